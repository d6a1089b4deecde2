"""Retry for tools and providers: :class:`RetryPolicy` and its wrappers, on tenacity.

:func:`retry_tool`, :func:`retry_middleware` and :func:`retry_provider` share one precedence for
what is retried (see the policy), and :func:`parse_retry_after` reads a server's Retry-After.
Cancellation is never retried. Sleeps are injectable so tests never wait.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import KW_ONLY, dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from goagent_py._dispatch_types import DispatchFunc, DispatchMiddleware
from goagent_py._provider_retry import provider_verdict
from goagent_py._retry_after import parse_retry_after
from goagent_py.errors import (
    CircuitOpenError,
    ConfigurationError,
    ProviderError,
    ToolArgumentsError,
    ToolBlockedError,
    ToolExecutionError,
    ToolNotFoundError,
)
from goagent_py.hooks import Hooks, call_hook
from goagent_py.messages import ContentBlock, ToolCall
from goagent_py.provider import (
    CompletionRequest,
    CompletionResponse,
    Provider,
    StreamEvent,
    StreamingProvider,
)
from goagent_py.tool_context import _fresh_attempt
from goagent_py.tools import Tool, ToolDefinition

__all__ = [
    "RetryPolicy",
    "Sleep",
    "TransientError",
    "TransientMarker",
    "is_retryable_provider_error",
    "is_retryable_tool_error",
    "parse_retry_after",
    "retry_middleware",
    "retry_provider",
    "retry_tool",
]

T = TypeVar("T")


@runtime_checkable
class TransientError(Protocol):
    """An error that knows whether trying again can help.

    Any exception with an ``is_transient()`` method matches (``isinstance`` works on it); the
    retry wrappers look for one along the error's causes. Subclass :class:`TransientMarker` for a
    ready-made implementation.
    """

    def is_transient(self) -> bool:
        """Whether the same call may succeed if tried again."""
        ...


class TransientMarker:
    """A mixin that makes an exception a :class:`TransientError`.

    Set ``transient`` on the class or the instance (True by default)::

        class BackendBusyError(TransientMarker, Exception):
            transient = True
    """

    transient: bool = True

    def is_transient(self) -> bool:
        """Whether the same call may succeed if tried again (the ``transient`` attribute)."""
        return self.transient


Sleep = Callable[[float], Awaitable[None]]
"""An async sleep in seconds (``asyncio.sleep``); tests inject one that records and returns."""


@dataclass(slots=True, frozen=True)
class RetryPolicy:
    """How to retry a failing tool or provider call (exponential backoff with jitter).

    Whether an error is retried follows ONE precedence, the same for :func:`retry_tool`,
    :func:`retry_middleware` and :func:`retry_provider`:

    1. ``retryable``, when set, decides alone (its answer wins, even over a transient marker);
    2. else a :class:`TransientError` marker found on the error or along its causes decides;
    3. else the default classifier: for providers, first what the server said (its
       ``x-should-retry: true|false`` header; a quota or spend limit that no wait lifts is never
       retried; a vendor error type meaning "busy", such as ``overloaded_error`` or OpenAI's
       ``server_error``, is retried even on an HTTP 200, sent mid-stream), then connection
       errors and HTTP 408, 409, 429 and 5xx (529 included), or a :class:`ProviderError` that
       got no status at all; for tools, every failure except the model's bad arguments, an unknown
       tool, an open circuit and a blocked call.

    ``BaseException``s that are not ``Exception`` (cancellation, KeyboardInterrupt) are never
    retried; a cancellation during a wait stops at once. The delay before retry ``n`` (1-based)
    is ``retry_after(error)`` when that returns a number, else the server's Retry-After (the
    error's ``retry_after`` attribute, as :class:`ProviderError` carries it), else
    ``initial_delay * multiplier ** (n - 1)`` with ``± jitter`` of itself at random; whichever
    it is, it never exceeds ``max_delay`` (a server asking for an hour does not stall the run).

    Args:
        max_attempts: calls in all, the first included; 0 or 1 means no retry (the wrappers then
            return what they were given).
        initial_delay: seconds before the first retry.
        max_delay: the most any wait lasts, server Retry-After included.
        multiplier: growth of the delay per attempt (>= 1).
        jitter: random spread as a fraction of the delay (0 to 1; 0 for none).
        retryable: ``error -> bool``; decides alone which errors are retried. For tools it gets
            the tool's own exception (a :class:`ToolExecutionError` is unwrapped to its
            ``cause``).
        retry_after: ``error -> seconds | None``; a delay that wins over the computed one.
        sleep: the async sleep used between attempts (inject one in tests).
    """

    max_attempts: int = 3
    _: KW_ONLY
    initial_delay: float = 0.2
    max_delay: float = 10.0
    multiplier: float = 2.0
    jitter: float = 0.25
    retryable: Callable[[BaseException], bool] | None = None
    retry_after: Callable[[BaseException], float | None] | None = None
    sleep: Sleep = asyncio.sleep

    def __post_init__(self) -> None:
        if self.max_attempts < 0:
            raise ConfigurationError(
                f"RetryPolicy: max_attempts must be >= 1 (0 or 1 = no retry), "
                f"got {self.max_attempts}"
            )
        if self.initial_delay < 0:
            raise ConfigurationError(
                f"RetryPolicy: initial_delay must be >= 0, got {self.initial_delay}"
            )
        if self.max_delay < 0:
            raise ConfigurationError(f"RetryPolicy: max_delay must be >= 0, got {self.max_delay}")
        if self.multiplier < 1:
            raise ConfigurationError(f"RetryPolicy: multiplier must be >= 1, got {self.multiplier}")
        if not 0 <= self.jitter <= 1:
            raise ConfigurationError(
                f"RetryPolicy: jitter must be between 0 and 1, got {self.jitter}"
            )

    @property
    def retries(self) -> bool:
        """Whether this policy makes more than one attempt."""
        return self.max_attempts > 1

    def delay(self, attempt: int, error: BaseException) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based) before the next one."""
        chosen: float | None = None
        if self.retry_after is not None:
            chosen = self.retry_after(error)
        if chosen is None:
            chosen = _server_retry_after(error)
        if chosen is None:
            chosen = self.initial_delay * self.multiplier ** (attempt - 1)
            if self.jitter:
                chosen *= 1 + self.jitter * (2 * random.random() - 1)
        return max(0.0, min(chosen, self.max_delay))


