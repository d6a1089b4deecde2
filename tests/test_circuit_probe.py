"""Issue 21 defect 8: calls refused during the half-open probe get a real reopen time."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from goagent_py.dispatch import circuit_breaker_middleware
from goagent_py.errors import CircuitOpenError
from goagent_py.messages import ContentBlock, TextBlock, ToolCall
from goagent_py.resilience import CircuitBreaker, CircuitState


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_call_refused_during_the_probe_is_told_a_reset_timeout_from_now() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(1, 30.0, clock=clock)
    breaker.record_failure()
    clock.now += 31  # past the reset timeout
    assert breaker.allow()  # the probe
    assert breaker.state is CircuitState.HALF_OPEN
    before = datetime.now(UTC)
    assert not breaker.allow()  # refused while the probe runs
    until = breaker.open_until()
    # Not "now" (retry_after 0, the defect): the probe may fail and open the circuit for a
    # whole reset timeout from its end, so that is the honest answer to a refused caller.
    assert until >= before + timedelta(seconds=29)
    assert until <= datetime.now(UTC) + timedelta(seconds=31)


def test_open_until_of_an_open_circuit_is_unchanged() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(1, 30.0, clock=clock)
    breaker.record_failure()
    clock.now += 10
    before = datetime.now(UTC)
    until = breaker.open_until()
    assert before + timedelta(seconds=19) <= until <= datetime.now(UTC) + timedelta(seconds=21)


async def test_through_the_middleware_the_refused_caller_gets_a_future_open_until() -> None:
    clock = FakeClock()
    entered = asyncio.Event()
    release = asyncio.Event()
    fail = True

    async def svc(tc: ToolCall) -> list[ContentBlock]:
        if fail:
            raise RuntimeError("down")
        entered.set()
        await release.wait()
        return [TextBlock("ok")]

    call = circuit_breaker_middleware(1, 30.0, clock=clock)(svc)
    with pytest.raises(RuntimeError):
        await call(ToolCall("c0", "svc", {}))
    clock.now += 30
    fail = False
    probe = asyncio.create_task(call(ToolCall("probe", "svc", {})))
    waiter = asyncio.create_task(entered.wait())
    await asyncio.wait({probe, waiter}, return_when=asyncio.FIRST_COMPLETED)
    assert entered.is_set(), "the probe must be let through and be running"
    before = datetime.now(UTC)
    with pytest.raises(CircuitOpenError) as info:
        await call(ToolCall("c1", "svc", {}))
    assert info.value.open_until >= before + timedelta(seconds=29)
    release.set()
    assert await probe == [TextBlock("ok")]
    await waiter
