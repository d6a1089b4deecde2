"""Telling a cancellation of the run from user code that let one out.

A tool, hook, guardrail, gate, provider, memory, ``instructions``, ``transform_context``,
``prepare_turn`` or output validator that awaited something cancelled elsewhere (a task of its
own, a future) raises ``asyncio.CancelledError`` although nobody cancelled the run: that is the
code's failure, handled as its other failures are (an error result, a logged hook, a guardrail
that fails closed, a :class:`~goagent_py.errors.ProviderError`) or, where those propagate, a
:class:`~goagent_py.errors.StrayCancellationError`. A cancellation of the run (the caller
cancelled, an abort, a timeout) always has the running task's cancel request behind it, or is a
:func:`run_cancelled` the framework raised for it, and propagates. One rule, here, for every
place the run awaits code that is not its own (docs/architecture.md, rule 5).
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, TypeVar

from goagent_py.errors import StrayCancellationError

__all__ = [
    "as_failure",
    "cancels_the_run",
    "failed",
    "in_the_runs_task",
    "run_cancelled",
    "stray",
    "unasked",
]

T = TypeVar("T")
C = TypeVar("C")


_RUNS = "_goagent_cancels_the_run"


def run_cancelled(message: str) -> asyncio.CancelledError:
    """A cancellation of the run that the framework raises with no cancel request on the task
    behind it: Temporal clears the request when it settles an awaited activity's fate, and the
    durable workflow then raises this for the activity a cancelled run was awaiting."""
    exc = asyncio.CancelledError(message)
    setattr(exc, _RUNS, True)
    return exc


def cancels_the_run(exc: BaseException) -> bool:
    """Whether ``exc`` is a cancellation the framework raised for the run
    (:func:`run_cancelled`)."""
    return getattr(exc, _RUNS, False) is True


def unasked(exc: BaseException | None = None) -> bool:
    """Whether a ``CancelledError`` being handled now (``exc``, when given) was not asked of the
    running task, nor raised by the framework for the run (:func:`run_cancelled`)."""
    if exc is not None and cancels_the_run(exc):
        return False
    task = asyncio.current_task()
    return task is not None and task.cancelling() == 0


def failed(exc: BaseException) -> bool:
    """Whether ``exc``, raised by user code, is its failure: an ``Exception``, or a
    ``CancelledError`` nobody asked the running task for (:func:`unasked`)."""
    if isinstance(exc, Exception):
        return True
    return isinstance(exc, asyncio.CancelledError) and unasked(exc)


def stray(exc: BaseException, where: str) -> StrayCancellationError | None:
    """The failure ``exc`` is when it is a ``CancelledError`` ``where`` let out that nobody
    asked of the running task (its cause ``exc``); None for anything else, a cancellation of
    the run included."""
    if not isinstance(exc, asyncio.CancelledError) or not unasked(exc):
        return None
    error = StrayCancellationError(where)
    error.__cause__ = exc
    error.__context__ = exc
    return error


def as_failure(exc: BaseException, where: str) -> Exception:
    """``exc``, caught from ``where``, as that code's failure: an ``Exception`` is itself, a
    ``CancelledError`` nobody asked for is its :class:`StrayCancellationError`; anything else
    (the run's cancellation, ``KeyboardInterrupt``) is raised again."""
    if isinstance(exc, Exception):
        return exc
    error = stray(exc, where)
    if error is None:
        raise exc
    return error


@types.coroutine
def in_the_runs_task(
    coro: Coroutine[Any, Any, T],
    failed_call: Callable[[C, asyncio.CancelledError], Awaitable[T]],
    call: C,
) -> Generator[Any, Any, T]:
    """Await ``coro``, code that would have a task of its own (a tool call) but runs in the
    run's task to spare one (a quiet run's lone call), with the rule its own task would give.

    A cancel request the code makes on the task it runs in (``current_task().cancel()``) is
    then on the run's task, where it would cancel the run; in a task of its own it cancels only
    that code. So the requests are told apart by when they come: one made while the code's own
    steps run is the code's; one that comes while it waits is somebody else's (the run's caller,
    an ``asyncio.timeout`` around the code, which takes its own back). A ``CancelledError`` the
    code lets out is then ``failed_call(call, exc)``'s to answer (as its task's end would be)
    when it was the code's own request or nobody's (:func:`unasked`), and propagates when
    anyone else's request is still standing (the run's cancellation is never swallowed). The
    code's own requests are taken back when it ends, so they never reach the run's next step,
    as they die with a task of its own. A signal handler that cancels the task while the code's
    own steps run (``asyncio.run``'s first Ctrl-C) cannot be told from the code's own request;
    one that comes while it waits, as a wait on I/O or a worker thread does, is the run's.
    """
    task = asyncio.current_task()
    if task is None:  # not in a task: nothing to tell apart
        return (yield from coro.__await__())
    level = task.cancelling()
    try:  # the first step: all of a call that never waits, with nothing more to watch
        yielded = coro.send(None)
    except StopIteration as stop:
        if task.cancelling() != level:  # it asked for its own task's cancellation
            own, others = _moved(task.cancelling() - level, 0, 0, True)
            if own:
                yield from _take_back(task, own, others)
        return stop.value  # type: ignore[no-any-return]
    except BaseException as exc:
        return (yield from _ended(task, level, 0, 0, exc, failed_call, call))
    own = others = 0  # the requests standing, by whom
    while True:
        stepped = task.cancelling()
        own, others = _moved(stepped - level, own, others, True)
        try:
            value = yield yielded
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # what the task throws in: the awaited future's error
            thrown: BaseException | None = exc
        else:
            thrown = None
        level = task.cancelling()
        own, others = _moved(level - stepped, own, others, False)
        try:
            yielded = coro.send(value) if thrown is None else coro.throw(thrown)
        except StopIteration as stop:
            own, others = _moved(task.cancelling() - level, own, others, True)
            if own:
                yield from _take_back(task, own, others)
            return stop.value  # type: ignore[no-any-return]
        except BaseException as exc:
            return (yield from _ended(task, level, own, others, exc, failed_call, call))


@types.coroutine
def _ended(
    task: asyncio.Task[Any],
    level: int,
    own: int,
    others: int,
    exc: BaseException,
    failed_call: Callable[[C, asyncio.CancelledError], Awaitable[T]],
    call: C,
) -> Generator[Any, Any, T]:
    """The end of :func:`in_the_runs_task`'s code that raised ``exc`` in its last step."""
    own, others = _moved(task.cancelling() - level, own, others, True)
    if isinstance(exc, asyncio.CancelledError) and not (
        others or cancels_the_run(exc) or not (own or unasked())
    ):
        if own:
            yield from _take_back(task, own, others)
        return (yield from failed_call(call, exc).__await__())
    if own:
        yield from _take_back(task, own, others)
    raise exc


def _moved(change: int, own: int, others: int, stepping: bool) -> tuple[int, int]:
    """The standing requests after the task's count moved by ``change`` while the code's
    steps ran (``stepping``) or while it waited. A request taken back is the code's own first
    while it steps (it takes back what it asked), the others' first while it waits; an
    unclear case leaves a request to the others, so it propagates rather than be swallowed."""
    if change > 0:
        return (own + change, others) if stepping else (own, others + change)
    if change < 0:
        back = -change
        if stepping:
            mine = min(own, back)
            return own - mine, max(others - (back - mine), 0)
        theirs = min(others, back)
        return max(own - (back - theirs), 0), others - theirs
    return own, others


@types.coroutine
def _take_back(task: asyncio.Task[Any], own: int, others: int) -> Generator[None, None, None]:
    """Take back the code's ``own`` standing requests; one still pending on the task (asyncio
    3.11 keeps it after ``uncancel``) is let arrive here, at one bare yield, and dropped."""
    for _ in range(own):
        task.uncancel()
    if getattr(task, "_must_cancel", True):
        try:
            yield
        except asyncio.CancelledError:
            if others or task.cancelling():  # somebody else asked meanwhile
                raise
