"""Hooks: typed callbacks on the life of a run, derived from its events.

A run is observed through one channel, its events (:mod:`goagent_py.events`). Hooks are a
convenience over it: :class:`HookDispatcher` maps each event to the hook that wants it and calls
it as a typed attribute, so mypy checks every call. Hooks are sync or async; a hook that raises is
logged and the run goes on.

One hook is not derived from an event: ``on_tool_call`` fires inside the call's own task, just
before the tool runs, so a context variable it sets (the OpenTelemetry hooks make the call's span
current) reaches the tool (and a sync tool's worker thread) and neither the run nor a sibling
call. Events are consumed in the run's task, where that would be too late and the wrong context.

Every hook, while it runs, can read the run it fires in with :func:`current_hook_context`: the
run's id, its agent path and its ``deps`` (typed with ``deps_as``), so one hook set serves many
concurrent runs without mixing them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

from goagent_py import _deps
from goagent_py._cancel import failed
from goagent_py._deepcopy import deepcopy, snapshot_message
from goagent_py.events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    CircuitOpen,
    FinalResponse,
    GuardrailChecked,
    HistoryAppend,
    HistoryLoad,
    MemoryRecall,
    MemoryStore,
    MessageDelta,
    MessageEnd,
    MessageStart,
    ModelRequest,
    ToolExecutionEnd,
    ToolRetry,
    ToolTimeout,
    TurnStart,
)
from goagent_py.messages import Role, ScoredMessage, ThinkingBlock, ToolCall
from goagent_py.provider import CompletionRequest
from goagent_py.results import ModelResponse, ProviderEvent, RunInfo, RunResult, ToolResult

__all__ = [
    "HookContext",
    "HookDispatcher",
    "Hooks",
    "ModelResponse",
    "ProviderEvent",
    "RunInfo",
    "RunResult",
    "ToolResult",
    "callbacks_of",
    "current_hook_context",
    "merge_hooks",
]

_log = logging.getLogger("goagent_py.hooks")

D = TypeVar("D")


@dataclass(slots=True, frozen=True)
class HookContext:
    """The run a hook is called for (:func:`current_hook_context`, inside the hook).

    Attributes:
        run_id: the run's id.
        deps: the run's request-scoped dependencies (``agent.run(prompt, deps=...)``), or None.
        path: the agent names from the root run down to this one (empty at top level).
    """

    run_id: str
    deps: Any = None
    path: tuple[str, ...] = ()

    def deps_as(self, kind: type[D]) -> D:
        """The run's deps, typed.

        Raises:
            TypeError: the run's deps are not a ``kind`` (the message names both).
        """
        return _deps.deps_as(self.deps, kind)


_HOOK_CONTEXT: ContextVar[HookContext | None] = ContextVar("goagent_hook_context", default=None)
# How an async hook's awaitable is awaited: by the loop's runner in a run an abort may end (so
# a hook that hangs never holds abort("now"), review7a); plainly otherwise.
_HOOK_AWAIT: ContextVar[Callable[[Awaitable[Any]], Awaitable[None]] | None] = ContextVar(
    "goagent_hook_await", default=None
)


def current_hook_context() -> HookContext | None:
    """The run the running hook was called for, or None outside a hook::

    def on_tool_result(result: ToolResult) -> None:
        ctx = current_hook_context()
        audit(ctx.deps_as(Deps).user_id, result.call.name)
    """
    return _HOOK_CONTEXT.get()


async def call_in(
    context: HookContext,
    handler: Callable[[Any], Awaitable[None]],
    event: Any,
    awaiter: Callable[[Awaitable[Any]], Awaitable[None]] | None = None,
) -> None:
    """``await handler(event)`` with ``context`` as :func:`current_hook_context` meanwhile
    (set and reset around the one call, in the caller's task); ``awaiter``, when given, awaits
    each async hook's awaitable (a sync hook costs nothing more)."""
    token = _HOOK_CONTEXT.set(context)
    waiting = _HOOK_AWAIT.set(awaiter) if awaiter is not None else None
    dropped = False
    try:
        await handler(event)
    except GeneratorExit:  # a run dropped unclosed (goagent_py._closing): not our context
        dropped = True
        raise
    finally:
        if not dropped:
            if waiting is not None:
                _HOOK_AWAIT.reset(waiting)
            _HOOK_CONTEXT.reset(token)


@dataclass(slots=True)
class Hooks:
    """Callbacks on the life of a run. Every field is optional; each may be sync or async.

    In firing order on success: ``on_run_start`` -> [``on_long_term_retrieve``] ->
    [``on_short_term_load``] -> per iteration {``on_iteration_start`` -> ``on_provider_request``
    -> [``on_stream_start`` -> ``on_stream_token``/``on_thinking_text``...] ->
    ``on_provider_response`` -> ``on_thinking``... -> (``on_tool_call``... ->
    ``on_tool_result``...)}
    -> ``on_response`` -> [``on_short_term_append``] -> [``on_long_term_store``] -> ``on_run_end``.
    ``on_run_end`` fires exactly once on every exit.

    ``on_tool_call`` fires in the call's own task just before the call runs (after
    ``before_tool_call`` let it through or blocked it; a blocked call gets both hooks too).
    ``on_tool_result`` fires as each call finishes; ``on_circuit_open(call, open_until)``,
    ``on_tool_retry(call, attempt, error, delay)`` and ``on_tool_timeout(call, timeout)`` while
    calls run. ``call`` is the :class:`ToolCall` concerned: its ``id`` tells apart parallel calls.
    """

    on_run_start: Callable[[RunInfo], Any] | None = None
    on_run_end: Callable[[RunResult], Any] | None = None
    on_iteration_start: Callable[[int], Any] | None = None
    on_provider_request: Callable[[int, CompletionRequest], Any] | None = None
    on_provider_response: Callable[[int, ModelResponse], Any] | None = None
    on_thinking: Callable[[str], Any] | None = None
    on_tool_call: Callable[[ToolCall], Any] | None = None
    on_tool_result: Callable[[ToolResult], Any] | None = None
    on_circuit_open: Callable[[ToolCall, datetime], Any] | None = None
    on_tool_retry: Callable[[ToolCall, int, BaseException, float], Any] | None = None
    on_tool_timeout: Callable[[ToolCall, float], Any] | None = None
    on_response: Callable[[str, int], Any] | None = None
    on_short_term_load: Callable[[int, float, BaseException | None], Any] | None = None
    on_short_term_append: Callable[[int, float, BaseException | None], Any] | None = None
    on_long_term_retrieve: (
        Callable[[list[ScoredMessage], float, BaseException | None], Any] | None
    ) = None
    on_long_term_store: Callable[[int, float, BaseException | None], Any] | None = None
    on_stream_start: Callable[[int], Any] | None = None
    on_stream_token: Callable[[str], Any] | None = None
    on_thinking_text: Callable[[str], Any] | None = None
    on_guardrail: Callable[[GuardrailChecked], Any] | None = None
    """Each guardrail's decision (goagent_py.guardrails), input ones before the first model
    call, output ones before ``on_response``."""


HOOK_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Hooks))


