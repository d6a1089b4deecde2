"""pgvector: a session search is an exact scan of the covering session index."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest

from goagent_py.memory.vector.base import SearchOptions, UpsertEntry
from goagent_py.messages import Message, Role, TextBlock

psycopg = pytest.importorskip("psycopg", reason='needs the "postgres" extra')

from goagent_py.memory.vector.pgvector import PgVectorStore  # noqa: E402

DIMS = 16


def batch(vectors: Any) -> list[UpsertEntry]:
    return [
        UpsertEntry(
            f"e{i}", v, Message(Role.USER, [TextBlock(f"m{i}")], metadata={"session": f"s{i % 10}"})
        )
        for i, v in enumerate(vectors)
    ]


def indexes(dsn: str, table: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = %s ORDER BY indexname", (table,)
        ).fetchall()
    return [str(r[0]) for r in rows]


async def test_session_search_is_exact_and_uses_the_covering_index(pg_dsn: str) -> None:
    table = f"t_{uuid.uuid4().hex[:12]}"
    rng = np.random.default_rng(4)
    vectors = rng.standard_normal((3000, DIMS), dtype=np.float32)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    async with PgVectorStore(pg_dsn, table=table, dimensions=DIMS) as store:
        await store.upsert_batch(batch(vectors))
        for query in rng.standard_normal((10, DIMS), dtype=np.float32):
            hits = await store.search(query, SearchOptions(top_k=8, filter={"session": "s3"}))
            cos = unit @ (query / np.linalg.norm(query))
            rows = [i for i in np.argsort(-cos) if i % 10 == 3][:8]
            assert [h.id for h in hits] == [f"e{i}" for i in rows]
            assert [h.score for h in hits] == pytest.approx([cos[i] for i in rows], abs=1e-5)
        # With another metadata key as well, and with a score threshold.
        hits = await store.search(
            vectors[13], SearchOptions(top_k=3, filter={"session": "s3"}, score_threshold=0.99)
        )
        assert [h.id for h in hits] == ["e13"]
        assert await store.search(vectors[13], SearchOptions(filter={"session": "none"})) == []
    defs = indexes(pg_dsn, table)
    assert any("USING btree (session) INCLUDE (id, embedding)" in d for d in defs)
    assert not any(d.endswith("USING btree (session)") for d in defs)


async def test_an_older_table_gets_the_covering_index_on_open(pg_dsn: str) -> None:
    table = f"t_{uuid.uuid4().hex[:12]}"
    rng = np.random.default_rng(8)
    vectors = rng.standard_normal((200, DIMS), dtype=np.float32)
    async with PgVectorStore(pg_dsn, table=table, dimensions=DIMS) as store:
        await store.upsert_batch(batch(vectors))
    # The layout tables had before: a plain session index, no covering one.
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"DROP INDEX {table}_session_cover_idx")
        conn.execute(f"CREATE INDEX {table}_session_idx ON {table} (session)")
    async with PgVectorStore(pg_dsn, table=table, dimensions=DIMS) as store:
        [hit] = await store.search(vectors[5], SearchOptions(top_k=1, filter={"session": "s5"}))
        assert hit.id == "e5"
    defs = indexes(pg_dsn, table)
    assert any("INCLUDE (id, embedding)" in d for d in defs)
    assert not any(d.endswith("USING btree (session)") for d in defs)


async def test_hnsw_for_sessions_when_asked(pg_dsn: str) -> None:
    table = f"t_{uuid.uuid4().hex[:12]}"
    rng = np.random.default_rng(2)
    vectors = rng.standard_normal((500, DIMS), dtype=np.float32)
    async with PgVectorStore(pg_dsn, table=table, dimensions=DIMS, exact_sessions=False) as store:
        await store.upsert_batch(batch(vectors))
        hits = await store.search(vectors[7], SearchOptions(top_k=5, filter={"session": "s7"}))
        assert hits[0].id == "e7"
        assert len(hits) == 5
        assert all(int(h.id[1:]) % 10 == 7 for h in hits)
