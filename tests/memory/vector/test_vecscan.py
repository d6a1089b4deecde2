"""Fast scans: the in-memory store's session grouping, and sqlite-vec's int8 side table (same
results as the exact search, migration of files without it, writes from other connections)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from goagent_py.errors import ConfigurationError
from goagent_py.memory.vector.base import SearchOptions, UpsertEntry
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.messages import Message, Role, TextBlock

DIMS = 48


def entry(id: str, vector: Any, session: str | None) -> UpsertEntry:
    metadata = {"session": session} if session is not None else {}
    return UpsertEntry(id, vector, Message(Role.USER, [TextBlock(id)], metadata=metadata))


def exact_top(
    state: dict[str, tuple[Any, str | None]], query: Any, k: int, session: str | None
) -> list[str]:
    """The ids of the ``k`` best cosine matches in ``state``, computed here from scratch."""
    scored = []
    for id, (vector, s) in state.items():
        if session is not None and s != session:
            continue
        cos = float(vector @ query) / float(np.linalg.norm(vector) * np.linalg.norm(query))
        scored.append((-cos, id))
    scored.sort()
    return [id for _, id in scored[:k]]


@pytest.mark.parametrize("quantization", [None, "int8"])
async def test_session_search_follows_writes_deletes_and_session_moves(
    quantization: str | None,
) -> None:
    if quantization:
        pytest.importorskip("simsimd")
    rng = np.random.default_rng(11)
    store = InMemoryVectorStore(dimensions=DIMS, quantization=quantization)  # type: ignore[arg-type]
    state: dict[str, tuple[Any, str | None]] = {}
    sessions = ["a", "b", "c", None]

    async def write(ids: list[str]) -> None:
        batch = []
        for id in ids:
            vector = rng.standard_normal(DIMS, dtype=np.float32)
            session = sessions[int(rng.integers(len(sessions)))]
            state[id] = (vector, session)
            batch.append(entry(id, vector, session))
        await store.upsert_batch(batch)

    async def check() -> None:
        for session in ["a", "c", None]:
            for query in rng.standard_normal((3, DIMS), dtype=np.float32):
                flt = None if session is None else {"session": session}
                hits = await store.search(query, SearchOptions(top_k=5, filter=flt))
                assert [h.id for h in hits] == exact_top(state, query, 5, session)
                if session is not None:
                    assert all(state[h.id][1] == session for h in hits)
        assert await store.count({"session": "b"}) == sum(s == "b" for _, s in state.values())

    await write([f"e{i}" for i in range(4000)])
    await check()  # the first session search groups the rows
    # Changes in the grouped prefix (overwrites that move sessions, deletes that fill holes
    # from the end) and new rows in the tail, below and then past the regrouping threshold.
    for round in range(3):
        await write([f"e{int(i)}" for i in rng.choice(4000, 300, replace=False)])
        gone = [f"e{int(i)}" for i in rng.choice(4000, 200, replace=False)]
        await store.delete_batch(gone)
        for id in gone:
            state.pop(id, None)
        await write([f"n{round}_{i}" for i in range(600 * round)])
        await check()


async def test_session_filter_with_more_keys_and_unknown_sessions() -> None:
    store = InMemoryVectorStore(dimensions=2)
    batch = [
        UpsertEntry(
            f"e{i}",
            [1.0, i / 3000],
            Message(
                Role.USER,
                [TextBlock("x")],
                metadata={"session": f"s{i % 3}", "kind": "odd" if i % 2 else "even"},
            ),
        )
        for i in range(3000)
    ]
    await store.upsert_batch(batch)
    await store.search([1.0, 0.0], SearchOptions(filter={"session": "s0"}))  # groups the rows
    hits = await store.search(
        [1.0, 0.0], SearchOptions(top_k=3, filter={"session": "s1", "kind": "odd"})
    )
    assert [h.id for h in hits] == ["e1", "e7", "e13"]
    assert await store.count({"session": "s1", "kind": "odd"}) == 500
    assert await store.search([1.0, 0.0], SearchOptions(filter={"session": "nobody"})) == []


# -- sqlite-vec, quantization="int8" ---------------------------------------------------------


def _sqlite() -> Any:
    pytest.importorskip("sqlite_vec", reason='needs the "vector" extra')
    pytest.importorskip("simsimd", reason='needs the "simd" extra')
    from goagent_py.memory.vector.sqlite_vec import SqliteVecStore

    return SqliteVecStore


def _version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        (version,) = conn.execute("SELECT schema_version FROM goagent_vector_tables").fetchone()
        return int(version)
    finally:
        conn.close()


def _has_side_table(path: Path) -> bool:
    conn = sqlite3.connect(path)
    try:
        names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master")}
        return "memories_vec_q8" in names
    finally:
        conn.close()


def _batch(vectors: Any, start: int = 0) -> list[UpsertEntry]:
    return [
        entry(f"e{start + i}", v, f"s{i % 4}" if i % 5 else None) for i, v in enumerate(vectors)
    ]


async def test_int8_sqlite_search_returns_the_exact_top_results(tmp_path: Path) -> None:
    store_class = _sqlite()
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((3000, DIMS), dtype=np.float32)
    exact = InMemoryVectorStore(dimensions=DIMS)
    await exact.upsert_batch(_batch(vectors))
    async with store_class(tmp_path / "q.db", dimensions=DIMS, quantization="int8") as quick:
        await quick.upsert_batch(_batch(vectors))
        for query in rng.standard_normal((15, DIMS), dtype=np.float32):
            for options in (
                SearchOptions(top_k=10),
                SearchOptions(top_k=3, filter={"session": "s2"}),
                SearchOptions(top_k=2, filter={"session": "s1"}, score_threshold=0.3),
            ):
                want = await exact.search(query, options)
                got = await quick.search(query, options)
                assert [h.id for h in got] == [h.id for h in want]
                assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-5)
    assert _version(tmp_path / "q.db") == 3


async def test_a_file_without_the_side_table_gets_it_on_open(tmp_path: Path) -> None:
    store_class = _sqlite()
    path = tmp_path / "old.db"
    rng = np.random.default_rng(9)
    vectors = rng.standard_normal((500, DIMS), dtype=np.float32)
    async with store_class(path, dimensions=DIMS) as plain:
        await plain.upsert_batch(_batch(vectors))
    assert _version(path) == 2
    assert not _has_side_table(path)

    async with store_class(path, dimensions=DIMS, quantization="int8") as quick:
        assert await quick.count() == 500
        [hit] = await quick.search(vectors[42], SearchOptions(top_k=1))
        assert hit.id == "e42"
        assert hit.score == pytest.approx(1.0, abs=1e-6)
    assert _version(path) == 3
    assert _has_side_table(path)

    # A store opened without quantization keeps the side table up to date.
    async with store_class(path, dimensions=DIMS) as plain:
        await plain.upsert("new", vectors[7] * -1, Message(Role.USER, [TextBlock("new")]))
        await plain.delete("e42")
    async with store_class(path, dimensions=DIMS, quantization="int8") as quick:
        hits = await quick.search(vectors[42], SearchOptions(top_k=3))
        assert "e42" not in [h.id for h in hits]
        [hit] = await quick.search(-vectors[7], SearchOptions(top_k=1))
        assert hit.id == "new"


async def test_writes_from_another_connection_reach_the_int8_search(tmp_path: Path) -> None:
    store_class = _sqlite()
    path = tmp_path / "shared.db"
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((300, DIMS), dtype=np.float32)
    async with (
        store_class(path, dimensions=DIMS, quantization="int8") as quick,
        store_class(path, dimensions=DIMS) as other,
    ):
        await quick.upsert_batch(_batch(vectors))
        assert (await quick.search(vectors[1], SearchOptions(top_k=1)))[0].id == "e1"
        await other.delete("e1")
        await other.upsert(
            "moved", vectors[2], Message(Role.USER, [TextBlock("m")], metadata={"session": "z"})
        )
        hits = await quick.search(vectors[1], SearchOptions(top_k=5))
        assert "e1" not in [h.id for h in hits]
        [hit] = await quick.search(vectors[2], SearchOptions(top_k=1, filter={"session": "z"}))
        assert hit.id == "moved"
        # Its own writes too, with no other connection involved.
        await quick.upsert("own", -vectors[3], Message(Role.USER, [TextBlock("o")]))
        assert (await quick.search(-vectors[3], SearchOptions(top_k=1)))[0].id == "own"


def test_int8_sqlite_needs_the_cosine_metric_and_a_known_name(tmp_path: Path) -> None:
    store_class = _sqlite()
    with pytest.raises(ConfigurationError, match="metric='cosine'"):
        store_class(tmp_path / "a.db", dimensions=4, metric="l2", quantization="int8")
    with pytest.raises(ConfigurationError, match="quantization='int4'"):
        store_class(tmp_path / "a.db", dimensions=4, quantization="int4")


def test_top_indices_match_a_full_sort_with_and_without_the_sample() -> None:
    from goagent_py.memory.vector._int8 import top_indices

    rng = np.random.default_rng(1)
    for n, count in ((100_000, 64), (5_000, 64), (3_000, 100), (65, 64)):
        values = rng.standard_normal(n).astype(np.float32)
        want = set(np.argsort(-values)[:count].tolist())
        assert set(top_indices(values, count).tolist()) == want
    # An adversarial order: the sampled values are the largest, so the sampled threshold
    # passes fewer than count values and the full partition must run.
    values = np.zeros(10_000, dtype=np.float32)
    values[::16] = 1.0 + np.arange(values[::16].size, dtype=np.float32)
    got = top_indices(values, 64)
    assert set(got.tolist()) == set(np.argsort(-values, kind="stable")[:64].tolist())
