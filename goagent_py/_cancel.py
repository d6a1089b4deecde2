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

from goagent_py.errors import StrayCancellationError

__all__ = ["as_failure", "cancels_the_run", "failed", "run_cancelled", "stray", "unasked"]


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
