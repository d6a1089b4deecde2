"""The circuit breaker under parallel calls: only the calls of the circuit's current period give
it a verdict (review9f).

A call admitted before the circuit opened ends later, while it is open or while its half-open
probe runs. Its verdict is about a tool state the breaker has already judged: it must not close
the circuit without a probe, reopen it under a running probe, or let a second probe through.
"""

from __future__ import annotations

import asyncio
import contextlib

from goagent_py.dispatch import circuit_breaker_middleware
from goagent_py.errors import CircuitOpenError, ToolArgumentsError
from goagent_py.messages import ContentBlock, TextBlock, ToolCall


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Scripted:
    """A tool whose calls each wait for their own verdict, so tests choose when each ends."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.entered: dict[str, asyncio.Event] = {}
        self.verdict: dict[str, asyncio.Future[BaseException | None]] = {}

    def prepare(self, call_id: str) -> None:
        self.entered[call_id] = asyncio.Event()
        self.verdict[call_id] = asyncio.get_running_loop().create_future()

    async def __call__(self, tc: ToolCall) -> list[ContentBlock]:
        self.started.append(tc.id)
        self.entered[tc.id].set()
        outcome = await self.verdict[tc.id]
        if outcome is not None:
            raise outcome
        return [TextBlock("ok")]


async def _start(call, tool: Scripted, call_id: str) -> asyncio.Task[list[ContentBlock]]:
    tool.prepare(call_id)
    task = asyncio.create_task(call(ToolCall(call_id, "t", {})))
    await tool.entered[call_id].wait()
    return task


async def _refused(call, tool: Scripted, call_id: str) -> bool:
    """Whether a call now is refused by the breaker (one let through succeeds)."""
    tool.prepare(call_id)
    tool.verdict[call_id].set_result(None)
    try:
        await call(ToolCall(call_id, "t", {}))
    except CircuitOpenError:
        assert call_id not in tool.started
        return True
    return False


async def _open(call, tool: Scripted, n: int) -> None:
    for i in range(n):
        task = await _start(call, tool, f"fail{i}")
        tool.verdict[f"fail{i}"].set_result(RuntimeError("down"))
        with contextlib.suppress(RuntimeError):
            await task


async def test_a_success_of_a_call_started_before_the_circuit_opened_does_not_close_it() -> None:
    clock = FakeClock()
    tool = Scripted()
    mw = circuit_breaker_middleware(2, 30.0, clock=clock)
    call = mw(tool)
    old = await _start(call, tool, "old")  # admitted while closed, still running
    await _open(call, tool, 2)
    tool.verdict["old"].set_result(None)
    await old
    # The tool answered a call it got before it went down; the circuit waits for its probe.
    assert await _refused(call, tool, "next")


async def test_a_failure_of_an_older_call_does_not_decide_for_the_running_probe() -> None:
    clock = FakeClock()
    tool = Scripted()
    mw = circuit_breaker_middleware(2, 30.0, clock=clock)
    call = mw(tool)
    old = await _start(call, tool, "old")
    await _open(call, tool, 2)
    clock.now += 31
    probe = await _start(call, tool, "probe")
    tool.verdict["old"].set_result(RuntimeError("late"))
    with contextlib.suppress(RuntimeError):
        await old
    clock.now += 31  # a slow probe: still running a reset timeout later
    assert await _refused(call, tool, "second")  # one probe at a time
    tool.verdict["probe"].set_result(None)
    await probe
    # The probe succeeded: the circuit is closed (the old failure did not reopen it under the
    # probe, which would have kept it open for another reset timeout).
    assert not await _refused(call, tool, "after")


async def test_an_older_call_ending_without_a_verdict_lets_no_second_probe_through() -> None:
    clock = FakeClock()
    tool = Scripted()
    mw = circuit_breaker_middleware(2, 30.0, clock=clock)
    call = mw(tool)
    old = await _start(call, tool, "old")
    await _open(call, tool, 2)
    clock.now += 31
    probe = await _start(call, tool, "probe")
    # The old call ends with what says nothing of the tool's health (bad arguments).
    tool.verdict["old"].set_result(ToolArgumentsError("t", "x: field required"))
    with contextlib.suppress(ToolArgumentsError):
        await old
    assert await _refused(call, tool, "second")  # one probe at a time
    tool.verdict["probe"].set_result(None)
    await probe


async def test_a_cancelled_older_call_lets_no_second_probe_through() -> None:
    clock = FakeClock()
    tool = Scripted()
    mw = circuit_breaker_middleware(2, 30.0, clock=clock)
    call = mw(tool)
    old = await _start(call, tool, "old")
    await _open(call, tool, 2)
    clock.now += 31
    probe = await _start(call, tool, "probe")
    old.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await old
    assert await _refused(call, tool, "second")  # one probe at a time
    tool.verdict["probe"].set_result(None)
    await probe
    assert not await _refused(call, tool, "after")


async def test_a_late_failure_of_an_older_call_does_not_push_the_reopen_time_back() -> None:
    clock = FakeClock()
    tool = Scripted()
    mw = circuit_breaker_middleware(2, 30.0, clock=clock)
    call = mw(tool)
    old = await _start(call, tool, "old")
    await _open(call, tool, 2)
    clock.now += 29
    tool.verdict["old"].set_result(RuntimeError("late"))
    with contextlib.suppress(RuntimeError):
        await old
    clock.now += 2  # 31 s after the circuit opened: the probe is due
    assert not await _refused(call, tool, "probe")