def _causes(error: BaseException) -> Iterator[BaseException]:
    """The error, then what it wraps (a ``cause`` attribute, else ``__cause__``)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        inner = getattr(current, "cause", None)
        current = inner if isinstance(inner, BaseException) else current.__cause__


def _server_retry_after(error: BaseException) -> float | None:
    for e in _causes(error):
        value = getattr(e, "retry_after", None)
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return float(value)
    return None


def _transient_verdict(error: BaseException) -> bool | None:
    for e in _causes(error):
        if isinstance(e, TransientError):
            return bool(e.is_transient())
    return None


_RETRYABLE_STATUS = frozenset({408, 409, 429})


def is_retryable_provider_error(error: BaseException) -> bool:
    """The default classifier for providers (step 3 of :class:`RetryPolicy`'s precedence).

    Args:
        error: what the provider raised.

    Returns:
        The server's ``x-should-retry`` verdict when it sent one; False for a quota or spend
        limit used up (OpenAI ``insufficient_quota``, Anthropic ``enforced_spend_limit_reached``);
        True for the vendor error types that mean "busy" (``overloaded_error``,
        ``rate_limit_error``, ``api_error``, ``server_error``... whatever the status), connection
        errors, HTTP 408/409/429/5xx and a :class:`ProviderError` without a status (the request
        got no answer). See ``goagent_py._provider_retry`` for the lists.
    """
    for e in _causes(error):
        if isinstance(e, ProviderError):
            verdict = provider_verdict(e)  # x-should-retry, quota, vendor error types
            if verdict is not None:
                return verdict
            if e.status is None:
                if not e.error_type:
                    return True
                continue
            return e.status in _RETRYABLE_STATUS or e.status >= 500
        if isinstance(e, ConnectionError | TimeoutError):
            return True
        # httpx is only consulted if someone imported it: its errors cannot exist otherwise.
        httpx = sys.modules.get("httpx")
        if httpx is not None and isinstance(e, httpx.TransportError):
            return True
    return False


_NEVER_RETRIED_TOOL_ERRORS = (
    ToolArgumentsError,
    ToolNotFoundError,
    CircuitOpenError,
    ToolBlockedError,
)


def is_retryable_tool_error(error: BaseException) -> bool:
    """The default classifier for tools (step 3 of :class:`RetryPolicy`'s precedence).

    Args:
        error: what the tool (or the chain below the retry) raised.

    Returns:
        False for bad arguments, an unknown tool, an open circuit and a blocked call (trying
        again cannot change them); True for every other ``Exception``.
    """
    return isinstance(error, Exception) and not isinstance(error, _NEVER_RETRIED_TOOL_ERRORS)


def _unwrap_execution(error: BaseException) -> BaseException:
    # What the tool raised, as the recovery layer wrapped it, is what a classifier judges.
    return error.cause if isinstance(error, ToolExecutionError) else error


def _should_retry(
    policy: RetryPolicy, error: BaseException, default: Callable[[BaseException], bool]
) -> bool:
    if not isinstance(error, Exception):
        return False  # cancellation, KeyboardInterrupt, SystemExit: never
    if policy.retryable is not None:
        return bool(policy.retryable(error))
    verdict = _transient_verdict(error)
    if verdict is not None:
        return verdict
    return default(error)


OnRetry = Callable[[int, BaseException, float], Awaitable[None]]


async def _call_with_retry(
    policy: RetryPolicy,
    fn: Callable[[], Awaitable[T]],
    *,
    default: Callable[[BaseException], bool],
    unwrap: Callable[[BaseException], BaseException] = lambda e: e,
    on_retry: OnRetry | None = None,
) -> T:
    """Call ``fn`` under ``policy``; the last error is raised unchanged.

    The first attempt runs bare (most calls succeed: they pay nothing for the policy); the
    retries after a retryable failure run on tenacity.
    """

    def should_retry(error: BaseException) -> bool:
        return _should_retry(policy, unwrap(error), default)

    try:
        return await fn()
    except Exception as exc:
        if policy.max_attempts <= 1 or not should_retry(exc):
            raise
        first_error: BaseException = exc
    delay = policy.delay(1, unwrap(first_error))
    if on_retry is not None:
        await on_retry(1, first_error, delay)
    await policy.sleep(delay)
    del first_error

    import tenacity  # here, not at the top: `import goagent_py` stays light

    pending: list[tuple[int, BaseException, float]] = []

    def wait(state: tenacity.RetryCallState) -> float:
        assert state.outcome is not None
        error = state.outcome.exception()
        assert error is not None
        attempt = state.attempt_number + 1  # tenacity counts from the second attempt
        delay = policy.delay(attempt, unwrap(error))
        pending.append((attempt, error, delay))
        return delay

    async def sleep(seconds: float) -> None:
        if on_retry is not None and pending:
            attempt, error, delay = pending.pop()
            await on_retry(attempt, error, delay)
        await policy.sleep(seconds)

    retrying = tenacity.AsyncRetrying(
        stop=tenacity.stop_after_attempt(policy.max_attempts - 1),
        retry=tenacity.retry_if_exception(should_retry),
        wait=wait,
        sleep=sleep,
        reraise=True,
    )
    # The iterator form (not ``await retrying(fn)``): it behaves the same on every tenacity >= 8.2.
    async for attempt in retrying:
        with attempt:
            result = await fn()
        if not attempt.retry_state.outcome or not attempt.retry_state.outcome.failed:
            return result
    raise AssertionError("unreachable: tenacity ends with a result or the last error")


def _each_clean(fn: Callable[[], Awaitable[T]]) -> Callable[[], Awaitable[T]]:
    """``fn`` for a tool call's attempts: each after the first starts with a clean context
    outcome, so a failed attempt's ``set_details``/``terminate`` never reach the result."""
    first = True

    def attempt() -> Awaitable[T]:
        nonlocal first
        if not first:
            _fresh_attempt()
        first = False
        return fn()

    return attempt


class _RetryingTool:
    """A tool whose failures are retried under a policy (see :func:`retry_tool`)."""

    __slots__ = ("inner", "policy")

    def __init__(self, inner: Tool, policy: RetryPolicy) -> None:
        self.inner = inner
        self.policy = policy

    @property
    def definition(self) -> ToolDefinition:
        return self.inner.definition

    async def execute(self, args: dict[str, Any]) -> list[ContentBlock]:
        return await _call_with_retry(
            self.policy,
            _each_clean(lambda: self.inner.execute(dict(args))),
            default=is_retryable_tool_error,
            unwrap=_unwrap_execution,
        )

    def __getattr__(self, name: str) -> Any:
        # Everything else is the inner tool's: what the loop reads off a tool (its
        # ``requires_approval``, ``validate_arguments``, ``external``...) must not be lost by
        # wrapping it, or a tool that needs a person's approval runs without asking. Not the
        # special names (copy and pickle look them up: a copy must stay a retrying tool).
        if name in ("inner", "policy") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"retry_tool({self.inner!r})"


def retry_tool(tool: Tool, policy: RetryPolicy | None = None) -> Tool:
    """Wrap ``tool`` so failed calls are retried under ``policy``.

    Args:
        tool: the tool to wrap; its definition is kept as is.
        policy: the retry policy (``RetryPolicy()`` by default).

    Returns:
        A tool that retries, or ``tool`` itself when the policy makes a single attempt.
    """
    policy = policy or RetryPolicy()
    if not policy.retries:
        return tool
    return _RetryingTool(tool, policy)


def retry_middleware(
    policy: RetryPolicy | None = None, *, hooks: Hooks | None = None
) -> DispatchMiddleware:
    """A dispatch middleware that retries failed tool calls under ``policy``.

    In the agent's chain it sits inside the circuit breaker and the timeout: the breaker counts
    one failure per call, whatever the attempts, and the timeout bounds all attempts together.

    Args:
        policy: the retry policy (``RetryPolicy()`` by default).
        hooks: when given, ``on_tool_retry(call, attempt, error, delay)`` fires before each
            wait; ``call`` is the :class:`~goagent_py.messages.ToolCall` retried, ``attempt`` the
            1-based number of the attempt that failed.

    Returns:
        The middleware (one that passes calls straight through when the policy does not retry).
    """
    policy = policy or RetryPolicy()
    on_tool_retry = hooks.on_tool_retry if hooks is not None else None

    def middleware(next_: DispatchFunc) -> DispatchFunc:
        if not policy.retries:
            return next_

        async def call(tc: ToolCall) -> list[ContentBlock]:
            on_retry: OnRetry | None = None
            if on_tool_retry is not None:

                async def on_retry(attempt: int, error: BaseException, delay: float) -> None:
                    await call_hook(on_tool_retry, tc, attempt, error, delay)

            return await _call_with_retry(
                policy,
                _each_clean(lambda: next_(tc)),
                default=is_retryable_tool_error,
                unwrap=_unwrap_execution,
                on_retry=on_retry,
            )

        return call

    return middleware


class _RetryingProvider:
    """A provider whose failed calls are retried under a policy (see :func:`retry_provider`)."""

    def __init__(self, inner: Provider, policy: RetryPolicy) -> None:
        self.inner = inner
        self.policy = policy

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        return await _call_with_retry(
            self.policy,
            lambda: self.inner.complete(request),
            default=is_retryable_provider_error,
        )

    def __getattr__(self, name: str) -> Any:
        # Anything else (name, aclose, ...) is the inner provider's.
        if name in ("inner", "policy"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"retry_provider({self.inner!r})"


class _RetryingStreamingProvider(_RetryingProvider):
    """The streaming form: a stream is retried only while nothing has been yielded from it."""

    inner: StreamingProvider

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        async def open_stream() -> tuple[AsyncIterator[StreamEvent], StreamEvent | None]:
            events = self.inner.stream(request)
            try:
                first = await anext(events)
            except StopAsyncIteration:
                return events, None
            except BaseException:
                await _aclose(events)
                raise
            return events, first

        events, first = await _call_with_retry(
            self.policy, open_stream, default=is_retryable_provider_error
        )
        try:
            if first is None:
                return
            yield first
            async for event in events:
                yield event
        finally:
            await _aclose(events)


async def _aclose(events: AsyncIterator[Any]) -> None:
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()


def retry_provider(provider: Provider, policy: RetryPolicy | None = None) -> Provider:
    """Wrap ``provider`` so failed model calls are retried under ``policy``.

    By default connection errors, HTTP 408/409/429/5xx and overload errors sent mid-stream are
    retried, waiting what the server's Retry-After asks (capped at ``max_delay``). A streaming
    provider stays a streaming provider: a stream is retried only when it fails before its first
    event (once text reached the caller, starting over would repeat it).

    Args:
        provider: the provider to wrap (other attributes are reached through the wrapper).
        policy: the retry policy (``RetryPolicy()`` by default).

    Returns:
        A provider that retries, or ``provider`` itself when the policy makes a single attempt.
    """
    policy = policy or RetryPolicy()
    if not policy.retries:
        return provider
    if isinstance(provider, StreamingProvider):
        return _RetryingStreamingProvider(provider, policy)
    return _RetryingProvider(provider, policy)
