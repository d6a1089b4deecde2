"""Dispatch overhead: a bare ``await tool.execute(args)`` vs the full chain, per tool call.

Run with ``python bench/dispatch.py`` (never collected as a test). The full chain is
logging -> timeout -> circuit breaker -> retry -> rate limit (a rate so high it never waits) ->
exception recovery -> tool; the tool itself does nothing, so the difference is the chain's cost.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import time
from collections.abc import Awaitable, Callable

from goagent_py.dispatch import Dispatcher
from goagent_py.messages import ToolCall
from goagent_py.resilience import RetryPolicy
from goagent_py.tools import Tool, tool

CALLS = 20_000
WARMUP = 1_000


@tool
async def noop(x: int) -> str:
    """Return the number as text.

    Args:
        x: any integer.
    """
    return str(x)


async def measure(fn: Callable[[], Awaitable[object]], calls: int) -> list[float]:
    """Microseconds per call, one sample per call."""
    for _ in range(WARMUP):
        await fn()
    samples: list[float] = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        start = clock()
        await fn()
        samples.append((clock() - start) / 1000)
    return samples


def dispatcher(tools: dict[str, Tool], **kwargs: object) -> Dispatcher:
    logger = logging.getLogger("bench.dispatch")
    logger.setLevel(logging.WARNING)  # debug lines are formatted only when enabled
    return Dispatcher(tools, logger=logger, **kwargs)  # type: ignore[arg-type]


async def main() -> None:
    tools: dict[str, Tool] = {"noop": noop}
    call = ToolCall("c1", "noop", {"x": 1})
    args = {"x": 1}
    bare = dispatcher(tools)
    full = dispatcher(
        tools,
        timeout=30.0,
        circuit_breaker=(5, 30.0),
        retry=RetryPolicy(max_attempts=3),
        rate_limit=(1e12, 1_000_000),
    )
    cases: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        ("bare await tool.execute(args)", lambda: noop.execute(args)),
        ("Dispatcher.execute, no options", lambda: bare.execute(call)),
        ("Dispatcher.execute, full chain", lambda: full.execute(call)),
    ]
    results = [(name, await measure(fn, CALLS)) for name, fn in cases]
    base = statistics.median(results[0][1])
    print(f"dispatch overhead per tool call ({CALLS} calls each, microseconds)")
    print(f"{'case':<34} {'median':>8} {'p90':>8} {'overhead':>9}")
    for name, samples in results:
        median = statistics.median(samples)
        p90 = statistics.quantiles(samples, n=10)[-1]
        print(f"{name:<34} {median:>8.1f} {p90:>8.1f} {median - base:>+9.1f}")


if __name__ == "__main__":
    asyncio.run(main())
