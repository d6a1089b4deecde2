"""loop15: a tool that cancels its own task fails alone on every path; every user-code hook the
loop awaits follows the one cancellation rule (``goagent_py/_cancel.py``); a run refuses an
empty prompt (docs/architecture.md, rules 5 and 10, "Running an agent")."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import fields
from typing import Any

import pytest

from goagent_py import (
    Agent,
    ConfigurationError,
    GoAgentError,
    Hooks,
    ImageBlock,
    InvalidInputError,
    Session,
    StrayCancellationError,
    TextBlock,
    tool,
    user_message,
)
from goagent_py.events import AgentEnd
from goagent_py.testing import ScriptedProvider, tool_call_response

# -- an empty prompt ------------------------------------------------------------------------

EMPTY = ["", "   ", "\n\t ", [TextBlock("")], [TextBlock(" "), TextBlock("\n")]]


async def _start(agent: Agent[Any], prompt: Any, how: str) -> None:
    if how == "run":
        await agent.run(prompt)
    elif how == "stream":
        async for _ in agent.stream(prompt):
            pass
    elif how == "session":
        await Session(agent).prompt(prompt)
    else:
        assert how == "run_sync"
        await asyncio.to_thread(agent.run_sync, prompt)


@pytest.mark.parametrize("how", ["run", "stream", "session", "run_sync"])
@pytest.mark.parametrize("prompt", EMPTY, ids=repr)
async def test_an_empty_prompt_is_refused_before_the_model_is_called(prompt: Any, how: str) -> None:
    """A run on nothing sent the model a blank user message (the vendors refuse one); there is
    nothing to answer, so the run is refused before anything is called or stored, saying what
    to do."""
    provider = ScriptedProvider("Hi.")
    agent = Agent(provider=provider)
    with pytest.raises(InvalidInputError, match=r"continue_\(\)") as caught:
        await _start(agent, prompt, how)
    assert "empty" in str(caught.value)
    assert provider.requests == []


@pytest.mark.parametrize("prompt", ["", "  "])
async def test_an_empty_message_among_the_prompts_messages_is_refused(prompt: str) -> None:
    provider = ScriptedProvider("Hi.")
    agent = Agent(provider=provider)
    with pytest.raises(InvalidInputError):
        await agent.run([user_message(prompt), user_message("Hello")])
    session = Session(agent)
    for queue in (session.steer, session.follow_up):
        with pytest.raises(InvalidInputError):
            queue(prompt)
        with pytest.raises(InvalidInputError):
            queue(user_message(prompt))
    assert provider.requests == []


async def test_a_prompt_with_an_image_and_no_text_still_runs() -> None:
    provider = ScriptedProvider("A dot.")
    agent = Agent(provider=provider)
    png = bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c63000100000500010d0a2db40000000049454e44ae426082"
    )
    result = await agent.run([ImageBlock(data=png, media_type="image/png"), TextBlock("")])
    assert result.text == "A dot."
    assert len(provider.requests) == 1


# -- a tool that cancels its own task --------------------------------------------------------


async def _drive(agent: Agent[Any], how: str, prompt: str = "Go") -> Any:
    if how == "run":
        return await agent.run(prompt)
    if how == "stream":
        ended = None
        async for event in agent.stream(prompt):  # a failed run raises after its AgentEnd
            if isinstance(event, AgentEnd):
                ended = event.result
        assert ended is not None
        return ended
    return await Session(agent).prompt(prompt)


HOW = ["run", "stream", "session"]


@pytest.mark.parametrize("how", HOW)
async def test_a_tool_that_cancels_its_own_task_fails_alone_on_every_path(how: str) -> None:
    """A quiet run's lone call runs in the run's task: a tool that cancelled its own task
    cancelled the run there, while a streamed run's call (its own task) failed alone. The same
    call now fails alone on every path: an error result the model reads, the run goes on."""

    @tool
    async def selfish(city: str) -> str:
        """Cancel the task I run in."""
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(0)
        return "not reached"

    provider = ScriptedProvider(tool_call_response(("selfish", {"city": "Oslo"})), "Sorry.")
    result = await _drive(Agent(provider=provider, tools=[selfish]), how)
    assert result.text == "Sorry."
    told = provider.requests[1].messages[-1]
    assert told.is_error
    assert "CancelledError" in told.text
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


@pytest.mark.parametrize("how", HOW)
async def test_a_tool_that_cancels_its_own_task_and_returns_keeps_its_result(how: str) -> None:
    """The request the tool left on its task (never delivered to it) dies with the call, as a
    call's task ends with it; it never reaches the run's next step."""

    @tool
    async def leaves_a_request(city: str) -> str:
        """Cancel the task I run in, and return."""
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        return "sunny"

    provider = ScriptedProvider(tool_call_response(("leaves_a_request", {"city": "Oslo"})), "Ok.")
    result = await _drive(Agent(provider=provider, tools=[leaves_a_request]), how)
    assert result.text == "Ok."
    assert provider.requests[1].messages[-1].text == "sunny"
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


@pytest.mark.parametrize("uncancels", [False, True])
async def test_cancelling_the_run_while_a_tool_that_cancelled_itself_waits_cancels_it(
    uncancels: bool,
) -> None:
    """Control: the tool's own request does not hide the caller's: the run ends cancelled."""
    waiting = asyncio.Event()

    @tool
    async def recovers(city: str) -> str:
        """Cancel myself, recover, then wait."""
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        try:
            await asyncio.sleep(0)
        except asyncio.CancelledError:
            if uncancels:
                task.uncancel()
        waiting.set()
        await asyncio.Event().wait()
        return "never"

    provider = ScriptedProvider(tool_call_response(("recovers", {"city": "Oslo"})), "Ok.")
    run = asyncio.create_task(Agent(provider=provider, tools=[recovers]).run("Go"))
    await waiting.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert len(provider.requests) == 1


async def test_cancelling_the_run_while_its_lone_tool_waits_cancels_it() -> None:
    waiting = asyncio.Event()

    @tool
    async def slow(city: str) -> str:
        """Wait."""
        waiting.set()
        await asyncio.Event().wait()
        return "never"

    provider = ScriptedProvider(tool_call_response(("slow", {"city": "Oslo"})), "Ok.")
    run = asyncio.create_task(Agent(provider=provider, tools=[slow]).run("Go"))
    await waiting.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert run.cancelled()


async def test_a_timeout_inside_a_lone_tool_is_the_tools_own_error() -> None:
    """Control: ``asyncio.timeout`` in a tool cancels the task it runs in from outside its
    steps and takes the request back: a TimeoutError the tool lets out, an error result."""

    @tool
    async def times_out(city: str) -> str:
        """Wait past my own deadline."""
        async with asyncio.timeout(0):
            await asyncio.Event().wait()
        return "never"

    provider = ScriptedProvider(tool_call_response(("times_out", {"city": "Oslo"})), "Late.")
    result = await Agent(provider=provider, tools=[times_out]).run("Go")
    assert result.text == "Late."
    assert provider.requests[1].messages[-1].is_error
    assert "TimeoutError" in provider.requests[1].messages[-1].text


# -- every hook the loop awaits follows the one rule ----------------------------------------


async def _let_out_a_cancellation() -> None:
    """What code does when it awaits something cancelled elsewhere (a future, a task)."""
    cancelled = asyncio.get_running_loop().create_future()
    cancelled.cancel()
    await cancelled


def _stray(*args: Any, **kwargs: Any) -> Any:
    """User code that lets out a CancelledError nobody asked for: sync ones raise it."""
    raise asyncio.CancelledError


async def _stray_async(*args: Any, **kwargs: Any) -> Any:
    await _let_out_a_cancellation()


@tool
async def lookup(city: str) -> str:
    """Look up the weather of a city."""
    return f"{city}: sunny"


class _StrayMemory:
    def __init__(self, where: str) -> None:
        self.where = where

    async def messages(self) -> list[Any]:
        if self.where == "load":
            await _let_out_a_cancellation()
        return []

    async def append(self, *messages: Any) -> None:
        await _let_out_a_cancellation()


class _StrayRecall:
    def __init__(self, where: str) -> None:
        self.where = where

    async def retrieve(self, content: Any, *, top_k: Any = None, session: Any = None) -> Any:
        if self.where == "retrieve":
            await _let_out_a_cancellation()
        return []

    async def store(self, messages: Any, *, session: Any = None) -> None:
        await _let_out_a_cancellation()


class _StrayProvider:
    async def complete(self, request: Any) -> Any:
        await _let_out_a_cancellation()


class _StrayServer:
    name = "stray"

    async def tools(self) -> list[Any]:
        await _let_out_a_cancellation()
        return []

    async def aclose(self) -> None:
        return None


class _Reserving:
    """A tool of the protocol whose ``reserve``, ``validate_arguments`` or ``execute`` lets
    out a stray cancellation."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.definition = lookup.definition

    def reserve(self, call: Any) -> Any:
        if self.where == "reserve":
            raise asyncio.CancelledError

        def release() -> None:
            if self.where == "release":
                raise asyncio.CancelledError

        return release

    def validate_arguments(self, args: dict[str, Any]) -> dict[str, Any]:
        if self.where == "validate_arguments":
            raise asyncio.CancelledError
        return args

    async def execute(self, args: dict[str, Any]) -> list[Any]:
        if self.where == "execute":
            await _let_out_a_cancellation()
        return [TextBlock("sunny")]


