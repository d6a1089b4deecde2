"""Where code runs among the orchestrations around it, for telemetry (no OpenTelemetry here).

Each run of an orchestration (:mod:`goagent_py.orchestration`) opens a :class:`FlowFrame`: the
flow's name and input, when it started, the frame it runs inside, and a copy of the context it
started in, and how to find the hooks of the agents it holds. Telemetry
(:mod:`goagent_py.otel`), once imported, is told of every frame as it opens
(:func:`add_opener`): a flow holding an instrumented agent gets its ``invoke_workflow`` span
then, with the tracer of that agent's hooks, current for everything the flow runs (its agents,
and the spans its steps open with the application's own tracer), until the flow ends. A flow
whose agents are only made while it runs (a function node building one) gets the span when the
first instrumented run starts inside it, with the frame's start time; a flow of plain functions
groups no GenAI operation: no span. The frame ends the span when the flow ends. With nothing
instrumented a flow pays for one small object and a context variable.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FlowFrame", "add_opener", "current_frame", "enter_frame", "leave_frame"]

_log = logging.getLogger("goagent_py.otel")

Ender = Callable[[str | None, BaseException | None], None]
"""Ends what telemetry opened for a frame: ``(output text, None)`` or ``(None, error)``."""

Opener = Callable[["FlowFrame"], "Callable[[], None] | None"]
"""Told of a frame as it opens; returns what puts the context back as the flow leaves, or None."""


@dataclass(slots=True, eq=False)
class FlowFrame:
    """One run of an orchestration, as telemetry sees it.

    Attributes:
        name: the flow's name (``gen_ai.workflow.name``).
        input: what the flow was run on.
        parent: the frame of the flow this one runs inside (a nested flow, or a flow called as
            a tool by an agent of another flow), or None.
        context: a copy of the context the flow started in (the span that was current then).
        start_ns: when it started, in nanoseconds since the epoch.
        span: what the telemetry opened for it (opaque here), or None.
        started: what the telemetry read of ``context`` (opaque here), or None: read once,
            under ``lock`` (a context cannot be entered by two threads at once).
        ended: the flow has ended: a run it left behind (a task it did not wait for) opens
            no span for it, which nothing would end.
        lock: held while the telemetry opens the span (runs in threads may race for it).
        hook_sets: the hook sets of the agents the flow holds (its nodes, at any depth), read
            only by telemetry.
    """

    name: str
    input: str
    parent: FlowFrame | None
    context: contextvars.Context
    start_ns: int
    span: Any = None
    started: Any = None  # the telemetry's reading of ``context`` (opaque here), once
    ended: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    hook_sets: Callable[[], Iterable[Any]] = tuple
    _ender: Ender | None = None
    _restore: list[Callable[[], None]] = field(default_factory=list)

    def on_end(self, ender: Ender) -> None:
        """Have ``ender`` called once when the flow ends (the telemetry that opened the span)."""
        self._ender = ender

    def end(self, text: str | None, error: BaseException | None) -> None:
        """The flow ended: end what telemetry opened. Telemetry never fails the flow: an ender
        that raises is logged and dropped."""
        with self.lock:
            self.ended = True
            ender, self._ender = self._ender, None
        if ender is None:
            return
        try:
            ender(text, error)
        except Exception:  # telemetry's own fault: the flow's outcome stands
            _log.warning("ending the span of flow %r failed", self.name, exc_info=True)


_FRAME: contextvars.ContextVar[FlowFrame | None] = contextvars.ContextVar(
    "goagent_flow_frame", default=None
)


def current_frame() -> FlowFrame | None:
    """The frame of the innermost flow run this code runs in, or None."""
    return _FRAME.get()


_OPENERS: list[Opener] = []


def add_opener(opener: Opener) -> None:
    """Have ``opener`` told of every frame as it opens (telemetry, once, at its import)."""
    if opener not in _OPENERS:
        _OPENERS.append(opener)


def enter_frame(
    name: str, input: str, hook_sets: Callable[[], Iterable[Any]] = tuple
) -> tuple[FlowFrame, contextvars.Token[FlowFrame | None]]:
    """Open a frame for a flow starting now, inside the current one; :func:`leave_frame` it.

    ``hook_sets`` lists the hook sets of the agents the flow holds (called only when telemetry
    is there to read them)."""
    frame = FlowFrame(
        name=name,
        input=input,
        parent=_FRAME.get(),
        context=contextvars.copy_context(),
        start_ns=time.time_ns(),
        hook_sets=hook_sets,
    )
    token = _FRAME.set(frame)
    for opener in _OPENERS:
        try:
            restore = opener(frame)
        except Exception:  # telemetry's own fault: the flow runs untraced, never fails
            _log.warning("opening the span of flow %r failed", name, exc_info=True)
            continue
        if restore is not None:
            frame._restore.append(restore)
    return frame, token


def leave_frame(frame: FlowFrame, token: contextvars.Token[FlowFrame | None]) -> None:
    """Put back the frame (and what telemetry made current) from before :func:`enter_frame`."""
    for restore in reversed(frame._restore):
        try:
            restore()
        except Exception:
            _log.warning("leaving the span of flow %r failed", frame.name, exc_info=True)
    frame._restore.clear()
    _FRAME.reset(token)
