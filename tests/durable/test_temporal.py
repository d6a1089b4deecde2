"""Durable runs on a real Temporal dev server, with in-process workers."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import durable_app  # tests/durable/durable_app.py
import pytest
from temporalio.testing import WorkflowEnvironment

from goagent_py import Agent
from goagent_py.durable import (
    ABORT_SIGNAL,
    FOLLOW_UP_SIGNAL,
    STATE_QUERY,
    STEER_SIGNAL,
    DurableAgent,
    DurableRunError,
    ProviderRegistry,
    create_worker,
)
from goagent_py.errors import ConfigurationError, ProviderError, SessionBusyError
from goagent_py.messages import Role, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tools import tool

pytestmark = pytest.mark.slow


def queue() -> str:
    return f"q-{uuid.uuid4().hex[:8]}"


async def test_a_run_completes_with_model_and_tool_activities(
    temporal: WorkflowEnvironment, pg_dsn: str
) -> None:
    durable = durable_app.durable_agent(pg_dsn, task_queue=queue())
    async with create_worker(temporal.client, [durable], registry=durable_app.registry()):
        result = await durable.execute(temporal.client, "go", session_id="s-basic")
        again = await durable.execute(temporal.client, "again", session_id="s-basic")
    assert result.text == "done: value of a, step 2 done"
    assert (result.iterations, result.tool_calls, result.aborted) == (3, 2, False)
    assert [m.role for m in result.messages] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert result.run_id
    # The second run read the first one's history (two tool results) from PostgreSQL, so the
    # plan answered at once.
    assert (again.iterations, again.text) == (1, "done: value of a, step 2 done")


def one_tool_agent(provider_fn: Any, tools: list[Any], name: str = "helper") -> Agent:
    return Agent(provider=FunctionProvider(provider_fn), model="m", name=name, tools=tools)


async def test_outside_a_workflow_is_a_clear_error() -> None:
    durable = DurableAgent(one_tool_agent(lambda r: "hi", []), provider="fn:x")
    with pytest.raises(ConfigurationError, match="only run inside a Temporal workflow"):
        await durable.run("hello")
    with pytest.raises(ConfigurationError, match="runs only on Temporal"):
        durable.run_sync("hello")


def test_misconfigured_durable_agents_fail_at_construction() -> None:
    unnamed = Agent(provider=FunctionProvider(lambda r: "x"), model="m")
    with pytest.raises(ConfigurationError, match="needs a name"):
        DurableAgent(unnamed, provider="fn:x")
    named = one_tool_agent(lambda r: "x", [])
    with pytest.raises(ConfigurationError, match="spec"):
        DurableAgent(named, provider="")
    with pytest.raises(ConfigurationError):
        DurableAgent(named, provider="fn:x", max_attempts=0)
    with pytest.raises(ConfigurationError):
        ProviderRegistry().resolve("nobody:x")


async def test_a_tool_result_over_the_payload_limit_is_an_error_naming_the_tool(
    temporal: WorkflowEnvironment,
) -> None:
    @tool
    async def dump() -> str:
        """Return a lot."""
        return "x" * 5000

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        results = [m for m in request.messages if m.role == Role.TOOL]
        if not results:
            return tool_call_response(ToolCall("c1", "dump", {}))
        return f"error={results[0].is_error}: {results[0].text}"

    durable = DurableAgent(
        one_tool_agent(plan, [dump]), provider="fn:x", payload_limit=4000, task_queue=queue()
    )
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    async with create_worker(temporal.client, [durable], registry=registry):
        result = await durable.execute(temporal.client, "go")
    assert result.text.startswith("error=True")
    assert "tool 'dump' result" in result.text
    assert "4000-byte limit" in result.text


async def test_provider_errors_retry_by_the_engine_and_4xx_is_not_retried(
    temporal: WorkflowEnvironment,
) -> None:
    attempts: list[str] = []

    async def flaky(request: CompletionRequest) -> str:
        prompt = request.messages[-1].text
        attempts.append(prompt)
        if prompt == "rate" and attempts.count("rate") == 1:
            raise ProviderError("slow down", provider="fn", status=429, retry_after=0.01)
        if prompt == "bad":
            raise ProviderError("invalid request", provider="fn", status=400)
        return f"ok {prompt}"

    durable = DurableAgent(
        one_tool_agent(flaky, []), provider="fn:x", max_attempts=3, task_queue=queue()
    )
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(flaky)})
    async with create_worker(temporal.client, [durable], registry=registry):
        assert (await durable.execute(temporal.client, "rate")).text == "ok rate"
        with pytest.raises(DurableRunError) as info:
            await durable.execute(temporal.client, "bad")
    assert attempts.count("rate") == 2  # a 429 is retried (after its Retry-After)
    assert attempts.count("bad") == 1  # a 400 is not
    assert info.value.type == "ProviderError"
    assert "invalid request" in str(info.value)


async def test_an_unknown_provider_spec_fails_the_run_without_retrying(
    temporal: WorkflowEnvironment,
) -> None:
    durable = DurableAgent(one_tool_agent(lambda r: "x", []), provider="nope:x", task_queue=queue())
    async with create_worker(temporal.client, [durable], registry=ProviderRegistry()):
        with pytest.raises(DurableRunError, match="no provider registered for spec 'nope:x'"):
            await durable.execute(temporal.client, "go")


async def test_steer_is_queued_and_abort_stops_a_running_run(
    temporal: WorkflowEnvironment,
) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Never returns."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "unreachable"

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        return tool_call_response(ToolCall("c1", "wait_forever", {}))

    durable = DurableAgent(
        one_tool_agent(plan, [wait_forever]),
        provider="fn:x",
        heartbeat_timeout=1.0,
        task_queue=queue(),
    )
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "go")
        await started.wait()
        await handle.signal(STEER_SIGNAL, "use the other tool")
        state = await handle.query(STATE_QUERY)
        assert state["status"] == "running"
        assert state["steering"] == ["use the other tool"]
        await handle.signal(ABORT_SIGNAL, "user pressed stop")
        result = await durable_result(handle)
        await cancelled.wait()  # the tool's activity was cancelled too
        final = await handle.query(STATE_QUERY)  # a query needs a worker: ask before it stops
    assert result.aborted
    assert result.text == ""
    assert final["status"] == "aborted"
    assert final["abort_reason"] == "user pressed stop"


async def durable_result(handle: Any) -> Any:
    from goagent_py.durable._client import result_of

    return await result_of(handle)


async def test_events_stream_while_the_run_goes_on(
    temporal: WorkflowEnvironment, pg_dsn: str
) -> None:
    durable = durable_app.durable_agent(pg_dsn, task_queue=queue())
    async with create_worker(temporal.client, [durable], registry=durable_app.registry()):
        handle = await durable.start(temporal.client, "go", session_id=f"ev-{uuid.uuid4().hex}")
        events = [event async for event in durable.events(handle)]
        result = await durable_result(handle)
    assert result.text == "done: value of a, step 2 done"
    assert [e["type"] for e in events] == [
        "turn_start",
        "message",
        "tool_result",
        "turn_start",
        "message",
        "tool_result",
        "turn_start",
        "message",
    ]
    assert events[1]["tool_calls"] == ["lookup"]
    assert events[2] == {
        "type": "tool_result",
        "iteration": 0,
        "tool": "lookup",
        "call_id": "call-1",
        "is_error": False,
        "text": "value of a",
    }
    assert events[-1]["text"] == result.text


async def test_exclusive_runs_make_a_second_run_of_the_session_busy(
    temporal: WorkflowEnvironment,
) -> None:
    release = asyncio.Event()
    started = asyncio.Event()

    @tool
    async def hold() -> str:
        """Wait for the test."""
        started.set()
        await release.wait()
        return "held"

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        if request.messages[-1].role == Role.TOOL:
            return "finished"
        return tool_call_response(ToolCall("c1", "hold", {}))

    durable = DurableAgent(one_tool_agent(plan, [hold]), provider="fn:x", task_queue=queue())
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    async with create_worker(temporal.client, [durable], registry=registry):
        first = await durable.start(temporal.client, "one", session_id="bob", exclusive=True)
        await started.wait()
        with pytest.raises(SessionBusyError) as info:
            await durable.start(temporal.client, "two", session_id="bob", exclusive=True)
        other = await durable.start(temporal.client, "x", session_id="carol", exclusive=True)
        release.set()
        assert (await durable_result(first)).text == "finished"
        assert (await durable_result(other)).text == "finished"
        # Once the first run is over, the session is free again.
        again = await durable.execute(temporal.client, "three", session_id="bob", exclusive=True)
    assert again.text == "finished"
    assert info.value.session_id == "bob"
    assert first.id == "helper-bob"


async def test_long_term_memory_is_recalled_and_stored_through_activities(
    temporal: WorkflowEnvironment,
) -> None:
    from goagent_py.memory import LongTermMemory
    from goagent_py.memory.vector.in_memory import InMemoryVectorStore
    from goagent_py.testing import FakeEmbedder

    memory = LongTermMemory(FakeEmbedder(), InMemoryVectorStore(dimensions=16))
    seen: list[str] = []

    def plan(request: CompletionRequest) -> str:
        seen.append(request.messages[0].text)
        return f"noted: {request.messages[-1].text}"

    agent = Agent(
        provider=FunctionProvider(plan), model="m", name="rememberer", long_term_memory=memory
    )
    durable = DurableAgent(agent, provider="fn:x", task_queue=queue())
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    async with create_worker(temporal.client, [durable], registry=registry):
        await durable.execute(temporal.client, "my favourite colour is teal")
        await durable.execute(temporal.client, "what is my favourite colour?")
    assert "<recalled_memories>" not in seen[0]
    assert "<recalled_memories>" in seen[1]
    assert "my favourite colour is teal" in seen[1]


async def test_a_follow_up_signal_runs_after_the_current_prompt(
    temporal: WorkflowEnvironment,
) -> None:
    release = asyncio.Event()
    started = asyncio.Event()
    keys: list[str] = []

    @tool
    async def hold() -> str:
        """Wait for the test."""
        from goagent_py.tool_context import current_tool_context

        ctx = current_tool_context()
        keys.append(ctx.idempotency_key if ctx else "")
        started.set()
        await release.wait()
        return "held"

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        last = request.messages[-1]
        if last.role == Role.TOOL:
            return "first answered"
        if last.text == "first":
            return tool_call_response(ToolCall("c1", "hold", {}))
        prompts = [m.text for m in request.messages if m.role == Role.USER]
        return f"follow-up answered after {prompts}"

    from goagent_py.memory import ShortTermMemory

    # The follow-up is a run of its own: it sees the first one through the session's memory.
    agent = Agent(
        provider=FunctionProvider(plan),
        model="m",
        name="helper",
        tools=[hold],
        short_term_memory=ShortTermMemory(),
    )
    durable = DurableAgent(agent, provider="fn:x", task_queue=queue())
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "first", session_id="fu")
        await started.wait()
        await handle.signal(FOLLOW_UP_SIGNAL, "second")
        release.set()
        result = await durable_result(handle)
    assert result.runs == 2
    assert result.text == "follow-up answered after ['first', 'second']"
    assert [m.text for m in result.messages if m.role == Role.USER] == ["first", "second"]
    assert (result.iterations, result.tool_calls) == (3, 1)
    assert keys == [f"{handle.id}:0:c1"]


async def test_a_steer_signal_reaches_the_model_at_the_next_turn(
    temporal: WorkflowEnvironment,
) -> None:
    from goagent_py import _loop

    if not hasattr(_loop, "RunControl"):
        pytest.skip("the loop has no steering queue yet (RunControl); steering is only recorded")
    release = asyncio.Event()
    started = asyncio.Event()
    requests: list[list[str]] = []

    @tool
    async def hold() -> str:
        """Wait for the test."""
        started.set()
        await release.wait()
        return "held"

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        requests.append([f"{m.role}:{m.text}" for m in request.messages])
        if len(requests) == 1:
            return tool_call_response(ToolCall("c1", "hold", {}))
        return "steered"

    durable = DurableAgent(one_tool_agent(plan, [hold]), provider="fn:x", task_queue=queue())
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "go")
        await started.wait()
        await handle.signal(STEER_SIGNAL, "use metric units")
        state = await handle.query(STATE_QUERY)  # the signal is in once a query sees it
        assert state["steering"] == ["use metric units"]
        release.set()
        result = await durable_result(handle)
    assert result.text == "steered"
    assert requests[1][-2:] == ["tool:held", "user:use metric units"]


async def test_consolidation_runs_in_the_store_activity_and_its_decision_is_recorded(
    temporal: WorkflowEnvironment,
) -> None:
    """Issue 31: a durable run's long-term memory consolidates in its store activity, with
    the same decider a plain run uses, and the activity's result (in the run's history)
    records what was decided."""
    from goagent_py.memory import LongTermMemory, RuleDecider
    from goagent_py.memory.vector.in_memory import InMemoryVectorStore
    from goagent_py.testing import FakeEmbedder

    memory = LongTermMemory(
        FakeEmbedder(), InMemoryVectorStore(dimensions=16), decider=RuleDecider()
    )
    agent = Agent(
        provider=FunctionProvider(lambda r: "noted"),
        model="m",
        name="mover",
        long_term_memory=memory,
    )
    durable = DurableAgent(agent, provider="fn:x", task_queue=queue())
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(lambda r: "noted")})
    async with create_worker(temporal.client, [durable], registry=registry):
        await durable.execute(temporal.client, "I live in Lisbon.", workflow_id="mv-1")
        await durable.execute(temporal.client, "I moved to Porto.", workflow_id="mv-2")
    current = [r.text for r in await memory.records(session="mover")]
    assert "I live in Porto." in current
    assert not [t for t in current if "Lisbon" in t]
    history = await temporal.client.get_workflow_handle("mv-2").fetch_history()
    recorded = [
        e.activity_task_completed_event_attributes.result
        for e in history.events
        if e.HasField("activity_task_completed_event_attributes")
    ]
    text = " ".join(str(p) for r in recorded for p in r.payloads)
    assert "consolidations" in text
    assert "UPDATE" in text
    assert "rules" in text
