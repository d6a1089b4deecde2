"""Interleaved peerbench: every framework's script runs as a worker at once (each in its own venv,
idle while it waits), and small blocks of runs / constructions / imports are handed to them in
turn, the order rotating every pass. A slow spell of a shared VM then falls on all frameworks
alike instead of on whichever one happened to be running. Stdlib only; run by run_all.sh.

usage: python3 interleave.py OUT_DIR NAME=PYTHON [NAME=PYTHON ...]

Writes OUT_DIR/<NAME>.r1.json: one JSON line per framework in the same schema as a standalone
`python <NAME>.py` (or an {"error"} record). Knobs: the PEERBENCH_* variables of _harness.py, plus
PEERBENCH_BLOCK (runs per block, default 25) and PEERBENCH_CONSTRUCT_BLOCK (default 100).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _harness as h  # noqa: E402  (statistics, knobs and the record schema)

BLOCK = int(os.environ.get("PEERBENCH_BLOCK", "25"))
CONSTRUCT_BLOCK = int(os.environ.get("PEERBENCH_CONSTRUCT_BLOCK", "100"))
NETNS = ["unshare", "-n"] if os.environ.get("PEERBENCH_IN_NETNS") == "1" else []
LOGS = Path(os.environ.get("PEERBENCH_LOGS", "/tmp/goagent-peerbench/venvs/logs"))


class WorkerDied(RuntimeError):
    pass


class Worker:
    def __init__(self, name: str, python: str, tag: str = "interleave") -> None:
        self.name = name
        self.python = python
        LOGS.mkdir(parents=True, exist_ok=True)
        self.err_path = LOGS / f"{name}.{tag}.err"
        env = dict(os.environ, PEERBENCH_WORKER="1")
        self.proc = subprocess.Popen(
            [*NETNS, python, str(HERE / f"{name}.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err_path.open("w"),
            text=True,
            env=env,
            cwd="/tmp",
        )
        hello = self._read()
        if "hello" not in hello:
            raise WorkerDied(hello.get("error", "no hello"))
        self.static = hello["hello"]
        self.samples: dict[str, list] = {
            "sync_tool": [],
            "async_tool": [],
            "fn": [],
            "prebuilt": [],
            "import": [],
        }
        self.memory: dict | None = None
        self.error: str | None = None

    def _read(self) -> dict:
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line:
            tail = self.err_path.read_text()[-1500:] if self.err_path.exists() else ""
            raise WorkerDied(f"worker exited (rc={self.proc.poll()}): {tail}")
        return json.loads(line)

    def ask(self, **cmd: object) -> dict:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(cmd) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError as e:
            raise WorkerDied(f"worker gone: {e}") from e
        reply = self._read()
        if "error" in reply:
            raise WorkerDied(reply["error"])
        return reply

    def close(self) -> None:
        try:
            self.ask(cmd="quit")
        except WorkerDied:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def framework_name(script: str) -> str:
    """Best guess of a script's framework name when its worker never said hello."""
    return script if script == "goagent_py" else script.replace("_", "-")


def rotated(items: list, k: int) -> list:
    return items[k % len(items) :] + items[: k % len(items)] if items else []


def main() -> int:
    out_dir = Path(sys.argv[1])
    pairs = [a.split("=", 1) for a in sys.argv[2:]]
    started = time.perf_counter()
    workers: list[Worker] = []
    failed: dict[str, str] = {}
    for name, python in pairs:
        h.log(f"interleave: starting {name}")
        try:
            workers.append(Worker(name, python))
        except (WorkerDied, OSError, json.JSONDecodeError) as e:
            failed[name] = f"could not start: {e}"

    def each(pass_no: int, fn) -> None:
        for w in rotated([w for w in workers if w.error is None], pass_no):
            try:
                fn(w)
            except (WorkerDied, json.JSONDecodeError) as e:
                w.error = str(e)
                h.log(f"interleave: {w.name} failed: {e}")

    h.log("interleave: warm-up")
    each(0, lambda w: w.ask(cmd="warmup"))

    n_blocks = math.ceil(h.RUNS / BLOCK)
    h.log(f"interleave: runs, {n_blocks} passes of {BLOCK}")
    for b in range(n_blocks):

        def do_runs(w: Worker) -> None:
            w.samples["sync_tool"] += w.ask(cmd="runs", variant="sync_tool", n=BLOCK)["ns"]
            if w.static.get("has_async_tool"):
                w.samples["async_tool"] += w.ask(cmd="runs", variant="async_tool", n=BLOCK)["ns"]

        each(b, do_runs)

    n_blocks = math.ceil(h.CONSTRUCT / CONSTRUCT_BLOCK)
    h.log(f"interleave: constructions, {n_blocks} passes of {CONSTRUCT_BLOCK}")
    each(0, lambda w: w.ask(cmd="gc"))
    for b in range(n_blocks):

        def do_construct(w: Worker) -> None:
            w.samples["fn"] += w.ask(cmd="construct", variant="fn", n=CONSTRUCT_BLOCK)["ns"]
            if w.static.get("has_prebuilt"):
                w.samples["prebuilt"] += w.ask(
                    cmd="construct", variant="prebuilt", n=CONSTRUCT_BLOCK
                )["ns"]

        each(b, do_construct)

    h.log("interleave: memory, each in a fresh worker process")

    def do_memory(w: Worker) -> None:
        # a fresh process: the long-lived worker's heap is full of freed agents, which new ones
        # would reuse without growing RSS
        fresh = Worker(w.name, w.python, tag="memory")
        try:
            w.memory = fresh.ask(cmd="memory")
        finally:
            fresh.close()

    each(0, do_memory)

    h.log(f"interleave: imports, {h.IMPORT_REPEATS} passes (+1 warm-up)")
    each(0, lambda w: w.ask(cmd="import", n=1))  # warm .pyc and page caches
    for b in range(h.IMPORT_REPEATS):

        def do_import(w: Worker) -> None:
            w.samples["import"] += w.ask(cmd="import", n=1)["ms"]

        each(b, do_import)

    for w in workers:
        w.close()
    protocol = h._protocol(interleaved=True, block=BLOCK, construct_block=CONSTRUCT_BLOCK)
    out_dir.mkdir(parents=True, exist_ok=True)
    for w in workers:
        if w.error is None:
            rec = h.build_record(
                w.static,
                runs=w.samples["sync_tool"],
                runs_async_tool=w.samples["async_tool"] or None,
                construct=w.samples["fn"],
                construct_prebuilt=w.samples["prebuilt"] or None,
                memory=w.memory or {},
                import_ms=w.samples["import"],
                protocol=protocol,
                started=started,
            )
        else:
            rec = {"framework": w.static["framework"], "error": w.error[-1500:]}
        (out_dir / f"{w.name}.r1.json").write_text(json.dumps(rec) + "\n")
    for name, why in failed.items():
        (out_dir / f"{name}.r1.json").write_text(
            json.dumps({"framework": framework_name(name), "error": why[-1500:]}) + "\n"
        )
    h.log(f"interleave: done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
