"""The tables of per-tool resilience state stay bounded when used alone (docs/reliability.md,
"Tool calls under fault"): ``circuit_breaker_middleware`` without a key and ``rate_limit``
with ``per_tool=True`` keep state per tool name they are given, and a dispatch built on them
outside the ``Dispatcher`` can be given any name (an MCP server's, a model's made-up one)."""

from __future__ import annotations

import gc

import pytest

from goagent_py.dispatch import circuit_breaker_middleware
from goagent_py.errors import CircuitOpenError
from goagent_py.messages import ContentBlock, TextBlock, ToolCall
from goagent_py.resilience import CircuitBreaker, RateLimiter, rate_limit


def _live(kind: type) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is kind)


async def _failing(tc: ToolCall) -> list[ContentBlock]:
    if tc.arguments.get("fail"):
        raise RuntimeError("backend down")
    return [TextBlock("ok")]


async def test_an_unkeyed_breaker_table_is_bounded_by_max_keys() -> None:
    # 12,000 tool names failing once each (threshold 3): each breaker has a failure to
    # remember, and the table keeps the 10,000 used last (as the keyed table does).
    call = circuit_breaker_middleware(3, 60.0)(_failing)
    before = _live(CircuitBreaker)
    for i in range(12_000):
        with pytest.raises(RuntimeError):
            await call(ToolCall(str(i), f"tool_{i}", {"fail": True}))
    assert _live(CircuitBreaker) - before <= 10_000


async def test_an_unkeyed_breaker_forgets_names_with_nothing_to_remember() -> None:
    call = circuit_breaker_middleware(3, 60.0)(_failing)
    before = _live(CircuitBreaker)
    for i in range(500):
        assert await call(ToolCall(str(i), f"tool_{i}", {})) == [TextBlock("ok")]
    assert _live(CircuitBreaker) - before == 0


async def test_an_unkeyed_breaker_still_opens_per_tool_and_keeps_an_open_circuit() -> None:
    call = circuit_breaker_middleware(2, 60.0, max_keys=2)(_failing)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            await call(ToolCall("s", "search", {"fail": True}))
    # Other tools come and go; "search" is called again each time, so it is never the least
    # recently used one: its circuit stays open.
    for i in range(5):
        with pytest.raises(CircuitOpenError):
            await call(ToolCall("s", "search", {}))
        with pytest.raises(RuntimeError):
            await call(ToolCall(str(i), f"other_{i}", {"fail": True}))
    with pytest.raises(CircuitOpenError):
        await call(ToolCall("s", "search", {}))
    assert await call(ToolCall("f", "fetch", {})) == [TextBlock("ok")]


async def test_per_tool_rate_limit_buckets_are_not_kept_for_every_name() -> None:
    # A full bucket is what a new one is: it need not be kept. 5,000 names called once each
    # at a high rate (their buckets refill at once) leave a table of at most a few.
    now = [0.0]
    limited = rate_limit(1.0, 1, per_tool=True, clock=lambda: now[0])(_failing)
    before = _live(RateLimiter)
    for i in range(5_000):
        await limited(ToolCall(str(i), f"tool_{i}", {}))
        now[0] += 1.0  # each bucket is full again by the next call
    assert _live(RateLimiter) - before <= 1_100


async def test_per_tool_rate_limit_still_holds_each_tool_to_its_rate() -> None:
    now = [0.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    limited = rate_limit(1.0, 1, per_tool=True, clock=lambda: now[0], sleep=sleep)(_failing)
    await limited(ToolCall("a", "search", {}))
    for i in range(3_000):  # many other names while "search" is still empty
        await limited(ToolCall(str(i), f"tool_{i}", {}))
    assert slept == []  # each other name has a bucket of its own, full
    await limited(ToolCall("b", "search", {}))
    assert sum(slept) == pytest.approx(1.0)
