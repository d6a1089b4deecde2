"""Cold start: ``import goagent_py`` plus a first scripted answer, in fresh interpreters.

Run: .venv/bin/python bench/cold_start.py [--runs 15] [--importtime]

Each run starts a new interpreter that imports goagent_py, builds an agent on a
``ScriptedProvider`` with one ``@tool`` function, and runs one turn (a tool call, then the
answer). Prints the median and minimum of: the import, the first answer (agent built and run),
their sum, and the interpreter's whole wall time (start-up included); and which heavy optional
packages (numpy, httpx, ...) the import pulled in (none should be), and whether pydantic was
loaded (not for a plain ``@tool`` signature and a scripted answer). With ``--importtime`` it
also lists the modules with the largest self time under ``-X importtime`` (minimum over runs).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import time
t0 = time.perf_counter()
import goagent_py as ga
t1 = time.perf_counter()
from goagent_py.testing import ScriptedProvider, tool_call_response

@ga.tool
def add(a: int, b: int) -> int:
    '''Add two integers.'''
    return a + b

provider = ScriptedProvider(tool_call_response(ga.ToolCall("c1", "add", {"a": 2, "b": 3})), "5")
answer = ga.Agent(provider=provider, tools=[add]).run_sync("2+3?").text
t2 = time.perf_counter()
assert answer == "5", answer
import json, sys
optional = ("numpy", "httpx", "anyio", "opentelemetry", "sqlite_vec", "psycopg")
heavy = [m for m in optional if m in sys.modules]
pydantic = [m for m in ("pydantic", "pydantic_core") if m in sys.modules]
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "answer_ms": (t2 - t1) * 1e3, "heavy": heavy,
                  "pydantic": pydantic}))
"""


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), out.get("PYTHONPATH", "")]))
    return out


def run_once() -> dict[str, float]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env(), check=True
    )
    wall = (time.perf_counter() - start) * 1e3
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    record["wall_ms"] = wall
    return record


def importtime(runs: int, top: int) -> None:
    selfs: dict[str, list[int]] = collections.defaultdict(list)
    cums: dict[str, list[int]] = collections.defaultdict(list)
    for _ in range(runs):
        err = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import goagent_py"],
            capture_output=True,
            text=True,
            env=env(),
            check=True,
        ).stderr
        for line in err.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            own, cum, name = line[len("import time:") :].split("|")
            selfs[name.strip()].append(int(own))
            cums[name.strip()].append(int(cum))
    print(f"\nlargest self times under -X importtime (minimum of {runs} runs):")
    for name in sorted(selfs, key=lambda k: -min(selfs[k]))[:top]:
        own, cum = min(selfs[name]) / 1e3, min(cums[name]) / 1e3
        print(f"  {own:7.1f} ms self {cum:8.1f} ms cum  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--importtime", action="store_true")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    run_once()  # warm the .pyc and page caches
    records = [run_once() for _ in range(args.runs)]
    print(f"{'(ms)':<28} {'median':>8} {'min':>8}")
    for key, label in (
        ("import_ms", "import goagent_py"),
        ("answer_ms", "first scripted answer"),
        ("total_ms", "import + first answer"),
        ("wall_ms", "whole interpreter"),
    ):
        if key == "total_ms":
            values = [r["import_ms"] + r["answer_ms"] for r in records]
        else:
            values = [r[key] for r in records]
        print(f"{label:<28} {statistics.median(values):>8.1f} {min(values):>8.1f}")
    heavy = sorted({m for r in records for m in r["heavy"]})
    print(f"optional packages imported: {', '.join(heavy) if heavy else 'none'}")
    pydantic = sorted({m for r in records for m in r["pydantic"]})
    print(f"pydantic loaded by the first answer: {', '.join(pydantic) if pydantic else 'no'}")
    if args.importtime:
        importtime(args.runs, args.top)


if __name__ == "__main__":
    main()
