"""Concurrent turns of one user never lose an update (issue 31), across processes.

Two real processes consolidate into the same sqlite-vec file (and the same pgvector table):
both read "I live in Lisbon." as current and decide to replace it, then a barrier lets them
write. Without a compare-and-set, both replacements end up current and the first writer's
supersede is lost under the second's. With it (``GuardedStore.upsert_batch_if``), the second
writer finds the scope changed, reads again, and replaces the first writer's fact instead: one
current home, and a history that holds all three.

The barrier is two pipes: each child says READY once it has decided (inside its decider's
first call) and waits for GO on its stdin; the test sends GO when both are ready.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from goagent_py.memory.deciders import RuleDecider
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.records import MemoryRecord
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.memory.vector.sqlite_vec import SqliteVecStore
from goagent_py.messages import Message, Role, TextBlock, user_message
from goagent_py.testing import FakeEmbedder

ROOT = Path(__file__).resolve().parents[2]
DIMS = 64
ALL = ("current", "superseded", "deleted")

_WRITER = textwrap.dedent(
    """
    import asyncio, json, sys

    from goagent_py.memory.deciders import RuleDecider
    from goagent_py.memory.long_term import LongTermMemory
    from goagent_py.messages import user_message
    from goagent_py.testing import FakeEmbedder

    kind, where, table, text = sys.argv[1:5]
    DIMS = int(sys.argv[5])


    class AtTheBarrier(RuleDecider):
        # Decides, then waits for the other process to have decided too (first call only).
        waited = False

        async def decide(self, facts, candidates):
            decisions = await super().decide(facts, candidates)
            if not self.waited:
                self.waited = True
                print("READY", flush=True)
                assert sys.stdin.readline().strip() == "GO"
            return decisions


    async def main() -> None:
        if kind == "sqlite":
            from goagent_py.memory.vector.sqlite_vec import SqliteVecStore

            store = SqliteVecStore(where, table=table, dimensions=DIMS)
        else:
            from goagent_py.memory.vector.pgvector import PgVectorStore

            store = PgVectorStore(where, table=table, dimensions=DIMS)
        reports = []
        memory = LongTermMemory(
            FakeEmbedder(DIMS), store, decider=AtTheBarrier(), on_consolidation=reports.append
        )
        await memory.store([user_message(text)], session="alice")
        await store.aclose()
        last = reports[-1]
        print(json.dumps({"attempts": getattr(last, "attempts", 1), "warning": last.warning}))


    asyncio.run(main())
    """
)


def _said(text: str, session: str) -> Message:
    return Message(Role.USER, [TextBlock(text)], metadata={"session": session})


def _writers(kind: str, where: str, table: str, texts: list[str]) -> list[dict[str, Any]]:
    """Run one writer process per text, release them together, return their reports."""
    import json
    import os

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, kind, where, table, text, str(DIMS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for text in texts
    ]
    try:
        for proc in procs:  # both have read the scope and decided
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "READY"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("GO\n")
            proc.stdin.flush()
        outs = [proc.communicate(timeout=120)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [p.returncode for p in procs] == [0, 0]
    return [json.loads(out.strip().splitlines()[-1]) for out in outs]


async def _seed(store: Any) -> None:
    memory = LongTermMemory(FakeEmbedder(DIMS), store, decider=RuleDecider())
    await memory.store([user_message("I live in Lisbon.")], session="alice")


async def _records(store: Any) -> list[MemoryRecord]:
    memory = LongTermMemory(FakeEmbedder(DIMS), store, decider=RuleDecider())
    return await memory.records(session="alice", states=ALL)


def _check_nothing_lost(records: list[MemoryRecord], reports: list[dict[str, Any]]) -> None:
    current = [r for r in records if r.is_current]
    # One current home: the second writer replaced the first writer's fact.
    assert len(current) == 1, [(r.text, r.state) for r in records]
    by_id = {r.id: r for r in records}
    chain = [current[0]]
    while True:
        update = next((c for c in chain[-1].history[::-1] if c.op == "update"), None)
        if update is None:
            break
        chain.append(by_id[update.other_id])
    # Lisbon -> (first writer's city) -> (second writer's city): every value is kept,
    # each older one superseded by the next.
    assert [r.text for r in chain][-1] == "I live in Lisbon."
    assert {r.text for r in chain} == {"I live in Lisbon.", "I live in Porto.", "I live in Madrid."}
    for newer, older in itertools.pairwise(chain):
        assert older.state == "superseded"
        assert older.superseded_by == newer.id
    # The winner wrote at once; the other saw the scope changed and decided again.
    assert sorted(r["attempts"] for r in reports) == [1, 2]
    assert all(r["warning"] == "" for r in reports)
    # The current fact's history tells the whole story, oldest first.
    texts = [(c.op, c.previous, c.text) for c in current[0].history]
    assert texts[0] == ("add", "", "I live in Lisbon.")
    assert [op for op, _, _ in texts] == ["add", "update", "update"]


@pytest.mark.slow
@pytest.mark.needs_extra("vector")
async def test_two_processes_superseding_one_sqlite_memory_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "memory.db")
    async with SqliteVecStore(path, table="memories", dimensions=DIMS) as store:
        await _seed(store)
    reports = _writers(
        "sqlite", path, "memories", ["I moved to Porto last month.", "I moved to Madrid."]
    )
    async with SqliteVecStore(path, table="memories", dimensions=DIMS) as store:
        _check_nothing_lost(await _records(store), reports)


@pytest.fixture
def pg_table(pg_dsn: str) -> str:
    import uuid

    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return f"m_{uuid.uuid4().hex[:12]}"


@pytest.mark.slow
@pytest.mark.needs_extra("postgres")
async def test_two_processes_superseding_one_pgvector_memory_lose_nothing(
    pg_dsn: str, pg_table: str
) -> None:
    from goagent_py.memory.vector.pgvector import PgVectorStore

    async with PgVectorStore(pg_dsn, table=pg_table, dimensions=DIMS) as store:
        await _seed(store)
    texts = ["I moved to Porto last month.", "I moved to Madrid."]
    reports = _writers("pg", pg_dsn, pg_table, texts)
    async with PgVectorStore(pg_dsn, table=pg_table, dimensions=DIMS) as store:
        _check_nothing_lost(await _records(store), reports)


# -- the guard itself, in one process ------------------------------------------------------------


async def test_a_guarded_write_is_refused_once_the_scope_changed() -> None:
    from goagent_py.memory.vector.base import GuardedStore, UpsertEntry

    store = InMemoryVectorStore()
    assert isinstance(store, GuardedStore)
    embedder = FakeEmbedder(DIMS)
    vector = await embedder.embed(list(user_message("x").content))
    scope = {"session": "alice"}
    before = await store.version(scope)
    await store.upsert("alice:1", vector, _said("a", "alice"))
    # Another scope's writes do not change alice's version.
    other = await store.version(scope)
    await store.upsert("bob:1", vector, _said("b", "bob"))
    assert await store.version(scope) == other != before
    stale = UpsertEntry("alice:2", vector, _said("c", "alice"))
    assert not await store.upsert_batch_if([stale], filter=scope, version=before)
    assert [s.id for s in await store.entries(scope)] == ["alice:1"]  # nothing written
    assert await store.upsert_batch_if([stale], filter=scope, version=other)
    assert [s.id for s in await store.entries(scope)] == ["alice:1", "alice:2"]


@pytest.mark.needs_extra("vector")
async def test_sqlite_and_memory_stores_agree_on_the_version(tmp_path: Path) -> None:
    embedder = FakeEmbedder(DIMS)
    vector = await embedder.embed(list(user_message("x").content))
    message = _said("I live in Lisbon.", "alice")
    memory = InMemoryVectorStore()
    async with SqliteVecStore(tmp_path / "v.db", dimensions=DIMS) as sqlite:
        for store in (memory, sqlite):
            await store.upsert("alice:1", vector, message)
        assert await memory.version({"session": "alice"}) == await sqlite.version(
            {"session": "alice"}
        )


async def test_a_second_memory_object_on_one_store_builds_on_the_first() -> None:
    # Two LongTermMemory objects (two locks) on one store, interleaved by hand: the second
    # decides on stale candidates, its write is refused, it decides again.
    store = InMemoryVectorStore()
    await _seed(store)
    reports: list[Any] = []

    class Interleaved(RuleDecider):
        async def decide(self, facts: Any, candidates: Any) -> Any:
            decisions = await super().decide(facts, candidates)
            if not reports:  # the first decision of the second memory: the first one writes
                reports.append("interleaved")
                await first.store([user_message("I moved to Porto.")], session="alice")
            return decisions

    first = LongTermMemory(FakeEmbedder(DIMS), store, decider=RuleDecider())
    second = LongTermMemory(
        FakeEmbedder(DIMS), store, decider=Interleaved(), on_consolidation=reports.append
    )
    await second.store([user_message("I moved to Madrid.")], session="alice")
    records = await _records(store)
    assert [r.text for r in records if r.is_current] == ["I live in Madrid."]
    assert reports[-1].attempts == 2
    madrid = next(r for r in records if r.is_current)
    assert [c.previous for c in madrid.history if c.op == "update"] == [
        "I live in Lisbon.",
        "I live in Porto.",
    ]
