"""sqlite-vec: exact distance ties at the k-th result are settled by the KNN query (asked for
more rows when needed), not by the exact scan, and still broken by id."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from goagent_py.memory.vector.base import SearchOptions, UpsertEntry
from goagent_py.memory.vector.sqlite_vec import SqliteVecStore
from goagent_py.messages import Message, Role, TextBlock

pytestmark = pytest.mark.needs_extra("vector")


def msg(text: str, **metadata: object) -> Message:
    return Message(Role.USER, [TextBlock(text)], metadata=dict(metadata))


async def store_with_copies(path: Path, copies: int, **metadata: object) -> SqliteVecStore:
    """20 random vectors, each stored ``copies`` times (ids ``c<copy>-<n>``, shuffled order)."""
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((20, 16), dtype=np.float32)
    entries = [
        UpsertEntry(f"c{c:02d}-{n:02d}", vectors[n], msg(f"{c}/{n}", **metadata))
        for c in range(copies)
        for n in range(20)
    ]
    order = rng.permutation(len(entries))
    store = SqliteVecStore(path, dimensions=16)
    await store.upsert_batch([entries[i] for i in order])
    return store


def statements(store: SqliteVecStore) -> list[str]:
    seen: list[str] = []
    assert store._file.conn is not None
    store._file.conn.set_trace_callback(seen.append)
    return seen


@pytest.mark.parametrize(("copies", "top_k"), [(6, 5), (6, 1), (40, 3), (40, 45)])
async def test_ties_across_the_kth_result_are_broken_by_id_without_a_scan(
    tmp_path: Path, copies: int, top_k: int
) -> None:
    store = await store_with_copies(tmp_path / "v.db", copies)
    async with store:
        rng = np.random.default_rng(5)
        vectors = rng.standard_normal((20, 16), dtype=np.float32)
        seen = statements(store)
        hits = await store.search(vectors[7], SearchOptions(top_k=top_k))
        # The copies of vector 7 first (score 1), by id; then the next vector's copies.
        want = [f"c{c:02d}-07" for c in range(copies)]
        if top_k > copies:
            second = [h.id for h in hits[copies:]]
            assert len({i.split("-")[1] for i in second}) == 1
            assert second == sorted(second)
        assert [h.id for h in hits[: min(top_k, copies)]] == want[:top_k]
        assert len(hits) == top_k
        assert not [s for s in seen if "CROSS JOIN" in s]  # no exact scan
        assert any("MATCH" in s for s in seen)


async def test_session_partition_ties_are_settled_the_same_way(tmp_path: Path) -> None:
    store = await store_with_copies(tmp_path / "v.db", 12, session="s")
    async with store:
        rng = np.random.default_rng(5)
        vectors = rng.standard_normal((20, 16), dtype=np.float32)
        seen = statements(store)
        hits = await store.search(vectors[3], SearchOptions(top_k=4, filter={"session": "s"}))
        assert [h.id for h in hits] == [f"c{c:02d}-03" for c in range(4)]
        assert not [s for s in seen if "CROSS JOIN" in s]


async def test_a_tie_group_beyond_the_knn_limit_falls_back_to_the_exact_scan(
    tmp_path: Path,
) -> None:
    # 4,100 identical vectors: more than sqlite-vec returns from one KNN query (k <= 4096).
    path = tmp_path / "v.db"
    vector = np.ones(4, dtype=np.float32)
    async with SqliteVecStore(path, dimensions=4) as store:
        await store.upsert_batch(
            [UpsertEntry(f"e{i:05d}", vector, msg(str(i))) for i in range(4_100, 0, -1)]
        )
        seen = statements(store)
        hits = await store.search(vector, SearchOptions(top_k=2))
        assert [h.id for h in hits] == ["e00001", "e00002"]
        assert [s for s in seen if "CROSS JOIN" in s]
