"""Two approved writes to one file in one batch of a durable run reach the file in the order
the model gave them, as in a plain run (docs/approvals.md "What an approval covers"; the file
tools' write queue): the workflow starts the second one's activity once the first has ended,
and the worker takes each call's place in the file's queue before its approval is checked.
Real Temporal dev server, real files, real SQLite file."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

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

pytestmark = pytest.mark.slow
WRITE = "goagent.tool.writer.write_file"


def _planner(first: str, second: str) -> Callable[[CompletionRequest], Awaitable[Any]]:
    async def plan(request: CompletionRequest) -> CompletionResponse | str:
        if request.messages[-1].role is not Role.TOOL:
            return tool_call_response(
                ToolCall("w1", "write_file", {"path": first, "content": "first"}),
                ToolCall("w2", "write_file", {"path": second, "content": "second"}),
            )
        return "noted"

    return plan


# The same file written as the same name, and as two names of it (was: "./plan.md" took a line
# of its own, and the two activities ran at once).
@pytest.mark.parametrize("names", [("plan.md", "plan.md"), ("plan.md", "./plan.md")])
async def test_two_approved_writes_to_one_file_run_in_call_order(
    temporal: WorkflowEnvironment, tmp_path: Path, names: tuple[str, str]
) -> None:
    _plan = _planner(*names)
    root = tmp_path / "repo"
    root.mkdir()
    tools = file_tools(root, require_read=False)
    policy = ApprovalPolicy(tools)  # every write waits for a person
    agent = Agent(
        provider=FunctionProvider(_plan), model="m", name="writer", tools=tools, **policy.deferred()
    )
    durable = DurableAgent(
        agent,
        provider="fn:x",
        short_term_memory=lambda s: ShortTermMemory(
            storage=SQLiteStorage(tmp_path / "chat.db", session_id=s)
        ),
        heartbeat_timeout=5.0,
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
    )
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(_plan)})
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "write the plan twice", session_id="s1")
        await next_wait(durable, handle, 0)
        asked = await durable.pending(handle)
        assert [a.id for a in asked] == ["w1", "w2"]
        await durable.decide(handle, {a.id: Approve(token=a.token) for a in asked})
        result = await asyncio.wait_for(result_of(handle), timeout=300)
        history = await handle.fetch_history()
    assert result.text == "noted"
    assert (root / "plan.md").read_text() == "second"
    # The record: the second write's activity was started after the first one's ended.
    order = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled = event.activity_task_scheduled_event_attributes
            if scheduled.activity_type.name == WRITE:
                order.append(("scheduled", event.event_id))
        elif event.HasField("activity_task_completed_event_attributes"):
            done = event.activity_task_completed_event_attributes
            if any(s == ("scheduled", done.scheduled_event_id) for s in order):
                order.append(("completed", event.event_id))
    assert [kind for kind, _ in order] == ["scheduled", "completed", "scheduled", "completed"]
