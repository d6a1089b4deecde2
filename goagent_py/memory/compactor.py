"""The compactor: runs a compaction strategy when the context passes a fraction of the window.

Use it as the agent's ``transform_context``; give it the agent's short-term memory to persist
each compaction as a boundary (history stays append-only, the next request and the next run do
not summarise again)::

    memory = ShortTermMemory(SQLiteStorage("chat.db"))
    compactor = Compactor(
        Tiered([ClampParts(20_000), ClearToolResults(4), Summarize(provider, model="small")]),
        context_window=200_000,
        memory=memory,
    )
    agent = Agent(provider=provider, short_term_memory=memory, transform_context=compactor,
                  hooks=compactor.hooks())
"""

from __future__ import annotations

import collections
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Literal

from goagent_py._deepcopy import snapshot_message
from goagent_py._describe import error_type
from goagent_py._metadata_keys import UI_ONLY_KEY
from goagent_py.errors import ConfigurationError
from goagent_py.events import EVENT_SINK, CompactionEvent
from goagent_py.hooks import Hooks
from goagent_py.memory.compaction import (
    _REPORT,
    COMPACTION_METADATA_KEY,
    CompactionError,
    SlidingWindow,
    _join,
    _Report,
    _split,
    _tokens,
    validate_context,
)
from goagent_py.memory.short_term import ShortTermMemory, is_boundary, model_visible
from goagent_py.memory.tokens import HeuristicEstimator, TokenEstimator
from goagent_py.messages import Message, Role, Usage
from goagent_py.results import ModelResponse

__all__ = ["DEFAULT_CONTEXT_WINDOW", "EVENT_SINK", "CompactionEvent", "Compactor"]

log = logging.getLogger(__name__)

DEFAULT_CONTEXT_WINDOW = 32_000
"""The window assumed when none is given: small enough for most models served today."""


def _covers(boundary: Message) -> int:
    return int(boundary.metadata[COMPACTION_METADATA_KEY].get("covers", 0))


