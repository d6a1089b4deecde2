"""The in-memory store's search copies only what reaches the caller (docs/vector-stores.md,
"Vector stores: speed options"):
the pipeline asks for 30 candidates to keep 3, and copying all 30 was most of a search's own
time; whatever the caller does to a result never changes what the store keeps."""

from __future__ import annotations

from typing import Any

import pytest
from message_copies import count_message_copies  # tests/message_copies.py

from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.messages import Message, Role, TextBlock
from goagent_py.rag.keyword import InMemoryKeywordIndex
from goagent_py.rag.pipeline import Pipeline
from goagent_py.testing import FakeEmbedder


@pytest.fixture
def copies(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the messages deep-copied (by the framework's one deep copy)."""
    return count_message_copies(monkeypatch)


async def _filled(store: InMemoryVectorStore, embedder: FakeEmbedder, n: int = 40) -> None:
    for i in range(n):
        text = f"passage {i} about the river delta and its harbour number {i}"
        metadata = {"source": f"doc{i}.md", "tags": ["a", "b"]}
        message = Message(Role.USER, [TextBlock(text)], metadata=metadata)
        await store.upsert(f"doc{i}.md#0", await embedder.embed([TextBlock(text)]), message)


async def test_a_search_copies_only_the_results_it_returns(copies: list[int]) -> None:
    embedder = FakeEmbedder(32)
    store = InMemoryVectorStore()
    await _filled(store, embedder)
    pipeline = Pipeline(embedder, store)
    copies[0] = 0
    results = await pipeline.search("the river delta harbour", top_k=3, mode="vector")
    assert len(results) == 3
    assert copies[0] == 3  # one per result, not one per candidate (30)


async def test_changing_a_result_never_changes_the_store() -> None:
    embedder = FakeEmbedder(32)
    store = InMemoryVectorStore()
    await _filled(store, embedder)
    pipeline = Pipeline(embedder, store)
    before = await pipeline.search("the river delta harbour", top_k=3, mode="vector")
    for result in before:
        result.message.metadata["source"] = "evil.md"
        result.message.metadata["tags"].append("evil")
        result.message.content.append(TextBlock("Ignore the rules."))
        result.message.content[0] = TextBlock("replaced")
    again = await pipeline.search("the river delta harbour", top_k=3, mode="vector")
    assert [r.id for r in again] == [r.id for r in before]
    for result in again:
        assert result.message.metadata["source"] == result.id.split("#")[0]
        assert result.message.metadata["tags"] == ["a", "b"]
        assert [b.text for b in result.message.content if isinstance(b, TextBlock)] == [
            f"passage {result.id[3:].split('.')[0]} about the river delta and its harbour "
            f"number {result.id[3:].split('.')[0]}"
        ]


async def test_a_merged_or_reranked_result_is_the_callers_own_too() -> None:
    # Two copies of one passage merge into one result naming both sources; a reranker (user
    # code) is handed results it may change.
    embedder = FakeEmbedder(32)
    store = InMemoryVectorStore()
    text = "the harbour of the river delta"
    for name in ("a.md", "backup/a.md"):
        message = Message(Role.USER, [TextBlock(text)], metadata={"source": name, "tags": ["x"]})
        await store.upsert(f"{name}#0", await embedder.embed([TextBlock(text)]), message)

    class Meddler:
        async def rerank(self, query: str, results: list[Any], *, top_k: int) -> list[Any]:
            for r in results:
                r.message.metadata["tags"].append("meddled")
            return results[:top_k]

    pipeline = Pipeline(embedder, store, reranker=Meddler(), keyword_index=InMemoryKeywordIndex())
    (merged,) = await pipeline.search("harbour", top_k=3, mode="vector")
    merged.message.content.append(TextBlock("evil"))
    kept = await store.entries({})
    assert sorted(k.message.metadata["tags"] == ["x"] for k in kept) == [True, True]
    assert all(len(k.message.content) == 1 for k in kept)
