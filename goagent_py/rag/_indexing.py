"""The pipeline's indexing internals: embed chunks, write and delete them (private to pipeline.py).

:meth:`_Indexing._index_one` indexes one document incrementally: it embeds and writes only the
chunks (and, with ``part_vectors``, the part vectors) the manifest does not have, deletes the
ids it no longer has, and records the new ids in the manifest last. The ids it writes are
recorded first as pending (``manifest.pending_key``), so that a run that fails after writing
them leaves no chunk nothing knows about.

The manifest records which embedder made the vectors (:data:`~goagent_py.rag.manifest.
EMBEDDER_KEY`: its ``embedder_identity`` and the sources whose vectors are still another
embedder's). Chunk ids cover content and metadata, not the embedder: without the record, a
re-index with another model of the same size kept every old vector as "unchanged", and searches
compared vectors of two models. :meth:`_Indexing._start_embedder` (at the start of ``index()``)
adopts an index that records none, or, when the identity differs, records the new identity with
every indexed source listed *before* any vector is written; a listed source is re-embedded in
full and taken off the list only after its new vectors are recorded. A crash therefore leaves
at worst listed sources (re-embedded again), never a vector under the wrong identity unlisted;
:meth:`_Indexing._check_embedder` refuses a vector search while the identity differs or a source
is listed. An embedder without an identity (user code) is neither recorded nor checked.

Here so that pipeline.py keeps the public :class:`~goagent_py.rag.pipeline.Pipeline` and its
methods (and both files stay within the project's 600 lines); the pipeline inherits
:class:`_Indexing`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from goagent_py.errors import ConfigurationError, MemoryStoreError, NoEmbeddableContentError
from goagent_py.memory.base import BatchEmbedder, Chunker, Embedder, embedder_identity
from goagent_py.memory.vector.base import (
    BulkVectorStore,
    ListableStore,
    UpsertEntry,
    VectorStore,
)
from goagent_py.messages import ContentBlock, TextBlock
from goagent_py.rag._chunks import Prepared, is_part_id, part_entries, prepare, rebuilt
from goagent_py.rag.keyword import BulkKeywordIndex, KeywordEntry, KeywordIndex
from goagent_py.rag.manifest import (
    EMBEDDER_KEY,
    compare_and_set,
    pending_key,
    source_key,
    source_of_key,
)
from goagent_py.rag.results import DocumentReport

_log = logging.getLogger("goagent_py.rag")

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

    @property
    def embedder_identity(self) -> str:
        """The identity of the embedder (see ``goagent_py.memory.base.embedder_identity``)."""
        return embedder_identity(self.embedder)

    async def _start_embedder(self) -> list[str]:
        """Record this embedder's identity before ``index()`` writes (see the module); the
        sources that held another embedder's vectors when it changed here ([] otherwise)."""
        identity = embedder_identity(self.embedder)
        while True:
            record = await self.manifest.get(EMBEDDER_KEY)
            if record and record[0] == identity:
                return []
            if not record:  # a new index, or one from before identities: adopted as it is
                wanted, changed = [identity], []
            else:  # every indexed source now holds another embedder's vectors
                keys = await self.manifest.sources()
                changed = sorted({source_of_key(k) for k in keys if k != EMBEDDER_KEY})
                wanted = [identity, *changed]
            if await compare_and_set(self.manifest, EMBEDDER_KEY, record, wanted):
                if changed:
                    _log.warning(
                        "RAG index embedded with %s; re-embedding its %d sources with %s",
                        record[0],
                        len(changed),
                        identity,
                    )
                return changed

    async def _listed(self, source: str) -> bool:
        """Whether ``source``'s vectors are listed as another embedder's.

        Raises:
            ConfigurationError: another indexer (another process) has since moved the index to
                another embedder: this one's vectors would be written under its identity.
        """
        identity = embedder_identity(self.embedder)
        record = await self.manifest.get(EMBEDDER_KEY)
        if record and record[0] != identity:
            raise ConfigurationError(
                f"another indexer moved this index to the embedder {record[0]} while this one "
                f"indexed with {identity}: index with one embedder at a time"
            )
        return source in record[1:]

    async def _unlist(self, source: str) -> None:
        """Take ``source`` off the list of sources holding another embedder's vectors."""
        while True:
            record = await self.manifest.get(EMBEDDER_KEY)
            if source not in record[1:]:
                return
            wanted = [record[0], *(s for s in record[1:] if s != source)]
            if await compare_and_set(self.manifest, EMBEDDER_KEY, record, wanted):
                return

    async def _remove_source(self, source: str) -> int:
        """Delete every chunk of ``source`` and forget it (see ``Pipeline.remove``); how many
        chunks it had. It is unlisted last: until its vectors are gone, a listed source keeps
        searches refused."""
        while True:
            ids = await self.manifest.get(source_key(source))
            # And what a failed index() may have written without recording it.
            pending = await self.manifest.get(pending_key(source))
            # Pending first (a crash after the manifest moves on leaves them known); forgotten
            # only if no other indexer replaced the document meanwhile (its chunks are not
            # these): else read again.
            if ids:
                await self._pending(pending_key(source), add=ids)
            if await compare_and_set(self.manifest, source_key(source), ids, []):
                break
        await self._delete(list(dict.fromkeys([*ids, *pending])))
        if ids or pending:
            await self._pending(pending_key(source), drop=[*ids, *pending])
        await self._unlist(source)
        return len([id for id in ids if not is_part_id(id)])

    async def _drop_listed(self, reports: list[DocumentReport]) -> list[str]:
        """Re-embed from the store, or else remove, the sources still holding another
        embedder's vectors (an ``index()`` of this embedder did not reach them); the sources
        removed, sorted. ``reports`` gets one report per source re-embedded.

        A source is re-embedded from the store when the store can list it and every chunk's
        embedded text can be rebuilt exactly (:meth:`_reembed_stored`); otherwise it is
        removed as ``remove()`` does (still listed until its vectors are deleted, so a crash
        leaves nothing that claims to be this embedder's) and reported for indexing again.
        Nothing is done when another indexer has moved the index to another embedder
        meanwhile (its sources are not these).
        """
        record = await self.manifest.get(EMBEDDER_KEY)
        if not record or record[0] != embedder_identity(self.embedder) or not record[1:]:
            return []
        dropped: list[str] = []
        for source in sorted(record[1:]):
            chunks = await self._reembed_stored(source)
            if chunks is not None:
                reports.append(
                    DocumentReport(source=source, chunks=chunks, written=chunks, reembedded=True)
                )
                continue
            await self._remove_source(source)
            dropped.append(source)
        if dropped:
            _log.warning(
                "RAG index: %d sources held another embedder's vectors, were not indexed with "
                "%s in this run and could not be re-embedded from the store; removed (index "
                "them again): %s",
                len(dropped),
                record[0],
                ", ".join(dropped[:5]) + (", ..." if len(dropped) > 5 else ""),
            )
        return dropped

    async def _reembed_stored(self, source: str) -> int | None:
        """Re-embed ``source``'s chunks from what the store keeps, when that is exactly what
        was embedded (:func:`~goagent_py.rag._chunks.rebuilt`: the ids' digests say so); the
        number of chunks, or None (a store that cannot list, a chunk that cannot be rebuilt
        or embedded: the caller removes the source).

        Its ids are pending before any vector is written (another indexer may replace the
        document meanwhile, and nothing else would know these ids), and it is unlisted only
        after its new vectors are written and its record is still what was re-embedded.
        """
        if not isinstance(self.store, ListableStore):
            return None
        ids = await self.manifest.get(source_key(source))
        if not ids:
            return None
        stored = {s.id: s.message for s in await self.store.entries({"source": source})}
        chunks: dict[str, Prepared] = {}
        for id in ids:
            message = stored.get(id)
            if is_part_id(id):
                continue
            chunk = rebuilt(id, message) if message is not None else None
            if chunk is None:
                return None
            chunks[id] = chunk
        parts = {p.id: p for c in chunks.values() for p in part_entries(c)}
        wanted = [*chunks.values(), *(parts[id] for id in ids if id in parts)]
        if len(wanted) != len(ids):  # a part vector of another way of splitting
            return None
        vectors = await self._embed(wanted)
        entries = [
            UpsertEntry(c.id, v, c.message)
            for c, v in zip(wanted, vectors, strict=True)
            if v is not None
        ]
        if len(entries) != len(wanted):  # something this embedder cannot embed
            return None
        pending_at = pending_key(source)
        await self._pending(pending_at, add=ids)
        if isinstance(self.store, BulkVectorStore):
            await self.store.upsert_batch(entries)
        else:
            for entry in entries:
                await self.store.upsert(entry.id, entry.vector, entry.message)
        if await self.manifest.get(source_key(source)) != ids:
            return None  # replaced meanwhile: the ids stay pending, the source listed
        await self._pending(pending_at, drop=ids)
        await self._unlist(source)
        return len(chunks)

    async def other_embedder_sources(self) -> list[str]:
        """The indexed sources whose vectors are still another embedder's (index them again;
        [] when none)."""
        record = await self.manifest.get(EMBEDDER_KEY)
        if record and record[0] != embedder_identity(self.embedder):
            return await self._indexed_sources()
        return sorted(record[1:])

    async def _indexed_sources(self) -> list[str]:
        keys = await self.manifest.sources()
        return sorted({source_of_key(k) for k in keys if k != EMBEDDER_KEY})

    async def _check_embedder(self) -> None:
        """Refuse a vector search whose query vector would not be comparable to the index's."""
        identity = embedder_identity(self.embedder)
        record = await self.manifest.get(EMBEDDER_KEY)
        if not record:  # nothing recorded yet (an index from before identities)
            return
        if record[0] != identity:
            raise ConfigurationError(
                f"this index was embedded with {record[0]}, not with this pipeline's embedder "
                f"{identity}: their vectors do not compare. Index the documents again with "
                "this embedder (goagent-py rag index PATH..., or Pipeline.index), or search "
                "with the index's embedder"
            )
        listed = record[1:]
        if listed:
            names = ", ".join(repr(s) for s in listed[:3]) + (", ..." if len(listed) > 3 else "")
            raise ConfigurationError(
                f"{len(listed)} indexed sources still hold another embedder's vectors ({names}): "
                f"a re-index with {identity} did not reach them. Index them again "
                "(goagent-py rag index PATH..., or Pipeline.index), or remove them"
            )

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
        # Vectors of another embedder: every chunk is embedded again (same ids, overwritten).
        listed = await self._listed(doc.source)
        kept = set() if listed else old_set
        new = [c for c in prepared if c.id not in kept]
        counts["unchanged"] = len(prepared) - len(new)
        counts["reembedded"] = int(listed)
        # Part vectors are items of their own (ids derived from the chunk's): a store indexed
        # without them gets them on the next index(), one indexed with them loses them when
        # part_vectors is turned off (they are then stale).
        parts = [p for c in prepared for p in part_entries(c)] if self._part_vectors else []
        new_parts = [p for p in parts if p.id not in kept]
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
                if e.message.text.strip() and e.id not in old_set  # a re-embedded one is there
            ]
            if isinstance(self.keyword_index, BulkKeywordIndex):
                await self.keyword_index.add_batch(keyword_entries)
            else:  # the protocol's add() takes no context: the text alone is indexed
                for k in keyword_entries:
                    await self.keyword_index.add(k.id, k.text, k.metadata)
        counts["written"] = len(entries)
        # (A listed source's old vectors are kept only where new ones overwrote them.)
        stored = {e.id for e in entries} | (kept & {c.id for c in prepared})
        parts_stored = {e.id for e in part_rows} | (kept & {p.id for p in parts})
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
        if listed:  # its new vectors are recorded: off the list last
            await self._unlist(doc.source)
        return True
