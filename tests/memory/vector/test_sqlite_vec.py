"""sqlite-vec specifics: the session-less partition (and the schema 1 -> 2 upgrade), table names
that SQLite sees as one, and names refused at construction."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from goagent_py._sqlite import connect_vec
from goagent_py.errors import ConfigurationError, InvalidInputError
from goagent_py.memory.vector.base import SearchOptions, UpsertEntry
from goagent_py.memory.vector.sqlite_vec import SqliteVecStore
from goagent_py.messages import Message, Role, TextBlock, messages_to_json

pytestmark = pytest.mark.needs_extra("vector")


def msg(text: str, **metadata: object) -> Message:
    return Message(Role.USER, [TextBlock(text)], metadata=dict(metadata))


def file_size(path: Path) -> int:
    """The database's size with its WAL folded in."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return os.path.getsize(path)


def chunk_count(path: Path, table: str = "memories") -> int:
    conn = connect_vec(str(path))
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}_vec_chunks").fetchone()[0])
    finally:
        conn.close()


# -- session-less entries ----------------------------------------------------------------------


async def test_ten_thousand_sessionless_vectors_stay_small(tmp_path: Path) -> None:
    # Issue 19: in the NULL partition every insert took a fresh 128-slot chunk (1,000
    # 384-dimensional vectors: 199 MB). 10k vectors are 15 MB of float32.
    path = tmp_path / "rag.db"
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((10_000, 384), dtype=np.float32)
    async with SqliteVecStore(path, dimensions=384) as store:
        for start in range(0, 10_000, 1_000):
            await store.upsert_batch(
                [
                    UpsertEntry(f"c{i}", vectors[i], msg(f"chunk {i}"))
                    for i in range(start, start + 1_000)
                ]
            )
        hits = await store.search(vectors[1234], SearchOptions(top_k=3))
        assert hits[0].id == "c1234"
        assert await store.count() == 10_000
    assert file_size(path) < 30_000_000
    assert chunk_count(path) == 10_000 // 128 + 1


async def test_sessionless_entries_are_not_the_empty_session(tmp_path: Path) -> None:
    async with SqliteVecStore(tmp_path / "v.db", dimensions=3) as store:
        await store.upsert("none", [1.0, 0.0, 0.0], msg("no session"))
        await store.upsert("empty", [1.0, 0.0, 0.0], msg("empty session", session=""))
        await store.upsert("alice", [1.0, 0.0, 0.0], msg("alice", session="alice"))
        scoped = await store.search([1.0, 0.0, 0.0], SearchOptions(filter={"session": ""}))
        assert [h.id for h in scoped] == ["empty"]
        everything = await store.search([1.0, 0.0, 0.0], SearchOptions(top_k=5))
        assert [h.id for h in everything] == ["alice", "empty", "none"]  # ties by id
        # Moving an entry into and out of a session moves it between partitions.
        await store.upsert("none", [1.0, 0.0, 0.0], msg("now alice's", session="alice"))
        await store.upsert("alice", [1.0, 0.0, 0.0], msg("now session-less"))
        scoped = await store.search([1.0, 0.0, 0.0], SearchOptions(filter={"session": "alice"}))
        assert [h.id for h in scoped] == ["none"]
        assert await store.count({"session": "alice"}) == 1


def write_v1_file(
    path: Path, *, sessionless: int, dims: int = 8, table: str = "memories"
) -> np.ndarray:
    """A table as schema 1 wrote it: session-less rows in the NULL partition."""
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((sessionless + 2, dims), dtype=np.float32)
    conn = connect_vec(str(path))
    try:
        conn.execute("BEGIN")
        conn.execute(
            "CREATE TABLE goagent_vector_tables (name TEXT PRIMARY KEY, schema_version INTEGER "
            "NOT NULL, dimensions INTEGER NOT NULL, metric TEXT NOT NULL)"
        )
        conn.execute(
            f"CREATE TABLE {table} (pk INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, "
            "session TEXT, text TEXT NOT NULL DEFAULT '', message TEXT NOT NULL, "
            "metadata TEXT NOT NULL DEFAULT '{}', "
            "created_at REAL NOT NULL DEFAULT (unixepoch('subsec')))"
        )
        conn.execute(
            f"CREATE VIRTUAL TABLE {table}_vec USING vec0(session text partition key, "
            f"embedding float[{dims}] distance_metric=cosine, chunk_size=128)"
        )
        conn.execute("INSERT INTO goagent_vector_tables VALUES (?, 1, ?, 'cosine')", (table, dims))
        for i, vector in enumerate(vectors):
            session = "alice" if i >= sessionless else None
            message = msg(f"entry {i}", **({"session": session} if session else {}))
            conn.execute(
                f"INSERT INTO {table} (pk, id, session, text, message, metadata) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    i + 1,
                    f"e{i}",
                    session,
                    message.text,
                    messages_to_json([message]).decode(),
                    '{"session": "alice"}' if session else "{}",
                ),
            )
            conn.execute(
                f"INSERT INTO {table}_vec (rowid, session, embedding) VALUES (?, ?, ?)",
                (i + 1, session, vector.tobytes()),
            )
        conn.execute("COMMIT")
    finally:
        conn.close()
    return vectors