def _child(**options: Any) -> Any:
    child = Agent(provider=ScriptedProvider("Child."))
    schema = lookup.definition.parameters  # the call's {"city": ...}: no prompt field
    return child.as_tool(name="lookup", description="Ask.", parameters=schema, **options)


def _middleware(next_: Any) -> Any:
    async def call(tc: Any) -> Any:
        await _let_out_a_cancellation()
        return await next_(tc)

    return call


# Every setting of an agent (docs/architecture.md, rule 5): the user code the run awaits, each
# with settings that make it let out a stray CancelledError; and what is not code.
USER_CODE: dict[str, Callable[[], dict[str, Any]]] = {
    "provider": lambda: {"provider": _StrayProvider()},
    "tools": lambda: {"tools": [_Reserving("execute")]},
    "instructions": lambda: {"instructions": [_stray_async]},
    "short_term_memory": lambda: {"short_term_memory": _StrayMemory("load")},
    "long_term_memory": lambda: {"long_term_memory": _StrayRecall("retrieve")},
    "write_policy": lambda: {"long_term_memory": _StrayRecall(""), "write_policy": _stray_async},
    "hooks": lambda: {"hooks": Hooks(**{f.name: _stray_async for f in fields(Hooks)})},
    "dispatch_middlewares": lambda: {"dispatch_middlewares": [_middleware]},
    "mcp_connectors": lambda: {"mcp_connectors": [_stray_async]},
    "mcp_servers": lambda: {"mcp_servers": [_StrayServer()]},
    "before_tool_call": lambda: {"before_tool_call": _stray_async},
    "requires_approval": lambda: {"requires_approval": _stray_async},
    "after_tool_call": lambda: {"after_tool_call": _stray_async},
    "prepare_arguments": lambda: {"prepare_arguments": _stray_async},
    "should_stop": lambda: {"should_stop": _stray_async},
    "prepare_turn": lambda: {"prepare_turn": _stray_async},
    "transform_context": lambda: {"transform_context": _stray_async},
    "output_validators": lambda: {
        "output_type": int,
        "output_mode": "prompted",
        "output_validators": [_stray_async],
    },
    "input_guardrails": lambda: {"input_guardrails": [_stray_async]},
    "output_guardrails": lambda: {"output_guardrails": [_stray_async]},
}
# Code a setting holds besides the agent's own (the tool protocol's hooks, as_tool's functions).
MORE_CODE: dict[str, Callable[[], dict[str, Any]]] = {
    "short_term_memory.append": lambda: {"short_term_memory": _StrayMemory("append")},
    "long_term_memory.store": lambda: {"long_term_memory": _StrayRecall("store")},
    "sync hooks": lambda: {"hooks": Hooks(**{f.name: _stray for f in fields(Hooks)})},
    "tool.reserve": lambda: {"tools": [_Reserving("reserve")]},
    "tool.reserve's release": lambda: {"tools": [_Reserving("release")]},
    "tool.validate_arguments": lambda: {"tools": [_Reserving("validate_arguments")]},
    "as_tool(prompt=)": lambda: {"tools": [_child(prompt=_stray)]},
    "as_tool(history=)": lambda: {"tools": [_child(history=_stray)]},
    "as_tool(deps=)": lambda: {"tools": [_child(deps=_stray)]},
    "as_tool(returns=)": lambda: {"tools": [_child(returns=_stray)]},
}
NOT_CODE = {
    "model", "system_prompt", "max_iterations", "long_term_top_k", "name", "hook_sets",
    "logger", "tool_timeout", "circuit_breaker", "thinking", "effort", "max_tokens",
    "short_term_trace_tools", "stop_on_denied", "before_tool_call_sees_message",
    "before_tool_call_sees_run", "approval_timeout", "holds_calls", "tool_execution",
    "sequential_tools", "max_parallel_tools", "max_run_tokens", "max_tool_result_chars",
    "tool_retry", "rate_limit", "output_type", "output_mode", "output_retries", "output",
    "sources",
}  # fmt: skip
AS_TOOL_DATA = {"agent", "name", "description", "parameters", "max_iterations", "streaming"}


