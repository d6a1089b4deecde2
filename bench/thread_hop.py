"""The sync-tool thread hop: ways of running a blocking function from the event loop, compared.

Run: .venv/bin/python bench/thread_hop.py [--runs 3000]

Each variant awaits a trivial function in a worker thread with the caller's context copied in
(what a sync tool needs: the OpenTelemetry span and the tool's call context must reach it):

- ``thread per call``: a new daemon thread per call (goagent-py before the worker pool);
- ``asyncio.to_thread``: the loop's default executor, via ``run_in_executor`` + ``copy_context``;
- ``shared ThreadPoolExecutor``: ``loop.run_in_executor`` on one reused executor, the context
  copied by hand (what ``to_thread`` does, without its per-call partial);
- ``goagent_py run_in_thread``: the reused daemon workers of ``goagent_py._workers``;
- ``inline``: an awaited ``async def`` call, no thread (the floor).

The variants are interleaved in blocks of 100 so a slow spell of a shared machine hits them all.
Prints the median and p90 in µs per variant.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import contextvars
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from goagent_py.tools import run_in_thread


def work() -> int:
    return 5


async def thread_per_call(fn: Callable[[], int]) -> int:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[int] = loop.create_future()
    ctx = contextvars.copy_context()

    def worker() -> None:
        result = ctx.run(fn)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(future.set_result, result)

    threading.Thread(target=worker, daemon=True).start()
    return await future


_EXECUTOR = concurrent.futures.ThreadPoolExecutor(max_workers=4)


async def shared_executor(fn: Callable[[], int]) -> int:
    ctx = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(_EXECUTOR, ctx.run, fn)


async def inline(fn: Callable[[], int]) -> int:
    return fn()


VARIANTS: dict[str, Callable[[Callable[[], int]], Awaitable[int]]] = {
    "thread per call (before)": thread_per_call,
    "asyncio.to_thread": asyncio.to_thread,
    "shared ThreadPoolExecutor": shared_executor,
    "goagent_py run_in_thread": run_in_thread,
    "inline (no thread)": inline,
}


async def main(runs: int, block: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for variant in VARIANTS.values():  # warm up: threads started, code paths hot
        for _ in range(50):
            await variant(work)
    while min(len(t) for t in times.values()) < runs:
        for name, variant in VARIANTS.items():
            for _ in range(block):
                start = time.perf_counter_ns()
                await variant(work)
                times[name].append((time.perf_counter_ns() - start) / 1000)
    return times


def report(times: dict[str, Any]) -> None:
    print(f"{'variant':<28} {'median µs':>10} {'p90 µs':>8}")
    for name, values in times.items():
        values = sorted(values)
        p90 = values[int(len(values) * 0.9)]
        print(f"{name:<28} {statistics.median(values):>10.1f} {p90:>8.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--block", type=int, default=100)
    args = parser.parse_args()
    report(asyncio.run(main(args.runs, args.block)))
