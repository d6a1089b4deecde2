"""Tool dispatch: the middleware chain every tool call goes through.

The chain, outermost first: logging -> timeout -> circuit breaker -> retry (opt-in) -> rate limit
(opt-in) -> custom middlewares (first registered is outermost) -> exception recovery -> the tool.
``Dispatcher.execute`` does the logging itself, and with no layer configured between logging and
recovery the rest is one coroutine (issue 36: each awaited layer costs every call).
It is built once per agent, so breaker and limiter state live across runs, and it serves every
kind of tool alike (function tools, MCP tools, agents as tools).

What the breaker counts as a failure: any error out of the layers inside it (tool exceptions,
recovered panics, timeouts, errors of custom middlewares, a retry's final error). Not failures:
the model's bad arguments, an unknown tool, a blocked call, cancellation by the caller, and a
timeout while the call still waited for the rate limit (the tool never ran). Only calls admitted
since the circuit last opened count: an older parallel call's outcome is ignored.
"""

from __future__ import annotations

import asyncio
import logging
import marshal
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from goagent_py._cancel import unasked
from goagent_py._deepcopy import deepcopy
from goagent_py._dispatch_types import DispatchFunc, DispatchMiddleware
from goagent_py._records import tool_result
from goagent_py._redact import redact
from goagent_py._tool_servers import JoinedTools
from goagent_py.errors import (
    CircuitOpenError,
    ConfigurationError,
    ToolArgumentsError,
    ToolBlockedError,
    ToolError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolTimeoutError,
)
from goagent_py.events import CircuitOpen, ToolRetry, ToolTimeout
from goagent_py.hooks import Hooks, call_hook, merge_hooks
from goagent_py.messages import (
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCall,
)
from goagent_py.resilience import (
    CircuitBreaker,
    PerTool,
    RetryPolicy,
    check_circuit_breaker,
    check_rate_limit,
    retry_middleware,
)
from goagent_py.resilience import rate_limit as _rate_limit
from goagent_py.results import ToolResult
from goagent_py.tool_context import ToolContext, current_tool_context
from goagent_py.tools import FunctionTool, Tool

__all__ = [
    "BreakerKey",
    "CircuitBreakerConfig",
    "DispatchFunc",
    "DispatchMiddleware",
    "Dispatcher",
    "RateLimitConfig",
    "check_dispatch_settings",
    "circuit_breaker_middleware",
    "logging_middleware",
    "recovery_middleware",
    "timeout_middleware",
]


BreakerKey = Callable[[ToolCall, ToolContext | None], Hashable]
"""``CircuitBreakerConfig.key``: which breaker of a tool a call counts in, from the call and
its context (``context.deps`` holds the run's request-scoped values, a user id say)."""


@dataclass(slots=True, frozen=True)
class CircuitBreakerConfig:
    """A circuit breaker per tool: open after ``max_failures`` consecutive failures, for
    ``reset_timeout`` seconds, then let one probe through.

    By default a tool has one breaker, shared by every run of the agent: a breaker is there to
    stop calling a dependency that is down, and a dependency down for one caller is down for
    all. When callers can make a tool fail on their own (their input, their credentials), one
    caller's failures open the circuit for everyone who shares the agent: give ``key``, and
    each key gets its own breaker, e.g. one per user of a served app,
    ``key=lambda call, ctx: ctx.deps.user_id`` (``agent.run(..., deps=...)``), or one per host
    a fetch tool calls. Breakers of keys with nothing to remember (closed, no failure counted,
    no call running) are dropped, so the table does not grow with every user ever seen; and it
    holds at most ``max_keys`` breakers: past that, the breaker of the key used least recently
    (with no call running) goes, so keys that failed once and never came back cannot fill it.
    A key that keeps calling is the one used last, so an open circuit that is still being hit
    stays; a key evicted starts again from a closed circuit with no failure counted.

    Attributes:
        max_failures: consecutive failures that open a circuit (> 0).
        reset_timeout: seconds a circuit stays open before one probe is let through (> 0).
        key: None (one breaker per tool), or a function of the call and its
            :class:`~goagent_py.tool_context.ToolContext` (None outside a run) returning a
            hashable key: one breaker per tool and key. Should it raise, the call fails with
            that error (and is not counted).
        max_keys: the most breakers kept (an int > 0; 10,000 by default, a few MB), one per
            tool and key (per tool without ``key``): the least recently used one is dropped
            to make room.
    """

    max_failures: int = 5
    reset_timeout: float = 30.0
    key: BreakerKey | None = None
    max_keys: int = 10_000

    def __post_init__(self) -> None:
        check_circuit_breaker(self.max_failures, self.reset_timeout, owner="CircuitBreakerConfig")
        _check_max_keys(self.max_keys, "CircuitBreakerConfig")
        if self.key is not None and not callable(self.key):
            raise ConfigurationError(
                f"CircuitBreakerConfig: key must be None or a function (call, context) -> a "
                f"hashable key, got {type(self.key).__name__}"
            )


