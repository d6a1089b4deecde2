"""Issue 21 defect 8: calls refused during the half-open probe get a real reopen time."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from goagent_py.dispatch import Dispatcher
from goagent_py.errors import CircuitOpenError
from goagent_py.messages import ToolCall
from goagent_py.resilience import CircuitBreaker, CircuitState
from goagent_py.tools import tool_func


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


async def test_through_the_dispatcher_the_refused_caller_gets_a_future_open_until() -> None:
    clock = FakeClock()
    entered = asyncio.Event()
    release = asyncio.Event()
    fail = True

    async def svc(args: dict[str, Any]) -> str:
        if fail:
            raise RuntimeError("down")
        entered.set()
        await release.wait()
        return "ok"

    d = Dispatcher(
        {"svc": tool_func("svc", "A service.", None, svc)}, circuit_breaker=(1, 30.0), clock=clock
    )
    await d.execute(ToolCall("c0", "svc", {}))
    clock.now += 30
    fail = False
    probe = asyncio.create_task(d.execute(ToolCall("probe", "svc", {})))
    await entered.wait()
    before = datetime.now(UTC)
    refused = await d.execute(ToolCall("c1", "svc", {}))
    error = refused.error
    while error is not None and not isinstance(error, CircuitOpenError):
        error = getattr(error, "cause", None) or error.__cause__
    assert isinstance(error, CircuitOpenError)
    assert error.open_until >= before + timedelta(seconds=29)
    release.set()
    assert (await probe).error is None
