"""Tests for goagent_py.resilience: retry (tools, middleware, providers), rate limiting, breaker."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from goagent_py.errors import (
    CircuitOpenError,
    ConfigurationError,
    ProviderError,
    ToolArgumentsError,
    ToolExecutionError,
)
from goagent_py.hooks import Hooks
from goagent_py.messages import ContentBlock, TextBlock, ToolCall
from goagent_py.provider import (
    CompletionRequest,
    CompletionResponse,
    StreamDone,
    StreamEvent,
    StreamingProvider,
    TextDelta,
)
from goagent_py.resilience import (
    CircuitBreaker,
    CircuitState,
    RateLimiter,
    RetryPolicy,
    TransientError,
    TransientMarker,
    is_retryable_provider_error,
    parse_retry_after,
    rate_limit,
    retry_middleware,
    retry_provider,
    retry_tool,
)
from goagent_py.testing import text_response
from goagent_py.tools import ToolDefinition, tool

# -- helpers ----------------------------------------------------------------------------------


class FakeClock:
    """A monotonic clock that only moves when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class RecordingSleep:
    """An injected sleep: records each delay and returns at once (optionally moving a clock)."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.delays: list[float] = []
        self.clock = clock

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        if self.clock is not None:
            self.clock.advance(seconds)


class BlockingSleep:
    """An injected sleep that never returns by itself; ``entered`` is set once it is waiting."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        self.entered.set()
        await asyncio.Event().wait()


def policy(**kwargs: Any) -> tuple[RetryPolicy, RecordingSleep]:
    sleep = RecordingSleep()
    kwargs.setdefault("jitter", 0.0)
    return RetryPolicy(sleep=sleep, **kwargs), sleep


REQUEST = CompletionRequest(model="m")


class FakeProvider:
    """Raises the scripted errors in order, then answers."""

    def __init__(self, *outcomes: BaseException | str) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        self.calls += 1
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return text_response(outcome)


class FakeStreamingProvider(FakeProvider):
    """Streams "a", "b" then done; an error scripted as (error, after) fails after n events."""

    def __init__(self, *outcomes: BaseException | str | tuple[BaseException, int]) -> None:
        super().__init__()
        self.stream_outcomes = list(outcomes)
        self.closed = 0

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        outcome = self.stream_outcomes.pop(0)
        try:
            if isinstance(outcome, BaseException):
                raise outcome
            if isinstance(outcome, tuple):
                error, after = outcome
                for i in range(after):
                    yield TextDelta(f"t{i}")
                raise error
            yield TextDelta(outcome)
            yield StreamDone(text_response(outcome))
        finally:
            self.closed += 1


def http_error(status: int, **kwargs: Any) -> ProviderError:
    return ProviderError(f"HTTP {status}", provider="fake", status=status, **kwargs)


class Flaky:
    """A tool body that fails ``failures`` times with ``error`` then answers "ok"."""

    def __init__(self, failures: int, error: Callable[[], BaseException]) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error()
        return "ok"


def flaky_tool(flaky: Flaky) -> Any:
    @tool(name="flaky")
    async def flaky_fn() -> str:
        """A tool that fails a few times."""
        return await flaky()

    return flaky_fn


# -- RetryPolicy ------------------------------------------------------------------------------