async def _settle(call: Callable[[], Any], hook: object, logger: logging.Logger) -> None:
    """Run one hook call, awaiting it if async; log and swallow any ``Exception``."""
    try:
        result = call()
        if inspect.isawaitable(result):
            awaiter = _HOOK_AWAIT.get()
            await (result if awaiter is None else awaiter(result))
    except (Exception, asyncio.CancelledError) as exc:
        if not failed(exc):  # the run is cancelled: not the hook's failure
            raise
        name = getattr(hook, "__qualname__", repr(hook))
        logger.exception("hook %s raised; the run goes on", name)


async def call_hook(
    hook: Callable[..., Any] | None, *args: Any, logger: logging.Logger = _log
) -> None:
    """Call one hook, sync or async; log and swallow any ``Exception`` it raises."""
    if hook is not None:
        await _settle(lambda: hook(*args), hook, logger)


def _merged(callbacks: list[Callable[..., Any]]) -> Callable[..., Awaitable[None]]:
    async def merged(*args: Any) -> None:
        for i, callback in enumerate(callbacks):
            try:
                await call_hook(callback, *args)
            except asyncio.CancelledError:
                # Given up (a Session's abort gives up a hook that hangs): the sync callbacks
                # after this one still run, as they would have alone, since they cannot hang
                # (the telemetry's on_run_end ends the run's spans); the async ones do not.
                for rest in callbacks[i + 1 :]:
                    _call_if_sync(rest, args)
                raise

    merged.__qualname__ = "merged_hook"
    merged.__dict__[_PARTS] = tuple(callbacks)
    return merged


