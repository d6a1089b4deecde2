"""pgvector session search: exact through the half-precision side table, and its upkeep."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import numpy as np
import pytest

from goagent_py.errors import ConfigurationError
from goagent_py.memory.vector.base import SearchOptions, UpsertEntry
from goagent_py.messages import Message, Role, TextBlock, messages_to_json

psycopg = pytest.importorskip("psycopg", reason='needs the "postgres" extra')

from goagent_py.memory.vector import _pg_layout, pgvector  # noqa: E402
from goagent_py.memory.vector.pgvector import PgVectorStore  # noqa: E402

pytestmark = pytest.mark.slow  # a real PostgreSQL

DIMS = 16


def entry(id: str, vector: Any, session: str | None) -> UpsertEntry:
    metadata = {} if session is None else {"session": session}
    return UpsertEntry(id, vector, Message(Role.USER, [TextBlock(id)], metadata=metadata))


def batch(vectors: Any, sessions: int = 10) -> list[UpsertEntry]:
    return [entry(f"e{i}", v, f"s{i % sessions}") for i, v in enumerate(vectors)]


def new_table() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


def sql(dsn: str, statement: str, params: Any = None) -> list[Any]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return list(cur.fetchall()) if cur.description else []


def indexes(dsn: str, *tables: str) -> list[str]:
    rows = sql(dsn, "SELECT indexdef FROM pg_indexes WHERE tablename = ANY(%s)", (list(tables),))
    return [str(r[0]) for r in rows]


def literal(vector: Any) -> str:
    return "[" + ",".join(repr(x) for x in np.asarray(vector, np.float32).tolist()) + "]"


def insert_sql(dsn: str, table: str, id: str, vector: Any, session: str) -> None:
    """A row written the way an older version of the store (or any other writer) would."""
    message = messages_to_json([Message(Role.USER, [TextBlock(id)])]).decode()
    sql(
        dsn,
        f"INSERT INTO {table} (id, session, embedding, message) VALUES (%s, %s, %s::vector, %s)",
        (id, session, literal(vector), message),
    )


def to_old_layout(dsn: str, table: str) -> None:
    """What tables had before: a covering index of float vectors, no side table."""
    sql(dsn, f"DROP TABLE {table}_half")
    sql(dsn, f"DROP TRIGGER goagent_half_sync ON {table}")
    sql(dsn, f"DROP TRIGGER goagent_half_truncate ON {table}")
    sql(dsn, f"DROP INDEX {table}_session_idx")
    sql(dsn, f"CREATE INDEX {table}_session_cover_idx ON {table} (session) INCLUDE (id, embedding)")


def float_scan(dsn: str, table: str, query: Any, session: str, k: int) -> list[tuple[str, float]]:
    """What pgvector's own exact float scan ranks first (ties by id, as the store orders)."""
    q = literal(query)
    rows = sql(
        dsn,
        f"SELECT id, 1 - (embedding <=> %s::vector) AS s FROM {table} WHERE session = %s "
        "ORDER BY embedding <=> %s::vector, id LIMIT %s",
        (q, session, q, k),
    )
    return [(str(i), float(s)) for i, s in rows]


def ids_scores(hits: Any) -> list[tuple[str, float]]:
    return [(h.id, h.score) for h in hits]


async def test_session_search_is_exact_against_numpy(pg_dsn: str) -> None:
    table = new_table()
    rng = np.random.default_rng(4)
    vectors = rng.standard_normal((3000, DIMS), dtype=np.float32)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    async with PgVectorStore(pg_dsn, table=table, dimensions=DIMS) as store:
        await store.upsert_batch(batch(vectors))
        for query in rng.standard_normal((10, DIMS), dtype=np.float32):
            for k in (1, 8, 100):
                hits = await store.search(query, SearchOptions(top_k=k, filter={"session": "s3"}))
                cos = unit @ (query / np.linalg.norm(query))
                rows = [i for i in np.argsort(-cos) if i % 10 == 3][:k]
                assert [h.id for h in hits] == [f"e{i}" for i in rows]
                assert [h.score for h in hits] == pytest.approx([cos[i] for i in rows], abs=1e-5)
                # the float scores themselves, not their half-precision estimates
                assert ids_scores(hits) == float_scan(pg_dsn, table, query, "s3", k)
        hits = await store.search(
            vectors[13], SearchOptions(top_k=3, filter={"session": "s3"}, score_threshold=0.99)
        )
        assert [h.id for h in hits] == ["e13"]
        assert await store.search(vectors[13], SearchOptions(filter={"session": "none"})) == []
    defs = indexes(pg_dsn, table, f"{table}_half")
    assert any(d.endswith("USING btree (session) INCLUDE (id, half)") for d in defs)
    assert not any("INCLUDE (id, embedding)" in d for d in defs)


