"""Telling a cancellation of the run from user code that let one out.

A tool, hook, guardrail or gate that awaited something cancelled elsewhere (a task of its own,
a future) raises ``asyncio.CancelledError`` although nobody cancelled the run: that is the
callback's failure, handled as its other failures are (an error result, a logged hook, a
guardrail that fails closed). A cancellation of the run (the caller cancelled, an abort, a
timeout) always has the running task's cancel request behind it, and propagates.
"""

from __future__ import annotations

import asyncio

__all__ = ["failed", "unasked"]


def unasked() -> bool:
    """Whether a ``CancelledError`` being handled now was not asked of the running task."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() == 0


def failed(exc: BaseException) -> bool:
    """Whether ``exc``, raised by user code, is its failure: an ``Exception``, or a
    ``CancelledError`` nobody asked the running task for (:func:`unasked`)."""
    if isinstance(exc, Exception):
        return True
    return isinstance(exc, asyncio.CancelledError) and unasked()