_PARTS = "_goagent_merged_callbacks"


def callbacks_of(callback: Callable[..., Any]) -> tuple[Callable[..., Any], ...]:
    """The callbacks :func:`merge_hooks` combined into ``callback`` (at any depth), or
    ``callback`` alone: who is behind a hook (telemetry finds its own this way)."""
    parts = getattr(callback, "__dict__", {}).get(_PARTS)
    if parts is None:
        return (callback,)
    return tuple(c for part in parts for c in callbacks_of(part))


def _call_if_sync(callback: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        result = callback(*args)
        if inspect.iscoroutine(result):
            result.close()  # an async hook: not started, so it never runs (nor warns)
    except Exception:
        name = getattr(callback, "__qualname__", repr(callback))
        _log.exception("hook %s raised; the run goes on", name)


def merge_hooks(*hooks: Hooks) -> Hooks:
    """Combine hook sets: each event calls every set's callback, in the order given.

    A callback that raises does not stop the ones after it. Fields that no set defines stay None.
    """
    if len(hooks) == 1:
        return hooks[0]
    merged = Hooks()
    for name in HOOK_NAMES:
        callbacks = [getattr(h, name) for h in hooks if getattr(h, name) is not None]
        if len(callbacks) == 1:
            setattr(merged, name, callbacks[0])
        elif callbacks:
            setattr(merged, name, _merged(callbacks))
    return merged


_NO_HOOKS = Hooks()  # read only: what a dispatcher without hooks calls (no field is set)


class HookDispatcher:
    """The one adapter from events to hooks: ``await dispatcher(event)`` calls the hooks that
    event feeds, in the documented order. Built once per agent; events no hook wants cost one
    dictionary lookup."""

    __slots__ = ("handlers", "hooks", "logger")

    def __init__(self, hooks: Hooks | None, logger: logging.Logger = _log) -> None:
        self.logger = logger
        table: dict[type[Any], Callable[[Any], Awaitable[None]]] = {}
        if hooks is None:  # an agent with no hooks (most): nothing to look at
            self.hooks, self.handlers = _NO_HOOKS, table
            return
        self.hooks = h = hooks
        if h.on_run_start is not None:
            table[AgentStart] = self._run_start
        if h.on_long_term_retrieve is not None:
            table[MemoryRecall] = self._recall
        if h.on_short_term_load is not None:
            table[HistoryLoad] = self._load
        if h.on_iteration_start is not None:
            table[TurnStart] = self._turn_start
        if h.on_provider_request is not None:
            table[ModelRequest] = self._request
        if h.on_stream_start is not None:
            table[MessageStart] = self._message_start
        if h.on_stream_token is not None or h.on_thinking_text is not None:
            table[MessageDelta] = self._delta
        if h.on_provider_response is not None:
            table[ModelResponse] = self._response
        if h.on_thinking is not None:
            table[MessageEnd] = self._message_end
        if h.on_tool_retry is not None:
            table[ToolRetry] = self._retry
        if h.on_tool_timeout is not None:
            table[ToolTimeout] = self._timeout
        if h.on_circuit_open is not None:
            table[CircuitOpen] = self._circuit_open
        if h.on_tool_result is not None:
            table[ToolExecutionEnd] = self._tool_end
        if h.on_response is not None:
            table[FinalResponse] = self._final
        if h.on_short_term_append is not None:
            table[HistoryAppend] = self._append
        if h.on_long_term_store is not None:
            table[MemoryStore] = self._store
        if h.on_guardrail is not None:
            table[GuardrailChecked] = self._guardrail
        if h.on_run_end is not None:
            table[AgentEnd] = self._run_end
        self.handlers = table

    def wants(self, event_type: type[Any]) -> bool:
        """Whether any hook is fed by events of ``event_type``."""
        return event_type in self.handlers

    async def __call__(self, event: AgentEvent) -> None:
        handler = self.handlers.get(type(event))
        if handler is not None:
            await handler(event)

    async def _run_start(self, e: AgentStart) -> None:
        if (h := self.hooks.on_run_start) is not None:
            await _settle(lambda: h(e.info), h, self.logger)

    async def _recall(self, e: MemoryRecall) -> None:
        if (h := self.hooks.on_long_term_retrieve) is not None:
            await _settle(lambda: h(e.memories, e.duration, e.error), h, self.logger)

    async def _load(self, e: HistoryLoad) -> None:
        if (h := self.hooks.on_short_term_load) is not None:
            await _settle(lambda: h(e.count, e.duration, e.error), h, self.logger)

    async def _turn_start(self, e: TurnStart) -> None:
        if (h := self.hooks.on_iteration_start) is not None:
            await _settle(lambda: h(e.iteration), h, self.logger)

    async def _request(self, e: ModelRequest) -> None:
        if (h := self.hooks.on_provider_request) is not None:
            # A copy: the request holds the run's messages (a hook that changed them changed
            # what the model is sent and what is stored). Made only when the hook is set.
            request = deepcopy(e.request)
            await _settle(lambda: h(e.iteration, request), h, self.logger)

    async def _message_start(self, e: MessageStart) -> None:
        if e.role is Role.ASSISTANT and e.streaming and (h := self.hooks.on_stream_start):
            await _settle(lambda: h(e.iteration), h, self.logger)

    async def _delta(self, e: MessageDelta) -> None:
        if e.kind == "text":
            if (h := self.hooks.on_stream_token) is not None:
                await _settle(lambda: h(e.delta), h, self.logger)
        elif e.kind == "thinking" and (t := self.hooks.on_thinking_text) is not None:
            await _settle(lambda: t(e.delta), t, self.logger)

    async def _response(self, e: ModelResponse) -> None:
        if (h := self.hooks.on_provider_response) is not None:
            # The answer is the record's message: the hook reads a copy of it (as above).
            event = e if e.message is None else replace(e, message=snapshot_message(e.message))
            await _settle(lambda: h(e.iteration, event), h, self.logger)

    async def _message_end(self, e: MessageEnd) -> None:
        if e.message.role is not Role.ASSISTANT or (h := self.hooks.on_thinking) is None:
            return
        for text in [b.thinking for b in e.message.content if isinstance(b, ThinkingBlock)]:
            await _settle(partial(h, text), h, self.logger)

    async def _retry(self, e: ToolRetry) -> None:
        if (h := self.hooks.on_tool_retry) is not None:
            await _settle(lambda: h(e.call, e.attempt, e.error, e.delay), h, self.logger)

    async def _timeout(self, e: ToolTimeout) -> None:
        if (h := self.hooks.on_tool_timeout) is not None:
            await _settle(lambda: h(e.call, e.timeout), h, self.logger)

    async def _circuit_open(self, e: CircuitOpen) -> None:
        if (h := self.hooks.on_circuit_open) is not None:
            await _settle(lambda: h(e.call, e.open_until), h, self.logger)

    async def _tool_end(self, e: ToolExecutionEnd) -> None:
        if (h := self.hooks.on_tool_result) is not None:
            await _settle(lambda: h(e.result), h, self.logger)

    async def _final(self, e: FinalResponse) -> None:
        if (h := self.hooks.on_response) is not None:
            await _settle(lambda: h(e.text, e.iterations), h, self.logger)

    async def _append(self, e: HistoryAppend) -> None:
        if (h := self.hooks.on_short_term_append) is not None:
            await _settle(lambda: h(e.count, e.duration, e.error), h, self.logger)

    async def _store(self, e: MemoryStore) -> None:
        if (h := self.hooks.on_long_term_store) is not None:
            await _settle(lambda: h(e.count, e.duration, e.error), h, self.logger)

    async def _guardrail(self, e: GuardrailChecked) -> None:
        if (h := self.hooks.on_guardrail) is not None:
            await _settle(lambda: h(e), h, self.logger)

    async def _run_end(self, e: AgentEnd) -> None:
        if (h := self.hooks.on_run_end) is not None:
            await _settle(lambda: h(e.result), h, self.logger)
