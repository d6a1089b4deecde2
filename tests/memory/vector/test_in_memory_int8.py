"""The in-memory store's int8 first pass: same results and exact scores as the float32 scan."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np
import pytest

from goagent_py.errors import ConfigurationError, MissingExtraError
from goagent_py.memory.vector.base import SearchOptions, UpsertEntry
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.messages import Message, Role, TextBlock

pytest.importorskip("simsimd")

DIMS = 96
N = 3000


def entries(vectors: np.ndarray[Any, Any], start: int = 0) -> list[UpsertEntry]:
    return [
        UpsertEntry(
            f"e{start + i}",
            v,
            Message(Role.USER, [TextBlock(f"m{start + i}")], metadata={"session": f"s{i % 4}"}),
        )
        for i, v in enumerate(vectors)
    ]


async def pair(rng: np.random.Generator) -> tuple[InMemoryVectorStore, InMemoryVectorStore]:
    exact = InMemoryVectorStore(dimensions=DIMS)
    quick = InMemoryVectorStore(quantization="int8")  # dimensions from the first upsert
    batch = entries(rng.standard_normal((N, DIMS), dtype=np.float32))
    await exact.upsert_batch(batch)
    await quick.upsert_batch(batch)
    return exact, quick


async def assert_same(
    exact: InMemoryVectorStore,
    quick: InMemoryVectorStore,
    queries: np.ndarray[Any, Any],
    options: SearchOptions,
) -> None:
    for q in queries:
        want = await exact.search(q, options)
        got = await quick.search(q, options)
        assert [h.id for h in got] == [h.id for h in want]
        assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-6)


async def test_int8_search_finds_what_the_exact_scan_finds() -> None:
    rng = np.random.default_rng(7)
    exact, quick = await pair(rng)
    queries = rng.standard_normal((20, DIMS), dtype=np.float32)
    await assert_same(exact, quick, queries, SearchOptions(top_k=10))
    await assert_same(exact, quick, queries, SearchOptions(top_k=3, filter={"session": "s1"}))


async def test_int8_rows_follow_overwrites_and_deletes() -> None:
    rng = np.random.default_rng(8)
    exact, quick = await pair(rng)
    # Overwrite some entries, delete others (their holes are filled by moving the last row).
    replaced = entries(rng.standard_normal((200, DIMS), dtype=np.float32), start=1000)
    gone = [f"e{i}" for i in range(0, 1000, 7)]
    for store in (exact, quick):
        await store.upsert_batch(replaced)
        await store.delete_batch(gone)
    queries = [e.vector for e in replaced[:10]]  # each should find itself first
    await assert_same(exact, quick, np.array(queries), SearchOptions(top_k=5))
    for q, e in zip(queries, replaced[:10], strict=True):
        assert (await quick.search(q, SearchOptions(top_k=1)))[0].id == e.id


async def test_small_stores_and_large_k_skip_the_int8_pass() -> None:
    rng = np.random.default_rng(9)
    exact, quick = await pair(rng)
    q = rng.standard_normal(DIMS, dtype=np.float32)
    await assert_same(exact, quick, q[None, :], SearchOptions(top_k=N))


def test_int8_needs_the_cosine_metric_and_a_known_name() -> None:
    with pytest.raises(ConfigurationError, match="metric='cosine'"):
        InMemoryVectorStore(metric="l2", quantization="int8")
    with pytest.raises(ConfigurationError, match="quantization='int4'"):
        InMemoryVectorStore(quantization="int4")  # type: ignore[arg-type]


def test_int8_without_simsimd_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_simsimd(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "simsimd":
            raise ImportError("No module named 'simsimd'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_simsimd)
    with pytest.raises(MissingExtraError, match=r"goagent-py\[simd\]"):
        InMemoryVectorStore(quantization="int8")
