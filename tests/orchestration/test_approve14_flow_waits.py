"""An agent node of a flow whose calls wait for a person (approve14; docs/approvals.md "In
flows"): a flow does not pause for decisions, so the node fails, saying so, instead of handing
its half-done text on as its answer while the waiting call is dropped without a word."""

from __future__ import annotations

from pathlib import Path

import pytest
from refund_waits import refund_tool  # tests/refund_waits.py
from wiping import RAN, wipe  # tests/wiping.py

from goagent_py import Agent, ApprovalPendingError, ToolCall
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.orchestration import Handoffs, Pipeline, StepFailedError
from goagent_py.testing import ScriptedProvider, tool_call_response


async def test_a_node_whose_calls_wait_for_a_person_fails_the_flow_saying_so(
    tmp_path: Path,
) -> None:
    RAN.clear()
    read: list[str] = []
    worker = Agent(
        name="cleaner",
        provider=ScriptedProvider(tool_call_response(ToolCall("c1", "wipe", {"target": "disk"}))),
        tools=[wipe],
        short_term_memory=ShortTermMemory(storage=SQLiteStorage(tmp_path / "c.db", session_id="s")),
    )

    async def report(text: str) -> str:
        read.append(text)
        return "reported"

    with pytest.raises(StepFailedError) as caught:
        await Pipeline(worker, report).run("clean up")
    assert isinstance(caught.value.cause, ApprovalPendingError)
    said = str(caught.value)
    assert "wipe" in said
    assert "resume" in said
    assert read == []  # the next node never read a half-done answer
    assert RAN == []
    # The wait is kept in the node's record, for a resume outside the flow.
    memory = worker.options.short_term_memory
    assert memory is not None
    assert [c.name for c in (await memory.messages())[-1].tool_calls] == ["wipe"]


async def test_a_handoff_agent_whose_calls_wait_stops_the_desk_saying_so() -> None:
    ran: list[str] = []
    billing = Agent(
        name="billing",
        provider=ScriptedProvider(tool_call_response(ToolCall("r1", "refund", {"order": "A-1"}))),
        tools=[refund_tool(ran)],
    )
    triage = Agent(
        name="triage",
        provider=ScriptedProvider(
            tool_call_response(ToolCall("t1", "transfer_to_billing", {"reason": "money"}))
        ),
    )
    with pytest.raises(StepFailedError) as caught:
        await Handoffs([triage, billing], start="triage").run("charged twice")
    assert isinstance(caught.value.cause, ApprovalPendingError)
    assert "'refund'" in str(caught.value)
    assert ran == []