@dataclass(slots=True, frozen=True)
class RateLimitConfig:
    """A token bucket for tool calls: ``rate`` per second, up to ``burst`` at once.

    ``per_tool=False`` shares one bucket between every tool; ``True`` gives each tool its own;
    ``{"search": (1.0, 2)}`` gives the named tools their own limits (the rest share one).
    """

    rate: float
    burst: int = 1
    per_tool: PerTool = False

    def __post_init__(self) -> None:
        try:
            check_rate_limit(self.rate, self.burst, per_tool=self.per_tool)
        except ConfigurationError as exc:
            raise ConfigurationError(f"RateLimitConfig: {exc}") from None
        if isinstance(self.per_tool, Mapping):
            object.__setattr__(self, "per_tool", dict(self.per_tool))


def check_dispatch_settings(
    *,
    timeout: object = None,
    circuit_breaker: object = None,
    retry: object = None,
    rate_limit: object = None,
    middlewares: Iterable[object] = (),
    said: Callable[[str, object], str],
) -> None:
    """Check the chain's settings; raise :class:`ConfigurationError` naming the fix.

    The one check behind :class:`Dispatcher` and ``Agent``, so both refuse a wrong setting when
    built, in the same words (a wrong one let through would fail every call instead).

    Args:
        timeout, circuit_breaker, retry, rate_limit, middlewares: as :class:`Dispatcher` takes
            them.
        said: ``said(name, value)`` says how the caller wrote the setting ``name`` (a
            :class:`Dispatcher` parameter), e.g. ``"tool_timeout=0"``; called only for a message.
    """
    if timeout is not None:
        _check_timeout(timeout, said("timeout", timeout))
    for name, value, expected, want in (
        ("circuit_breaker", circuit_breaker, CircuitBreakerConfig,
         "a CircuitBreakerConfig(max_failures=5, reset_timeout=30.0)"),
        ("retry", retry, RetryPolicy, "a RetryPolicy(max_attempts=3)"),
        ("rate_limit", rate_limit, RateLimitConfig, "a RateLimitConfig(rate=10.0, burst=5)"),
    ):  # fmt: skip
        if value is not None and not isinstance(value, expected):
            raise ConfigurationError(
                f"{said(name, value)}: expected {want}, got {type(value).__name__}"
            )
    for middleware in middlewares:
        if not callable(middleware):
            raise ConfigurationError(
                f"dispatch middleware {middleware!r} is not callable: a middleware takes "
                "the next DispatchFunc and returns one"
            )


def _check_max_keys(max_keys: object, owner: str) -> None:
    if not isinstance(max_keys, int) or isinstance(max_keys, bool) or max_keys <= 0:
        raise ConfigurationError(
            f"{owner}: max_keys must be an int > 0 (the most keyed breakers kept), got {max_keys!r}"
        )


def _check_timeout(seconds: object, said: str) -> None:
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or not seconds > 0:
        raise ConfigurationError(
            f"{said}: must be a number of seconds > 0 (or None for no timeout)"
        )


# Where the middlewares' events (retry, timeout, open circuit) go: set by the run in each call's
# task, so a dispatcher shared by concurrent runs reports each call to its own run.
_sink: ContextVar[tuple[Callable[[Any], None], tuple[str, ...]] | None] = ContextVar(
    "goagent_dispatch_sink", default=None
)


