"""Durable history by reference (issue 30): the session's history stays on the workers.

The load activity gives the workflow stand-ins (roles and tool-call ids, no content); the model
activity puts the stored messages back. A history far above the server's 2 MB payload limit
runs durably, the model still reads all of it, and the workflow's recorded history stays small.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from goagent_py import Agent, validate_transcript
from goagent_py.durable._wire import DurableRunError
from goagent_py.memory import FixedWindow, ShortTermMemory
from goagent_py.memory.storage import PostgresStorage
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.messages import Message, Role, StopReason, TextBlock, ThinkingBlock, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tools import tool

pytestmark = pytest.mark.slow

RunDurably = Callable[..., Awaitable[tuple[Any, Any]]]  # the run_durably fixture

BIG = 200_000  # characters per stored message
COUNT = 30  # ~6 MB of history: three times the server's 2 MB payload limit


async def test_a_history_far_above_the_payload_limit_runs_durably(
    run_durably: RunDurably, tmp_path: Path
) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="long")
    old: list[Message] = []
    for i in range(COUNT // 2):
        old.append(Message(Role.USER, [TextBlock(f"q{i} " + "x" * BIG)]))
        old.append(Message(Role.ASSISTANT, [TextBlock(f"a{i} " + "y" * BIG)]))
    await storage.append(old)
    seen: list[int] = []

    @tool
    async def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: the key.
        """
        return f"value of {key}"

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        seen.append(sum(len(m.text) for m in request.messages))
        if request.messages[-1].role == Role.TOOL:
            return "answered"
        return tool_call_response(ToolCall("c1", "lookup", {"key": "k"}))

    agent = Agent(provider=FunctionProvider(plan), model="m", name="long", tools=[lookup])
    result, recorded = await run_durably(
        agent, "and now?", plan=plan, memory=ShortTermMemory(storage), session_id="long"
    )
    assert result.text == "answered"
    history_chars = sum(len(m.text) for m in old)
    # Both model calls read the whole stored history, not the stand-ins.
    assert len(seen) == 2
    assert all(n > history_chars for n in seen)
    stored = await storage.load()
    assert stored[: len(old)] == old
    assert stored[len(old) :] == result.messages
    assert validate_transcript(stored) == []
    # What the workflow recorded holds ids and counts, not the 6 MB.
    size = sum(
        len(p.data)
        for e in recorded.events
        for attrs in (
            e.activity_task_scheduled_event_attributes.input,
            e.activity_task_completed_event_attributes.result,
        )
        for p in attrs.payloads
    )
    assert size < 200_000


MANY = 20_000  # exchanges: 40,000 short messages, under 1 MB of text


async def _run_many(run_durably: RunDurably, tmp_path: Path, policy: Any) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="many")
    old: list[Message] = []
    for i in range(MANY):
        old.append(Message(Role.USER, [TextBlock(f"q{i}")]))
        old.append(Message(Role.ASSISTANT, [TextBlock(f"a{i}")]))
    await storage.append(old)
    seen: list[int] = []

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        seen.append(len(request.messages))
        return "answered"

    memory = ShortTermMemory(storage, policy)
    window = len(await memory.messages())
    agent = Agent(provider=FunctionProvider(plan), model="m", name="many")
    result, recorded = await run_durably(
        agent, "and now?", plan=plan, memory=memory, session_id="many"
    )
    assert result.text == "answered"
    assert seen == [window + 1]
    # The closed turns leading the window cross as one stand-in: the workflow's whole recorded
    # history stays small, however many messages the window holds.
    assert len(recorded.to_json()) < 200_000
    stored = await storage.load()
    assert stored[: len(old)] == old
    assert stored[len(old) :] == result.messages


async def test_a_window_of_many_small_messages_runs_durably(
    run_durably: RunDurably, tmp_path: Path
) -> None:
    await _run_many(run_durably, tmp_path, None)


async def test_a_long_session_of_small_messages_runs_durably_through_a_window(
    run_durably: RunDurably, tmp_path: Path
) -> None:
    # What the docs advise for a session of that many messages: a bounded window.
    await _run_many(run_durably, tmp_path, FixedWindow(200))


