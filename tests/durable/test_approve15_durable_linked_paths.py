"""A durable run's approval of a file tool's call covers the file its path led to when the
call was listed, as a plain run's does (approve15; docs/approvals.md "What an approval
covers"): the wait records the file (resolved on a worker), and a link swapped before the
decision makes the approved call refused on the worker, nothing written. Real Temporal dev
server, real files and symlinks, real SQLite file."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path

import pytest
from refund_clerk import next_wait
from temporalio.testing import WorkflowEnvironment

from goagent_py import Agent, Approve, Role, ToolCall
from goagent_py.coding import ApprovalPolicy, file_tools
from goagent_py.durable import DurableAgent, ProviderRegistry, create_worker
from goagent_py.durable._client import result_of
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX symlinks"),
]


async def _plan(request: CompletionRequest) -> CompletionResponse | str:
    if request.messages[-1].role is not Role.TOOL:
        call = ToolCall("w", "write_file", {"path": "notes/plan.md", "content": "the plan"})
        return tool_call_response(call)
    return "noted: " + request.messages[-1].text


def _durable(root: Path, db: Path) -> tuple[DurableAgent, ProviderRegistry]:
    tools = file_tools(root, require_read=False)
    policy = ApprovalPolicy(tools)  # every write waits for a person
    agent = Agent(
        provider=FunctionProvider(_plan),
        model="m",
        name="writer",
        tools=tools,
        **policy.deferred(),
    )
    durable = DurableAgent(
        agent,
        provider="fn:x",
        short_term_memory=lambda s: ShortTermMemory(storage=SQLiteStorage(db, session_id=s)),
        heartbeat_timeout=5.0,
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
    )
    return durable, ProviderRegistry({"fn": lambda _: FunctionProvider(_plan)})


async def test_a_durable_approved_write_whose_link_was_swapped_is_refused(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "src").mkdir()
    os.symlink("docs", root / "notes")  # notes -> docs
    durable, registry = _durable(root, tmp_path / "chat.db")
    async with create_worker(temporal.client, [durable], registry=registry):
        # The link unchanged: the approved write reaches the file the person was shown.
        kept = await durable.start(temporal.client, "write the plan", session_id="s1")
        await next_wait(durable, kept, 0)
        (asked,) = await durable.pending(kept)
        assert asked.resolved == "docs/plan.md"
        await durable.decide(kept, {asked.id: Approve(token=asked.token)})
        done = await asyncio.wait_for(result_of(kept), timeout=300)
        assert (root / "docs" / "plan.md").read_text() == "the plan"
        assert done.text.startswith("noted")
        os.remove(root / "docs" / "plan.md")

        # Swapped between the question and the decision: refused, nothing written.
        swapped = await durable.start(temporal.client, "write the plan", session_id="s2")
        await next_wait(durable, swapped, 0)
        (asked,) = await durable.pending(swapped)
        assert asked.resolved == "docs/plan.md"
        os.remove(root / "notes")
        os.symlink("src", root / "notes")
        await durable.decide(swapped, {asked.id: Approve(token=asked.token)})
        result = await asyncio.wait_for(result_of(swapped), timeout=300)

    assert not (root / "src" / "plan.md").exists()
    assert not (root / "docs" / "plan.md").exists()
    assert "now leads to 'src/plan.md'" in result.text
    assert "not to 'docs/plan.md'" in result.text
