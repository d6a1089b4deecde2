"""Backend-specific behaviour: persistence, atomic batches, identifiers, extension loading."""

from __future__ import annotations

import sqlite3
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from goagent_py import _sqlite
from goagent_py.errors import ConfigurationError, MemoryStoreError, MissingExtraError
from goagent_py.memory.vector.base import SearchOptions, UpsertEntry
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.memory.vector.pgvector import PgVectorStore
from goagent_py.memory.vector.qdrant import QdrantStore, point_id
from goagent_py.memory.vector.sqlite_vec import SqliteVecStore
from goagent_py.messages import Message, Role, TextBlock, user_message

BAD_NAMES = ["x; DROP TABLE y", 'x"y', "1abc", "", "a" * 64, "schema.table", "naïve"]


def msg(text: str, **metadata: Any) -> Message:
    return Message(Role.USER, [TextBlock(text)], metadata=dict(metadata))


# -- identifiers and construction -------------------------------------------------------------


# Each backend, built with a name or with dimensions; only the installed backends run.
NAMED = [
    pytest.param(
        lambda tmp_path, name: SqliteVecStore(tmp_path / "x.db", table=name, dimensions=3),
        "invalid table name",
        id="sqlite",
        marks=pytest.mark.needs_extra("vector"),
    ),
    pytest.param(
        lambda tmp_path, name: PgVectorStore("postgresql://unused", table=name, dimensions=3),
        "invalid table name",
        id="pgvector",
        marks=pytest.mark.needs_extra("postgres"),
    ),
    pytest.param(
        lambda tmp_path, name: QdrantStore(":memory:", collection=name, dimensions=3),
        "invalid collection name",
        id="qdrant",
        marks=pytest.mark.needs_extra("qdrant"),
    ),
]
SIZED = [
    pytest.param(lambda tmp_path, dims: InMemoryVectorStore(dimensions=dims), id="memory"),
    pytest.param(
        lambda tmp_path, dims: SqliteVecStore(tmp_path / "x.db", dimensions=dims),
        id="sqlite",
        marks=pytest.mark.needs_extra("vector"),
    ),
    pytest.param(
        lambda tmp_path, dims: PgVectorStore("postgresql://unused", dimensions=dims),
        id="pgvector",
        marks=pytest.mark.needs_extra("postgres"),
    ),
]


@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize(("build", "message"), NAMED)
def test_table_and_collection_names_are_validated(
    build: Callable[[Path, str], Any], message: str, name: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        build(tmp_path, name)


@pytest.mark.parametrize("dims", [0, -1, True, 2.5])
@pytest.mark.parametrize("build", SIZED)
def test_dimensions_are_validated(
    build: Callable[[Path, Any], Any], dims: Any, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError, match="dimensions must be a positive int"):
        build(tmp_path, dims)


def test_missing_extras_name_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingExtraError, match=r"goagent-py\[postgres\]"):
        PgVectorStore("postgresql://unused", dimensions=3)
    monkeypatch.setitem(sys.modules, "qdrant_client", None)
    with pytest.raises(MissingExtraError, match=r"goagent-py\[qdrant\]"):
        QdrantStore(":memory:", dimensions=3)
    monkeypatch.setitem(sys.modules, "sqlite_vec", None)
    _sqlite.vec_driver.cache_clear()
    try:
        with pytest.raises(MissingExtraError, match=r"goagent-py\[vector\]"):
            SqliteVecStore(tmp_path / "x.db", dimensions=3)
    finally:
        _sqlite.vec_driver.cache_clear()


@pytest.mark.skipif(
    hasattr(sqlite3.Connection, "enable_load_extension"),
    reason="this Python's sqlite3 can load extensions itself",
)
def test_no_extension_capable_sqlite_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("pysqlite3", "pysqlite3.dbapi2", "sqlean"):
        monkeypatch.setitem(sys.modules, name, None)
    _sqlite.vec_driver.cache_clear()
    try:
        with pytest.raises(ConfigurationError, match=r'pip install "goagent-py\[vector\]"'):
            SqliteVecStore(tmp_path / "x.db", dimensions=3)
    finally:
        _sqlite.vec_driver.cache_clear()