def set_event_sink(put: Callable[[Any], None], path: tuple[str, ...] = ()) -> Callable[[], None]:
    """Send the events of calls made in this context to ``put``; returns the undo."""
    token = _sink.set((put, path))
    return lambda: _sink.reset(token)


def _send(make: Callable[[tuple[str, ...]], Any]) -> None:
    sink = _sink.get()
    if sink is not None:
        put, path = sink
        put(make(path))


def _shown(call: ToolCall) -> ToolCall:
    """A copy of ``call`` for an event: the call the chain runs is the run's record (a consumer
    that changed ``event.call.arguments`` changed it; see goagent_py/_shown.py)."""
    return ToolCall(call.id, call.name, deepcopy(call.arguments))


# The middlewares report through these, turned into events for the run that made the call.
_EVENT_HOOKS = Hooks(
    on_tool_retry=lambda c, n, e, d: _send(lambda p: ToolRetry(_shown(c), n, e, d, path=p)),
    on_tool_timeout=lambda c, t: _send(lambda p: ToolTimeout(_shown(c), t, path=p)),
    on_circuit_open=lambda c, u: _send(lambda p: CircuitOpen(_shown(c), u, path=p)),
)

_DISPATCH_LOG = logging.getLogger("goagent_py.dispatch")

# The message a timeout cancels a call with, so the breaker can tell it from a caller's cancel.
_TIMEOUT_CANCEL = "goagent-tool-timeout"
# How long a timed-out call may take to unwind after its cancellation before it is abandoned.
_CANCEL_GRACE = 1.0


# A call's validated arguments on their way to the tool: [call, tool, arguments or None once
# used, the call's arguments as validated (marshal bytes)]. Through middlewares they travel in
# the context (a middleware may replace the call, or change its arguments in place: then the
# tool validates what it gets).
_Validated = list[Any]
_VALIDATED: ContextVar[_Validated | None] = ContextVar("goagent_dispatch_validated", default=None)


def _arguments_key(arguments: Any) -> bytes | None:
    """``arguments`` as bytes that tell any change apart, nested values and types included
    (marshal, format 2: no references); None when marshal cannot write them."""
    try:
        return marshal.dumps(arguments, 2)
    except ValueError:
        return None


def _not_a_failure(exc: BaseException) -> bool:
    # The model's bad arguments (or a refused call) say nothing about the tool's health.
    return isinstance(
        exc, ToolArgumentsError | ToolNotFoundError | ToolBlockedError | CircuitOpenError
    )


def logging_middleware(logger: logging.Logger) -> DispatchMiddleware:
    """Log every call at debug level with its duration, and failures at warning level."""

    def middleware(next_: DispatchFunc) -> DispatchFunc:
        async def call(tc: ToolCall) -> list[ContentBlock]:
            start = time.perf_counter()
            try:
                result = await next_(tc)
            except Exception as exc:
                logger.warning(
                    "tool dispatch failed: tool=%s duration=%.4fs error=%s",
                    tc.name,
                    time.perf_counter() - start,
                    exc,
                )
                raise
            logger.debug(
                "tool dispatch: tool=%s duration=%.4fs", tc.name, time.perf_counter() - start
            )
            return result

        return call

    return middleware


def timeout_middleware(seconds: float, hooks: Hooks | None = None) -> DispatchMiddleware:
    """Give each call ``seconds`` to finish; past that it is cancelled and fails with
    :class:`ToolTimeoutError`. A sync tool's thread cannot be stopped: it is abandoned.

    With ``hooks``, ``on_tool_timeout(call, seconds)`` fires for each call given up on.

    Raises:
        ConfigurationError: ``seconds`` is not a number > 0.
    """
    _check_timeout(seconds, f"timeout_middleware({seconds!r})")

    def middleware(next_: DispatchFunc) -> DispatchFunc:
        async def call(tc: ToolCall) -> list[ContentBlock]:
            task = asyncio.ensure_future(next_(tc))
            try:
                done, _ = await asyncio.wait({task}, timeout=seconds)
            except BaseException:
                task.cancel()
                raise
            if task in done:
                return task.result()
            # Given up on: the tool's context says so before the cancel arrives, for an async
            # tool that outlives it (one that swallows the cancel) as for a sync one's thread.
            context = current_tool_context()
            if context is not None:
                context.cancel_event.set()
            task.cancel(_TIMEOUT_CANCEL)
            # The call's own outcome no longer matters, even if it ends after being abandoned.
            task.add_done_callback(_discard_outcome)
            await asyncio.wait({task}, timeout=_CANCEL_GRACE)
            if hooks is not None:
                await call_hook(hooks.on_tool_timeout, tc, seconds)
            raise ToolTimeoutError(tc.name, seconds)

        return call

    return middleware


