"""ToolContext's cancel flag: a threading.Event that costs nothing until it is used; the
context itself, made only for a call that asks for it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from goagent_py import ToolCall
from goagent_py.tool_context import ToolContext, current_tool_context


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


async def test_a_context_is_made_only_for_a_call_that_asks_and_once_per_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from goagent_py import Agent, ToolCall, tool
    from goagent_py._loop import Run
    from goagent_py.testing import ScriptedProvider, tool_call_response

    made: list[str] = []
    real = Run._context

    def counting(self: Run, call: ToolCall, *rest: Any) -> Any:
        made.append(call.id)
        return real(self, call, *rest)

    monkeypatch.setattr(Run, "_context", counting)
    asked: list[Any] = []

    @tool
    async def quiet(a: int) -> int:
        """Ask for nothing."""
        return a

    @tool
    async def curious(a: int) -> int:
        """Ask twice, and from a thread."""
        first = current_tool_context()
        assert first is not None
        first.set_details({"a": a})
        asked.extend([first, current_tool_context()])
        asked.append(await asyncio.to_thread(current_tool_context))
        return a

    provider = ScriptedProvider(
        tool_call_response(ToolCall("q1", "quiet", {"a": 1})),
        tool_call_response(ToolCall("c1", "curious", {"a": 2})),
        tool_call_response(ToolCall("q2", "quiet", {"a": 3}), ToolCall("c2", "curious", {"a": 4})),
        "done",
    )
    result = await Agent(provider=provider, tools=[quiet, curious]).run("go")
    assert result.text == "done"
    assert made == ["c1", "c2"]
    assert asked[0] is asked[1] is asked[2]
    assert asked[3] is asked[4] is asked[5]
    assert [a.call.id for a in asked] == ["c1"] * 3 + ["c2"] * 3
    assert current_tool_context() is None


async def test_a_context_first_asked_after_a_resumed_call_ended_still_holds_its_resume() -> None:
    # Review5: the context is made on the first ask; one asked only after the call's batch
    # ended (by a task the tool started) must say what it would have said during the call.
    from goagent_py import Agent, Approve, PendingCall, tool
    from goagent_py.testing import ScriptedProvider, tool_call_response

    gate = asyncio.Event()
    later: list[asyncio.Task[Any]] = []

    async def ask_late() -> Any:
        await gate.wait()
        ctx = current_tool_context()
        assert ctx is not None
        return ctx.resumed

    @tool
    async def cleaner(folder: str) -> str:
        """Cleans a folder."""
        if not later:  # the first run: wait for a person's decision on an inner call
            ctx = current_tool_context()
            assert ctx is not None
            assert ctx.resumed is None
            inner = ToolCall("k1", "delete", {"folder": folder})
            ctx.wait_for([PendingCall(inner)], {"step": 1})
            later.append(asyncio.create_task(asyncio.sleep(0)))
            return "waiting"
        later.append(asyncio.create_task(ask_late()))  # asks only after the call ended
        return "cleaned"

    provider = ScriptedProvider(
        tool_call_response(ToolCall("p1", "cleaner", {"folder": "tmp"})), "Done.", "Done."
    )
    agent = Agent(provider=provider, tools=[cleaner])
    first = await agent.run("tidy up")
    assert [p.id for p in first.pending] == ["p1/k1"]
    result = await agent.resume({"p1/k1": Approve()}, history=first.messages)
    assert result.text == "Done."
    gate.set()
    resumed = await later[-1]
    assert resumed is not None
    assert resumed.state == {"step": 1}
    assert isinstance(resumed.decisions["k1"], Approve)
