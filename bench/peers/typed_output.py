"""Typed-output overhead, goagent_py against pydantic-ai: the same interleaved worker protocol
as interleave.py, on two scenarios of one model call each on the frameworks' own function test
doubles (goagent_py's ``FunctionProvider``, pydantic-ai's ``FunctionModel``):

- ``plain``: the model answers the text "Paris"; ``result.output`` is that text;
- ``typed``: the agent has ``output_type=City`` (a pydantic model of two fields), both in their
  default tool mode: the model calls the output tool (``final_result``) with the city, the
  framework validates it, and ``result.output`` is the ``City``.

usage: python3 bench/peers/typed_output.py goagent_py=PYTHON pydantic_ai=PYTHON

Each framework runs as a worker in its own interpreter (its venv); blocks of
``PEERBENCH_BLOCK`` runs (default 25) of each scenario are handed to them in turn, the order of
frameworks and of scenarios rotating every pass, after ``PEERBENCH_WARMUP`` warm-up runs of
each; ``PEERBENCH_RUNS`` runs (default 1000) per scenario in all. Prints one JSON line per
framework (median and p90 in µs, plain and typed) and a table.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# interleave first: importing _harness drops bench/peers/ from sys.path (interleave puts it back)
from interleave import BLOCK, Worker, WorkerDied, rotated  # noqa: E402

# isort: split
import _harness as h  # noqa: E402

SCENARIOS = ["plain", "typed"]


def main() -> int:
    pairs = [a.split("=", 1) for a in sys.argv[1:]]
    if not pairs:
        print(__doc__)
        return 2
    workers = [Worker(name, python, tag="typed") for name, python in pairs]
    samples = {w.name: {s: [] for s in SCENARIOS} for w in workers}
    try:
        for w in workers:
            w.ask(cmd="warmup")
        for b in range(math.ceil(h.RUNS / BLOCK)):
            for w in rotated(workers, b):
                for scenario in rotated(SCENARIOS, b):
                    reply = w.ask(cmd="runs", variant=scenario, n=BLOCK)
                    samples[w.name][scenario] += reply["ns"]
    except WorkerDied as exc:
        print(f"a worker failed: {exc}", file=sys.stderr)
        return 1
    finally:
        for w in workers:
            w.close()
    rows = []
    for w in workers:
        rec = {"framework": w.static["framework"], "version": w.static["version"]}
        for scenario in SCENARIOS:
            stats = h.summary_us(samples[w.name][scenario])
            rec[f"{scenario}_us_median"] = stats["median"]
            rec[f"{scenario}_us_p90"] = stats["p90"]
        rec["typed_minus_plain_us"] = round(rec["typed_us_median"] - rec["plain_us_median"], 1)
        rec["runs_per_scenario"] = len(samples[w.name]["plain"])
        print(json.dumps(rec), flush=True)
        rows.append(rec)
    print(
        "\n| framework | plain run, median µs (p90) | typed run, median µs (p90) | typed − plain |"
    )
    print("| --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['framework']} {r['version']} | {r['plain_us_median']} ({r['plain_us_p90']}) | "
            f"{r['typed_us_median']} ({r['typed_us_p90']}) | {r['typed_minus_plain_us']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
