"""Vector-store search latency and insert throughput (a plain script, not a test).

Run: .venv/bin/python bench/vector_search.py [--quick]

Measures, for 384-dimensional random vectors: insert throughput, and search latency (p50, p95)
for top-5 and top-10, without a filter and with a session filter (10 sessions, so the filter
keeps 10% of the entries), for the in-memory store at 10k and 100k vectors and sqlite-vec at
10k. For the in-memory store it also prints the scan rate (bytes of the matrix per second of
an unfiltered search), to compare with the machine's memory bandwidth.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from goagent_py.memory.vector.base import SearchOptions, UpsertEntry
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.memory.vector.sqlite_vec import SqliteVecStore
from goagent_py.messages import Message, Role, TextBlock

DIMS = 384
SESSIONS = 10


def entries(n: int, rng: np.random.Generator) -> list[UpsertEntry]:
    vectors = rng.standard_normal((n, DIMS), dtype=np.float32)
    return [
        UpsertEntry(
            f"e{i}",
            vectors[i],
            Message(
                Role.USER, [TextBlock(f"memory {i}")], metadata={"session": f"s{i % SESSIONS}"}
            ),
        )
        for i in range(n)
    ]


async def insert(store: Any, batch: list[UpsertEntry], chunk: int = 1000) -> float:
    start = time.perf_counter()
    for i in range(0, len(batch), chunk):
        await store.upsert_batch(batch[i : i + chunk])
    return len(batch) / (time.perf_counter() - start)


async def latencies(store: Any, queries: np.ndarray, options: SearchOptions) -> tuple[float, float]:
    await store.search(queries[0], options)  # warm-up
    times = []
    for q in queries:
        start = time.perf_counter()
        await store.search(q, options)
        times.append(time.perf_counter() - start)
    times.sort()
    return statistics.median(times) * 1e3, times[int(0.95 * (len(times) - 1))] * 1e3


async def bench(
    name: str, store: Any, n: int, queries: np.ndarray, rng: np.random.Generator
) -> None:
    rate = await insert(store, entries(n, rng))
    print(f"{name:<12} n={n:>7,}  insert {rate:>10,.0f} entries/s")
    for top_k in (5, 10):
        for label, flt in (("no filter", None), ("session", {"session": "s3"})):
            p50, p95 = await latencies(store, queries, SearchOptions(top_k=top_k, filter=flt))
            extra = ""
            if flt is None and isinstance(store, InMemoryVectorStore):
                scanned = n * DIMS * 4
                extra = f"  scan {scanned / (p50 / 1e3) / 1e9:5.1f} GB/s ({scanned / 1e6:.0f} MB)"
            print(
                f"{'':<12} top_k={top_k:<3} {label:<9}  p50 {p50:7.2f} ms  p95 {p95:7.2f} ms{extra}"
            )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer queries, skip 100k")
    args = parser.parse_args()
    rng = np.random.default_rng(42)
    queries = rng.standard_normal((20 if args.quick else 100, DIMS), dtype=np.float32)
    sizes = [10_000] if args.quick else [10_000, 100_000]
    for n in sizes:
        await bench("in-memory", InMemoryVectorStore(dimensions=DIMS), n, queries, rng)
    with tempfile.TemporaryDirectory() as tmp:
        async with SqliteVecStore(Path(tmp) / "bench.db", dimensions=DIMS) as store:
            await bench("sqlite-vec", store, 10_000, queries, rng)


if __name__ == "__main__":
    asyncio.run(main())
