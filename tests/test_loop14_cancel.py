"""A ``CancelledError`` that code the run awaits lets out although nobody cancelled the run is
that code's failure, at every place the run awaits code that is not its own: ``instructions``,
``transform_context``, ``prepare_turn``, output validators, the provider (its answer and its
stream), memories, the write and approval policies, dispatch middlewares. Only the run's own
cancellation ends it cancelled (docs/architecture.md, rule 5; ``goagent_py/_cancel.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic import BaseModel

from goagent_py import (
    Agent,
    ProviderError,
    Session,
    StrayCancellationError,
    ToolCall,
    tool,
)
from goagent_py.dispatch import DispatchFunc
from goagent_py.events import AgentEnd
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.messages import ContentBlock, Message
from goagent_py.provider import CompletionRequest, CompletionResponse, StreamEvent
from goagent_py.testing import ScriptedProvider, tool_call_response


async def _let_out_a_cancellation() -> None:
    """What code does when it awaits something cancelled elsewhere (a future, a task)."""
    cancelled = asyncio.get_running_loop().create_future()
    cancelled.cancel()
    await cancelled


def _stray(kind: str) -> Any:
    """A stray cancellation, raised (sync) or from an awaitable (async)."""
    if kind == "sync":
        raise asyncio.CancelledError
    return _let_out_a_cancellation()


@tool
async def lookup(city: str) -> str:
    """Look up the weather of a city."""
    return f"{city}: sunny"


class City(BaseModel):
    name: str


def _agent_with(place: str, kind: str, provider: Any) -> Agent[Any]:
    async def later(value: Any) -> Any:
        await _let_out_a_cancellation()
        return value

    def user_code(*args: Any) -> Any:
        return _stray(kind)

    if place == "instructions":
        return Agent(provider=provider, instructions=user_code)
    if place == "transform_context":
        return Agent(provider=provider, transform_context=user_code)
    if place == "prepare_turn":
        return Agent(provider=provider, prepare_turn=user_code)
    assert place == "an output validator"
    return Agent(
        provider=provider, output_type=City, output_mode="native", output_validators=[user_code]
    )


PLACES = ["instructions", "transform_context", "prepare_turn", "an output validator"]


async def _run(agent: Agent[Any], how: str) -> None:
    if how == "run":
        await agent.run("Hello")
    elif how == "stream":
        async for _ in agent.stream("Hello"):
            pass
    else:
        await Session(agent).prompt("Hello")


@pytest.mark.parametrize("how", ["run", "stream", "session"])
@pytest.mark.parametrize("kind", ["async", "sync"])
@pytest.mark.parametrize("place", PLACES)
async def test_a_stray_cancellation_from_the_runs_user_code_fails_the_run(
    place: str, kind: str, how: str
) -> None:
    """The run ended cancelled (a CancelledError for its caller, "run cancelled" in the log,
    no AgentEnd in the stream) although nobody cancelled it; such code's other failures
    already failed the run, so this one does too, naming the place and keeping the cause."""
    agent = _agent_with(place, kind, ScriptedProvider('{"name": "Oslo"}'))
    with pytest.raises(StrayCancellationError) as caught:
        await _run(agent, how)
    error = caught.value
    assert error.where == place
    assert isinstance(error.__cause__, asyncio.CancelledError)
    assert error.run_result is not None
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_the_stream_ends_with_the_failed_runs_agent_end() -> None:
    events: list[Any] = []
    agent = _agent_with("instructions", "async", ScriptedProvider("Hi."))

    async def consume() -> None:
        async for event in agent.stream("Hello"):
            events.append(event)

    with pytest.raises(StrayCancellationError):
        await consume()
    assert isinstance(events[-1], AgentEnd)
    assert events[-1].result.error is not None


class _StrayProvider:
    """A provider that awaited something cancelled elsewhere: in its answer, or mid-stream."""

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        await _let_out_a_cancellation()
        raise AssertionError("not reached")

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        await _let_out_a_cancellation()
        yield  # type: ignore[misc]


@pytest.mark.parametrize("loud", [False, True])
@pytest.mark.parametrize("how", ["run", "stream", "session"])
async def test_a_providers_stray_cancellation_is_a_provider_error(how: str, loud: bool) -> None:
    """Every other failure of the model call is a ProviderError with its cause; a stray
    CancelledError ended the run cancelled, on the quiet path, the loud one, the stream
    consumer and a session's interruptible call alike."""
    from goagent_py import Hooks

    hooks = Hooks(on_iteration_start=lambda i: None) if loud else None
    agent = Agent(provider=_StrayProvider(), hooks=hooks)
    with pytest.raises(ProviderError) as caught:
        await _run(agent, how)
    cause = caught.value.__cause__
    assert isinstance(cause, StrayCancellationError)
    assert cause.where == "the provider"
    assert isinstance(cause.__cause__, asyncio.CancelledError)