def test_policy_defaults_match_the_reference() -> None:
    p = RetryPolicy()
    assert (p.max_attempts, p.initial_delay, p.max_delay, p.multiplier, p.jitter) == (
        3,
        0.2,
        10.0,
        2.0,
        0.25,
    )
    assert p.retryable is None
    assert p.retry_after is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_attempts": -1}, "max_attempts"),
        ({"initial_delay": -0.1}, "initial_delay"),
        ({"max_delay": -1}, "max_delay"),
        ({"multiplier": 0.5}, "multiplier"),
        ({"jitter": 1.5}, "jitter"),
    ],
)
def test_policy_rejects_bad_values(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        RetryPolicy(**kwargs)


def test_backoff_grows_and_is_capped() -> None:
    p = RetryPolicy(initial_delay=1, multiplier=3, max_delay=5, jitter=0)
    assert [p.delay(n, ValueError()) for n in (1, 2, 3, 4)] == [1, 3, 5, 5]


def test_jitter_stays_within_its_fraction_and_the_cap() -> None:
    p = RetryPolicy(initial_delay=1, multiplier=2, max_delay=2, jitter=0.25)
    first = [p.delay(1, ValueError()) for _ in range(200)]
    assert all(0.75 <= d <= 1.25 for d in first)
    assert len(set(first)) > 1
    assert all(d <= 2 for d in (p.delay(2, ValueError()) for _ in range(200)))


def test_server_retry_after_wins_and_is_capped() -> None:
    p = RetryPolicy(initial_delay=1, max_delay=10, jitter=0.25)
    assert p.delay(1, http_error(429, retry_after=2.5)) == 2.5
    assert p.delay(1, http_error(429, retry_after=3600)) == 10
    wrapped = RuntimeError("outer")
    wrapped.__cause__ = http_error(503, retry_after=4)
    assert p.delay(1, wrapped) == 4


def test_retry_after_callable_wins_over_the_server_and_is_capped() -> None:
    p = RetryPolicy(max_delay=10, retry_after=lambda e: 7.0)
    assert p.delay(1, http_error(429, retry_after=2)) == 7.0
    capped = RetryPolicy(max_delay=10, retry_after=lambda e: 99.0)
    assert capped.delay(1, ValueError()) == 10
    fallthrough = RetryPolicy(max_delay=10, jitter=0, retry_after=lambda e: None)
    assert fallthrough.delay(1, http_error(429, retry_after=2)) == 2


def test_parse_retry_after_seconds_and_http_date() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("1") == 1.0
    assert parse_retry_after(" 2.5 ") == 2.5
    assert parse_retry_after("Wed, 01 Jan 2025 12:00:30 GMT", now=now) == 30.0
    assert parse_retry_after("Wed, 01 Jan 2025 11:00:00 GMT", now=now) == 0.0
    assert parse_retry_after("-5") is None  # unusable (RFC 9110): the backoff applies
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (http_error(408), True),
        (http_error(409), True),
        (http_error(429), True),
        (http_error(500), True),
        (http_error(503), True),
        (http_error(529), True),
        (http_error(400), False),
        (http_error(401), False),
        (http_error(404), False),
        (http_error(200, error_type="overloaded_error"), True),
        (http_error(200, error_type="rate_limit_error"), True),
        (http_error(200, error_type="api_error"), True),
        (http_error(400, error_type="invalid_request_error"), False),
        (ProviderError("no answer", status=None), True),
        (httpx.ConnectError("refused"), True),
        (httpx.ReadTimeout("slow"), True),
        (ConnectionResetError(), True),
        (ValueError("bug"), False),
    ],
)
def test_default_provider_classifier(error: BaseException, expected: bool) -> None:
    assert is_retryable_provider_error(error) is expected


def test_a_translated_connection_error_is_retryable_through_its_cause() -> None:
    error = ProviderError("connect failed", status=None, error_type="connection")
    error.__cause__ = httpx.ConnectError("refused")
    assert is_retryable_provider_error(error)


def test_transient_marker_is_a_transient_error() -> None:
    class BusyError(TransientMarker, Exception):
        pass

    class GoneError(TransientMarker, Exception):
        transient = False

    assert isinstance(BusyError("x"), TransientError)
    assert BusyError("x").is_transient()
    assert not GoneError("x").is_transient()
    assert not isinstance(ValueError("x"), TransientError)


# -- retry_provider ---------------------------------------------------------------------------


async def test_provider_429_waits_the_servers_retry_after() -> None:
    p, sleep = policy(initial_delay=0.2)
    inner = FakeProvider(http_error(429, retry_after=1.0), "done")
    response = await retry_provider(inner, p).complete(REQUEST)
    assert response.message.text == "done"
    assert sleep.delays == [1.0]
    assert inner.calls == 2


async def test_provider_400_is_not_retried() -> None:
    p, sleep = policy()
    inner = FakeProvider(http_error(400), "never")
    with pytest.raises(ProviderError) as info:
        await retry_provider(inner, p).complete(REQUEST)
    assert info.value.status == 400
    assert inner.calls == 1
    assert sleep.delays == []


async def test_provider_503_three_times_then_success_returns_the_success() -> None:
    p, sleep = policy(max_attempts=4, initial_delay=0.5, multiplier=2)
    inner = FakeProvider(http_error(503), http_error(503), http_error(503), "finally")
    response = await retry_provider(inner, p).complete(REQUEST)
    assert response.message.text == "finally"
    assert inner.calls == 4
    assert sleep.delays == [0.5, 1.0, 2.0]