# -- sqlite-vec -------------------------------------------------------------------------------


@pytest.mark.needs_extra("vector")
async def test_sqlite_persists_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "mem.db"
    async with SqliteVecStore(path, table="notes", dimensions=3) as store:
        await store.upsert("a", [1.0, 0.0, 0.0], msg("remember me", session="alice"))
    async with SqliteVecStore(path, table="notes", dimensions=3) as store:
        assert await store.count() == 1
        [hit] = await store.search([1.0, 0.0, 0.0], SearchOptions(filter={"session": "alice"}))
        assert hit.message.text == "remember me"
    with sqlite3.connect(path) as conn:  # the schema version is recorded
        row = conn.execute(
            "SELECT schema_version, dimensions, metric FROM goagent_vector_tables "
            "WHERE name = 'notes'"
        ).fetchone()
    assert row == (2, 3, "cosine")  # 3 only with the int8 side tables (quantization="int8")


@pytest.mark.needs_extra("vector")
async def test_sqlite_reopen_with_other_dimensions_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "mem.db"
    async with SqliteVecStore(path, dimensions=3) as store:
        await store.upsert("a", [1.0, 0.0, 0.0], msg("a"))
    with pytest.raises(ConfigurationError, match="holds 3-dimensional vectors"):
        SqliteVecStore(path, dimensions=4)  # refused at construction: the file exists
    async with SqliteVecStore(path, dimensions=3) as store:
        assert await store.count() == 1


@pytest.mark.needs_extra("vector")
async def test_sqlite_l2_table_records_its_metric_and_refuses_another(tmp_path: Path) -> None:
    path = tmp_path / "mem.db"
    async with SqliteVecStore(path, table="notes", dimensions=3, metric="l2") as store:
        await store.upsert("a", [3.0, 4.0, 0.0], msg("a"))
    with sqlite3.connect(path) as conn:
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'notes_vec'").fetchone()[0]
        (metric,) = conn.execute(
            "SELECT metric FROM goagent_vector_tables WHERE name = 'notes'"
        ).fetchone()
    conn.close()
    assert "distance_metric=l2" in sql
    assert "chunk_size=128" in sql
    assert metric == "l2"
    with pytest.raises(ConfigurationError, match=r"made with metric='l2'.*metric='cosine'"):
        SqliteVecStore(path, table="notes", dimensions=3)  # cosine
    async with SqliteVecStore(path, table="notes", dimensions=3, metric="l2") as store:
        [hit] = await store.search([0.0, 0.0, 0.0])
        assert hit.score == pytest.approx(1 / 6)  # distance 5


@pytest.mark.needs_extra("vector")
async def test_sqlite_table_of_a_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "mem.db"
    async with SqliteVecStore(path, dimensions=3) as store:
        await store.upsert("a", [1.0, 0.0, 0.0], msg("a"))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE goagent_vector_tables SET schema_version = 99")
    conn.close()
    with pytest.raises(ConfigurationError, match=r"schema version 99, newer .* upgrade"):
        SqliteVecStore(path, dimensions=3)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (1,)
    conn.close()