async def test_near_ties_beyond_half_precision_still_come_out_exact(pg_dsn: str) -> None:
    # 300 vectors a hair apart: in half precision they are all the same vector, so the
    # candidates cannot be trusted and the store must fall back to the float vectors.
    table = new_table()
    rng = np.random.default_rng(11)
    base = rng.standard_normal(DIMS).astype(np.float32)
    close = base + 1e-4 * rng.standard_normal((300, DIMS)).astype(np.float32)
    async with PgVectorStore(pg_dsn, table=table, dimensions=DIMS) as store:
        await store.upsert_batch([entry(f"c{i:03}", v, "s") for i, v in enumerate(close)])
        query = base + 1e-4 * rng.standard_normal(DIMS).astype(np.float32)
        for k in (5, 40):
            hits = await store.search(query, SearchOptions(top_k=k, filter={"session": "s"}))
            assert ids_scores(hits) == float_scan(pg_dsn, table, query, "s", k)


async def test_the_error_bound_holds_for_pgvectors_arithmetic(pg_dsn: str) -> None:
    dims = 384
    table = new_table()
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((400, dims), dtype=np.float32)
    # Scale drops out of the unit vectors, but lopsided ones have components down in the
    # subnormal halves.
    vectors[:100] *= 1e-6
    vectors[100:200, : dims // 2] *= 1e-4
    vectors[200:300] *= 1e4
    async with PgVectorStore(pg_dsn, table=table, dimensions=dims) as store:
        await store.upsert_batch(batch(vectors, sessions=1))
    error = _pg_layout._half_error(dims)
    for query in rng.standard_normal((5, dims), dtype=np.float32):
        # the half query vector exactly as the store sends it
        half = np.frombuffer(pgvector._half_param(query)[4:], ">f2").astype(np.float32)
        rows = sql(
            pg_dsn,
            "SELECT max(abs(1 + (h.half <#> %s::halfvec) - (t.embedding <=> %s::vector))) "
            f"FROM {table} t JOIN {table}_half h USING (id)",
            (literal(half), literal(query)),
        )
        assert 0 < float(rows[0][0]) <= error


async def test_an_older_table_gets_the_side_table_on_open(pg_dsn: str) -> None:
    table = new_table()
    rng = np.random.default_rng(8)
    vectors = rng.standard_normal((200, DIMS), dtype=np.float32)
    async with PgVectorStore(pg_dsn, table=table, dimensions=DIMS) as store:
        await store.upsert_batch(batch(vectors[:100]))
    to_old_layout(pg_dsn, table)
    for i in range(100, 200):  # written meanwhile by an older version
        insert_sql(pg_dsn, table, f"e{i}", vectors[i], f"s{i % 10}")
    async with PgVectorStore(pg_dsn, table=table, dimensions=DIMS) as store:
        assert await store.count() == 200
        for i in (5, 150):
            options = SearchOptions(top_k=6, filter={"session": f"s{i % 10}"})
            hits = await store.search(vectors[i], options)
            assert hits[0].id == f"e{i}"
            assert ids_scores(hits) == float_scan(pg_dsn, table, vectors[i], f"s{i % 10}", 6)
    assert sql(pg_dsn, f"SELECT count(*) FROM {table}_half") == [(200,)]
    defs = indexes(pg_dsn, table, f"{table}_half")
    assert any(d.endswith("INCLUDE (id, half)") for d in defs)
    assert not any("INCLUDE (id, embedding)" in d for d in defs)


async def test_a_failed_migration_leaves_the_table_as_it_was(
    pg_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    table = new_table()
    rng = np.random.default_rng(9)
    vectors = rng.standard_normal((200, DIMS), dtype=np.float32)
    async with PgVectorStore(pg_dsn, table=table, dimensions=DIMS) as store:
        await store.upsert_batch(batch(vectors[:100]))
    to_old_layout(pg_dsn, table)
    # The server refuses the migration's triggers on this table (as a DDL policy might).
    guard = f"g_{table}"
    sql(
        pg_dsn,
        f"CREATE FUNCTION {guard}() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF current_query() LIKE '%goagent_half_sync%{table}%' THEN "
        "RAISE EXCEPTION 'no triggers here'; END IF; END $$",
    )
    sql(pg_dsn, f"CREATE EVENT TRIGGER {guard} ON ddl_command_start EXECUTE FUNCTION {guard}()")
    try:
        with caplog.at_level(logging.WARNING, logger="goagent_py.memory.vector"):
            async with PgVectorStore(pg_dsn, table=table, dimensions=DIMS) as store:
                await store.upsert_batch(batch(vectors)[100:])
                hits = await store.search(
                    vectors[7], SearchOptions(top_k=5, filter={"session": "s7"})
                )
                assert ids_scores(hits) == float_scan(pg_dsn, table, vectors[7], "s7", 5)
                assert await store.count({"session": "s7"}) == 20
        assert "no triggers here" in caplog.text
        assert sql(pg_dsn, "SELECT to_regclass(%s)", (f"{table}_half",)) == [(None,)]
        assert any("INCLUDE (id, embedding)" in d for d in indexes(pg_dsn, table))
    finally:
        sql(pg_dsn, f"DROP EVENT TRIGGER {guard}")
        sql(pg_dsn, f"DROP FUNCTION {guard}()")
    async with PgVectorStore(pg_dsn, table=table, dimensions=DIMS) as store:
        [hit] = await store.search(vectors[150], SearchOptions(top_k=1, filter={"session": "s0"}))
        assert hit.id == "e150"
    assert sql(pg_dsn, f"SELECT count(*) FROM {table}_half") == [(200,)]


async def test_every_write_reaches_the_side_table(pg_dsn: str) -> None:
    table = new_table()
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((50, DIMS), dtype=np.float32)
    s = SearchOptions(top_k=3, filter={"session": "a"})
    async with PgVectorStore(pg_dsn, table=table, dimensions=DIMS) as store:
        await store.upsert_batch([entry(f"e{i}", v, "a") for i, v in enumerate(vectors[:20])])
        # an upsert that moves an entry to another session, and one that changes its vector
        await store.upsert_batch([entry("e1", vectors[1], "b"), entry("e2", vectors[40], "a")])
        assert "e1" not in [h.id for h in await store.search(vectors[1], s)]
        hits = await store.search(vectors[1], SearchOptions(top_k=1, filter={"session": "b"}))
        assert [h.id for h in hits] == ["e1"]
        assert next(h.id for h in await store.search(vectors[40], s)) == "e2"
        await store.delete_batch(["e2", "e3"])
        assert not {"e2", "e3"} & {h.id for h in await store.search(vectors[3], s)}
        # writers that do not know of the side table: plain SQL
        insert_sql(pg_dsn, table, "x", vectors[45], "a")
        assert next(h.id for h in await store.search(vectors[45], s)) == "x"
        sql(pg_dsn, f"UPDATE {table} SET id = 'y' WHERE id = 'x'")
        assert next(h.id for h in await store.search(vectors[45], s)) == "y"
        sql(pg_dsn, f"DELETE FROM {table} WHERE id = 'y'")
        assert "y" not in [h.id for h in await store.search(vectors[45], s)]
        assert sql(pg_dsn, f"SELECT count(*) FROM {table}_half") == [(18,)]
        sql(pg_dsn, f"TRUNCATE {table}")
        assert await store.search(vectors[5], s) == []
        assert sql(pg_dsn, f"SELECT count(*) FROM {table}_half") == [(0,)]


async def test_long_vectors_and_the_l2_metric(pg_dsn: str) -> None:
    rng = np.random.default_rng(6)
    # 1536 dimensions do not fit a covering index (the float one failed every insert);
    # 1024 fit the half one; l2 covers float vectors.
    for dims, metric, layout in (
        (1536, "cosine", "plain"),
        (1024, "cosine", "half"),
        (64, "l2", "float"),
    ):
        table = new_table()
        vectors = rng.standard_normal((60, dims), dtype=np.float32)
        async with PgVectorStore(pg_dsn, table=table, dimensions=dims, metric=metric) as store:
            await store.upsert_batch(batch(vectors, sessions=3))
            assert store._layout == layout
            for i in (4, 31):
                hits = await store.search(
                    vectors[i], SearchOptions(top_k=4, filter={"session": f"s{i % 3}"})
                )
                assert hits[0].id == f"e{i}"
                assert all(int(h.id[1:]) % 3 == i % 3 for h in hits)


async def test_an_id_too_long_for_the_covering_index_is_refused(pg_dsn: str) -> None:
    table = new_table()
    vector = np.ones(1024, dtype=np.float32)
    async with PgVectorStore(pg_dsn, table=table, dimensions=1024) as store:
        with pytest.raises(ConfigurationError, match="id and session"):
            await store.upsert_batch([entry("ok", vector, "s"), entry("x" * 700, vector, "s")])
        assert await store.count() == 0
        await store.upsert_batch([entry("x" * 300, vector, "s")])
        assert await store.count() == 1


async def test_hnsw_for_sessions_when_asked(pg_dsn: str) -> None:
    table = new_table()
    rng = np.random.default_rng(2)
    vectors = rng.standard_normal((500, DIMS), dtype=np.float32)
    async with PgVectorStore(pg_dsn, table=table, dimensions=DIMS, exact_sessions=False) as store:
        await store.upsert_batch(batch(vectors))
        hits = await store.search(vectors[7], SearchOptions(top_k=5, filter={"session": "s7"}))
        assert hits[0].id == "e7"
        assert len(hits) == 5
        assert all(int(h.id[1:]) % 10 == 7 for h in hits)


@pytest.mark.parametrize("autocommit", [True, False])
async def test_a_passed_connection_in_either_mode(pg_dsn: str, autocommit: bool) -> None:
    table = new_table()
    vectors = np.random.default_rng(7).standard_normal((100, DIMS), dtype=np.float32)
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=autocommit) as conn:
        async with PgVectorStore(conn, table=table, dimensions=DIMS) as store:
            await store.upsert_batch(batch(vectors))
            hits = await store.search(vectors[9], SearchOptions(top_k=3, filter={"session": "s9"}))
            assert ids_scores(hits) == float_scan(pg_dsn, table, vectors[9], "s9", 3)
        assert not conn.closed


async def test_stores_opening_an_older_table_at_once_take_turns(
    pg_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    table = new_table()
    vectors = np.random.default_rng(12).standard_normal((300, DIMS), dtype=np.float32)
    async with PgVectorStore(pg_dsn, table=table, dimensions=DIMS) as store:
        await store.upsert_batch(batch(vectors))
    to_old_layout(pg_dsn, table)
    stores = [PgVectorStore(pg_dsn, table=table, dimensions=DIMS) for _ in range(3)]
    options = SearchOptions(top_k=4, filter={"session": "s2"})
    with caplog.at_level(logging.WARNING, logger="goagent_py.memory.vector"):
        results = [
            ids_scores(hits)
            for hits in await asyncio.gather(*(s.search(vectors[2], options) for s in stores))
        ]
    for s in stores:
        await s.aclose()
    assert results == [float_scan(pg_dsn, table, vectors[2], "s2", 4)] * 3
    assert caplog.text == ""
    assert [s._layout for s in stores] == ["half"] * 3
    # An older version opening the table since made its float covering index again.
    sql(
        pg_dsn,
        f"CREATE INDEX {table}_session_cover_idx ON {table} (session) INCLUDE (id, embedding)",
    )
    async with PgVectorStore(pg_dsn, table=table, dimensions=DIMS) as store:
        assert await store.count() == 300
    defs = indexes(pg_dsn, table)
    assert not any("INCLUDE (id, embedding)" in d for d in defs)
    assert any(d.endswith("USING btree (session)") for d in defs)


async def test_someone_elses_table_named_like_the_side_table_is_left_alone(
    pg_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    table = new_table()
    sql(pg_dsn, f"CREATE TABLE {table}_half (id TEXT PRIMARY KEY, session TEXT, half TEXT)")
    sql(pg_dsn, f"INSERT INTO {table}_half VALUES ('mine', 's', 'keep me')")
    vectors = np.random.default_rng(13).standard_normal((100, DIMS), dtype=np.float32)
    with caplog.at_level(logging.WARNING, logger="goagent_py.memory.vector"):
        async with PgVectorStore(pg_dsn, table=table, dimensions=DIMS) as store:
            await store.upsert_batch(batch(vectors))
            hits = await store.search(vectors[4], SearchOptions(top_k=3, filter={"session": "s4"}))
            assert ids_scores(hits) == float_scan(pg_dsn, table, vectors[4], "s4", 3)
            assert store._layout == "float"
    assert "not its side table" in caplog.text
    assert sql(pg_dsn, f"SELECT * FROM {table}_half") == [("mine", "s", "keep me")]