async def test_provider_exhausted_raises_the_last_error_unchanged() -> None:
    p, sleep = policy(max_attempts=3)
    last = http_error(503, body="third")
    inner = FakeProvider(http_error(503), http_error(502), last)
    with pytest.raises(ProviderError) as info:
        await retry_provider(inner, p).complete(REQUEST)
    assert info.value is last
    assert len(sleep.delays) == 2


async def test_provider_retry_after_3600_is_capped_at_max_delay() -> None:
    p, sleep = policy(max_delay=10)
    inner = FakeProvider(http_error(429, retry_after=3600), "ok")
    await retry_provider(inner, p).complete(REQUEST)
    assert sleep.delays == [10]


async def test_provider_overloaded_on_http_200_is_retried() -> None:
    p, _ = policy()
    inner = FakeProvider(http_error(200, error_type="overloaded_error"), "ok")
    assert (await retry_provider(inner, p).complete(REQUEST)).message.text == "ok"
    assert inner.calls == 2


async def test_provider_connection_error_is_retried() -> None:
    p, _ = policy()
    inner = FakeProvider(httpx.ConnectError("refused"), "ok")
    assert (await retry_provider(inner, p).complete(REQUEST)).message.text == "ok"


async def test_cancellation_during_the_wait_stops_at_once() -> None:
    sleep = BlockingSleep()
    inner = FakeProvider(http_error(503), "never")
    wrapped = retry_provider(inner, RetryPolicy(sleep=sleep, initial_delay=5))
    task = asyncio.create_task(wrapped.complete(REQUEST))
    await sleep.entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert inner.calls == 1


async def test_cancellation_raised_by_the_provider_is_not_retried() -> None:
    p, sleep = policy()
    inner = FakeProvider(asyncio.CancelledError(), "never")
    with pytest.raises(asyncio.CancelledError):
        await retry_provider(inner, p).complete(REQUEST)
    assert inner.calls == 1
    assert sleep.delays == []


@pytest.mark.parametrize("attempts", [0, 1])
def test_single_attempt_returns_the_original_objects(attempts: int) -> None:
    p = RetryPolicy(max_attempts=attempts)
    provider = FakeProvider()
    assert retry_provider(provider, p) is provider

    @tool
    def noop() -> str:
        """Do nothing."""
        return ""

    assert retry_tool(noop, p) is noop


def test_retry_provider_keeps_other_attributes_and_the_streaming_capability() -> None:
    plain = FakeProvider()
    streaming = FakeStreamingProvider()
    assert not isinstance(retry_provider(plain, RetryPolicy()), StreamingProvider)
    wrapped = retry_provider(streaming, RetryPolicy())
    assert isinstance(wrapped, StreamingProvider)
    assert wrapped.stream_outcomes is streaming.stream_outcomes  # type: ignore[attr-defined]


async def test_stream_retried_when_it_fails_before_the_first_event() -> None:
    p, sleep = policy()
    inner = FakeStreamingProvider(http_error(200, error_type="overloaded_error"), "hello")
    wrapped = retry_provider(inner, p)
    assert isinstance(wrapped, StreamingProvider)
    events = [e async for e in wrapped.stream(REQUEST)]
    assert events[0] == TextDelta("hello")
    assert isinstance(events[-1], StreamDone)
    assert inner.calls == 2
    assert len(sleep.delays) == 1
    assert inner.closed == 2


async def test_stream_not_retried_once_an_event_was_yielded() -> None:
    p, sleep = policy()
    inner = FakeStreamingProvider((http_error(200, error_type="overloaded_error"), 1), "never")
    wrapped = retry_provider(inner, p)
    assert isinstance(wrapped, StreamingProvider)
    seen: list[StreamEvent] = []

    async def consume() -> None:
        async for event in wrapped.stream(REQUEST):
            seen.append(event)

    with pytest.raises(ProviderError):
        await consume()
    assert seen == [TextDelta("t0")]
    assert inner.calls == 1
    assert sleep.delays == []