@pytest.mark.needs_extra("vector")
async def test_sqlite_failed_batch_leaves_previous_contents_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with SqliteVecStore(tmp_path / "mem.db", dimensions=3) as store:
        await store.upsert_batch(
            [
                UpsertEntry("a", [1.0, 0.0, 0.0], msg("old a")),
                UpsertEntry("b", [0.0, 1.0, 0.0], msg("old b")),
            ]
        )
        real = SqliteVecStore._write_row
        calls = 0

        def failing(self: SqliteVecStore, conn: Any, row: tuple[Any, ...]) -> None:
            nonlocal calls
            calls += 1
            if calls == 3:  # fail mid-batch, after two rows were written in the transaction
                raise sqlite3.OperationalError("disk I/O error (simulated)")
            real(self, conn, row)

        monkeypatch.setattr(SqliteVecStore, "_write_row", failing)
        with pytest.raises(MemoryStoreError, match="simulated"):
            await store.upsert_batch(
                [
                    UpsertEntry("a", [0.0, 0.0, 1.0], msg("new a")),
                    UpsertEntry("c", [0.0, 0.0, 1.0], msg("new c")),
                    UpsertEntry("d", [0.0, 0.0, 1.0], msg("new d")),
                ]
            )
        monkeypatch.setattr(SqliteVecStore, "_write_row", real)
        assert await store.count() == 2
        hits = await store.search([1.0, 0.0, 0.0], SearchOptions(top_k=10))
        assert [(h.id, h.message.text) for h in hits] == [("a", "old a"), ("b", "old b")]
        assert hits[0].score == pytest.approx(1.0, abs=1e-6)
        await store.upsert("e", [1.0, 1.0, 0.0], msg("e"))  # the store still works
        assert await store.count() == 3


@pytest.mark.needs_extra("vector")
async def test_sqlite_extension_loading_is_switched_off_after_load(tmp_path: Path) -> None:
    async with SqliteVecStore(tmp_path / "mem.db", dimensions=3) as store:
        assert await store.count() == 0
        conn = store._file.conn
        with pytest.raises(Exception, match="not authorized"):
            conn.execute("SELECT load_extension('libc.so.6')")
        with pytest.raises(Exception, match="not authorized"):
            conn.load_extension("libc.so.6")


@pytest.mark.needs_extra("vector")
async def test_sqlite_corrupted_row_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "mem.db"
    async with SqliteVecStore(path, table="mem", dimensions=3) as store:
        await store.upsert("a", [1.0, 0.0, 0.0], msg("a"))
        with sqlite3.connect(path) as raw:
            raw.execute("UPDATE mem SET message = '[{\"role\": \"nope\"}]' WHERE id = 'a'")
        with pytest.raises(MemoryStoreError, match=r"entry 'a' in table 'mem'.*corrupted"):
            await store.search([1.0, 0.0, 0.0])


@pytest.mark.needs_extra("vector")
async def test_sqlite_large_top_k_and_closed_store(tmp_path: Path) -> None:
    store = SqliteVecStore(tmp_path / "mem.db", dimensions=3)
    await store.upsert_batch(
        [UpsertEntry(str(i), [1.0, i / 10, 0.0], msg(str(i), session="s")) for i in range(5)]
    )
    # Beyond sqlite-vec's KNN limit of 4096 the store scans exactly instead.
    hits = await store.search([1.0, 0.0, 0.0], SearchOptions(top_k=5000, filter={"session": "s"}))
    assert [h.id for h in hits] == ["0", "1", "2", "3", "4"]
    await store.aclose()
    with pytest.raises(MemoryStoreError, match="closed"):
        await store.count()


@pytest.mark.needs_extra("vector")
async def test_sqlite_tables_are_independent(tmp_path: Path) -> None:
    path = tmp_path / "mem.db"
    async with (
        SqliteVecStore(path, table="one", dimensions=3) as one,
        SqliteVecStore(path, table="two", dimensions=5) as two,
    ):
        await one.upsert("a", [1.0, 0.0, 0.0], msg("a"))
        await two.upsert("a", [1.0, 0.0, 0.0, 0.0, 0.0], msg("b"))
        assert (await one.count(), await two.count()) == (1, 1)


# -- pgvector ---------------------------------------------------------------------------------


