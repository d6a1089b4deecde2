"""ToolContext's cancel flag: a threading.Event that costs nothing until it is used."""

from __future__ import annotations

import threading

from goagent_py import ToolCall
from goagent_py.tool_context import ToolContext


def _context() -> ToolContext:
    return ToolContext(call=ToolCall("c1", "slow", {}))


def test_the_cancel_event_is_a_threading_event_that_starts_clear() -> None:
    event = _context().cancel_event
    assert isinstance(event, threading.Event)
    assert not event.is_set()
    assert event.wait(0) is False


def test_setting_the_cancel_event_wakes_a_worker_thread_waiting_on_it() -> None:
    ctx = _context()
    waiting = threading.Event()
    woke: list[bool] = []

    def worker() -> None:
        waiting.set()
        woke.append(ctx.cancel_event.wait())

    thread = threading.Thread(target=worker)
    thread.start()
    assert waiting.wait(10)
    ctx.cancel_event.set()
    thread.join(10)
    assert woke == [True]
    assert ctx.cancelled


def test_set_then_clear_then_wait_with_a_timeout() -> None:
    event = _context().cancel_event
    event.set()
    assert event.wait(0) is True
    event.clear()
    assert not event.is_set()
    assert event.wait(0.01) is False


def test_a_context_makes_no_lock_until_its_event_is_used() -> None:
    # Issue 36: one Condition and lock per tool call was a measurable share of a run.
    ctx = _context()
    assert ctx.cancel_event._cond is None  # type: ignore[attr-defined]
    assert not ctx.cancelled
    assert ctx.cancel_event._cond is None  # type: ignore[attr-defined]