async def test_a_run_whose_own_tool_results_pass_the_payload_limit_runs_durably(
    run_durably: RunDurably, tmp_path: Path
) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="run")

    @tool
    async def read(path: str) -> str:
        """Read a file.

        Args:
            path: the path.
        """
        return path + " " + "x" * 900_000

    seen: list[list[int]] = []

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        # The model reads every tool result whole, never a stand-in.
        seen.append([len(m.text) for m in request.messages if m.role == Role.TOOL])
        done = sum(1 for m in request.messages if m.role == Role.TOOL)
        if done >= 4:
            return "read them all"
        return tool_call_response(ToolCall(f"c{done}", "read", {"path": f"f{done}"}))

    agent = Agent(
        provider=FunctionProvider(plan),
        model="m",
        name="run",
        tools=[read],
        max_tool_result_chars=None,
    )
    result, recorded = await run_durably(
        agent,
        "read four files",
        plan=plan,
        memory=ShortTermMemory(storage),
        session_id="run",
        without=("block_refs",),  # a run of a client before tool results by reference
    )
    assert result.text == "read them all"
    assert seen == [[], [900_003], [900_003] * 2, [900_003] * 3, [900_003] * 4]
    stored = await storage.load()
    assert [len(m.text) for m in stored if m.role == Role.TOOL] == [900_003] * 4
    assert validate_transcript(stored) == []
    # A big tool result is stored before the next model call (by local activity, whose input
    # is not recorded): every model request holds stand-ins, not the 900 KB.
    model_inputs = [
        sum(len(p.data) for p in e.activity_task_scheduled_event_attributes.input.payloads)
        for e in recorded.events
        if e.activity_task_scheduled_event_attributes.activity_type.name.startswith(
            "goagent.model."
        )
    ]
    assert len(model_inputs) == 5
    assert max(model_inputs) < 10_000
    # The result is over the limit whole: the stored tool results are stand-ins in it.
    tool_results = [m for m in result.messages if m.role == Role.TOOL]
    assert [m.text for m in tool_results] == [""] * 4
    assert all(m.metadata.get("goagent.ref") for m in tool_results)
    # The digests the workflow computed are the same on replay: no nondeterminism error.
    from temporalio.worker import Replayer

    from goagent_py.durable._activities import sandbox_runner
    from goagent_py.durable._workflow import AgentWorkflow

    replayer = Replayer(workflows=[AgentWorkflow], workflow_runner=sandbox_runner())
    await replayer.replay_workflow(recorded)


async def test_a_result_over_the_payload_limit_fails_the_run_instead_of_hanging(
    run_durably: RunDurably,
) -> None:
    # No short-term memory on the worker: nothing is stored, so nothing can be a stand-in.
    # Each request fits (1.3 MB), the result (the two reads and an 800 KB answer) does not.
    @tool
    async def read(path: str) -> str:
        """Read a file.

        Args:
            path: the path.
        """
        return path + " " + "x" * 650_000

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        done = sum(1 for m in request.messages if m.role == Role.TOOL)
        if done >= 2:
            return "y" * 800_000
        return tool_call_response(ToolCall(f"c{done}", "read", {"path": f"f{done}"}))

    agent = Agent(
        provider=FunctionProvider(plan),
        model="m",
        name="big",
        tools=[read],
        max_tool_result_chars=None,
    )
    with pytest.raises(DurableRunError, match="PayloadTooLargeError"):
        await run_durably(agent, "read two files", plan=plan, session_id="big")


def _payload_bytes(recorded: Any) -> int:
    """Bytes of every activity's input and result the workflow recorded."""
    return sum(
        len(p.data)
        for e in recorded.events
        for attrs in (
            e.activity_task_scheduled_event_attributes.input,
            e.activity_task_completed_event_attributes.result,
        )
        for p in attrs.payloads
    )


def _dumping_agent(
    name: str, size: int
) -> tuple[Agent, Callable[[CompletionRequest], CompletionResponse | str], list[list[str]]]:
    """An agent whose one tool call returns ``"big "`` and ``size`` z's, its model's plan (call
    the tool, then answer "dumped"), and the tool results each request carried."""

    @tool
    async def dump(path: str) -> str:
        """Dump a file.

        Args:
            path: the path.
        """
        return path + " " + "z" * size

    seen: list[list[str]] = []

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        seen.append([m.text for m in request.messages if m.role == Role.TOOL])
        if seen[-1]:
            return "dumped"
        return tool_call_response(ToolCall("c0", "dump", {"path": "big"}))

    agent = Agent(
        provider=FunctionProvider(plan),
        model="m",
        name=name,
        tools=[dump],
        max_tool_result_chars=None,
    )
    return agent, plan, seen