async def test_stream_not_retried_for_a_permanent_error() -> None:
    p, _ = policy()
    inner = FakeStreamingProvider(http_error(400), "never")
    wrapped = retry_provider(inner, p)
    assert isinstance(wrapped, StreamingProvider)
    with pytest.raises(ProviderError):
        async for _ in wrapped.stream(REQUEST):
            pass
    assert inner.calls == 1


# -- one precedence for all three wrappers ----------------------------------------------------


class PermanentProviderError(ProviderError, TransientMarker):
    """A 503 that says it is permanent."""

    def __init__(self) -> None:
        ProviderError.__init__(self, "gone for good", status=503)
        self.transient = False


class TransientProviderError(ProviderError, TransientMarker):
    """A 400 that says it is transient."""

    def __init__(self) -> None:
        ProviderError.__init__(self, "try again", status=400)
        self.transient = True


async def _attempts_provider(p: RetryPolicy, error: Callable[[], BaseException]) -> int:
    inner = FakeProvider(error(), "ok")
    with contextlib.suppress(Exception):
        await retry_provider(inner, p).complete(REQUEST)
    return inner.calls


async def _attempts_tool(p: RetryPolicy, error: Callable[[], BaseException]) -> int:
    flaky = Flaky(1, error)
    with contextlib.suppress(Exception):
        await retry_tool(flaky_tool(flaky), p).execute({})
    return flaky.calls


async def _attempts_middleware(p: RetryPolicy, error: Callable[[], BaseException]) -> int:
    flaky = Flaky(1, error)
    the_tool = flaky_tool(flaky)

    async def base(tc: ToolCall) -> list[ContentBlock]:
        try:
            return await the_tool.execute(dict(tc.arguments))
        except ToolArgumentsError:
            raise
        except Exception as exc:  # what the recovery middleware does in the real chain
            raise ToolExecutionError(tc.name, tc.arguments, exc, "tb") from exc

    with contextlib.suppress(Exception):
        await retry_middleware(p)(base)(ToolCall("1", "flaky", {}))
    return flaky.calls


WRAPPERS = {
    "retry_provider": _attempts_provider,
    "retry_tool": _attempts_tool,
    "retry_middleware": _attempts_middleware,
}


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
async def test_retryable_wins_over_a_permanent_marker(wrapper: str) -> None:
    p, _ = policy(retryable=lambda e: True)
    assert await WRAPPERS[wrapper](p, PermanentProviderError) == 2


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
async def test_retryable_false_wins_over_a_transient_marker(wrapper: str) -> None:
    p, _ = policy(retryable=lambda e: False)
    assert await WRAPPERS[wrapper](p, TransientProviderError) == 1


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
async def test_a_permanent_marker_wins_over_the_default(wrapper: str) -> None:
    p, _ = policy()
    assert await WRAPPERS[wrapper](p, PermanentProviderError) == 1


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
async def test_a_transient_marker_wins_over_the_default(wrapper: str) -> None:
    p, _ = policy()
    assert await WRAPPERS[wrapper](p, TransientProviderError) == 2


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
async def test_retryable_sees_the_original_error(wrapper: str) -> None:
    seen: list[BaseException] = []

    def retryable(error: BaseException) -> bool:
        seen.append(error)
        return False

    p, _ = policy(retryable=retryable)
    await WRAPPERS[wrapper](p, lambda: http_error(503))
    assert len(seen) == 1
    assert isinstance(seen[0], ProviderError)


# -- retry_tool / retry_middleware ------------------------------------------------------------


async def test_retry_tool_retries_then_succeeds_and_keeps_the_definition() -> None:
    p, sleep = policy(initial_delay=0.1)
    flaky = Flaky(2, lambda: RuntimeError("flaky"))
    inner = flaky_tool(flaky)
    wrapped = retry_tool(inner, p)
    assert wrapped.definition is inner.definition
    assert await wrapped.execute({}) == [TextBlock("ok")]
    assert flaky.calls == 3
    assert sleep.delays == [0.1, 0.2]


async def test_retry_tool_does_not_retry_bad_arguments() -> None:
    calls = 0

    @tool
    def add(a: int) -> int:
        """Add."""
        nonlocal calls
        calls += 1
        return a

    p, sleep = policy()
    with pytest.raises(ToolArgumentsError):
        await retry_tool(add, p).execute({"a": "not a number"})
    assert calls == 0
    assert sleep.delays == []