async def test_a_middlewares_stray_cancellation_is_an_error_result_the_model_reads() -> None:
    """A custom dispatch middleware's exception is an error result; its stray CancelledError
    ended the run cancelled (the tool's own was already an error result)."""

    def middleware(next_: DispatchFunc) -> DispatchFunc:
        async def call(tc: ToolCall) -> list[ContentBlock]:
            await _let_out_a_cancellation()
            return await next_(tc)

        return call

    provider = ScriptedProvider(tool_call_response(("lookup", {"city": "Oslo"})), "Sorry.")
    agent = Agent(provider=provider, tools=[lookup], dispatch_middlewares=[middleware])
    result = await agent.run("Weather?")
    assert result.output == "Sorry."
    told = provider.requests[1].messages[-1]
    assert told.is_error
    assert "CancelledError" in told.text


class _Recall:
    """A long-term memory whose store lets out a stray cancellation."""

    async def retrieve(self, content: Any, *, top_k: Any = None, session: Any = None) -> Any:
        return []

    async def store(self, messages: Any, *, session: Any = None) -> None:
        await _let_out_a_cancellation()


class _StrayAppend(SQLiteStorage):
    async def append(self, *messages: Message) -> None:
        await _let_out_a_cancellation()


async def _stray_policy(prompt: Message, answer: Message) -> Any:
    await _let_out_a_cancellation()


class _Remembers:
    async def retrieve(self, content: Any, *, top_k: Any = None, session: Any = None) -> Any:
        return []

    async def store(self, messages: Any, *, session: Any = None) -> None:
        return None


@pytest.mark.parametrize("session", [False, True])
@pytest.mark.parametrize("what", ["short-term append", "long-term store", "write policy"])
async def test_memories_and_policies_that_let_out_a_stray_cancellation_are_logged(
    tmp_path: Any, session: bool, what: str
) -> None:
    """A memory append, a long-term store or a write policy that raises is logged and the run
    ends with its answer; a stray CancelledError from one cancelled the run instead."""
    storage = None
    if what == "short-term append":
        storage = _StrayAppend(tmp_path / "chat.db", session_id="s")
        agent = Agent(provider=ScriptedProvider("Hi."), short_term_memory=ShortTermMemory(storage))
    elif what == "long-term store":
        agent = Agent(provider=ScriptedProvider("Hi."), long_term_memory=_Recall())
    else:
        agent = Agent(
            provider=ScriptedProvider("Hi."),
            long_term_memory=_Remembers(),
            write_policy=_stray_policy,
        )
    try:
        result = await (Session(agent).prompt("Hello") if session else agent.run("Hello"))
    finally:
        if storage is not None:
            await storage.aclose()
    assert result.output == "Hi."


@pytest.mark.parametrize("session", [False, True])
async def test_an_approval_policy_that_lets_out_a_stray_cancellation_makes_the_call_wait(
    session: bool,
) -> None:
    """An approval policy that raises makes the call wait; a stray CancelledError cancelled
    the run instead."""

    async def approval(call: ToolCall, context: Any) -> bool:
        await _let_out_a_cancellation()
        return False

    provider = ScriptedProvider(tool_call_response(("lookup", {"city": "Oslo"})), "Sunny.")
    agent = Agent(provider=provider, tools=[lookup], requires_approval=approval)
    result = await (Session(agent).prompt("Weather?") if session else agent.run("Weather?"))
    assert [c.call.name for c in result.pending] == ["lookup"]


@pytest.mark.parametrize("place", PLACES)
async def test_cancelling_the_run_in_its_user_code_still_cancels_it(place: str) -> None:
    """The other side: a cancellation of the run that reaches it while that code runs."""
    entered = asyncio.Event()

    async def hang(*args: Any) -> Any:
        entered.set()
        await asyncio.Event().wait()

    agent = _hanging(place, hang)
    task = asyncio.create_task(agent.run("Hello"))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def _hanging(place: str, hang: Callable[..., Any]) -> Agent[Any]:
    provider = ScriptedProvider('{"name": "Oslo"}')
    if place == "instructions":
        return Agent(provider=provider, instructions=hang)
    if place == "transform_context":
        return Agent(provider=provider, transform_context=hang)
    if place == "prepare_turn":
        return Agent(provider=provider, prepare_turn=hang)
    return Agent(
        provider=provider, output_type=City, output_mode="native", output_validators=[hang]
    )


