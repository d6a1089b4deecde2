"""Two indexers (two processes sharing a store and a manifest) indexing different versions of
one document at once leave the chunks of exactly one version: the replace is checked against
the manifest at commit, and the one that finds it changed starts again from the new version
(docs/rag.md). Every test here interleaves them deterministically, with events."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.messages import ContentBlock
from goagent_py.rag import Document, InMemoryManifest, Pipeline, SqliteManifest
from goagent_py.rag.manifest import pending_key

from .conftest import BatchWordEmbedder


class _HeldOnce(BatchWordEmbedder):
    """Embeds like BatchWordEmbedder; its first call waits until ``go`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding, self.go = asyncio.Event(), asyncio.Event()

    async def embed_batch(self, inputs: Sequence[Sequence[ContentBlock]]) -> NDArray[np.float32]:
        if not self.embedding.is_set():
            self.embedding.set()
            await self.go.wait()
        return await super().embed_batch(inputs)


async def _stored_ids(store: InMemoryVectorStore) -> set[str]:
    """Every id in the store (its rows, as its own delete keeps them)."""
    rows: Any = store._rows
    return set(rows)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_two_versions_indexed_at_once_leave_one_versions_chunks(
    kind: str, tmp_path: Path
) -> None:
    store = InMemoryVectorStore()
    manifest: Any = (
        InMemoryManifest() if kind == "memory" else SqliteManifest(tmp_path / "manifest.db")
    )
    first = Pipeline(BatchWordEmbedder(), store, manifest=manifest)
    await first.index(Document("Apples are red and sweet.", "fruit.txt"))
    held = _HeldOnce()
    slow = Pipeline(held, store, manifest=manifest)
    fast = Pipeline(BatchWordEmbedder(), store, manifest=manifest)
    # The slow one reads the manifest (version 1), then waits in its embedder; meanwhile the
    # fast one indexes version 3 from start to end; then the slow one goes on with version 2.
    slowly = asyncio.ensure_future(
        slow.index(Document("Bananas are yellow and curved.", "fruit.txt"))
    )
    await held.embedding.wait()
    await fast.index(Document("Cherries are small and dark.", "fruit.txt"))
    held.go.set()
    await slowly
    recorded = set(await manifest.get("fruit.txt"))
    # was: version 3's chunk stayed in the store, searchable, recorded nowhere (an orphan)
    assert await _stored_ids(store) == recorded
    assert await manifest.get(pending_key("fruit.txt")) == []
    hits = await slow.search("cherries small dark", top_k=10, mode="vector")
    assert all("Cherries" not in h.text for h in hits)
    assert await slow.remove("fruit.txt") == 1
    assert await _stored_ids(store) == set()
    if kind == "sqlite":
        await manifest.aclose()


class _HeldDelete(InMemoryVectorStore):
    """Its first delete waits until ``go`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.deleting, self.go = asyncio.Event(), asyncio.Event()

    async def delete_batch(self, ids: Sequence[str]) -> None:
        if not self.deleting.is_set():
            self.deleting.set()
            await self.go.wait()
        await super().delete_batch(ids)


async def test_a_remove_while_another_indexer_replaces_the_document_leaves_no_orphan() -> None:
    store, manifest = _HeldDelete(), InMemoryManifest()
    remover = Pipeline(BatchWordEmbedder(), store, manifest=manifest)
    indexer = Pipeline(BatchWordEmbedder(), store, manifest=manifest)
    store.deleting.set()  # the first index deletes nothing: not held
    await indexer.index(Document("Apples are red and sweet.", "fruit.txt"))
    store.deleting.clear()
    removing = asyncio.ensure_future(remover.remove("fruit.txt"))
    await store.deleting.wait()
    await indexer.index(Document("Cherries are small and dark.", "fruit.txt"))
    store.go.set()
    await removing
    recorded = set(await manifest.get("fruit.txt"))
    # was: the remove recorded "no chunks" over the version indexed meanwhile, whose chunk
    # stayed searchable with nothing recording it
    assert await _stored_ids(store) == recorded