@pytest.mark.needs_extra("postgres")
async def test_pgvector_uses_a_passed_connection_and_leaves_it_open(pg_dsn: str) -> None:
    import psycopg

    table = f"t_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        async with PgVectorStore(conn, table=table, dimensions=3) as store:
            await store.upsert("a", [1.0, 0.0, 0.0], msg("a", session="s"))
            assert await store.count() == 1
        assert not conn.closed
        cur = await conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = %s ORDER BY indexname", (table,)
        )
        indexes = " ".join(r[0] for r in await cur.fetchall())
        assert "hnsw (embedding vector_cosine_ops)" in indexes
        assert "gin (metadata jsonb_path_ops)" in indexes
        async with PgVectorStore(conn, table=table, dimensions=4) as other:
            with pytest.raises(ConfigurationError, match="holds 3-dimensional vectors"):
                await other.count()


@pytest.mark.needs_extra("postgres")
async def test_pgvector_l2_uses_an_l2_index_and_refuses_another_metric(pg_dsn: str) -> None:
    import psycopg

    table = f"t_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        async with PgVectorStore(conn, table=table, dimensions=3, metric="l2") as store:
            await store.upsert("a", [3.0, 4.0, 0.0], msg("a"))
            [hit] = await store.search([0.0, 0.0, 0.0], SearchOptions(score_threshold=0.1))
            assert hit.score == pytest.approx(1 / 6)  # distance 5
            assert await store.search([0.0, 0.0, 0.0], SearchOptions(score_threshold=0.2)) == []
        cur = await conn.execute("SELECT indexdef FROM pg_indexes WHERE tablename = %s", (table,))
        indexes = " ".join(r[0] for r in await cur.fetchall())
        assert "hnsw (embedding vector_l2_ops)" in indexes
        async with PgVectorStore(conn, table=table, dimensions=3) as other:
            with pytest.raises(ConfigurationError, match="made with metric='l2'"):
                await other.count()


@pytest.mark.needs_extra("postgres")
async def test_pgvector_corrupted_row_is_a_clear_error(pg_dsn: str) -> None:
    import psycopg
    from psycopg import sql

    table = f"t_{uuid.uuid4().hex[:12]}"
    async with PgVectorStore(pg_dsn, table=table, dimensions=3) as store:
        await store.upsert("a", [1.0, 0.0, 0.0], msg("a"))
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("UPDATE {} SET message = 'garbage'").format(sql.Identifier(table))
            )
        with pytest.raises(MemoryStoreError, match="corrupted"):
            await store.search([1.0, 0.0, 0.0])


@pytest.mark.needs_extra("postgres")
async def test_pgvector_server_errors_become_memory_store_errors(tmp_path: Path) -> None:
    socket_dir = tmp_path / "nothing-listens-here"
    socket_dir.mkdir()
    async with PgVectorStore(
        f"postgresql://postgres@/postgres?host={socket_dir}", dimensions=3
    ) as s:
        with pytest.raises(MemoryStoreError):
            await s.count()


# -- qdrant -----------------------------------------------------------------------------------


def test_qdrant_point_ids_are_deterministic_uuids() -> None:
    assert point_id("alice:abc:0") == point_id("alice:abc:0")
    assert point_id("alice:abc:0") != point_id("bob:abc:0")
    assert uuid.UUID(point_id("x")).version == 5


@pytest.mark.needs_extra("qdrant")
async def test_qdrant_local_mode_persists_across_reopen(tmp_path: Path) -> None:
    path = str(tmp_path / "qdrant")
    async with QdrantStore(path, collection="mem", dimensions=3) as store:
        await store.upsert("a", [1.0, 0.0, 0.0], user_message("kept"))
    async with QdrantStore(path, collection="mem", dimensions=3) as store:
        [hit] = await store.search([1.0, 0.0, 0.0])
        assert (hit.id, hit.message.text) == ("a", "kept")
    async with QdrantStore(path, collection="mem", dimensions=4) as store:
        with pytest.raises(ConfigurationError, match="holds 3-dimensional"):
            await store.count()
    async with QdrantStore(path, collection="mem", dimensions=3, metric="l2") as store:
        with pytest.raises(ConfigurationError, match="metric='l2'"):
            await store.count()