def test_every_hook_the_loop_awaits_is_listed_here() -> None:
    """A new setting or as_tool function is either user code, listed with a case below that
    makes it let out a stray CancelledError, or data: a new hook without the rule fails."""
    from goagent_py.agent_tool import as_tool
    from goagent_py.options import AgentOptions

    settings = {f.name for f in fields(AgentOptions)}
    assert settings - NOT_CODE == set(USER_CODE), "classify the new setting here"
    assert not NOT_CODE - settings
    functions = set(inspect.signature(as_tool).parameters) - AS_TOOL_DATA
    assert {f"as_tool({name}=)" for name in functions} <= set(MORE_CODE)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("where", [*USER_CODE, *MORE_CODE])
async def test_a_stray_cancellation_from_any_hook_never_ends_the_run_cancelled(
    where: str, how: str
) -> None:
    """Whatever user code the run awaits lets out a CancelledError nobody asked for, the run
    never ends cancelled: it goes on, or fails with that code's error (a GoAgentError; for
    as_tool's deps= and returns= the ConfigurationError their other failures are), quiet,
    streamed or in a session."""
    settings = {"provider": ScriptedProvider(
        tool_call_response(("lookup", {"city": "Oslo"})), "Done.", "7", "7"
    ), "tools": [lookup]}  # fmt: skip
    settings.update((USER_CODE | MORE_CODE)[where]())
    agent = Agent(**settings)
    failure: GoAgentError | None = None
    result: Any = None
    try:
        result = await _drive(agent, how)
    except GoAgentError as exc:
        failure = exc
    if where in ("as_tool(deps=)", "as_tool(returns=)"):  # as their other failures
        assert isinstance(failure, ConfigurationError)
        assert isinstance(failure.__cause__, asyncio.CancelledError)
    if where in ("tool.reserve", "tool.reserve's release"):  # no place taken; the call runs
        assert result is not None
        assert result.text == "Done."
        assert result.messages[-2].text == "sunny"
    if where == "tool.validate_arguments":  # its other failures fail the run
        assert isinstance(failure, StrayCancellationError)
        assert failure.where == "a tool's validate_arguments"
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