def _discard_outcome(task: asyncio.Future[list[ContentBlock]]) -> None:
    if not task.cancelled():
        task.exception()  # mark it retrieved: no "exception was never retrieved" noise


def circuit_breaker_middleware(
    max_failures: int,
    reset_timeout: float,
    hooks: Hooks | None = None,
    *,
    clock: Callable[[], float] | None = None,
    logger: logging.Logger | None = None,
    key: BreakerKey | None = None,
    max_keys: int = 10_000,
) -> DispatchMiddleware:
    """A circuit breaker per tool name (and per ``key``); rejected calls fail with
    :class:`CircuitOpenError`.

    With ``hooks``, ``on_circuit_open(call, open_until)`` fires on every rejection. ``key`` and
    ``max_keys``: see :class:`CircuitBreakerConfig`. Breakers, one per tool name or per tool
    and key, are dropped when idle, and the least recently used past ``max_keys``: used alone,
    outside the agent's ``Dispatcher`` (which passes only registered tools), the middleware may
    be given any name, and it does not keep a breaker for each.

    Raises:
        ConfigurationError: a setting is out of range (checked now, not at the first call).
    """
    check_circuit_breaker(max_failures, reset_timeout, owner="circuit_breaker_middleware")
    _check_max_keys(max_keys, "circuit_breaker_middleware")
    # One table for every breaker, keyed or not (an unkeyed breaker is the tool's breaker of
    # the key None): idle ones are dropped and at most ``max_keys`` kept, whoever picks the
    # names. Least recently used first: a dict keeps insertion order, and each use moves its
    # key last.
    keyed: dict[tuple[str, Hashable], _KeyedBreaker] = {}
    keyed_lock = threading.Lock()
    log = logger or logging.getLogger("goagent_py.dispatch")
    kwargs = {"clock": clock} if clock is not None else {}

    async def guarded(tc: ToolCall, breaker: CircuitBreaker, next_: DispatchFunc) -> Any:
        # The ticket: a verdict of this call counts only while the circuit has not opened
        # since it was let through (parallel calls outlive the state they started in).
        ticket = breaker.admit()
        if ticket is None:
            open_until = breaker.open_until()
            log.warning("circuit breaker open: tool=%s until=%s", tc.name, open_until.isoformat())
            if hooks is not None:
                await call_hook(hooks.on_circuit_open, tc, open_until)
            raise CircuitOpenError(tc.name, open_until)
        try:
            result = await next_(tc)
        except asyncio.CancelledError as exc:
            if exc.args and exc.args[0] == _TIMEOUT_CANCEL:
                breaker.record_failure(ticket)
            else:
                breaker.release_probe(ticket)
            raise
        except Exception as exc:
            if _not_a_failure(exc):
                breaker.release_probe(ticket)
            else:
                breaker.record_failure(ticket)
            raise
        except BaseException:
            breaker.release_probe(ticket)
            raise
        breaker.record_success(ticket)
        return result

    def middleware(next_: DispatchFunc) -> DispatchFunc:
        async def keyed_call(tc: ToolCall) -> list[ContentBlock]:
            slot = (tc.name, None if key is None else key(tc, current_tool_context()))
            with keyed_lock:  # runs of several threads (run_sync) share the table
                held = keyed.pop(slot, None)
                if held is None:
                    _make_room(keyed, max_keys - 1)
                    held = _KeyedBreaker(CircuitBreaker(max_failures, reset_timeout, **kwargs))
                keyed[slot] = held  # the key used last
                held.calls += 1
            try:
                result: list[ContentBlock] = await guarded(tc, held.breaker, next_)
                return result
            finally:
                with keyed_lock:
                    held.calls -= 1
                    if held.calls == 0 and held.breaker.idle and keyed.get(slot) is held:
                        del keyed[slot]  # nothing to remember: a closed circuit, no failure

        return keyed_call

    return middleware


