"""The spans a traced durable run holds open, by workflow run, and the sweep that ends them when
the server closed the run from outside.

A workflow that is terminated, or that times out, is never told: its worker keeps the run's
objects until it evicts them (and ends nothing then: Temporal's replay-safe spans do not end
during an eviction, which may be a cache's, with the run going on elsewhere), so the spans the
run had open (``invoke_agent``, the ``execute_tool`` of the call in flight) would never end and
never be exported. The telemetry hooks tell a :class:`SpanLedger` of each span they open and
end in a workflow; what stays open while the run is quiet is looked up on the server (one
``describe`` per quiet run, less often the longer it stays quiet), and the spans of a run the
server closed as terminated, timed out, cancelled or failed are ended at its close time with an
error status and ``error.type`` ``workflow_terminated``, ``workflow_timed_out``,
``workflow_cancelled`` or ``workflow_failed``. The worker of
:func:`~goagent_py.durable.create_worker` sweeps as it stops too. A run the server completed
(or continued as new) ended its spans where it ran: they are forgotten here. A worker that
stops ends the spans of the runs still going on (``worker_stopped``, :meth:`SpanLedger.let_go`):
the server may close such a run while no worker holds it, and nothing would end them then.

What stays open is only what this worker opened and never ended: a span ended on a replay was
ended live before (another worker, or this one before an eviction).

A run the server closed from outside is still held by the worker that ran it (Temporal never
tells it), its loop suspended where it was. Dropped with the worker, its coroutines would be
closed by the garbage collector wherever it next runs (another workflow's thread, another
test), raising there from the loop's ``finally`` blocks. So the ledger asks the worker to evict
each such run (``evict``, the run id: Temporal then cancels its tasks on its own workflow
thread), and the telemetry hooks skip the runs whose spans it ended (:meth:`released`): the
eviction runs the loop's ends again, and they would touch ended spans.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import Span
from temporalio import workflow as temporal_workflow
from temporalio.client import WorkflowExecutionStatus

from goagent_py.otel._hooks import end_span, set_error

__all__ = ["SWEEP_AFTER", "SWEEP_EVERY", "SpanLedger"]

_log = logging.getLogger("goagent_py.durable")

SWEEP_AFTER = 30.0
"""Seconds a run with open spans stays quiet (no span opened or ended) before the server is
asked about it; doubled each time it is still running, up to :data:`SWEEP_MOST`."""

SWEEP_MOST = 600.0

RELEASED_KEPT = 1024
"""How many runs whose spans the sweep ended the ledger remembers (their hooks do nothing)."""

SWEEP_EVERY = 10.0
"""Seconds between two sweeps of a running worker."""

_CLOSED: dict[WorkflowExecutionStatus, tuple[str, str]] = {
    WorkflowExecutionStatus.TERMINATED: ("workflow_terminated", "the workflow was terminated"),
    WorkflowExecutionStatus.TIMED_OUT: ("workflow_timed_out", "the workflow timed out"),
    WorkflowExecutionStatus.CANCELED: ("workflow_cancelled", "the workflow was cancelled"),
    WorkflowExecutionStatus.FAILED: ("workflow_failed", "the workflow failed"),
}

_STOPPED = (
    "worker_stopped",
    "the worker stopped while the run went on: another worker goes on with it, or the server "
    "closes it",
)


class _Closed(Exception):
    """Why a span of a run closed from outside ended (``error_type`` is its ``error.type``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.error_type = kind


@dataclass(slots=True)
class _Open:
    spans: dict[int, Span] = field(default_factory=dict)  # by id, in the order they opened
    seen: float = 0.0  # when a span of the run last opened or ended (monotonic)
    wait: float = SWEEP_AFTER


class SpanLedger:
    """The open spans of the traced runs in this worker's workflows (see the module docstring).

    Told from the workflows' threads, swept from the worker's event loop: a lock keeps both.
    """

    def __init__(self, *, capture: bool) -> None:
        self.capture = capture
        self._lock = threading.Lock()
        self._runs: dict[tuple[str, str], _Open] = {}
        self._watcher: asyncio.Task[None] | None = None
        # The runs whose spans the sweep ended, oldest first (a dict as an ordered set; the
        # latest RELEASED_KEPT: a run is evicted as it goes in, so its hooks run only then).
        self._released: dict[tuple[str, str], None] = {}
        self.evict: Callable[[str], None] | None = None  # the worker's, by run id (if any)

    def released(self, key: tuple[str, str] | None) -> bool:
        """Whether the sweep ended the spans of the workflow run ``key`` (closed from outside):
        its loop, evicted, must not touch them again."""
        return key in self._released

    def opened(self, span: Span) -> None:
        key = _workflow_run()
        if key is None:
            return
        with self._lock:
            entry = self._runs.get(key)
            if entry is None:
                entry = self._runs[key] = _Open()
            entry.spans[id(span)] = span
            entry.seen, entry.wait = time.monotonic(), SWEEP_AFTER

    def closed(self, span: Span) -> None:
        key = _workflow_run()
        if key is None:
            return
        with self._lock:
            entry = self._runs.get(key)
            if entry is None or entry.spans.pop(id(span), None) is None:
                return
            entry.seen, entry.wait = time.monotonic(), SWEEP_AFTER
            if not entry.spans:
                del self._runs[key]

    def open_runs(self) -> list[tuple[str, str]]:
        """The workflow runs (workflow id, run id) with spans open here."""
        with self._lock:
            return list(self._runs)

    def watch(self, client: Any) -> None:
        """Sweep every :data:`SWEEP_EVERY` seconds on the running loop, with ``client``, until
        :meth:`stop` (started once)."""
        if self._watcher is not None and not self._watcher.done():
            return
        self._watcher = asyncio.get_running_loop().create_task(self._watch(client))

    async def stop(self, client: Any) -> None:
        """Stop watching, sweep every run with open spans, quiet or not, and end the spans of
        the runs still going on (:meth:`let_go`): a worker that stops, nothing here would end
        them later."""
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
            await asyncio.wait([watcher])  # its cancellation is not ours: nothing raised here
        try:
            await self.sweep(client, everyone=True)
        finally:
            self.let_go()

    def let_go(self) -> None:
        """End, now, every span this worker holds open, with ``error.type`` ``worker_stopped``:
        the worker stops while their runs go on. Nothing else could end them: the server may
        close such a run while no worker holds it (terminated, timed out, cancelled), and a
        worker that picks it up again replays what these spans recorded (replayed spans are
        not recorded) and traces only what it runs itself."""
        with self._lock:
            runs, self._runs = self._runs, {}
        now = time.time_ns()
        for key, entry in runs.items():
            self._release(key)
            self._end(list(entry.spans.values()), _Closed(*_STOPPED), now)
            self._evict(key[1])

    async def _watch(self, client: Any) -> None:
        try:
            while True:
                await asyncio.sleep(SWEEP_EVERY)
                await self.sweep(client)
        except asyncio.CancelledError:
            # Cancelled by :meth:`stop` (which goes on), or by the end of the event loop the
            # worker ran on (``asyncio.run`` cancels what is left): a worker of yours tells
            # its interceptor nothing as it stops, so this is the last word on its spans.
            if self._watcher is asyncio.current_task():
                self.let_go()
            raise

    async def sweep(self, client: Any, *, everyone: bool = False) -> None:
        """Ask the server about each quiet run with open spans (``everyone``: each run), and end
        the spans of those it closed from outside."""
        now = time.monotonic()
        with self._lock:
            due = [
                (key, entry)
                for key, entry in self._runs.items()
                if everyone or now - entry.seen >= entry.wait
            ]
        for key, entry in due:
            try:
                described = await client.get_workflow_handle(key[0], run_id=key[1]).describe()
            except Exception as exc:  # the server is away: ask again next time
                _log.debug("could not describe workflow %s: %s", key[0], exc)
                continue
            status = described.status
            with self._lock:
                if status in (None, WorkflowExecutionStatus.RUNNING):
                    entry.seen, entry.wait = time.monotonic(), min(entry.wait * 2, SWEEP_MOST)
                    continue
                if self._runs.get(key) is entry:
                    del self._runs[key]
                spans = list(entry.spans.values())
            closed = _CLOSED.get(status)
            if closed is None:  # completed, or continued as new: its spans ended where it ran
                continue
            close = described.close_time
            end_ns = int(close.timestamp() * 1e9) if close is not None else time.time_ns()
            self._release(key)
            self._end(spans, _Closed(*closed), end_ns)
            self._evict(key[1])

    def _release(self, key: tuple[str, str]) -> None:
        self._released[key] = None
        while len(self._released) > RELEASED_KEPT:
            del self._released[next(iter(self._released))]

    def _evict(self, run_id: str) -> None:
        if self.evict is None:  # your own worker: the run stays cached until Temporal drops it
            return
        try:
            self.evict(run_id)  # a run this worker no longer holds: nothing happens
        except Exception as exc:  # the worker is stopping: nothing left to evict from
            _log.debug("could not evict workflow run %s: %s", run_id, exc)

    def _end(self, spans: list[Span], why: _Closed, end_ns: int) -> None:
        for span in reversed(spans):  # the latest first: a call's span ends before its run's
            start = getattr(span, "start_time", None)
            set_error(span, why, capture=self.capture)
            end_span(span, max(end_ns, start) if isinstance(start, int) else end_ns)


def _workflow_run() -> tuple[str, str] | None:
    if not temporal_workflow.in_workflow():
        return None
    info = temporal_workflow.info()
    return info.workflow_id, info.run_id