async def test_retry_middleware_fires_on_tool_retry_with_attempt_error_and_delay() -> None:
    events: list[tuple[ToolCall, int, BaseException, float]] = []
    p, _ = policy(initial_delay=0.1, multiplier=2)
    hooks = Hooks(on_tool_retry=lambda *a: events.append(a))
    flaky = Flaky(2, lambda: RuntimeError("flaky"))
    the_tool = flaky_tool(flaky)

    async def base(tc: ToolCall) -> list[ContentBlock]:
        return await the_tool.execute({})

    tc = ToolCall("1", "flaky", {})
    result = await retry_middleware(p, hooks=hooks)(base)(tc)
    assert result == [TextBlock("ok")]
    assert [(c, attempt, delay) for c, attempt, _, delay in events] == [
        (tc, 1, 0.1),
        (tc, 2, 0.2),
    ]
    assert all(isinstance(e[2], RuntimeError) for e in events)


@pytest.mark.parametrize(
    "error",
    [
        ToolArgumentsError("t", "bad"),
        CircuitOpenError("t", datetime.now(UTC)),
    ],
)
async def test_retry_middleware_skips_errors_retrying_cannot_fix(error: Exception) -> None:
    calls = 0

    async def base(tc: ToolCall) -> list[ContentBlock]:
        nonlocal calls
        calls += 1
        raise error

    p, _ = policy()
    with pytest.raises(type(error)):
        await retry_middleware(p)(base)(ToolCall("1", "t", {}))
    assert calls == 1


async def test_retry_middleware_single_attempt_passes_through() -> None:
    async def base(tc: ToolCall) -> list[ContentBlock]:
        return []

    assert retry_middleware(RetryPolicy(max_attempts=1))(base) is base


async def test_keyboard_interrupt_is_never_retried() -> None:
    flaky = Flaky(1, KeyboardInterrupt)
    p, _ = policy()
    with pytest.raises(KeyboardInterrupt):
        await retry_tool(flaky_tool(flaky), p).execute({})
    assert flaky.calls == 1


async def test_a_custom_tool_without_validation_is_wrapped_too() -> None:
    class Raw:
        calls = 0

        @property
        def definition(self) -> ToolDefinition:
            return ToolDefinition("raw", "raw tool", {"type": "object", "properties": {}})

        async def execute(self, args: dict[str, Any]) -> list[ContentBlock]:
            self.calls += 1
            if self.calls == 1:
                raise OSError("disk hiccup")
            return [TextBlock(str(args))]

    raw = Raw()
    p, _ = policy()
    assert await retry_tool(raw, p).execute({"x": 1}) == [TextBlock("{'x': 1}")]
    assert raw.calls == 2


# -- RateLimiter / rate_limit -----------------------------------------------------------------


async def test_burst_passes_then_waits_follow_the_rate() -> None:
    clock = FakeClock()
    sleep = RecordingSleep()  # does not move the clock: the waits queue up
    limiter = RateLimiter(2.0, 3, clock=clock, sleep=sleep)
    waits = [await limiter.acquire() for _ in range(5)]
    assert waits == [0, 0, 0, 0.5, 1.0]
    assert sleep.delays == [0.5, 1.0]


async def test_tokens_refill_with_time_up_to_the_burst() -> None:
    clock = FakeClock()
    limiter = RateLimiter(10.0, 2, clock=clock, sleep=RecordingSleep())
    assert limiter.try_acquire()
    assert limiter.try_acquire()
    assert not limiter.try_acquire()
    clock.advance(0.1)
    assert limiter.try_acquire()
    clock.advance(100)
    assert limiter.tokens == 2


async def test_steady_state_waits_one_interval_each() -> None:
    clock = FakeClock()
    sleep = RecordingSleep(clock)  # moves the clock: each caller waits its own interval
    limiter = RateLimiter(4.0, 1, clock=clock, sleep=sleep)
    for _ in range(4):
        await limiter.acquire()
    assert sleep.delays == [0.25, 0.25, 0.25]


async def test_cancelled_waiter_stops_at_once_and_gives_its_token_back() -> None:
    clock = FakeClock()
    sleep = BlockingSleep()
    limiter = RateLimiter(1.0, 1, clock=clock, sleep=sleep)
    await limiter.acquire()
    task = asyncio.create_task(limiter.acquire())
    await sleep.entered.wait()
    assert limiter.tokens == -1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert limiter.tokens == 0
    clock.advance(1.0)
    assert limiter.try_acquire()


