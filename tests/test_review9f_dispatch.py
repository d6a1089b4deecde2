"""The dispatch chain against hostile tools and parallel failures (review9f)."""

from __future__ import annotations

import pickle

from goagent_py.dispatch import CircuitBreakerConfig, Dispatcher, RateLimitConfig
from goagent_py.errors import ToolExecutionError, ToolTimeoutError
from goagent_py.messages import ToolCall
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
