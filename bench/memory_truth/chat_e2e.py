"""End-to-end answers of the labelled set through ``goagent-py chat --provider local``.

    python bench/memory_truth/chat_e2e.py --limit 40 [--decider rules|none] [--category ...]

Each scenario runs the real chat (``run_chat``: the embedded model, the small-model kit, the
statements write policy, sqlite-vec memory, the decider) on a fresh data folder: every session
of the scenario is one run of the chat with its statements piped in, then one more run asks
the question of each ``ask`` check. In-process (the model and the embedder load once), which
is the only difference from separate processes (``lisbon_porto.sh`` shows those). An answer is
right when it names the current value and no stale one (for a question about the past: names
the former value).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from goagent_py.cli import _common as cli_common  # noqa: E402
from goagent_py.cli import main as cli  # noqa: E402

SET = Path(__file__).with_name("scenarios.jsonl")


async def chat(lines: list[str], home: Path, decider: str, session: str) -> str:
    """One run of the chat with ``lines`` piped in; its stdout."""
    read_fd, write_fd = os.pipe()
    os.write(write_fd, ("\n".join(lines) + "\n").encode())
    os.close(write_fd)
    stdin = os.fdopen(read_fd, "rb", buffering=0)
    old = sys.stdin
    sys.stdin = stdin  # type: ignore[assignment]
    os.environ["GOAGENT_HOME"] = str(home)
    out, err = io.StringIO(), io.StringIO()
    try:
        args = cli.build_parser().parse_args(
            ["chat", "--provider", "local", "--session", session, "--memory-decider", decider]
        )
        await cli.run_chat(args, cli.Console(out, err, interactive=False))
    finally:
        sys.stdin = old
        stdin.close()
    return out.getvalue()


async def main(args: argparse.Namespace) -> None:
    scenarios = [json.loads(line) for line in SET.read_text().splitlines() if line.strip()]
    scenarios = [s for s in scenarios if not args.category or s["category"] == args.category]
    scenarios = [s for s in scenarios if any("ask" in c for c in s["checks"])]
    if args.limit:
        scenarios = scenarios[:: max(1, len(scenarios) // args.limit)][: args.limit]
    # One model and one embedder for every run (the chat closes its provider: not this one).
    made: dict[str, Any] = {}
    real_make = cli_common.make_provider

    def make_provider(vendor: str, model: str, base_url: str | None = None) -> Any:
        if vendor not in made:
            provider = real_make(vendor, model, base_url)

            async def keep_open() -> None:
                return None

            provider.aclose = keep_open
            made[vendor] = provider
        return made[vendor]

    cli_common.make_provider = make_provider
    embedder = cli._make_embedder()
    cli._make_embedder = lambda: embedder  # type: ignore[assignment]
    right = total = 0
    for scenario in scenarios:
        if {u for s in scenario["sessions"] for u, _ in s} != {"alice"}:
            continue  # the chat has one user (its agent's name): two-user scenarios skipped
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            for n, session in enumerate(scenario["sessions"]):
                await chat([text for _, text in session], home, args.decider, f"s{n}")
            for check in scenario["checks"]:
                if "ask" not in check:
                    continue
                out = await chat([check["ask"]], home, args.decider, "ask")
                answer = out.strip().splitlines()[-1] if out.strip() else ""
                if "past" in check:
                    ok = check["past"].casefold() in answer.casefold()
                else:
                    ok = check.get("current", "").casefold() in answer.casefold() and not any(
                        s.casefold() in answer.casefold() for s in check.get("stale", [])
                    )
                total += 1
                right += int(ok)
                mark = "ok " if ok else "BAD"
                print(f"{mark} {scenario['id']}: {check['ask']!r} -> {answer!r}", flush=True)
    print(f"end-to-end right: {right}/{total} = {right / max(total, 1):.3f} ({args.decider})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--decider", choices=("rules", "model", "none"), default="rules")
    parser.add_argument("--category", default="")
    asyncio.run(main(parser.parse_args()))
