"""Memory records and consolidation on every backend (real PostgreSQL, Qdrant local, Chroma).

The same story on each store: the record survives the round trip (time, provenance, history),
a changed fact supersedes the old one, recall skips it unless asked about the past, and the
store lists every record (``ListableStore``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from goagent_py.memory.deciders import RuleDecider
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.records import SOURCE_MESSAGE_KEY
from goagent_py.memory.vector.base import ListableStore
from goagent_py.messages import Message, Role, TextBlock
from goagent_py.testing import FakeEmbedder
from tests.memory.vector.conftest import StoreFactory

ALL = ("current", "superseded", "deleted")


def clock() -> object:
    moments = iter(datetime(2026, 5, 1, tzinfo=UTC) + timedelta(days=i) for i in range(100))
    return lambda: next(moments)


def said(text: str, message: str) -> Message:
    return Message(Role.USER, [TextBlock(text)], metadata={SOURCE_MESSAGE_KEY: message})


async def test_records_consolidation_and_recall_on_every_backend(make_store: StoreFactory) -> None:
    store = await make_store(dimensions=32)
    assert isinstance(store, ListableStore)
    m = LongTermMemory(FakeEmbedder(32), store, decider=RuleDecider(), clock=clock())  # type: ignore[arg-type]
    await m.store([said("I live in Lisbon.", "m1"), said("I like tea.", "m1")], session="alice")
    await m.store([said("I moved to Porto last month.", "m2")], session="alice")
    await m.store([said("I also like coffee.", "m3")], session="alice")
    await m.store([said("I live in Oslo.", "b1")], session="bob")

    # top_k covers every memory of alice: what is recalled is decided by the records alone
    found = await m.retrieve([TextBlock("where do I live")], session="alice", top_k=5)
    assert sorted(s.message.text for s in found) == [
        "I also like coffee.",
        "I like tea.",
        "I live in Porto.",
    ]
    past = await m.retrieve([TextBlock("where did I live before")], session="alice", top_k=5)
    assert "I live in Lisbon." in [s.message.text for s in past]

    current = {r.text: r for r in await m.records(session="alice")}
    assert sorted(current) == ["I also like coffee.", "I like tea.", "I live in Porto."]
    porto = current["I live in Porto."]
    assert porto.created_at == datetime(2026, 5, 2, tzinfo=UTC)
    assert [(c.op, c.source_message) for c in porto.history] == [("add", "m1"), ("update", "m2")]
    (lisbon,) = [r for r in await m.records(session="alice", states=ALL) if r.state != "current"]
    assert (lisbon.text, lisbon.superseded_by) == ("I live in Lisbon.", porto.id)
    assert [r.text for r in await m.records(session="bob")] == ["I live in Oslo."]


async def test_one_turn_that_changes_a_fact_twice_and_a_fact_said_again_on_every_backend(
    make_store: StoreFactory,
) -> None:
    # review6b: the turn's later statement wins, and a forgotten fact said again (the same
    # entry id) continues its history, on every backend alike.
    store = await make_store(dimensions=32)
    m = LongTermMemory(FakeEmbedder(32), store, decider=RuleDecider(), clock=clock())  # type: ignore[arg-type]
    plain = [Message(Role.USER, [TextBlock(t)]) for t in ("I live in Lisbon.", "I live in Porto.")]
    await m.store(plain, session="alice")
    assert [r.text for r in await m.records(session="alice")] == ["I live in Porto."]
    for text in ["Forget that I live in Porto.", "I live in Porto."]:
        await m.store([Message(Role.USER, [TextBlock(text)])], session="alice")
    (porto,) = await m.records(session="alice", states=ALL)
    assert porto.state == "current"
    assert [c.op for c in porto.history] == ["add", "delete", "add"]
