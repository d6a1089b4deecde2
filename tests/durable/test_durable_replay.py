"""Runs started before a change replay as they ran (Temporal's ``Replayer``, no server).

The histories under ``histories/`` were recorded with ``histories/record.py`` by the versions
they stand for: ``tool_results.json.gz`` by main before tool results crossed by reference
(dur7), ``open_tail.json.gz`` by the version before the loop closed a loaded history's open
tail (f317d66^, review6a). A replay that issues a command the history does not hold fails with
a nondeterminism error.
"""

from __future__ import annotations

import gzip
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from goagent_py import Agent, validate_transcript
from goagent_py.durable._activities import sandbox_runner
from goagent_py.durable._workflow import CLOSING_APPEND_PATCH, AgentWorkflow
from goagent_py.memory import ShortTermMemory
from goagent_py.messages import Message, Role, TextBlock, ToolCall
from goagent_py.testing import FunctionProvider

HISTORIES = Path(__file__).parent / "histories"


def recorded(name: str) -> WorkflowHistory:
    text = gzip.decompress((HISTORIES / name).read_bytes()).decode()
    return WorkflowHistory.from_json(name, text)


async def replay(history: WorkflowHistory) -> BaseException | None:
    replayer = Replayer(workflows=[AgentWorkflow], workflow_runner=sandbox_runner())
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    return result.replay_failure


async def test_a_run_on_an_open_tail_recorded_before_the_closing_append_replays() -> None:
    # Its loaded history ended on a call without a result; the version that recorded it
    # appended the prompt first (no append closing the call before it), then called the model.
    history = recorded("open_tail.json.gz")
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert [a.activity_type.name for a in scheduled[:2]] == [
        "goagent.memory.append.open",
        "goagent.model.open",
    ]
    first = scheduled[0].input.payloads[0].data.decode()
    assert "read two files" in first
    assert "c-open" not in first
    assert await replay(history) is None


async def test_a_run_recorded_before_tool_results_by_reference_replays() -> None:
    # Two tool calls of 70 KB results, recorded whole by the tool activities.
    history = recorded("tool_results.json.gz")
    results = [
        sum(len(p.data) for p in e.activity_task_completed_event_attributes.result.payloads)
        for e in history.events
        if e.HasField("activity_task_completed_event_attributes")
    ]
    assert sum(1 for size in results if size > 70_000) == 2
    assert await replay(history) is None


@pytest.mark.slow
async def test_a_new_run_on_an_open_tail_closes_it_under_a_patch_marker(
    run_durably: Callable[..., Awaitable[tuple[Any, Any]]],
) -> None:
    memory = ShortTermMemory()
    open_call = ToolCall("c-open", "lookup", {"key": "gone"})
    await memory.append(
        Message(Role.USER, [TextBlock("look gone up")]),
        Message(Role.ASSISTANT, [], tool_calls=[open_call]),
    )
    agent = Agent(provider=FunctionProvider(lambda _: "fine"), model="m", name="tail")
    result, history = await run_durably(agent, "and now?", plan=lambda _: "fine", memory=memory)
    assert result.text == "fine"
    stored = await memory.messages()
    assert [m.role for m in stored] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.USER,
        Role.ASSISTANT,
    ]
    assert stored[2].tool_call_id == "c-open"
    assert stored[2].is_error
    assert validate_transcript(stored) == []
    markers = [
        e.marker_recorded_event_attributes
        for e in history.events
        if e.marker_recorded_event_attributes.marker_name == "core_patch"
    ]
    assert len(markers) == 1
    assert CLOSING_APPEND_PATCH.encode() in markers[0].SerializeToString()
    assert await replay(history) is None
