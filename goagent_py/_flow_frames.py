"""Where code runs among the orchestrations around it, for telemetry (no OpenTelemetry here).

Each run of an orchestration (:mod:`goagent_py.orchestration`) opens a :class:`FlowFrame`: the
flow's name and input, when it started, the frame it runs inside, and a copy of the context it
started in. Telemetry (:mod:`goagent_py.otel`) opens the flow's ``invoke_workflow`` span only
when an instrumented agent run starts inside it, with the frame's start time and the tracer of
that run's hooks (a flow of plain functions groups no GenAI operation: no span), and the frame
ends that span when the flow ends. With nothing instrumented a flow pays for one small object
and a context variable.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FlowFrame", "current_frame", "enter_frame", "leave_frame"]

_log = logging.getLogger("goagent_py.otel")

Ender = Callable[[str | None, BaseException | None], None]
"""Ends what telemetry opened for a frame: ``(output text, None)`` or ``(None, error)``."""


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
    _ender: Ender | None = None

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


def enter_frame(name: str, input: str) -> tuple[FlowFrame, contextvars.Token[FlowFrame | None]]:
    """Open a frame for a flow starting now, inside the current one; :func:`leave_frame` it."""
    frame = FlowFrame(
        name=name,
        input=input,
        parent=_FRAME.get(),
        context=contextvars.copy_context(),
        start_ns=time.time_ns(),
    )
    return frame, _FRAME.set(frame)


def leave_frame(token: contextvars.Token[FlowFrame | None]) -> None:
    """Put back the frame that was current before :func:`enter_frame`."""
    _FRAME.reset(token)