async def test_a_schema_1_file_is_upgraded_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    vectors = write_v1_file(path, sessionless=300)
    assert chunk_count(path) == 301  # one per NULL insert, one for alice
    before = file_size(path)
    async with SqliteVecStore(path, dimensions=8) as store:
        assert await store.count() == 302
        [hit] = await store.search(vectors[42], SearchOptions(top_k=1))
        assert hit.id == "e42"
        scoped = await store.search(vectors[42], SearchOptions(filter={"session": "alice"}))
        assert sorted(h.id for h in scoped) == ["e300", "e301"]
    assert chunk_count(path) == 4  # 300 session-less in 3 chunks, alice in 1
    assert file_size(path) < before / 4
    with sqlite3.connect(path) as conn:
        (version,) = conn.execute("SELECT schema_version FROM goagent_vector_tables").fetchone()
    conn.close()
    assert version == 2  # 3 only when the int8 side table is added (quantization="int8")


async def test_a_failed_upgrade_leaves_the_schema_1_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "old.db"
    write_v1_file(path, sessionless=5)

    def broken(self: SqliteVecStore, conn: object, name: str) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(SqliteVecStore, "_create_vec", broken)
    async with SqliteVecStore(path, dimensions=8) as store:
        with pytest.raises(Exception, match="disk on fire"):
            await store.count()
    monkeypatch.undo()
    with sqlite3.connect(path) as conn:
        (version,) = conn.execute("SELECT schema_version FROM goagent_vector_tables").fetchone()
    conn.close()
    assert version == 1
    assert chunk_count(path) == 6
    async with SqliteVecStore(path, dimensions=8) as store:  # and a later open upgrades it
        assert await store.count() == 7
    assert chunk_count(path) == 2


# -- names -------------------------------------------------------------------------------------


async def test_table_names_differing_in_case_are_one_table(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    async with SqliteVecStore(path, table="memories", dimensions=3) as lower:
        await lower.upsert("a", [1.0, 0.0, 0.0], msg("first"))
    # Same dimensions and metric: the same table, shared (not a second registry entry).
    async with SqliteVecStore(path, table="Memories", dimensions=3) as upper:
        assert await upper.count() == 1
        await upper.upsert("b", [0.0, 1.0, 0.0], msg("second"))
    async with SqliteVecStore(path, table="MEMORIES", dimensions=3) as again:
        assert await again.count() == 2
    with sqlite3.connect(path) as conn:
        names = conn.execute("SELECT name FROM goagent_vector_tables").fetchall()
    conn.close()
    assert names == [("memories",)]
    with pytest.raises(ConfigurationError, match=r"ignore case.*'memories'.*metric='cosine'"):
        SqliteVecStore(path, table="Memories", dimensions=3, metric="l2")
    with pytest.raises(ConfigurationError, match=r"ignore case.*holds 3-dimensional"):
        SqliteVecStore(path, table="MEMORIES", dimensions=4)


async def test_case_clash_is_refused_on_first_use_too(tmp_path: Path) -> None:
    # The file did not exist at construction: the same check runs when the table is opened.
    path = tmp_path / "v.db"
    late = SqliteVecStore(path, table="Notes", dimensions=3, metric="l2")
    async with SqliteVecStore(path, table="notes", dimensions=3) as first:
        await first.upsert("a", [1.0, 0.0, 0.0], msg("a"))
    async with late:
        with pytest.raises(ConfigurationError, match="ignore case"):
            await late.count()


@pytest.mark.parametrize(
    "name",
    [
        "sqlite_stat1",
        "SQLITE_x",
        "goagent_vector_tables",
        "GoAgent_Vector_Tables",
        "x_vec",
        "notes_vec_chunks",
        "a_VEC_b",
    ],
)
def test_names_that_would_fail_on_first_write_fail_at_construction(
    name: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError, match="invalid table name"):
        SqliteVecStore(tmp_path / "v.db", table=name, dimensions=3)


@pytest.mark.parametrize("taken", ["x_vec", "X_Vec", "x", "x_vec_chunks"])
async def test_names_taken_by_foreign_tables_fail_at_construction(
    taken: str, tmp_path: Path
) -> None:
    path = tmp_path / "v.db"
    with sqlite3.connect(path) as conn:
        conn.execute(f"CREATE TABLE {taken} (something TEXT)")
    conn.close()
    with pytest.raises(ConfigurationError, match=rf"already has '{taken.lower()}'"):
        SqliteVecStore(path, table="x", dimensions=3)
    async with SqliteVecStore(path, table="y", dimensions=3) as other:  # the file is usable
        await other.upsert("a", [1.0, 0.0, 0.0], msg("a"))


async def test_a_table_made_before_the_vec_rule_stays_usable(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    write_v1_file(path, sessionless=3, table="notes_vec")
    async with SqliteVecStore(path, table="notes_vec", dimensions=8) as store:
        assert await store.count() == 5
    assert chunk_count(path, "notes_vec") == 2
    with pytest.raises(ConfigurationError, match="invalid table name"):
        SqliteVecStore(path, table="other_vec", dimensions=8)  # a new one is still refused


def test_names_that_only_look_alike_are_accepted(tmp_path: Path) -> None:
    for name in ("vec", "my_vectors", "sqlitex", "vec_x", "goagent_vector_tables2"):
        SqliteVecStore(tmp_path / "v.db", table=name, dimensions=3)


# -- filters -----------------------------------------------------------------------------------


async def test_a_filter_integer_beyond_64_bits_is_a_bad_filter(tmp_path: Path) -> None:
    async with SqliteVecStore(tmp_path / "v.db", dimensions=3) as store:
        await store.upsert("a", [1.0, 0.0, 0.0], msg("a", n=2**63 - 1))
        for value in (2**64, -(2**63) - 1, 2**63):
            with pytest.raises(InvalidInputError, match=r"bad filter.*beyond 64 bits"):
                await store.search([1.0, 0.0, 0.0], SearchOptions(filter={"n": value}))
            with pytest.raises(InvalidInputError, match="bad filter"):
                await store.count({"n": value})
        assert await store.count({"n": 2**63 - 1}) == 1
