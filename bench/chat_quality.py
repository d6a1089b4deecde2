"""Quality of ``goagent-py chat`` on the embedded model, on a labelled set of prompts.

Run it (about 4 minutes per seed on 2 quiet cores):

    python bench/chat_quality.py [--seeds 1,2,3] [--out results.json]

Each seed is one whole run (both processes, a fresh data folder) with the embedded model's
sampling seeded: the same prompt gets the same answer, so a run can be repeated, and the mean
over seeds is not one lucky or unlucky draw (single unseeded runs moved by +-15 points).

The chat agent is built exactly as the command builds it (``cli.build_agent``: the embedded
SmolLM2-135M, the small-model kit, long-term memory with the default write policy and recall
threshold) in a fresh data folder, in two processes:

1. "tell": arithmetic, time and chit-chat prompts, and statements of personal facts;
2. "ask" (a new process on the same data folder): questions about those facts.

Measured:

- right tool or no tool: the turn called exactly the expected tool (calculator, current_time)
  or none when none is expected (chit-chat, facts, recall questions). Target >= 90%.
- correct tool answers: the arithmetic answer holds the right number, the time answer today's
  date (UTC).
- verbatim copies: model answers identical to an earlier answer of the same process (answers
  computed from a tool result are not the model's and are not counted). Target 0.
- echoes: answers that add nothing to the user's message (its words are a run of the
  message's words: "How are you today?" for "Hello! How are you today?"). Target 0.
- facts recalled across processes: the "ask" answer contains the fact's keyword. Target >= 80%.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# (prompt, expected tool or None, a check on the answer or None)
TELL: list[tuple[str, str | None, str | None]] = [
    ("What is 17 * 23 + 4?", "calculator", "395"),
    ("How much is 12 plus 30?", "calculator", "42"),
    ("What is 144 / 12?", "calculator", "12"),
    ("Calculate 250 - 37", "calculator", "213"),
    ("What is 9 * 8?", "calculator", "72"),
    ("What's 1000 divided by 8?", "calculator", "125"),
    ("Compute 2 ** 10", "calculator", "1024"),
    ("What is 15 + 27 + 3?", "calculator", "45"),
    ("How much is 7 times 6?", "calculator", "42"),
    ("What is (3 + 4) * 5?", "calculator", "35"),
    ("What time is it now?", "current_time", "{today}"),
    ("What's today's date?", "current_time", "{today}"),
    ("Which day is it today?", "current_time", "{today}"),
    ("Can you tell me the current time?", "current_time", "{today}"),
    ("Could you give me the time, please?", "current_time", "{today}"),
    ("Do you know what time it is?", "current_time", "{today}"),
    ("Hello!", None, None),
    ("Hello! How are you today?", None, None),
    ("Hey, what can you do?", None, None),
    ("Good morning!", None, None),
    ("How are you?", None, None),
    ("Hi there", None, None),
    ("What's up?", None, None),
    ("Nice to meet you!", None, None),
    ("Good evening!", None, None),
    ("How are you today?", None, None),
    ("Tell me a joke.", None, None),
    ("What is the capital of France?", None, None),
    ("Thanks for your help!", None, None),
    ("Can you recommend a good book?", None, None),
    ("What color is the sky?", None, None),
    ("Good morning, nice to meet you.", None, None),
    ("Hello! My name is Priya and I live in Lisbon.", None, None),
    ("My favourite colour is green.", None, None),
    ("I work as a nurse at the city hospital.", None, None),
    ("My dog is called Biscuit.", None, None),
    ("I was born in Goa, in India.", None, None),
    ("My favourite food is mango curry.", None, None),
    ("My sister is called Meera.", None, None),
    ("I drive a red Toyota.", None, None),
    ("My favourite sport is cricket.", None, None),
    ("I play the violin in an orchestra.", None, None),
    ("My birthday is on the 3rd of March.", None, None),
    ("I am allergic to peanuts.", None, None),
]
ASK: list[tuple[str, str]] = [
    ("Where do I live?", "lisbon"),
    ("What is my name?", "priya"),
    ("What is my favourite colour?", "green"),
    ("What is my dog called?", "biscuit"),
    ("Where was I born?", "goa"),
    ("What is my favourite food?", "mango"),
    ("What is my sister's name?", "meera"),
    ("What car do I drive?", "toyota"),
    ("What is my favourite sport?", "cricket"),
    ("Which instrument do I play?", "violin"),
    ("When is my birthday?", "march"),
    ("What am I allergic to?", "peanut"),
]


def _args(home: Path) -> argparse.Namespace:
    from goagent_py.cli import main as cli

    return cli.build_parser().parse_args(
        ["chat", "--provider", "local", "--db", str(home / "chat.db"), "--session", "bench"]
    )


async def _phase(phase: str, home: Path, seed: int | None) -> list[dict[str, Any]]:
    from goagent_py.cli import main as cli

    args = _args(home)
    console = cli.Console(io.StringIO(), io.StringIO(), interactive=False)
    state = cli.ChatState()
    picked = await cli.pick_provider(args.provider)
    if seed is not None:
        picked.provider.seed = seed  # the same prompt gets the same answer: runs repeat
    closers: list[Any] = []
    agent, _ = await cli.build_agent(args, console, picked, state, closers)
    today = dt.datetime.now(dt.UTC).date().isoformat()
    prompts = (
        [(p, tool, check) for p, tool, check in TELL]
        if phase == "tell"
        else [(p, None, keyword) for p, keyword in ASK]
    )
    rows = []
    try:
        for prompt, tool, check in prompts:
            start = time.perf_counter()
            result = await agent.run(prompt)
            took = time.perf_counter() - start
            called = [c.name for m in result.messages for c in m.tool_calls]
            answer = result.text.strip()
            expected = check.format(today=today) if check else None
            rows.append(
                {
                    "phase": phase,
                    "prompt": prompt,
                    "expected_tool": tool,
                    "called": called,
                    "right_tool": called == ([tool] if tool else []),
                    "answer": answer,
                    "answer_ok": None if expected is None else expected in answer.lower(),
                    "recalled": [s.message.text for s in state.recalled],
                    "seconds": round(took, 2),
                }
            )
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    finally:
        for closer in closers:
            await closer.aclose()
        await picked.provider.aclose()
    return rows


def _run_phase(phase: str, home: Path, seed: int | None) -> list[dict[str, Any]]:
    env = {**os.environ, "GOAGENT_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(key, None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, __file__, "--phase", phase, "--home", str(home)]
        + ([] if seed is None else ["--seed", str(seed)]),
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        check=True,
    )
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def _copies(rows: list[dict[str, Any]]) -> int:
    """Model answers identical to an earlier answer. Answers computed from a tool result are
    not the model's (two clock readings in the same second give the same text): they count as
    earlier answers, never as copies."""
    seen: set[str] = set()
    copies = 0
    for row in rows:
        if row["answer"] in seen and not row["called"]:
            copies += 1
        seen.add(row["answer"])
    return copies


def _echo(answer: str, prompt: str) -> bool:
    from goagent_py.small_models.repeat_guard import copies_message

    return copies_message(answer, prompt)


def report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of a run."""
    tell = [r for r in rows if r["phase"] == "tell"]
    ask = [r for r in rows if r["phase"] == "ask"]
    checked = [r for r in tell if r["answer_ok"] is not None]
    return {
        "prompts": len(rows),
        "right_tool_or_no_tool": sum(r["right_tool"] for r in rows) / len(rows),
        "correct_tool_answers": sum(bool(r["answer_ok"]) for r in checked) / len(checked),
        "verbatim_copies": _copies(tell) + _copies(ask),
        "echoes": sum(_echo(r["answer"], r["prompt"]) for r in rows),
        "facts_recalled_across_processes": sum(bool(r["answer_ok"]) for r in ask) / len(ask),
        "median_turn_seconds": sorted(r["seconds"] for r in rows)[len(rows) // 2],
    }


def mean(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean of each figure over runs (``figures`` of each run)."""
    keys = runs[0]["figures"].keys()
    return {k: round(sum(r["figures"][k] for r in runs) / len(runs), 4) for k in keys}


def _print_run(seed: int | None, rows: list[dict[str, Any]]) -> None:
    print(f"-- seed {seed}")
    for row in rows:
        mark = "ok " if row["right_tool"] else "BAD"
        if row["phase"] == "ask":
            mark = "ok " if row["answer_ok"] else "MISS"
        if _echo(row["answer"], row["prompt"]):
            mark = "ECHO"
        print(f"{mark} {row['prompt'][:45]:45} {row['called']!s:18} {row['answer'][:60]!r}")
    print(json.dumps(report(rows)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phase", choices=("tell", "ask"))
    parser.add_argument("--home")
    parser.add_argument("--seed", type=int, help="(internal) the sampling seed of a phase")
    parser.add_argument(
        "--seeds",
        default="1,2,3",
        help="run the whole set once per sampling seed, each in a fresh data folder "
        "(comma-separated; default 1,2,3; 'none' for one run with llama.cpp's own seed)",
    )
    parser.add_argument("--out", help="write every row and the figures to this JSON file")
    parser.add_argument("--report", help="print the figures of an earlier --out file")
    options = parser.parse_args()
    if options.report:
        saved = json.loads(Path(options.report).read_text())
        runs = saved.get("runs") or [{"seed": None, "rows": saved["rows"]}]
        for run in runs:
            run["figures"] = report(run["rows"])
            print(f"seed {run['seed']}: {json.dumps(run['figures'])}")
        print("mean:", json.dumps(mean(runs), indent=2))
        return
    if options.phase:
        rows = asyncio.run(_phase(options.phase, Path(options.home), options.seed))
        print(json.dumps(rows))
        return
    seeds: list[int | None] = (
        [None] if options.seeds == "none" else [int(x) for x in options.seeds.split(",")]
    )
    runs = []
    for seed in seeds:
        with tempfile.TemporaryDirectory(prefix="goagent-bench-") as folder:
            home = Path(folder)
            rows = _run_phase("tell", home, seed) + _run_phase("ask", home, seed)
        _print_run(seed, rows)
        runs.append({"seed": seed, "figures": report(rows), "rows": rows})
        if options.out:  # after every run: a long benchmark interrupted keeps what it did
            Path(options.out).write_text(json.dumps({"mean": mean(runs), "runs": runs}, indent=2))
    for run in runs:
        print(f"seed {run['seed']}: {json.dumps(run['figures'])}")
    print("mean:", json.dumps(mean(runs), indent=2))


if __name__ == "__main__":
    main()
