"""Worker threads for sync tools: reused daemon threads, reached without a per-call thread start.

A sync tool runs in a worker thread so the event loop keeps going. Starting a thread per call
(what this module replaces) costs ~60-100 µs; ``asyncio.to_thread`` reuses threads but its
executor's threads are joined at interpreter exit, so a sync tool that hangs past its timeout
would block the exit, and it holds a pool slot while it hangs. The pool here keeps both
properties of a thread per call and drops the start-up cost:

- every worker is a daemon: an abandoned (timed-out) call never blocks interpreter exit;
- a call never waits for a busy worker: when no worker is idle a new one starts, so a hung tool
  holds only its own thread;
- idle workers end after :data:`IDLE_SECONDS`, so a burst leaves no threads behind for long.

The caller's context (``contextvars``: the OpenTelemetry span, the tool's call context) is
copied per call and the function runs inside it, exactly as ``asyncio.to_thread`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

__all__ = ["IDLE_SECONDS", "run_in_thread", "run_named"]

T = TypeVar("T")

IDLE_SECONDS = 30.0
"""How long an idle worker waits for another call before it ends."""

_Job = Callable[[], Callable[[], None]]
"""Runs a call in the worker; returns what posts its outcome to the caller."""


class _DaemonPool:
    """Daemon worker threads fed from one queue; a new worker whenever none is idle.

    The count of idle workers is a semaphore, as in ``concurrent.futures.ThreadPoolExecutor``:
    a worker releases it each time it becomes free, a submit takes one release or starts a
    worker, so every queued job has a free worker (or one starting) of its own.
    """

    def __init__(self, idle_seconds: float) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._idle_seconds = idle_seconds

    def submit(self, job: _Job) -> None:
        self._jobs.put(job)
        if not self._idle.acquire(blocking=False):
            threading.Thread(target=self._work, name="goagent-tool", daemon=True).start()

    def _work(self) -> None:
        jobs, idle = self._jobs, self._idle
        while True:
            try:
                job = jobs.get(timeout=self._idle_seconds)
            except queue.Empty:
                # Leave only if this worker's idle mark is still unclaimed; if a submit took it,
                # a job is on its way and this worker must stay for it.
                if idle.acquire(blocking=False):
                    return
                continue
            post = job()
            del job  # drop the call's references before waiting for the next one
            # Idle before the result is posted: the caller's next call, made as soon as it has
            # the result, then finds this worker instead of starting another.
            idle.release()
            post()
            del post


_POOL = _DaemonPool(IDLE_SECONDS)


def _deliverable(error: BaseException) -> BaseException:
    """``error`` as a Future takes it: a Future refuses StopIteration (``set_exception`` raises
    TypeError, and the call would never end), so it becomes a RuntimeError, as a coroutine's
    does (``next()`` on an empty iterator in a sync tool)."""
    if isinstance(error, StopIteration):
        wrapped = RuntimeError("tool function raised StopIteration")
        wrapped.__cause__ = error
        return wrapped
    return error


async def run_in_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run blocking ``fn`` in a worker thread (a reused daemon thread) and await its result.

    The caller's context variables are visible to ``fn``. Unlike ``asyncio.to_thread`` the
    thread is a daemon and never shared with another running call: a sync tool that hangs past
    its timeout is abandoned without blocking interpreter exit or any other call.
    """
    return await run_named(getattr(fn, "__name__", "fn"), fn, *args, **kwargs)


async def run_named(label: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """:func:`run_in_thread`, the worker thread named ``goagent-tool-<label>`` meanwhile."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    ctx = contextvars.copy_context()
    name = f"goagent-tool-{label}"

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.cancelled():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(cast(T, result))

    def job() -> Callable[[], None]:
        threading.current_thread().name = name  # what the thread runs, for debuggers and logs
        try:
            result = ctx.run(fn, *args, **kwargs)
        except BaseException as exc:  # handed to the awaiting task, which decides
            outcome: tuple[T | None, BaseException | None] = (None, _deliverable(exc))
        else:
            outcome = (result, None)

        def post() -> None:
            # An abandoned call (timed out) may finish after its event loop closed: drop it.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, *outcome)

        return post

    _POOL.submit(job)
    return await future