async def test_a_tool_result_over_the_payload_limit_reaches_the_model_whole(
    run_durably: RunDurably, tmp_path: Path
) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="five")

    agent, plan, seen = _dumping_agent("five", 5_000_000)
    result, recorded = await run_durably(
        agent, "dump it", plan=plan, memory=ShortTermMemory(storage), session_id="five"
    )
    assert result.text == "dumped"
    # The model reads the 5 MB result itself, not its reference.
    assert seen == [[], ["big " + "z" * 5_000_000]]
    stored = await storage.load()
    assert [m.text for m in stored if m.role == Role.TOOL] == ["big " + "z" * 5_000_000]
    assert validate_transcript(stored) == []
    # Neither the tool activity's result nor the model request carried it.
    assert _payload_bytes(recorded) < 100_000
    from temporalio.worker import Replayer

    from goagent_py.durable._activities import sandbox_runner
    from goagent_py.durable._workflow import AgentWorkflow

    replayer = Replayer(workflows=[AgentWorkflow], workflow_runner=sandbox_runner())
    await replayer.replay_workflow(recorded)


async def test_a_run_whose_results_pass_the_history_limit_runs_durably(
    run_durably: RunDurably, tmp_path: Path
) -> None:
    # 60 results of 1 MB (six turns of ten calls): 60 MB, over the 50 MB a workflow's history
    # may hold, and each request past the 2 MB payload limit many times over.
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="sixty")

    @tool
    async def read(path: str) -> str:
        """Read a file.

        Args:
            path: the path.
        """
        return path + " " + "x" * 1_000_000

    seen: list[int] = []

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        results = [m.text for m in request.messages if m.role == Role.TOOL]
        assert all(len(t) > 1_000_000 and t.endswith("x" * 100) for t in results)
        seen.append(len(results))
        if len(results) >= 60:
            return "read sixty"
        turn = len(results) // 10
        calls = [ToolCall(f"c{turn}.{i}", "read", {"path": f"f{turn}.{i}"}) for i in range(10)]
        return tool_call_response(*calls)

    agent = Agent(
        provider=FunctionProvider(plan),
        model="m",
        name="sixty",
        tools=[read],
        max_tool_result_chars=None,
    )
    result, recorded = await run_durably(
        agent, "read sixty files", plan=plan, memory=ShortTermMemory(storage), session_id="sixty"
    )
    assert result.text == "read sixty"
    assert seen == [0, 10, 20, 30, 40, 50, 60]
    stored = await storage.load()
    assert sum(1 for m in stored if m.role == Role.TOOL and len(m.text) > 1_000_000) == 60
    assert validate_transcript(stored) == []
    assert _payload_bytes(recorded) < 1_000_000


async def test_a_thinking_block_over_the_payload_limit_reaches_the_next_request_whole(
    run_durably: RunDurably, tmp_path: Path
) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="think")
    thought = "t" * 3_000_000

    @tool
    async def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: the key.
        """
        return f"value of {key}"

    seen: list[list[tuple[str, str]]] = []

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        seen.append(
            [
                (b.thinking, b.signature)
                for m in request.messages
                for b in m.content
                if isinstance(b, ThinkingBlock)
            ]
        )
        if request.messages[-1].role == Role.TOOL:
            return "found"
        message = Message(
            Role.ASSISTANT,
            [ThinkingBlock(thought, signature="sig")],
            tool_calls=[ToolCall("c1", "lookup", {"key": "k"})],
        )
        return CompletionResponse(message, stop_reason=StopReason.TOOL_USE)

    agent = Agent(provider=FunctionProvider(plan), model="m", name="think", tools=[lookup])
    result, recorded = await run_durably(
        agent, "think", plan=plan, memory=ShortTermMemory(storage), session_id="think"
    )
    assert result.text == "found"
    # The second request carries the thinking block whole, with its signature.
    assert seen == [[], [(thought, "sig")]]
    assert _payload_bytes(recorded) < 100_000


async def test_on_postgres_a_tool_result_over_the_payload_limit_reaches_the_model_whole(
    run_durably: RunDurably, pg_dsn: str
) -> None:
    session = f"pg-{uuid.uuid4().hex[:8]}"

    agent, plan, seen = _dumping_agent("pgfive", 3_000_000)
    async with PostgresStorage(pg_dsn, table="refs_messages", max_size=2) as storage:
        memory = ShortTermMemory(storage.for_session(session))
        result, recorded = await run_durably(
            agent, "dump it", plan=plan, memory=memory, session_id=session
        )
        stored = await storage.for_session(session).load()
    assert result.text == "dumped"
    assert seen == [[], ["big " + "z" * 3_000_000]]
    assert [m.text for m in stored if m.role == Role.TOOL] == ["big " + "z" * 3_000_000]
    assert _payload_bytes(recorded) < 100_000
