"""Forgetting a fact that replaced another (docs/memory.md, "Time-aware recall"): the one it
replaced takes its place in the chain, so forgetting "I live in Porto." after "I live in
Lisbon." does not leave the user with no home at all, and no forgotten word or id is left."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from goagent_py import Agent
from goagent_py.memory.deciders import RuleDecider
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.records import MemoryRecord
from goagent_py.memory.vector.base import VectorStore
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.messages import TextBlock, user_message
from goagent_py.testing import FakeEmbedder, ScriptedProvider

ALL = ("current", "superseded", "deleted")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(days=1)
        return self.now


@pytest.fixture(params=["in_memory", "sqlite_vec"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], VectorStore]:
    if request.param == "in_memory":
        return lambda: InMemoryVectorStore()
    pytest.importorskip("sqlite_vec", reason='needs the "vector" extra')
    from goagent_py.memory.vector.sqlite_vec import SqliteVecStore

    return lambda: SqliteVecStore(tmp_path / "memory.db", table="memories", dimensions=64)


def memory(store: VectorStore) -> LongTermMemory:
    return LongTermMemory(FakeEmbedder(64), store, decider=RuleDecider(), clock=Clock())


async def everything(m: LongTermMemory) -> dict[str, MemoryRecord]:
    return {r.text: r for r in await m.records(session="alice", states=ALL)}


def _no_trace(records: dict[str, MemoryRecord], words: str, ids: set[str]) -> None:
    for record in records.values():
        for change in record.history:
            assert words not in (change.text, change.previous)
            assert change.other_id not in ids
        assert record.superseded_by not in ids


async def test_forgetting_the_fact_that_replaced_another_brings_the_other_back(
    make_store: Callable[[], VectorStore],
) -> None:
    m = memory(make_store())
    await m.store([user_message("I live in Lisbon.")], session="alice")
    moved = user_message("I moved to Porto last month.")
    await m.store([moved], session="alice")
    porto = (await everything(m))["I live in Porto."]
    await m.forget([moved], session="alice")
    left = await everything(m)
    assert list(left) == ["I live in Lisbon."]
    lisbon = left["I live in Lisbon."]
    assert lisbon.state == "current"
    assert lisbon.superseded_by is None
    assert lisbon.invalid_at is None
    assert lisbon.history[-1].op == "restored"
    found = await m.retrieve([TextBlock("Where do I live?")], session="alice", top_k=3)
    assert [s.message.text for s in found] == ["I live in Lisbon."]
    _no_trace(left, "I live in Porto.", {porto.id})


async def test_forgetting_a_middle_fact_links_the_one_before_to_the_one_after(
    make_store: Callable[[], VectorStore],
) -> None:
    # Lisbon -> Porto -> Madrid; forget Porto: Lisbon was replaced by what replaced Porto.
    m = memory(make_store())
    await m.store([user_message("I live in Lisbon.")], session="alice")
    moved = user_message("I moved to Porto.")
    await m.store([moved], session="alice")
    porto = (await everything(m))["I live in Porto."]
    await m.store([user_message("I moved to Madrid.")], session="alice")
    await m.forget([moved], session="alice")
    left = await everything(m)
    assert {t: r.state for t, r in left.items()} == {
        "I live in Lisbon.": "superseded",
        "I live in Madrid.": "current",
    }
    assert left["I live in Lisbon."].superseded_by == left["I live in Madrid."].id
    _no_trace(left, "I live in Porto.", {porto.id})


async def test_forgetting_a_retracted_replacement_does_not_bring_the_old_fact_back(
    make_store: Callable[[], VectorStore],
) -> None:
    # Lisbon -> Porto -> "I don't live in Porto anymore": the user lives in neither.
    m = memory(make_store())
    await m.store([user_message("I live in Lisbon.")], session="alice")
    moved = user_message("I moved to Porto.")
    await m.store([moved], session="alice")
    await m.store([user_message("I don't live in Porto anymore.")], session="alice")
    await m.forget([moved], session="alice")
    left = await everything(m)
    assert {t: r.state for t, r in left.items()} == {"I live in Lisbon.": "superseded"}
    assert left["I live in Lisbon."].superseded_by is None
    assert await m.records(session="alice") == []


async def test_of_two_facts_replaced_by_one_only_the_latest_comes_back(
    make_store: Callable[[], VectorStore],
) -> None:
    # Porto (said twice, one memory) replaced Lisbon, then Madrid: forgetting Porto brings
    # Madrid back (it was current just before), and Lisbon stays replaced, now by Madrid.
    m = memory(make_store())
    await m.store([user_message("I live in Lisbon.")], session="alice")
    await m.store([user_message("I live in Porto.")], session="alice")
    await m.store([user_message("I live in Madrid.")], session="alice")
    again = user_message("I live in Porto.")
    await m.store([again], session="alice")
    assert [r.text for r in await m.records(session="alice")] == ["I live in Porto."]
    await m.forget([again], session="alice")
    left = await everything(m)
    assert {t: r.state for t, r in left.items()} == {
        "I live in Lisbon.": "superseded",
        "I live in Madrid.": "current",
    }
    assert left["I live in Lisbon."].superseded_by == left["I live in Madrid."].id


@pytest.mark.needs_extra("serve")
async def test_the_served_forget_by_id_keeps_the_chain_too(tmp_path: Path) -> None:
    from goagent_py.serve import ThreadContext, create_app

    ltm = memory(InMemoryVectorStore())
    await ltm.store([user_message("I live in Lisbon.")], session="user-local")
    await ltm.store([user_message("I moved to Porto last month.")], session="user-local")
    [porto] = await ltm.records(session="user-local")

    def factory(ctx: ThreadContext) -> Agent[Any, Any]:
        return Agent(
            provider=ScriptedProvider("ok"),
            name=ctx.memory_scope,
            short_term_memory=ctx.short_term_memory,
            long_term_memory=ltm,
        )

    app = create_app(factory, storage_path=str(tmp_path / "serve.db"), long_term_memory=ltm)
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        r = await client.delete(f"/api/memories/{porto.id}")
        assert r.status_code == 200
    await app.aclose()
    left = {r.text: r for r in await ltm.records(session="user-local", states=ALL)}
    assert {t: r.state for t, r in left.items()} == {"I live in Lisbon.": "current"}
    _no_trace(left, "I live in Porto.", {porto.id})