# -- in-memory --------------------------------------------------------------------------------


@pytest.mark.parametrize("filtered", [False, True])
async def test_in_memory_l2_matches_brute_force(filtered: bool) -> None:
    import numpy as np

    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((2000, 64)).astype(np.float32) * 10 + 50  # far from 0
    store = InMemoryVectorStore(metric="l2")
    await store.upsert_batch(
        [UpsertEntry(f"e{i}", v, msg(str(i), session=f"s{i % 4}")) for i, v in enumerate(vectors)]
    )
    for query in rng.standard_normal((20, 64)).astype(np.float32) * 10 + 50:
        distances = np.linalg.norm(vectors.astype(np.float64) - query, axis=1)
        rows = np.arange(2000)
        if filtered:
            rows = rows[rows % 4 == 1]
        expected = rows[np.argsort(distances[rows], kind="stable")[:10]]
        options = SearchOptions(top_k=10, filter={"session": "s1"} if filtered else None)
        hits = await store.search(query, options)
        assert [h.id for h in hits] == [f"e{i}" for i in expected]
        assert [h.score for h in hits] == pytest.approx(1 / (1 + distances[expected]), rel=1e-5)


async def test_in_memory_session_index_follows_deletes_and_replacements() -> None:
    store = InMemoryVectorStore()
    await store.upsert("a", [1.0, 0.0], msg("a", session="s1"))
    await store.upsert("b", [1.0, 0.1], msg("b", session="s2"))
    await store.upsert("c", [1.0, 0.2], msg("c", session="s1"))
    await store.delete("a")  # "c" moves into the freed row
    s1 = SearchOptions(top_k=5, filter={"session": "s1"})
    assert [h.id for h in await store.search([1.0, 0.0], s1)] == ["c"]
    await store.upsert("b", [1.0, 0.1], msg("b", session="s1"))  # b changes session
    assert [h.id for h in await store.search([1.0, 0.0], s1)] == ["b", "c"]
    assert await store.search([1.0, 0.0], SearchOptions(filter={"session": "s2"})) == []
    assert store.dimensions == 2
    for i in range(200):  # growth keeps every row's session
        await store.upsert(f"x{i}", [1.0, i / 100], msg("x", session=f"g{i % 3}"))
    g1 = await store.search([1.0, 0.0], SearchOptions(top_k=500, filter={"session": "g1"}))
    assert len(g1) == 67
    assert all(h.message.metadata["session"] == "g1" for h in g1)


@pytest.mark.parametrize("length", [55, 62, 63])
async def test_pgvector_long_table_names_get_every_index(pg_dsn: str, length: int) -> None:
    # Issue 21 (5): "<table>_hnsw_idx" past 63 characters was truncated by PostgreSQL, so the
    # three index names collided (or named the table itself) and the indexes were skipped.
    import psycopg

    table = f"t_{uuid.uuid4().hex}".ljust(length, "x")
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        async with PgVectorStore(conn, table=table, dimensions=3) as store:
            await store.upsert("a", [1.0, 0.0, 0.0], msg("a", session="s"))
        async with PgVectorStore(conn, table=table, dimensions=3) as store:  # reopen: no dupes
            assert await store.count() == 1
        cur = await conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", (table,)
        )
        rows = await cur.fetchall()
    defs = " ".join(d for _, d in rows)
    assert "USING hnsw (embedding vector_cosine_ops)" in defs
    assert "USING btree (session)" in defs
    assert "USING gin (metadata jsonb_path_ops)" in defs
    assert len(rows) == 4  # with the primary key's
    assert all(len(name) <= 63 for name, _ in rows)


def test_pgvector_refuses_the_registry_table_as_its_table() -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(ConfigurationError, match="registry table"):
        PgVectorStore("postgresql://unused", table="goagent_vector_tables", dimensions=3)
