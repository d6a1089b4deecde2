"""Aborting a durable run ends it as a plain session run's abort ends (issue 28): the stop reason
is ``aborted``, usage and iterations so far are reported, finished results are kept, open calls
are closed with results, and what storage holds is what the result reports, valid for the next
request. Real Temporal dev server, in-process workers, the worker's real short-term memory."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from goagent_py import Agent, Session, validate_transcript
from goagent_py.durable import (
    ABORT_SIGNAL,
    STATE_QUERY,
    DurableAgent,
    ProviderRegistry,
    create_worker,
)
from goagent_py.durable._client import result_of
from goagent_py.memory import ShortTermMemory
from goagent_py.messages import Role, StopReason, ToolCall, Usage
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tools import tool

pytestmark = pytest.mark.slow

USAGE = Usage(input_tokens=11, output_tokens=7)


class Held:
    """A tool that waits for the test, and what happened to it."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.finished = 0


def setup(
    held: Held, model_calls: list[int]
) -> tuple[DurableAgent, ProviderRegistry, ShortTermMemory]:
    @tool
    async def hold(n: int) -> str:
        """Wait for the test.

        Args:
            n: a number.
        """
        held.started.set()
        try:
            await held.release.wait()
        except asyncio.CancelledError:
            held.cancelled.set()
            raise
        held.finished += 1
        return f"held {n}"

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        model_calls.append(len(request.messages))
        if request.messages[-1].role == Role.TOOL:
            return "finished"
        return tool_call_response(ToolCall("c1", "hold", {"n": 1}), usage=USAGE)

    memory = ShortTermMemory()  # the worker's: in-process, so the test reads what it stored
    agent = Agent(provider=FunctionProvider(plan), model="m", name="holder", tools=[hold])
    durable = DurableAgent(
        agent,
        provider="fn:x",
        short_term_memory=lambda _session: memory,
        heartbeat_timeout=1.0,
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
    )
    return durable, ProviderRegistry({"fn": lambda _: FunctionProvider(plan)}), memory


async def stored(memory: ShortTermMemory) -> list[Any]:
    return await memory.storage.load()


async def test_an_abort_signalled_before_a_worker_picks_the_run_up_is_applied(
    temporal: WorkflowEnvironment,
) -> None:
    held, model_calls = Held(), []
    durable, registry, memory = setup(held, model_calls)
    held.release.set()  # were the abort lost, the run would finish
    handle = await durable.start(temporal.client, "go", session_id="early")
    await handle.signal(ABORT_SIGNAL, "changed my mind")  # no worker runs yet
    async with create_worker(temporal.client, [durable], registry=registry):
        result = await result_of(handle)
        state = await handle.query(STATE_QUERY)
    assert model_calls == []  # the run never called the model
    assert result.aborted
    assert result.stop_reason == StopReason.ABORTED
    # As a plain session's run aborted before its first model call reports it.
    plain = await plain_abort_before_the_first_call(durable)
    assert (result.iterations, result.usage, result.tool_calls) == (
        plain.iterations,
        plain.usage,
        plain.tool_calls,
    )
    assert [(m.role, m.text) for m in result.messages] == [(m.role, m.text) for m in plain.messages]
    assert state["status"] == "aborted"
    assert state["abort_reason"] == "changed my mind"
    assert validate_transcript(result.messages) == []
    assert await stored(memory) == result.messages


async def plain_abort_before_the_first_call(durable: DurableAgent) -> Any:
    session = Session(durable.agent.replace(short_term_memory=ShortTermMemory()))
    task = asyncio.create_task(session.prompt("go"))
    await asyncio.sleep(0)  # the session is busy from the prompt's first line
    session.abort("now", reason="changed my mind")
    return await task


async def test_an_aborted_durable_run_ends_like_a_plain_runs_abort(
    temporal: WorkflowEnvironment,
) -> None:
    held, model_calls = Held(), []
    durable, registry, memory = setup(held, model_calls)
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "go", session_id="mid")
        await held.started.wait()
        await handle.signal(ABORT_SIGNAL, "user pressed stop")
        result = await result_of(handle)
        await held.cancelled.wait()  # "now": the tool's activity was cancelled
    assert result.aborted
    assert result.stop_reason == StopReason.ABORTED
    assert (result.iterations, result.usage, result.tool_calls) == (1, USAGE, 1)
    roles = [m.role for m in result.messages]
    assert roles == [Role.USER, Role.ASSISTANT, Role.TOOL]
    closed = result.messages[2]
    assert closed.is_error
    assert "user pressed stop" in closed.text
    assert closed.metadata.get("goagent.synthetic") == "aborted"
    assert validate_transcript(result.messages) == []
    # One record: the turn in flight is stored, exactly as the result reports it.
    assert await stored(memory) == result.messages
    assert model_calls == [1]


async def test_abort_after_tools_keeps_the_running_calls_result(
    temporal: WorkflowEnvironment,
) -> None:
    held, model_calls = Held(), []
    durable, registry, memory = setup(held, model_calls)
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "go", session_id="after-tools")
        await held.started.wait()
        await handle.signal(ABORT_SIGNAL, args=["after this call", "after_tools"])
        await handle.query(STATE_QUERY)  # the signal is in once a query sees it
        held.release.set()
        result = await result_of(handle)
    assert held.finished == 1
    assert not held.cancelled.is_set()
    assert result.stop_reason == StopReason.ABORTED
    assert [m.role for m in result.messages] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert result.messages[2].text == "held 1"  # the finished result, not an aborted one
    assert not result.messages[2].is_error
    assert model_calls == [1]  # no model call after the batch
    assert validate_transcript(result.messages) == []
    assert await stored(memory) == result.messages


async def test_an_abort_mode_that_does_not_exist_is_refused_by_the_signal_and_ignored(
    temporal: WorkflowEnvironment,
) -> None:
    held, model_calls = Held(), []
    durable, registry, _memory = setup(held, model_calls)
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "go", session_id="bad-mode")
        await held.started.wait()
        await handle.signal(ABORT_SIGNAL, args=["x", "later"])
        state = await handle.query(STATE_QUERY)
        held.release.set()
        result = await result_of(handle)
    assert state["abort_reason"] is None
    assert "later" in state["refused"][0]
    assert result.text == "finished"
    assert not result.aborted
