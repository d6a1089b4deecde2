"""Benchmark: window policies and SQLite short-term storage.

Run it from the repository root (it is a script, never a test)::

    .venv/bin/python bench/memory_windows.py

It prints the time of ``TokenWindow.apply`` / ``FixedWindow.apply`` over 1k and 10k message
conversations (a mix of user turns, tool-call groups and answers), and the append and load
throughput of :class:`SQLiteStorage` on a real file (one transaction, one fsync per append).
"""

from __future__ import annotations

import asyncio
import functools
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from goagent_py.memory.policies import FixedWindow, NoOp, TokenWindow
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.memory.tokens import TiktokenEstimator
from goagent_py.messages import Message, Role, TextBlock, ToolCall, assistant_message, user_message


def conversation(n: int) -> list[Message]:
    """About ``n`` messages: question, tool call, two results, answer, repeated."""
    out: list[Message] = []
    i = 0
    while len(out) < n:
        out.append(user_message(f"question {i}: " + "lorem ipsum dolor sit amet " * 8))
        out.append(
            Message(
                Role.ASSISTANT,
                [TextBlock("let me look that up")],
                tool_calls=[
                    ToolCall(f"c{i}a", "search", {"query": f"topic {i}", "top_k": 5}),
                    ToolCall(f"c{i}b", "fetch", {"url": f"https://example.com/{i}"}),
                ],
            )
        )
        out.append(Message(Role.TOOL, [TextBlock("result " * 40)], tool_call_id=f"c{i}a"))
        out.append(Message(Role.TOOL, [TextBlock("page " * 80)], tool_call_id=f"c{i}b"))
        out.append(assistant_message(f"answer {i}: " + "consectetur adipiscing " * 10))
        i += 1
    return out[:n]


def timeit(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median and best wall time of ``fn`` in milliseconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times)


def bench_policies() -> None:
    print("window policies: apply() time, median / best of runs")
    for n in (1_000, 10_000):
        msgs = conversation(n)
        policies = [
            NoOp(),
            FixedWindow(20),
            TokenWindow(8_000),
            TokenWindow(1_000_000),  # keeps everything: counts every message
            TokenWindow(8_000, estimator=TiktokenEstimator()),
        ]
        for policy in policies:
            repeat = 50 if n == 1_000 else 10
            median, best = timeit(functools.partial(policy.apply, msgs), repeat)
            kept = len(policy.apply(msgs))
            print(
                f"  {n:>6} msgs  {policy!r:<55} {median:8.2f} ms  (best {best:7.2f})  kept {kept}"
            )


async def bench_sqlite() -> None:
    print("SQLiteStorage (WAL, synchronous=FULL, one transaction per append)")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        turn = conversation(5)  # one turn: user, call, 2 results, answer
        async with SQLiteStorage(path, session_id="bench") as storage:
            appends = 400
            start = time.perf_counter()
            for _ in range(appends):
                await storage.append(turn)
            elapsed = time.perf_counter() - start
            print(
                f"  append: {appends} turns of {len(turn)} messages in {elapsed:.2f} s  "
                f"= {appends / elapsed:,.0f} appends/s, {appends * len(turn) / elapsed:,.0f} "
                f"msgs/s, {elapsed / appends * 1000:.2f} ms per append"
            )
            for _ in range(3):
                await storage.load()  # warm
            loads = 10
            start = time.perf_counter()
            for _ in range(loads):
                loaded = await storage.load()
            elapsed = (time.perf_counter() - start) / loads
            print(
                f"  load:   {len(loaded)} messages in {elapsed * 1000:.1f} ms "
                f"= {len(loaded) / elapsed:,.0f} msgs/s"
            )
        print(f"  file size: {path.stat().st_size / 1e6:.1f} MB (+ WAL)")


def main() -> None:
    bench_policies()
    asyncio.run(bench_sqlite())


if __name__ == "__main__":
    main()