def _make_room(keyed: dict[tuple[str, Hashable], _KeyedBreaker], room: int) -> None:
    """Drop the least recently used breakers with no call running until ``keyed`` holds at
    most ``room`` (fewer only when every breaker left has a call running: those stay)."""
    excess = len(keyed) - room
    if excess <= 0:
        return
    idle: list[tuple[str, Hashable]] = []
    for slot, held in keyed.items():  # oldest first; stops at the first ``excess`` idle ones
        if held.calls == 0:
            idle.append(slot)
            if len(idle) == excess:
                break
    for slot in idle:
        del keyed[slot]


class _KeyedBreaker:
    """The breaker of one (tool, key) and how many of its calls are running."""

    __slots__ = ("breaker", "calls")

    def __init__(self, breaker: CircuitBreaker) -> None:
        self.breaker = breaker
        self.calls = 0


def recovery_middleware(next_: DispatchFunc) -> DispatchFunc:
    """Turn any unexpected ``Exception`` from a tool into :class:`ToolExecutionError`.

    The exception becomes the error's ``cause`` and ``__cause__``, its formatted traceback the
    error's ``traceback`` (for logs; the model reads only the message). A :class:`ToolError`
    passes through as it is, and so do ``BaseException``s (cancellation, KeyboardInterrupt,
    SystemExit); only a ``CancelledError`` no one asked the call's task for (the tool let out
    one of something it awaited) is the tool's error.
    """

    async def call(tc: ToolCall) -> list[ContentBlock]:
        try:
            return await next_(tc)
        except ToolError:
            raise
        except Exception as exc:
            raise _recovered(tc, exc) from exc
        except asyncio.CancelledError as exc:
            if _unasked(exc):
                raise _recovered(tc, exc) from exc
            raise

    return call


def _unasked(exc: asyncio.CancelledError) -> bool:
    """Whether ``exc`` is a CancelledError no one asked the running task for: the tool awaited
    something cancelled elsewhere (a task of its own, a future) and let it out. That is the
    tool's failure, an error result; a cancellation of the call (the run cancelled or aborted,
    the tool timeout) always has the task's cancel request behind it, and propagates
    (``goagent_py/_cancel.py``)."""
    return unasked(exc)


def _chain(base: DispatchFunc, middlewares: Sequence[DispatchMiddleware]) -> DispatchFunc:
    for middleware in reversed(middlewares):
        base = middleware(base)
    return base


def _dispatcher_said(name: str, value: object) -> str:
    return f"Dispatcher({name}={value!r})"


def error_text(error: BaseException) -> str:
    """The text the model reads for a failed call."""
    return f"Error: {error}"


def _all_blocks(content: list[Any]) -> bool:
    for block in content:
        if type(block) is TextBlock:
            # The blocks' fields are not checked when they are made (issue 36): a text that
            # is not a str crashed the run later with a bare TypeError.
            if type(block.text) is not str:
                return False
        elif not isinstance(block, _BLOCK_TYPES) or not _fields_hold(block):
            return False
    return True


def _fields_hold(block: Any) -> bool:
    """Whether a block other than a plain ``TextBlock`` holds what its type says."""
    if isinstance(block, TextBlock):
        return isinstance(block.text, str)
    if isinstance(block, ThinkingBlock):
        return isinstance(block.thinking, str)
    return isinstance(block.data, bytes) and isinstance(block.media_type, str)


def _not_blocks(name: str, content: object) -> ConfigurationError:
    return ConfigurationError(
        f"tool {name!r} returned {type(content).__name__} ({content!r:.80}), not a list of "
        "content blocks holding what their types say (a TextBlock's text is a str): its "
        "execute() must return e.g. [TextBlock(text)] (or use @tool, which turns any value "
        "into blocks)"
    )


def _recovered(tc: ToolCall, exc: BaseException) -> ToolExecutionError:
    """What exception recovery makes of ``exc``, raised by the tool of ``tc`` (call it in the
    ``except`` block: it takes the traceback being handled)."""
    return ToolExecutionError(tc.name, tc.arguments, exc, traceback.format_exc())


