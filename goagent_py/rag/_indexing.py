"""The pipeline's indexing internals: embed chunks, write and delete them (private to pipeline.py).

:meth:`_Indexing._index_one` indexes one document incrementally: it embeds and writes only the
chunks (and, with ``part_vectors``, the part vectors) the manifest does not have, deletes the
ids it no longer has, and records the new ids in the manifest last. The ids it writes are
recorded first as pending (``manifest.pending_key``), so that a run that fails after writing
them leaves no chunk nothing knows about.

Here so that pipeline.py keeps the public :class:`~goagent_py.rag.pipeline.Pipeline` and its
methods (and both files stay within the project's 600 lines); the pipeline inherits
:class:`_Indexing`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from goagent_py.errors import MemoryStoreError, NoEmbeddableContentError
from goagent_py.memory.base import BatchEmbedder, Chunker, Embedder
from goagent_py.memory.vector.base import BulkVectorStore, UpsertEntry, VectorStore
from goagent_py.messages import ContentBlock, TextBlock
from goagent_py.rag._chunks import Prepared, is_part_id, part_entries, prepare
from goagent_py.rag.keyword import BulkKeywordIndex, KeywordEntry, KeywordIndex
from goagent_py.rag.manifest import compare_and_set, pending_key, source_key

_ATTEMPTS = 8  # tries of one document while other indexers replace it (see _index_one)

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from goagent_py.rag.documents import Document
    from goagent_py.rag.manifest import ChunkManifest


class _Indexing:
    """The indexing methods of :class:`~goagent_py.rag.pipeline.Pipeline` (its base class):
    they read the pipeline's embedder, store, keyword index, manifest and settings."""

    embedder: Embedder
    store: VectorStore
    chunker: Chunker | None
    keyword_index: KeywordIndex | None
    manifest: ChunkManifest
    _batch_size: int
    _max_concurrency: int
    _part_vectors: bool

    async def _embed(self, chunks: Sequence[Prepared]) -> list[NDArray[np.float32] | None]:
        """One vector per chunk; None where the embedder found nothing to embed."""
        vectors: list[NDArray[np.float32] | None] = [None] * len(chunks)

        def inputs(c: Prepared) -> list[ContentBlock]:
            if c.embed_text:
                return [TextBlock(c.embed_text)]
            return list(c.message.content)

        async def one(i: int) -> None:
            try:
                vectors[i] = await self.embedder.embed(inputs(chunks[i]))
            except NoEmbeddableContentError:
                vectors[i] = None

        if isinstance(self.embedder, BatchEmbedder):
            text_rows = [i for i, c in enumerate(chunks) if c.embed_text]
            for start in range(0, len(text_rows), self._batch_size):
                batch = text_rows[start : start + self._batch_size]
                try:
                    matrix = await self.embedder.embed_batch([inputs(chunks[i]) for i in batch])
                except NoEmbeddableContentError:
                    for i in batch:  # find which ones, one by one
                        await one(i)
                    continue
                for row, i in enumerate(batch):
                    vectors[i] = matrix[row]
            for i, c in enumerate(chunks):
                if not c.embed_text:  # images and other non-text chunks, one by one
                    await one(i)
            return vectors
        semaphore = asyncio.Semaphore(self._max_concurrency)

        async def limited(i: int) -> None:
            async with semaphore:
                await one(i)

        await asyncio.gather(*(limited(i) for i in range(len(chunks))))
        return vectors

    async def _delete(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        if isinstance(self.store, BulkVectorStore):
            await self.store.delete_batch(ids)
        else:
            for id in ids:
                await self.store.delete(id)
        if self.keyword_index is not None:
            await self.keyword_index.delete(ids)

    async def _index_one(self, doc: Document, counts: dict[str, int]) -> None:
        # Another indexer (another process) may replace the document meanwhile: an attempt
        # that finds the manifest changed at commit has deleted nothing and starts again from
        # the version now recorded (its own writes are pending: the next attempt drops what it
        # does not keep). Two versions written at once left the loser's chunks searchable,
        # recorded nowhere.
        for _ in range(_ATTEMPTS - 1):
            if await self._index_attempt(doc, counts):
                return
        if not await self._index_attempt(doc, counts):
            raise MemoryStoreError(
                f"{doc.source}: other indexers replaced it {_ATTEMPTS} times while this one "
                "indexed it; index it again"
            )

    async def _pending(self, key: str, add: Sequence[str] = (), drop: Sequence[str] = ()) -> None:
        """Add ``add`` to and take ``drop`` from the ids pending at ``key`` (compare and set:
        another indexer's additions are never lost)."""
        gone = set(drop)
        while True:
            current = await self.manifest.get(key)
            wanted = [id for id in dict.fromkeys([*current, *add]) if id not in gone]
            if wanted == current or await compare_and_set(self.manifest, key, current, wanted):
                return

    async def _index_attempt(self, doc: Document, counts: dict[str, int]) -> bool:
        prepared = prepare(doc, self.chunker)
        counts["chunks"] = len(prepared)
        key = source_key(doc.source)
        old = await self.manifest.get(key)
        # Ids a failed earlier run may have written without recording them (see below).
        pending_at = pending_key(doc.source)
        pending = await self.manifest.get(pending_at)
        old_set = set(old)
        new = [c for c in prepared if c.id not in old_set]
        counts["unchanged"] = len(prepared) - len(new)
        # Part vectors are items of their own (ids derived from the chunk's): a store indexed
        # without them gets them on the next index(), one indexed with them loses them when
        # part_vectors is turned off (they are then stale).
        parts = [p for c in prepared for p in part_entries(c)] if self._part_vectors else []
        new_parts = [p for p in parts if p.id not in old_set]
        vectors = await self._embed([*new, *new_parts])
        entries = [
            UpsertEntry(c.id, v, c.message)
            for c, v in zip(new, vectors[: len(new)], strict=True)
            if v is not None
        ]
        counts["skipped"] = len(new) - len(entries)
        part_rows = [
            UpsertEntry(p.id, v, p.message)
            for p, v in zip(new_parts, vectors[len(new) :], strict=True)
            if v is not None
        ]
        writing = [e.id for e in [*entries, *part_rows]]
        if writing:
            # Recorded before the write: should this run fail after it, the next index() or
            # remove() of the source knows these ids (the document may change again meanwhile,
            # and then nothing else would).
            await self._pending(pending_at, add=writing)
            if isinstance(self.store, BulkVectorStore):
                await self.store.upsert_batch([*entries, *part_rows])
            else:
                for entry in [*entries, *part_rows]:
                    await self.store.upsert(entry.id, entry.vector, entry.message)
        if entries and self.keyword_index is not None:
            contexts = {c.id: c.context for c in new}
            keyword_entries = [
                KeywordEntry(e.id, e.message.text, e.message.metadata, contexts[e.id])
                for e in entries
                if e.message.text.strip()
            ]
            if isinstance(self.keyword_index, BulkKeywordIndex):
                await self.keyword_index.add_batch(keyword_entries)
            else:  # the protocol's add() takes no context: the text alone is indexed
                for k in keyword_entries:
                    await self.keyword_index.add(k.id, k.text, k.metadata)
        counts["written"] = len(entries)
        stored = {e.id for e in entries} | (old_set & {c.id for c in prepared})
        parts_stored = {e.id for e in part_rows} | (old_set & {p.id for p in parts})
        known = dict.fromkeys([*old, *pending])
        stale = [id for id in known if id not in stored and id not in parts_stored]
        final = [c.id for c in prepared if c.id in stored] + [
            p.id for p in parts if p.id in parts_stored
        ]
        # The stale ids are pending before the manifest moves on (a crash after it leaves them
        # known), and nothing is deleted unless the manifest still held the version this
        # attempt started from: the winner of a race may still use them.
        if stale:
            await self._pending(pending_at, add=stale)
        if not await compare_and_set(self.manifest, key, old, final):
            return False
        await self._delete(stale)
        counts["deleted"] = len([id for id in stale if id in old_set and not is_part_id(id)])
        if pending or writing or stale:
            await self._pending(pending_at, drop=[*pending, *writing, *stale])
        return True
