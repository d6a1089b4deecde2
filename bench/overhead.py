"""Framework overhead: one run with one tool call on ScriptedProvider, and Agent construction.

Run it:

    python bench/overhead.py [runs]

Prints the median microseconds per run (>= 1000 runs), and the time and memory to construct an
Agent with one tool. The provider answers instantly, so what is measured is goagent-py itself:
the loop, hooks, dispatch chain, tool validation and message bookkeeping.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import tracemalloc

from goagent_py import Agent, ToolCall, tool
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import text_response, tool_call_response


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Replay:
    """Like ScriptedProvider but without per-request deep copies, to measure the framework."""

    def __init__(self) -> None:
        self.calls = 0
        self.first = tool_call_response(ToolCall("c1", "add", {"a": 2, "b": 3}))
        self.second = text_response("5")

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        self.calls += 1
        return self.first if self.calls % 2 else self.second


async def per_run(runs: int) -> list[float]:
    agent = Agent(provider=Replay(), model="bench", tools=[add])
    for _ in range(50):  # warm-up
        await agent.run("2+3")
    times = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        await agent.run("2+3")
        times.append((time.perf_counter_ns() - start) / 1000)
    return times


def construction(n: int) -> tuple[float, int]:
    provider = Replay()
    Agent(provider=provider, model="bench", tools=[add])
    start = time.perf_counter_ns()
    for _ in range(n):
        Agent(provider=provider, model="bench", tools=[add])
    per = (time.perf_counter_ns() - start) / n / 1000
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    keep = [Agent(provider=provider, model="bench", tools=[add]) for _ in range(100)]
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    size = sum(s.size_diff for s in after.compare_to(before, "filename")) // len(keep)
    return per, size


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    times = asyncio.run(per_run(runs))
    per, size = construction(2000)
    q = statistics.quantiles(times, n=100)
    print(f"one run, one tool call ({runs} runs, ScriptedProvider-like replay):")
    print(f"  median {statistics.median(times):8.1f} us   p10 {q[9]:8.1f} us   p90 {q[89]:8.1f} us")
    print("Agent construction with one tool:")
    print(f"  {per:8.1f} us per Agent   ~{size} bytes per Agent")


if __name__ == "__main__":
    main()
