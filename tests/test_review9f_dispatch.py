"""The dispatch chain against hostile tools and parallel failures (review9f)."""

from __future__ import annotations

import asyncio
import contextlib
import pickle

import pytest

from goagent_py import Agent
from goagent_py.dispatch import CircuitBreakerConfig, Dispatcher, RateLimitConfig
from goagent_py.errors import ToolExecutionError, ToolTimeoutError
from goagent_py.messages import ToolCall
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import tool


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str() of this error raises")


@tool
def unprintable() -> str:
    """Fails with an error that cannot be written out."""
    raise UnprintableError()


async def test_a_tool_error_whose_str_raises_is_reported_as_the_tools_own_error() -> None:
    result = await Dispatcher({"unprintable": unprintable}).execute(
        ToolCall("c1", "unprintable", {})
    )
    assert isinstance(result.error, ToolExecutionError)
    # The tool's own exception, not the RuntimeError its __str__ raised on the way.
    assert isinstance(result.error.cause, UnprintableError)
    assert result.content[0].text.startswith("Error: tool 'unprintable' failed: UnprintableError")
    assert "str() of this error raises" not in result.content[0].text
    copy = pickle.loads(pickle.dumps(result.error))
    assert str(copy) == str(result.error)


async def test_a_middleware_error_whose_str_raises_is_an_error_result_not_a_crash() -> None:
    def failing(next_):  # a custom middleware that fails on its own
        async def call(tc: ToolCall):
            raise UnprintableError()

        return call

    @tool
    def fine() -> str:
        """Works."""
        return "ok"

    result = await Dispatcher({"fine": fine}, middlewares=[failing]).execute(
        ToolCall("c1", "fine", {})
    )
    assert isinstance(result.error, ToolExecutionError)
    assert isinstance(result.error.cause, UnprintableError)
    assert result.content[0].text.startswith("Error: tool 'fine' failed: UnprintableError")


async def test_calls_timing_out_in_the_rate_limit_queue_do_not_open_the_circuit() -> None:
    ran: list[str] = []

    @tool
    def healthy() -> str:
        """Always works."""
        ran.append("healthy")
        return "ok"

    dispatcher = Dispatcher(
        {"healthy": healthy},
        timeout=0.05,
        circuit_breaker=CircuitBreakerConfig(max_failures=2, reset_timeout=3600),
        # One call now, the next in 1,000 s: the queued calls end at the timeout, waiting.
        rate_limit=RateLimitConfig(rate=0.001, burst=1),
    )
    first = await dispatcher.execute(ToolCall("c1", "healthy", {}))
    assert first.error is None
    for i in (2, 3):
        queued = await dispatcher.execute(ToolCall(f"c{i}", "healthy", {}))
        assert isinstance(queued.error, ToolTimeoutError)
    # The tool never failed: its circuit is closed (the call waits for a token again).
    fourth = await dispatcher.execute(ToolCall("c4", "healthy", {}))
    assert isinstance(fourth.error, ToolTimeoutError)
    assert ran == ["healthy"]


@tool
async def awaits_a_cancelled_task() -> str:
    """Awaits a task that something else cancelled: its CancelledError leaks out."""
    inner = asyncio.create_task(asyncio.sleep(3600))
    await asyncio.sleep(0)
    inner.cancel()
    return await inner


@tool
async def sibling() -> str:
    """Works."""
    return "fine"


async def test_a_cancelled_error_no_one_sent_the_call_is_the_tools_error() -> None:
    # Nobody cancelled the run or the call: the tool's own CancelledError is its failure, an
    # error result, not a cancellation of the whole run that its caller never asked for.
    provider = ScriptedProvider(
        tool_call_response(("awaits_a_cancelled_task", {}), ("sibling", {})),
        text_response("done"),
    )
    agent = Agent(provider=provider, tools=[awaits_a_cancelled_task, sibling], model="m")
    result = await agent.run("go")
    assert result.text == "done"
    results = [(m.text, m.is_error) for m in result.messages if m.role == "tool"]
    assert results == [
        ("Error: tool 'awaits_a_cancelled_task' failed: CancelledError", True),
        ("fine", False),
    ]


async def test_a_dispatcher_call_that_is_cancelled_still_raises_cancelled_error() -> None:
    started = asyncio.Event()

    @tool
    async def waits() -> str:
        """Waits."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    for dispatcher in (Dispatcher({"waits": waits}), Dispatcher({"waits": waits}, timeout=3600)):
        started.clear()
        task = asyncio.create_task(dispatcher.execute(ToolCall("c1", "waits", {})))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_an_async_tool_that_outlives_its_timeout_sees_its_call_cancelled() -> None:
    seen: list[bool] = []

    @tool
    async def stubborn() -> str:
        """Swallows its cancellation and goes on (as some libraries do)."""
        ctx = current_tool_context()
        assert ctx is not None
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
        seen.append(ctx.cancelled)  # a long job polls this to stop: the call was given up on
        return "late"

    provider = ScriptedProvider(tool_call_response(("stubborn", {})), text_response("done"))
    agent = Agent(provider=provider, tools=[stubborn], model="m", tool_timeout=0.05)
    result = await agent.run("go")
    (message,) = [m for m in result.messages if m.role == "tool"]
    assert message.text == "Error: tool 'stubborn' timed out after 0.05s"
    assert seen == [True]