def _fraction(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ConfigurationError(f"Compactor({name}={value!r}): use a fraction in (0, 1]")
    return float(value)


async def _on_copies(
    strategy: Callable[[list[Message]], Any], messages: list[Message]
) -> list[Message]:
    """What ``strategy`` makes of copies of ``messages`` (the run's record: a strategy that
    changes what it is given changes its copies, never the record). A copy it returns as it was
    given is the message itself again: the boundary in force and the kept messages keep their
    identity, on which the measure and the boundary's record rely."""
    copies = [snapshot_message(m) for m in messages]
    given = {id(c): (c, m) for c, m in zip(copies, messages, strict=True)}
    out = []
    for x in await strategy(copies):
        pair = given.get(id(x))
        out.append(pair[1] if pair is not None and pair[0] is x and x == pair[1] else x)
    return out


class Compactor:
    """Keeps the context under ``threshold`` of the window by running ``strategy``.

    Called with the messages of a request (as ``transform_context``), it

    1. replaces what its latest boundary covers with that boundary (no model call: a summary
       is made once, then reused for every later request);
    2. measures the context: the provider-reported input tokens of the last request (fed by
       :meth:`hooks`) plus an estimate of what was added since, or an estimate of everything
       (text, thinking, tool calls and images counted by ``estimator``);
    3. at or under ``threshold * context_window - reserve_tokens``, sends it as is; over it,
       runs ``strategy`` (with ``target * context_window - reserve_tokens`` as the target of a
       :class:`~goagent_py.memory.compaction.Tiered` strategy), checks the result with
       :func:`~goagent_py.memory.compaction.validate_context` and on failure runs ``fallback``;
       if that fails too, the context is sent unchanged. Failures never touch the history.
    4. stores a new boundary in ``memory`` (append-only) once the messages it covers are stored.
       A context made by the fallback after a failure is used for that request only.

    One compactor serves one conversation (like its memory). A boundary's ``covers`` counts
    transcript messages, so persisting needs the agent to store every message of a turn
    (``short_term_trace_tools=True``, the default). Every compaction is recorded in
    :attr:`events` (the last 100) and passed to ``on_event``; the summary model's usage adds up in
    :attr:`usage`.

    Args:
        strategy: an ``async (messages) -> messages`` strategy.
        context_window: the model's window in tokens; :data:`DEFAULT_CONTEXT_WINDOW` if None.
        threshold: the fraction of the window that triggers a compaction.
        target: the fraction of the window a tiered strategy brings the context under.
        estimator: how to count tokens; :class:`~goagent_py.memory.tokens.HeuristicEstimator`.
        memory: short-term memory to persist boundaries in (the agent's), or None.
        fallback: run when ``strategy`` fails; :class:`SlidingWindow` if None, False for none.
        reserve_tokens: room kept for what the messages do not hold (system prompt, tools,
            the answer).
        on_event: called (sync or async) with each :class:`CompactionEvent`.
        tracer_provider: an OpenTelemetry ``TracerProvider`` for the ``compact_context`` span
            (the global one if None; a no-op without an SDK).
    """

    # The run gives a transform copies of its messages, but this one the messages themselves:
    # it anchors its measure on their identity and hands its strategy copies (_on_copies).
    _keeps_messages = True

    def __init__(
        self,
        strategy: Callable[[list[Message]], Any],
        *,
        context_window: int | None = None,
        threshold: float = 0.8,
        target: float = 0.6,
        estimator: TokenEstimator | None = None,
        memory: ShortTermMemory | None = None,
        fallback: Callable[[list[Message]], Any] | Literal[False] | None = None,
        reserve_tokens: int = 0,
        on_event: Callable[[CompactionEvent], Any] | None = None,
        tracer_provider: Any = None,
    ) -> None:
        if not callable(strategy):
            raise ConfigurationError("Compactor(strategy): expected an async strategy callable")
        window = DEFAULT_CONTEXT_WINDOW if context_window is None else context_window
        if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
            raise ConfigurationError(
                f"Compactor(context_window={context_window!r}): use a positive int"
            )
        if isinstance(reserve_tokens, bool) or not isinstance(reserve_tokens, int):
            raise ConfigurationError(f"Compactor(reserve_tokens={reserve_tokens!r}): use an int")
        if not 0 <= reserve_tokens < window:
            raise ConfigurationError("Compactor(reserve_tokens=...): use 0 <= reserve < window")
        self.strategy = strategy
        self.context_window = window
        self.threshold = _fraction("threshold", threshold)
        self.target = _fraction("target", target)
        if self.target > self.threshold:
            raise ConfigurationError("Compactor(target=...): the target must be <= threshold")
        self.estimator: TokenEstimator = estimator or HeuristicEstimator()
        self.memory = memory
        self.fallback = SlidingWindow() if fallback is None else fallback or None
        self.reserve_tokens = reserve_tokens
        self.on_event = on_event
        self.tracer_provider = tracer_provider
        self.usage = Usage()
        self.events: collections.deque[CompactionEvent] = collections.deque(maxlen=100)
        self._boundary: Message | None = None
        self._pending: Message | None = None
        self._sent: list[Message] | None = None
        self._anchor: tuple[list[Message], int] | None = None

    @property
    def trigger_tokens(self) -> int:
        """The context size above which a compaction runs."""
        return int(self.threshold * self.context_window) - self.reserve_tokens

    @property
    def target_tokens(self) -> int:
        """The size a tiered strategy brings the context under."""
        return int(self.target * self.context_window) - self.reserve_tokens

    @property
    def boundary(self) -> Message | None:
        """The latest boundary this compactor made (None before its first summary)."""
        return self._boundary

    def estimate(self, messages: Sequence[Message]) -> int:
        """The context size of ``messages``: anchored on the last reported input if it applies."""
        if self._anchor is not None:
            sent, reported = self._anchor
            n = len(sent)
            if len(messages) >= n and all(a is b for a, b in zip(sent, messages, strict=False)):
                return reported + _tokens(messages[n:], self.estimator)
        return _tokens(messages, self.estimator)

    def observe(self, iteration: int, response: ModelResponse) -> None:
        """Anchor the next measure on the input tokens the provider reported for the last
        request (an ``on_provider_response`` hook; :meth:`hooks` wires it)."""
        usage = response.usage
        reported = (
            usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
        )
        if response.error is None and reported > 0 and self._sent is not None:
            self._anchor = (self._sent, reported)

    def hooks(self) -> Hooks:
        """Hooks that feed the provider-reported input tokens to :meth:`observe`."""
        return Hooks(on_provider_response=self.observe)

    async def __call__(self, messages: list[Message]) -> list[Message]:
        """The context to send for ``messages`` (compacted when over the threshold)."""
        return await self._run(list(messages), force=False, focus="")

    async def compact_now(self, messages: Sequence[Message], *, focus: str = "") -> list[Message]:
        """Compact ``messages`` whatever their size; ``focus`` tells the summariser what to keep.

        Every tier of a :class:`~goagent_py.memory.compaction.Tiered` strategy runs.
        """
        return await self._run(list(messages), force=True, focus=focus)

    # -- internals ---------------------------------------------------------------------------

    def _base(self, boundary: Message | None) -> int:
        """The transcript index of the first body message."""
        if boundary is not None:
            return _covers(boundary)
        return self.memory.window_start if self.memory is not None else 0

    def _apply_latest(self, messages: list[Message]) -> list[Message]:
        latest = self._boundary
        if latest is None:
            return messages
        prefix, boundary, body = _split(messages)
        if boundary is latest or (boundary is not None and _covers(boundary) >= _covers(latest)):
            return messages
        j = _covers(latest) - self._base(boundary)
        if not 0 < j < len(body) or body[j].role is not Role.USER:
            return messages  # another conversation, or one that does not reach the cut yet
        return _join(prefix, latest, body[j:])

    async def _run(self, messages: list[Message], *, force: bool, focus: str) -> list[Message]:
        # A boundary's covers counts what the model is sent, as storage counts it: UI-only
        # messages are never sent, so they are not counted (issue 28).
        messages = [m for m in messages if not m.metadata.get(UI_ONLY_KEY)]
        current = self._apply_latest(messages)
        await self._flush()
        before = self.estimate(current)
        if not force and before <= self.trigger_tokens:
            self._sent = current
            return current
        self._anchor = None
        # The trigger measured with the provider's counts: bring the target into the
        # estimator's units by the same ratio, so a tokenizer that counts more than the
        # estimate does not leave the compacted context over the window (issue 28).
        estimated = _tokens(current, self.estimator)
        ratio = max(1.0, before / estimated) if estimated > 0 else 1.0
        target = int(self.target_tokens / ratio)
        report = _Report(None if force else target, self.estimator, focus)
        from opentelemetry import trace  # here: `import goagent_py` stays light

        # goagent-py's instrumentation scope, as every span of ours has (goagent_py.otel).
        tracer = trace.get_tracer("goagent_py", tracer_provider=self.tracer_provider)
        with tracer.start_as_current_span("compact_context") as span:
            token = _REPORT.set(report)
            try:
                out = await self._compact(current, report)
            finally:
                _REPORT.reset(token)
            span.set_attribute("goagent.compaction.steps", list(report.steps))
            span.set_attribute("goagent.compaction.tokens_before", before)
            span.set_attribute("goagent.compaction.tokens_after", _tokens(out, self.estimator))
            span.set_attribute("goagent.compaction.fallback_used", report.fallback_used)
            if report.errors:
                error = report.errors[0]
                span.set_attribute("error.type", error_type(error))
        self.usage = self.usage + report.usage
        out, boundary = self._record(current, out, before)
        persisted = False
        if boundary is not None and not report.errors:
            # A fallback after a failure is for this request only: neither reused nor stored,
            # so the next request tries the strategy again (the breaker limits how often).
            self._boundary = boundary
            if self.memory is not None:
                self._pending = boundary
                persisted = await self._flush()
        event = CompactionEvent(
            steps=tuple(report.steps),
            tokens_before=before,
            tokens_after=_tokens(out, self.estimator),
            covers=_covers(boundary) if boundary is not None else 0,
            summary=str(boundary.metadata[COMPACTION_METADATA_KEY]["summary"]) if boundary else "",
            fallback_used=report.fallback_used,
            error=report.errors[0] if report.errors else None,
            changed=out is not current,
            persisted=persisted,
            usage=report.usage,
        )
        await self._emit(event)
        self._sent = out
        return out

    async def _compact(self, current: list[Message], report: _Report) -> list[Message]:
        try:
            out = await _on_copies(self.strategy, current)
            validate_context(out, current)
            self._check_fits(out)
            return out
        except Exception as exc:
            report.errors.append(exc)
            log.warning("compaction strategy failed, falling back: %s", exc)
        if self.fallback is not None:
            report.fallback_used = True
            try:
                out = await _on_copies(self.fallback, current)
                validate_context(out, current)
                return out
            except Exception as exc:
                report.errors.append(exc)
                log.warning("compaction fallback failed; the context is sent unchanged: %s", exc)
        return current  # failure never destroys history

    def _check_fits(self, out: list[Message]) -> None:
        """A compaction that does not fit the window is a failure (a summariser that ignores
        its ``max_tokens`` can write more than it replaced): never stored, never sent."""
        size = _tokens(out, self.estimator)
        room = self.context_window - self.reserve_tokens
        if size > room:
            raise CompactionError(
                f"the compacted context has {size} tokens, more than the {room} the window "
                "leaves; lower the summariser's max_tokens or use a model that keeps to it"
            )

    def _record(
        self, current: list[Message], out: list[Message], before: int
    ) -> tuple[list[Message], Message | None]:
        """Complete a new boundary's record (covers, tokens) and put it in ``out``."""
        _, old, body = _split(current)
        prefix, new, kept = _split(out)
        if new is None or new is old:
            return out, None
        if len(kept) > len(body):
            log.warning("compaction output holds more messages than its input; sent unchanged")
            return current, None
        record = dict(new.metadata[COMPACTION_METADATA_KEY])
        record["covers"] = self._base(old) + len(body) - len(kept)
        record["tokens_before"] = before
        record["tokens_after"] = _tokens(out, self.estimator)
        boundary = replace(new, metadata={**new.metadata, COMPACTION_METADATA_KEY: record})
        return _join(prefix, boundary, kept), boundary

    async def _flush(self) -> bool:
        """Store the pending boundary once every message it covers is stored."""
        pending, memory = self._pending, self.memory
        if pending is None or memory is None:
            return False
        try:
            stored = await memory.storage.load()
            if any(is_boundary(m) and _covers(m) >= _covers(pending) for m in stored):
                self._pending = None  # as new a boundary is already stored
                return False
            if _covers(pending) > sum(model_visible(m) for m in stored):
                return False  # the run has not stored what it covers yet; next request
            await memory.append(pending)
        except Exception as exc:
            log.warning("storing the compaction boundary failed; retrying later: %s", exc)
            return False
        self._pending = None
        return True

    async def _emit(self, event: CompactionEvent) -> None:
        self.events.append(event)
        sink = EVENT_SINK.get()
        if sink is not None:
            sink(event)
        if self.on_event is None:
            return
        try:
            result = self.on_event(event)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("Compactor on_event raised; ignored")

    def __repr__(self) -> str:
        return (
            f"Compactor({self.strategy!r}, context_window={self.context_window}, "
            f"threshold={self.threshold})"
        )