_BLOCK_TYPES = (TextBlock, ImageBlock, DocumentBlock, ThinkingBlock)


class Dispatcher:
    """Runs the model's tool calls through the chain; built once per agent.

    The chain, outermost first: logging -> timeout -> circuit breaker -> retry -> rate limit ->
    custom middlewares -> exception recovery -> tool (the optional layers only when configured).

    Args:
        tools: the tools by name (read at call time, so tools added later are found).
        timeout: seconds per call (all retries and rate-limit waits included), or None.
        circuit_breaker: the breaker's settings, or None for no breaker.
        retry: the retry policy for failed calls, or None for no retry.
        rate_limit: the rate limit's settings, or None for no limit.
        middlewares: custom middlewares, first registered outermost.
        hooks: hooks told of retries, timeouts and open circuits, for a dispatcher used on its
            own; inside a run these become ``ToolRetry``/``ToolTimeout``/``CircuitOpen`` events
            of the run that made the call (and reach the agent's hooks from there).
        logger: where the logging middleware writes.
        clock: the monotonic clock of the breaker and the rate limiter (tests inject one).

    Raises:
        ConfigurationError: a setting is of the wrong type or out of range (checked here, so
            a wrong one never fails every call instead).
    """

    def __init__(
        self,
        tools: Mapping[str, Tool],
        *,
        timeout: float | None = None,
        circuit_breaker: CircuitBreakerConfig | None = None,
        retry: RetryPolicy | None = None,
        rate_limit: RateLimitConfig | None = None,
        middlewares: Sequence[DispatchMiddleware] = (),
        hooks: Hooks | None = None,
        logger: logging.Logger | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        check_dispatch_settings(
            timeout=timeout,
            circuit_breaker=circuit_breaker,
            retry=retry,
            rate_limit=rate_limit,
            middlewares=middlewares,
            said=_dispatcher_said,
        )
        self._tools = tools
        self._logger = logger or _DISPATCH_LOG
        self._settings = (timeout, circuit_breaker, retry, rate_limit, middlewares, hooks, clock)
        self._chain: DispatchFunc | None = None  # built on the first call: most agents never
        self._bare = False  # nothing configured between logging and recovery
        # The chain's layers, whose state (breakers, rate limits) dispatchers made by
        # :meth:`sharing` share; and the layers of each scope of :meth:`joined`.
        self._layers: list[DispatchMiddleware] | None = None
        self._scopes: OrderedDict[Hashable, Dispatcher] | None = None
        self._scopes_lock = threading.Lock()

    def sharing(self, tools: Mapping[str, Tool]) -> Dispatcher:
        """A dispatcher of ``tools`` whose chain is this one's: the same settings and the same
        state (each tool's circuit breaker, the rate limits), built once for both."""
        layers = self._made_layers()
        other: Dispatcher = Dispatcher.__new__(Dispatcher)
        other._tools = tools
        other._logger = self._logger
        other._settings = self._settings
        other._chain = None
        other._bare = False
        other._layers = layers
        other._scopes = None
        other._scopes_lock = self._scopes_lock
        return other

    def joined(self, tools: Mapping[str, Tool], *, scope: Hashable) -> Dispatcher:
        """A dispatcher of this one's tools and ``tools`` (a client's own, for one run; a name
        of this one's wins): a call to one of this one's tools goes through this one's chain
        (its breakers, its rate limits, whoever calls), a call to one of ``tools`` through a
        chain of the same settings whose state is ``scope``'s, kept here across runs (a
        client's own tools never open another client's circuit, nor spend its rate). At most
        :data:`_MAX_SCOPES` scopes are kept, the least recently used dropped first."""
        with self._scopes_lock:
            if self._scopes is None:
                self._scopes = OrderedDict()
            kept = self._scopes.pop(scope, None)
            if kept is None:
                kept = self.sharing({})
                kept._layers = None  # its own state, built on its first call
                if len(self._scopes) >= _MAX_SCOPES:
                    self._scopes.popitem(last=False)
            self._scopes[scope] = kept
        return _JoinedDispatcher(self, kept.sharing(JoinedTools(self._tools, tools)))

    def _made_layers(self) -> list[DispatchMiddleware]:
        if self._layers is None:
            self._layers = self._new_layers()
        return self._layers

    def _build(self) -> DispatchFunc:
        chain = self._made_layers()
        if not chain:  # nothing between logging and recovery: recovery and the tool, one await
            self._chain = self._execute_recovered
            self._bare = True
            return self._chain
        self._chain = _chain(self._execute_tool, [*chain, recovery_middleware])
        return self._chain

    def _new_layers(self) -> list[DispatchMiddleware]:
        """The configured layers between logging and recovery, each with its state."""
        timeout, circuit_breaker, retry, rate_limit, middlewares, hooks, clock = self._settings
        hooks = _EVENT_HOOKS if hooks is None else merge_hooks(hooks, _EVENT_HOOKS)
        # Logging, the outermost layer, is :meth:`execute`'s own (it times every call anyway).
        chain: list[DispatchMiddleware] = []
        if timeout is not None:
            chain.append(timeout_middleware(timeout, hooks))
        if circuit_breaker is not None:
            chain.append(
                circuit_breaker_middleware(
                    circuit_breaker.max_failures,
                    circuit_breaker.reset_timeout,
                    hooks,
                    clock=clock,
                    logger=self._logger,
                    key=circuit_breaker.key,
                    max_keys=circuit_breaker.max_keys,
                )
            )
        if retry is not None and retry.retries:
            chain.append(retry_middleware(retry, hooks=hooks))
        if rate_limit is not None:
            chain.append(
                _rate_limit(
                    rate_limit.rate,
                    rate_limit.burst,
                    per_tool=rate_limit.per_tool,
                    clock=clock or time.monotonic,
                )
            )
        chain.extend(middlewares)
        return chain

    def tool(self, name: str) -> Tool | None:
        """The tool registered under ``name``, or None."""
        return self._tools.get(name)

    def _start(self, tc: ToolCall, validated: _Validated | None) -> Awaitable[list[ContentBlock]]:
        tool = self._tools[tc.name]
        # The arguments the loop validated for this very call and tool, given once (a retry
        # validates again, as a call that was not validated before).
        if validated is not None and validated[0] is tc and validated[1] is tool:
            args = validated[2]
            if (
                args is not None
                and type(tool) is FunctionTool
                and (validated[3] is None or validated[3] == _arguments_key(tc.arguments))
            ):
                validated[2] = None
                return tool._execute_validated(args)
        return tool.execute(dict(tc.arguments))

    async def _execute_tool(self, tc: ToolCall) -> list[ContentBlock]:
        return await self._start(tc, _VALIDATED.get())

    async def _execute_recovered(
        self, tc: ToolCall, validated: _Validated | None = None
    ) -> list[ContentBlock]:
        """:func:`recovery_middleware` around :meth:`_execute_tool`, as one coroutine."""
        try:
            return await self._start(tc, validated)
        except ToolError:
            raise
        except Exception as exc:
            raise _recovered(tc, exc) from exc
        except asyncio.CancelledError as exc:
            if _unasked(exc):
                raise _recovered(tc, exc) from exc
            raise

    async def execute(
        self, call: ToolCall, *, validated: dict[str, Any] | None = None
    ) -> ToolResult:
        """Run one call through the chain; failures come back as error results, never raised.

        ``validated``: what the tool's ``validate_arguments`` returned for ``call.arguments``
        (the loop validates each call before it shows and approves it); a function tool then
        runs on it instead of validating the same arguments again.

        ``BaseException``s that are not ``Exception`` (cancellation, KeyboardInterrupt) propagate.
        """
        if call.name not in self._tools:
            missing = ToolNotFoundError(call.name, tuple(self._tools))
            return ToolResult(
                call, [TextBlock(error_text(missing))], missing, 0.0, datetime.now(UTC)
            )
        start = time.perf_counter()
        error: ToolError | None = None
        failure: BaseException | None = None
        given: _Validated | None = None
        try:
            chain = self._chain or self._build()
            if self._bare:
                # :meth:`_execute_recovered` and :meth:`_start` in this frame: two layers fewer
                # (issue 36). Nothing runs between the loop's validation and the tool here, so
                # a function tool runs on what the loop validated, as :meth:`_start` decides.
                try:
                    tool = self._tools[call.name]
                    if validated is not None and type(tool) is FunctionTool:
                        content = await tool._execute_validated(validated)
                    else:
                        content = await tool.execute(dict(call.arguments))
                except ToolError:
                    raise
                except Exception as exc:
                    raise _recovered(call, exc) from exc
                except asyncio.CancelledError as exc:
                    if _unasked(exc):
                        raise _recovered(call, exc) from exc
                    raise
            else:
                if validated is not None:
                    # A middleware may change the arguments in place: the tool gets the loop's
                    # validation only for the arguments validated.
                    key = _arguments_key(call.arguments)
                    if key is not None:
                        given = [call, self._tools[call.name], validated, key]
                if given is None:
                    content = await chain(call)
                else:  # through the middlewares: the tool's layer finds them in the context
                    token = _VALIDATED.set(given)
                    try:
                        content = await chain(call)
                    except GeneratorExit:  # dropped unclosed (goagent_py._closing)
                        raise
                    except BaseException:
                        _VALIDATED.reset(token)
                        raise
                    _VALIDATED.reset(token)
            if type(content) is not list or not _all_blocks(content):
                # A tool of the protocol (not @tool) that returned something else: a str was
                # sent as one block per character, None crashed the run. The developer's to
                # fix, so a ConfigurationError: the run fails with it (docs/architecture.md).
                raise _recovered(call, _not_blocks(call.name, content))
        except ToolError as exc:  # the specific error: timeout, open circuit, bad arguments...
            error = failure = exc
            content = [TextBlock(error_text(error))]
        except Exception as exc:  # a custom middleware's own failure
            failure = exc
            error = ToolExecutionError(call.name, call.arguments, exc)
            error.__cause__ = exc
            content = [TextBlock(error_text(error))]
        except asyncio.CancelledError as exc:
            # A custom middleware that let out a CancelledError nobody asked the call's task
            # for (the tool's own was recovered inside): its failure, as an exception is.
            if not _unasked(exc):
                raise
            failure = exc
            error = ToolExecutionError(call.name, call.arguments, exc)
            error.__cause__ = exc
            content = [TextBlock(error_text(error))]
        duration = time.perf_counter() - start
        # The chain's outermost layer: every call logged with its duration.
        if failure is not None:
            self._logger.warning(
                "tool dispatch failed: tool=%s duration=%.4fs error=%s",
                call.name,
                duration,
                # A tool's error may quote a key (a URL, a header); a middleware's own error is
                # told as the error result tells it (its __str__ may raise: foreign code).
                redact(str(failure if failure is error else error)),
            )
        elif self._logger.isEnabledFor(logging.DEBUG):  # one call fewer when it is off
            self._logger.debug("tool dispatch: tool=%s duration=%.4fs", call.name, duration)
        # The start is counted back from the end, so started_at + duration is the wall-clock end
        # (telemetry ends the call's span there, after any span made inside the tool) even if the
        # process paused between the two clock reads a start taken first would need.
        started = datetime.fromtimestamp(time.time() - duration, UTC)
        return tool_result(call, content, error, duration, started)


# The scopes of :meth:`Dispatcher.joined` whose state a dispatcher keeps (a client's tools'
# breakers and rate limits, one set per client seen lately).
_MAX_SCOPES = 4096


class _JoinedDispatcher(Dispatcher):
    """:meth:`Dispatcher.joined`: a call to one of ``own``'s tools goes to ``own``, any other
    to ``extra`` (whose tools are both's: a name in neither is told with every name)."""

    def __init__(self, own: Dispatcher, extra: Dispatcher) -> None:
        # Not Dispatcher.__init__: this one only routes, each side has its chain.
        self._own = own
        self._extra = extra
        self._tools = extra._tools

    def tool(self, name: str) -> Tool | None:
        return self._extra.tool(name)

    async def execute(
        self, call: ToolCall, *, validated: dict[str, Any] | None = None
    ) -> ToolResult:
        side = self._own if call.name in self._own._tools else self._extra
        return await side.execute(call, validated=validated)