@pytest.mark.parametrize(
    ("rate", "burst", "message"),
    [(0, 1, "rate"), (-1, 1, "rate"), (1, 0, "burst"), (1, 1.5, "burst")],
)
def test_rate_limit_validation(rate: float, burst: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        RateLimiter(rate, burst)
    with pytest.raises(ConfigurationError, match=message):
        rate_limit(rate, burst)


def test_rate_limit_per_tool_validation() -> None:
    with pytest.raises(ConfigurationError, match="per_tool"):
        rate_limit(1, 1, per_tool="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="search"):
        rate_limit(1, 1, per_tool={"search": (1.0,)})  # type: ignore[dict-item]
    with pytest.raises(ConfigurationError, match="rate"):
        rate_limit(1, 1, per_tool={"search": (0, 1)})


async def _echo(tc: ToolCall) -> list[ContentBlock]:
    return [TextBlock(tc.name)]


async def test_rate_limit_middleware_is_global_by_default() -> None:
    clock = FakeClock()
    sleep = RecordingSleep()
    call = rate_limit(1.0, 2, clock=clock, sleep=sleep)(_echo)
    for name in ("a", "b", "c"):
        assert await call(ToolCall("1", name, {})) == [TextBlock(name)]
    assert sleep.delays == [1.0]


async def test_rate_limit_per_tool_buckets_are_independent() -> None:
    clock = FakeClock()
    sleep = RecordingSleep()
    call = rate_limit(1.0, 1, per_tool=True, clock=clock, sleep=sleep)(_echo)
    await call(ToolCall("1", "a", {}))
    await call(ToolCall("2", "b", {}))
    assert sleep.delays == []  # each tool has its own full bucket
    await call(ToolCall("3", "a", {}))
    assert sleep.delays == [1.0]


async def test_rate_limit_named_tools_get_their_own_limits() -> None:
    clock = FakeClock()
    sleep = RecordingSleep()
    call = rate_limit(1.0, 1, per_tool={"slow": (0.5, 1)}, clock=clock, sleep=sleep)(_echo)
    await call(ToolCall("1", "slow", {}))
    await call(ToolCall("2", "x", {}))
    assert sleep.delays == []
    await call(ToolCall("3", "slow", {}))
    await call(ToolCall("4", "y", {}))  # shares the global bucket with "x"
    assert sleep.delays == [2.0, 1.0]


async def test_rate_limit_middleware_cancellation_while_waiting() -> None:
    clock = FakeClock()
    sleep = BlockingSleep()
    reached = 0

    async def base(tc: ToolCall) -> list[ContentBlock]:
        nonlocal reached
        reached += 1
        return []

    call = rate_limit(1.0, 1, clock=clock, sleep=sleep)(base)
    await call(ToolCall("1", "a", {}))
    task = asyncio.create_task(call(ToolCall("2", "a", {})))
    await sleep.entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert reached == 1


async def test_concurrent_callers_are_throttled_in_order() -> None:
    clock = FakeClock()
    sleep = RecordingSleep()
    limiter = RateLimiter(10.0, 2, clock=clock, sleep=sleep)
    waits = await asyncio.gather(*(limiter.acquire() for _ in range(6)))
    assert sorted(waits) == pytest.approx([0, 0, 0.1, 0.2, 0.3, 0.4])


# -- CircuitBreaker unit ----------------------------------------------------------------------


def test_breaker_transitions_with_an_injected_clock() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(2, 30.0, clock=clock)
    assert breaker.allow()
    breaker.record_failure()
    assert breaker.state is CircuitState.CLOSED
    breaker.record_failure()
    assert breaker.state is CircuitState.OPEN
    assert not breaker.allow()
    expected = datetime.now(UTC) + timedelta(seconds=30)
    assert abs((breaker.open_until() - expected).total_seconds()) < 1
    clock.advance(30)
    assert breaker.allow()  # the one probe
    assert breaker.state is CircuitState.HALF_OPEN
    assert not breaker.allow()
    breaker.release_probe()  # cancelled probe: no verdict
    assert breaker.allow()
    breaker.record_success()
    assert breaker.state is CircuitState.CLOSED