async def test_cancelling_the_run_while_the_provider_answers_still_cancels_it() -> None:
    entered = asyncio.Event()

    class Hanging:
        async def complete(self, request: CompletionRequest) -> CompletionResponse:
            entered.set()
            await asyncio.Event().wait()
            raise AssertionError("not reached")

    task = asyncio.create_task(Agent(provider=Hanging()).run("Hello"))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancellation_the_framework_raises_for_the_run_cancels_it() -> None:
    """The durable workflow raises the cancellation of an activity a cancelled run awaited
    after Temporal cleared the task's cancel request: a tool (or provider) that raises it
    cancels the run, it is not the tool's failure."""
    from goagent_py._cancel import run_cancelled

    @tool
    async def activity(city: str) -> str:
        """Runs as a durable activity."""
        raise run_cancelled("goagent.tool.activity was cancelled")

    provider = ScriptedProvider(tool_call_response(("activity", {"city": "Oslo"})), "Sunny.")
    with pytest.raises(asyncio.CancelledError):
        await Agent(provider=provider, tools=[activity]).run("Weather?")

    class Cancelled:
        async def complete(self, request: CompletionRequest) -> CompletionResponse:
            raise run_cancelled("goagent.model was cancelled")

    with pytest.raises(asyncio.CancelledError):
        await Agent(provider=Cancelled()).run("Hello")


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_call_whose_task_another_call_cancels_fails_alone(streamed: bool) -> None:
    """Two parallel calls: one cancels the other's task (code holding the task of another,
    not the run's cancellation). The cancelled call ended the whole run cancelled; it is that
    call's error result, the other keeps its result and the run goes on."""
    tasks: dict[str, asyncio.Task[Any]] = {}
    waiting = asyncio.Event()

    @tool
    async def wait(n: int) -> str:
        """Waits."""
        task = asyncio.current_task()
        assert task is not None
        tasks["wait"] = task
        waiting.set()
        await asyncio.Event().wait()
        return "never"

    @tool
    async def stop_other(n: int) -> str:
        """Cancels the other call."""
        await waiting.wait()
        tasks["wait"].cancel()
        return "stopped it"

    provider = ScriptedProvider(
        tool_call_response(("wait", {"n": 1}), ("stop_other", {"n": 2})), "Done."
    )
    agent = Agent(provider=provider, tools=[wait, stop_other])
    if streamed:
        async for _ in agent.stream("Go"):
            pass
    else:
        result = await agent.run("Go")
        assert result.output == "Done."
    told = provider.requests[1].messages
    assert [m.tool_call_id for m in told[-2:]] == [
        c.id for c in provider.requests[1].messages[-3].tool_calls
    ]
    assert told[-2].is_error
    assert "CancelledError" in told[-2].text
    assert not told[-1].is_error
    assert told[-1].text == "stopped it"


async def test_a_parallel_call_given_the_runs_own_cancellation_cancels_the_run() -> None:
    """The durable workflow's cancellation of an activity one of several calls awaited (see
    above) still cancels the run, not only that call."""
    from goagent_py._cancel import run_cancelled

    @tool
    async def activity(n: int) -> str:
        """Runs as a durable activity."""
        raise run_cancelled("goagent.tool.activity was cancelled")

    provider = ScriptedProvider(
        tool_call_response(("activity", {"n": 1}), ("activity", {"n": 2})), "Done."
    )
    with pytest.raises(asyncio.CancelledError):
        await Agent(provider=provider, tools=[activity]).run("Go")


async def test_a_subscriber_that_lets_out_a_stray_cancellation_never_breaks_the_run() -> None:
    """A subscriber that raises is logged and the run goes on; one that let out a
    CancelledError (a sync callback that re-raised one it caught) ended the prompt cancelled."""
    seen: list[object] = []

    def subscriber(event: object) -> None:
        seen.append(event)
        raise asyncio.CancelledError

    session = Session(Agent(provider=ScriptedProvider("Hi.")))
    session.subscribe(subscriber)
    result = await session.prompt("Hello")
    assert result.output == "Hi."
    assert isinstance(seen[-1], AgentEnd)
