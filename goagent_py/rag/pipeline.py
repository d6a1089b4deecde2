"""The RAG pipeline: index documents into a vector store (and a keyword index), search them.

Indexing is incremental and leaves nothing stale (the reference left old chunks behind when a
document shrank). Each chunk's id is derived from its source, its index in the document and a
hash of its content and metadata, and a :class:`~goagent_py.rag.manifest.ChunkManifest` records
the ids each source has. Re-indexing a document therefore:

- writes nothing (and embeds nothing) when it is unchanged;
- writes only the chunks whose content changed, and deletes the chunks it no longer has;
- with :meth:`Pipeline.remove`, deletes all of its chunks.

Search takes ``top_k``, ``score_threshold`` and a metadata ``filter`` (the reference took only
``top_k``), in one of three modes: ``"vector"`` (embeddings), ``"keyword"`` (BM25 full text) or
``"hybrid"`` (both, fused by a :class:`~goagent_py.rag.fusion.Fusion`: by default a weighted sum
of the cosine similarity and the query-relative BM25 score, with more keyword weight for a
query that names an identifier, so an exact identifier that embeddings miss is still found and
prose questions keep their vector ranking). An optional :class:`~goagent_py.rag.rerank.Reranker`
reorders the fused candidates.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import operator
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self

from goagent_py._deepcopy import deepcopy
from goagent_py._workers import to_thread
from goagent_py.errors import ConfigurationError, InvalidInputError
from goagent_py.memory.base import Chunker, Embedder
from goagent_py.memory.vector._common import check_filter
from goagent_py.memory.vector._shared import search_shared
from goagent_py.memory.vector.base import SearchOptions, VectorStore
from goagent_py.messages import Message, Role, TextBlock
from goagent_py.rag._chunks import collapse_parts
from goagent_py.rag._indexing import _Indexing
from goagent_py.rag._search import SearchMode
from goagent_py.rag.documents import Document
from goagent_py.rag.fusion import DEFAULT_FUSION, RRF_K, Fusion, fuse, reciprocal_rank_fusion
from goagent_py.rag.keyword import KeywordEntry, KeywordIndex
from goagent_py.rag.manifest import (
    ChunkManifest,
    InMemoryManifest,
)
from goagent_py.rag.results import (
    DocumentReport,
    IndexProgress,
    IndexReport,
    SearchResult,
)

if TYPE_CHECKING:
    from goagent_py.rag.format import Formatter
    from goagent_py.rag.rerank import Reranker
    from goagent_py.rag.tool import KnowledgeBaseTool

__all__ = ["RRF_K", "Fusion", "Pipeline", "SearchMode", "fuse", "reciprocal_rank_fusion"]

_log = logging.getLogger("goagent_py.rag")

_MODES: tuple[str, ...] = ("hybrid", "vector", "keyword")


_END: Any = object()
"""The end of the documents given to :meth:`Pipeline.index`."""

SOURCES_KEY = "sources"
"""Metadata key of a search result whose text is indexed under several sources: all of them,
the result's own first (see :func:`merge_copies`)."""


def _owned(results: Sequence[SearchResult]) -> list[SearchResult]:
    """``results`` with messages of their own (their vector hits held the store's)."""
    return [replace(r, message=deepcopy(r.message)) for r in results]


def merge_copies(results: Sequence[SearchResult]) -> list[SearchResult]:
    """``results`` (best first) with passages of the same text merged into the best of them.

    The same file under two names (a copy in a backup folder) was indexed twice, and both
    copies took top-k slots: the answer's context held one passage twice and lost another.
    The one kept names every source in ``metadata["sources"]`` (set only when there are
    several); computed from what is indexed now, it follows re-indexing and removals. Text is
    compared with its whitespace runs collapsed; passages without text are never merged.
    """
    kept: dict[str, int] = {}
    sources: dict[int, list[str]] = {}
    out: list[SearchResult] = []
    for result in results:
        key = " ".join(result.text.split())
        first = kept.get(key) if key else None
        if first is None:
            if key:
                kept[key] = len(out)
            out.append(result)
            continue
        names = sources.setdefault(first, [out[first].source])
        if result.source and result.source not in names:
            names.append(result.source)
    for index, names in sources.items():
        if len(names) > 1:
            result = out[index]
            # A new message: the in-memory store hands out the one it keeps.
            message = replace(
                result.message, metadata={**result.message.metadata, SOURCES_KEY: names}
            )
            out[index] = replace(result, message=message)
    return out


# -- the pipeline -----------------------------------------------------------------------------


class Pipeline(_Indexing):
    """Indexes documents and searches them: chunk, embed, store; vector, keyword or hybrid.

    Args:
        embedder: turns chunks and queries into vectors (a ``BatchEmbedder`` embeds in
            batches of ``batch_size``; others are called concurrently, at most
            ``max_concurrency`` at a time).
        store: where the vectors go (``BulkVectorStore`` writes one batch per document).
        chunker: splits documents; None for a ``MarkdownChunker`` on Markdown and HTML and a
            ``RecursiveChunker`` on the rest (both about 800 characters, 80 overlap). Each
            text block of a document is chunked on its own (a PDF page stays a page).
        keyword_index: a :class:`~goagent_py.rag.keyword.KeywordIndex` kept in step with the
            store; it enables the ``"keyword"`` and ``"hybrid"`` modes (hybrid is then the
            default).
        manifest: where chunk ids per source are recorded; None for an in-memory one. With a
            persistent store, pass a persistent one (see :meth:`sqlite`) so that stale chunks
            are still found after a restart.
        reranker: reorders the fused candidates (see :mod:`goagent_py.rag.rerank`).
        observers: :class:`PipelineObserver` objects told about every index, search and remove.
        batch_size: chunks per ``embed_batch`` call.
        max_concurrency: parallel ``embed`` calls for an embedder without batching.
        candidates: how many hits each search leg fetches for fusion and reranking (at least
            ``top_k``; 30 by default, tuned with the fusion).
        fusion: how hybrid search fuses the two lists; None for
            :data:`~goagent_py.rag.fusion.DEFAULT_FUSION`.
        rrf_k: the reciprocal-rank-fusion constant: passing it (without ``fusion``) selects
            plain rank fusion, ``Fusion("rrf", 1.0, None, rrf_k)``, the default before the
            score fusion.
        part_vectors: also embed each part of a chunk (sentences packed to 150-400
            characters) and store it beside the chunk's vector; a chunk then scores half its
            own cosine and half its best part's (a small embedder blurs one fact in a whole
            chunk's vector). Off by default: it costs about twice the embedding at indexing
            and about three times the rows in the vector store (so a slower exact scan), for
            a clear gain in vector search and a small one in hybrid search (figures in
            ``bench/rag_labelled.py``). Results stay chunks.

    Raises:
        ConfigurationError: a missing embedder or store, or a bad number.
    """

    def __init__(
        self,
        embedder: Embedder,
        store: VectorStore,
        *,
        chunker: Chunker | None = None,
        keyword_index: KeywordIndex | None = None,
        manifest: ChunkManifest | None = None,
        reranker: Reranker | None = None,
        observers: Sequence[object] = (),
        batch_size: int = 64,
        max_concurrency: int = 8,
        candidates: int = 30,
        fusion: Fusion | None = None,
        rrf_k: int | None = None,
        part_vectors: bool = False,
    ) -> None:
        if not isinstance(embedder, Embedder):
            raise ConfigurationError("Pipeline: embedder is required (an Embedder)")
        if not isinstance(store, VectorStore):
            raise ConfigurationError("Pipeline: store is required (a VectorStore)")
        if chunker is not None and not isinstance(chunker, Chunker):
            raise ConfigurationError("Pipeline: chunker must implement Chunker")
        if keyword_index is not None and not isinstance(keyword_index, KeywordIndex):
            raise ConfigurationError("Pipeline: keyword_index must implement KeywordIndex")
        for name, value in (
            ("batch_size", batch_size),
            ("max_concurrency", max_concurrency),
            ("candidates", candidates),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"Pipeline: {name} must be an int >= 1, got {value!r}")
        if rrf_k is not None and (
            isinstance(rrf_k, bool) or not isinstance(rrf_k, int) or rrf_k < 0
        ):
            raise ConfigurationError(f"Pipeline: rrf_k must be an int >= 0, got {rrf_k!r}")
        if fusion is not None and not isinstance(fusion, Fusion):
            raise ConfigurationError(f"Pipeline: fusion must be a Fusion, got {fusion!r}")
        if fusion is None:
            fusion = DEFAULT_FUSION if rrf_k is None else Fusion("rrf", 1.0, None, rrf_k)
        self.embedder = embedder
        self.store = store
        self.chunker = chunker
        self.keyword_index = keyword_index
        self.manifest: ChunkManifest = manifest if manifest is not None else InMemoryManifest()
        self.reranker = reranker
        self._observers = list(observers)
        self._batch_size = batch_size
        self._max_concurrency = max_concurrency
        self._candidates = candidates
        self._part_vectors = bool(part_vectors)
        self.fusion = fusion
        self._write_lock = asyncio.Lock()
        self._owned: list[Any] = []

    # -- construction helpers ---------------------------------------------------------------

    @classmethod
    def in_memory(
        cls,
        embedder: Embedder,
        *,
        hybrid: bool = True,
        quantization: Literal["int8"] | None = None,
        **kwargs: Any,
    ) -> Pipeline:
        """A pipeline on an ``InMemoryVectorStore`` (and an in-memory BM25 index if ``hybrid``).

        ``quantization="int8"`` (the ``simd`` extra) scans an int8 copy of the vectors first and
        rescores the best exactly (see ``InMemoryVectorStore``). Other keyword arguments go to
        :class:`Pipeline`.
        """
        from goagent_py.memory.vector.in_memory import InMemoryVectorStore
        from goagent_py.rag.keyword import InMemoryKeywordIndex

        keyword = InMemoryKeywordIndex() if hybrid else None
        store = InMemoryVectorStore(quantization=quantization)
        return cls(embedder, store, keyword_index=keyword, **kwargs)

    @classmethod
    def sqlite(
        cls,
        path: str | os.PathLike[str],
        embedder: Embedder,
        *,
        dimensions: int | None = None,
        table: str = "rag",
        hybrid: bool = True,
        quantization: Literal["int8"] | None = None,
        **kwargs: Any,
    ) -> Pipeline:
        """A persistent pipeline in one SQLite file: vectors, FTS5 keywords and the manifest.

        Tables: ``<table>`` and ``<table>_vec`` (the ``SqliteVecStore``),
        ``<table>_keywords`` (+ ``_fts``) and ``<table>_manifest``. The pipeline owns them:
        :meth:`aclose` (or ``async with``) closes them.

        Args:
            path: the database file.
            embedder: the embedder.
            dimensions: its vector length; None reads ``embedder.dimensions`` (which may load
                a local model).
            table: the base table name (a plain identifier).
            hybrid: keep the FTS5 keyword index (hybrid and keyword search).
            quantization: ``"int8"`` (the ``simd`` extra) keeps int8 codes of the vectors
                beside them and scans those in memory first, rescoring the best exactly from
                the file (``SqliteVecStore(quantization="int8")``): a 10k-chunk vector search
                in ~1 ms instead of sqlite-vec's ~10 ms scan; None: sqlite-vec's own scan.
            **kwargs: passed to :class:`Pipeline` (chunker, reranker, observers...).

        Raises:
            ConfigurationError: unknown dimensions, a bad table name, or no sqlite3 module that
                can load sqlite-vec.
        """
        from goagent_py.memory.vector.sqlite_vec import SqliteVecStore
        from goagent_py.rag.keyword import SqliteKeywordIndex
        from goagent_py.rag.manifest import SqliteManifest

        if dimensions is None:
            dims = getattr(embedder, "dimensions", None)
            if not isinstance(dims, int):
                raise ConfigurationError(
                    "Pipeline.sqlite: pass dimensions= (the embedder's vector length)"
                )
            dimensions = dims
        store = SqliteVecStore(path, table=table, dimensions=dimensions, quantization=quantization)
        keyword = SqliteKeywordIndex(path, table=f"{table}_keywords") if hybrid else None
        manifest = SqliteManifest(path, table=f"{table}_manifest")
        pipeline = cls(embedder, store, keyword_index=keyword, manifest=manifest, **kwargs)
        pipeline._owned = [x for x in (store, keyword, manifest) if x is not None]
        return pipeline

    async def aclose(self) -> None:
        """Close what the pipeline created (nothing when you passed the store and index)."""
        owned, self._owned = self._owned, []
        for resource in owned:
            await resource.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return (
            f"Pipeline(embedder={self.embedder!r}, store={self.store!r}, "
            f"keyword_index={self.keyword_index!r})"
        )

    @property
    def default_mode(self) -> SearchMode:
        """``"hybrid"`` with a keyword index, else ``"vector"``."""
        return "hybrid" if self.keyword_index is not None else "vector"

    # -- observers --------------------------------------------------------------------------

    async def _notify(self, method: str, *args: Any) -> None:
        for observer in self._observers:
            fn = getattr(observer, method, None)
            if fn is None:
                continue
            try:
                result = fn(*args)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                _log.exception("RAG pipeline observer %r raised in %s", observer, method)

    # -- indexing ---------------------------------------------------------------------------

    async def index(
        self,
        documents: Document | Iterable[Document],
        *,
        progress: Callable[[IndexProgress], Any] | None = None,
    ) -> IndexReport:
        """Index documents: chunk, embed what changed, write it, delete what is gone.

        Documents are indexed one after another; a failure stops the call and raises (with a
        note naming the document), and documents indexed before it stay indexed. A lazy
        iterator (:func:`~goagent_py.rag.documents.iter_directory`, a generator) is advanced
        in a worker thread, one document at a time: reading a file never blocks the event loop,
        and only the document being indexed is in memory.

        Args:
            documents: one document or an iterable of them.
            progress: called (sync or async) after each document with an
                :class:`IndexProgress`, e.g. to drive a progress bar.

        Returns:
            What was written, left unchanged and deleted, per document.
        """
        docs: Iterable[Document] = [documents] if isinstance(documents, Document) else documents
        lazy = isinstance(docs, Iterator)
        total = len(docs) if isinstance(docs, Sized) else None
        started = time.perf_counter()
        reports: list[DocumentReport] = []
        async with self._write_lock:
            # The embedder's identity is recorded before any vector is written (see _indexing).
            await self._start_embedder()
            items = iter(docs)
            while True:
                if lazy:
                    doc = await to_thread(next, items, _END)
                    # What is done and what it says it has left (-1: it does not say).
                    left = operator.length_hint(items, -1)
                    total = None if left < 0 else len(reports) + (doc is not _END) + left
                else:
                    doc = next(items, _END)
                if doc is _END:
                    break
                if not isinstance(doc, Document):
                    raise ConfigurationError(f"index() takes Documents, got {type(doc).__name__}")
                counts: dict[str, int] = {}
                t0 = time.perf_counter()
                error: BaseException | None = None
                try:
                    await self._index_one(doc, counts)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    exc.add_note(f"while indexing document {doc.source!r}")
                    error = exc
                reembedded = bool(counts.pop("reembedded", 0))
                report = DocumentReport(source=doc.source, reembedded=reembedded, **counts)
                await self._notify("on_index", report, time.perf_counter() - t0, error)
                if error is not None:
                    raise error
                reports.append(report)
                if progress is not None:
                    update = IndexProgress(
                        done=len(reports),
                        total=total,
                        document=report,
                        elapsed=time.perf_counter() - started,
                    )
                    result = progress(update)
                    if inspect.isawaitable(result):
                        await result
            # Sources still holding another embedder's vectors that this run did not reach
            # (another folder): re-embedded from the store, or removed, so that every source
            # left is this embedder's.
            dropped = await self._drop_listed(reports)
        return IndexReport(
            documents=reports, dropped=dropped, duration=time.perf_counter() - started
        )

    async def remove(self, source: str) -> int:
        """Delete every chunk of ``source``; returns how many (0 for an unknown source)."""
        t0 = time.perf_counter()
        deleted = 0
        try:
            async with self._write_lock:
                deleted = await self._remove_source(source)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._notify("on_remove", source, 0, time.perf_counter() - t0, exc)
            raise
        await self._notify("on_remove", source, deleted, time.perf_counter() - t0, None)
        return deleted

    async def sources(self) -> list[str]:
        """Every indexed source, sorted (one a failed ``index()`` left chunks of included)."""
        return await self._indexed_sources()

    # -- search -----------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        top_k: int = 3,
        score_threshold: float | None = None,
        filter: Mapping[str, Any] | None = None,
        mode: SearchMode | None = None,
    ) -> list[SearchResult]:
        """The ``top_k`` chunks most relevant to ``query``, best first.

        Args:
            query: the question or keywords (plain text; never interpreted as query syntax).
            top_k: how many results (> 0).
            score_threshold: the minimum cosine similarity of a vector hit ("vector" and the
                vector leg of "hybrid"), or the minimum BM25 score in "keyword" mode. In hybrid
                mode keyword hits are kept whatever their vector similarity: they contain the
                query's words. With ``part_vectors``, a vector hit's score is the chunk's
                combined score (half its cosine, half its best part's), and the threshold
                applies to that.
            filter: metadata every result must match exactly, e.g. ``{"source": "a.md"}``.
            mode: "hybrid", "vector" or "keyword"; None for :attr:`default_mode`.

        Raises:
            InvalidInputError: a blank query, a bad ``top_k`` or filter, or an unknown mode
                (values a model may have chosen: a tool that raises it tells the model).
            ConfigurationError: a keyword mode without a keyword index; a vector or hybrid
                search whose embedder is not the one that made the index's vectors (index
                again with it; see ``docs/rag.md``).
        """
        t0 = time.perf_counter()
        try:
            results = await self._search(query, top_k, score_threshold, filter, mode)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._notify("on_search", query, [], time.perf_counter() - t0, exc)
            raise
        await self._notify("on_search", query, results, time.perf_counter() - t0, None)
        return results

    async def _search(
        self,
        query: str,
        top_k: int,
        score_threshold: float | None,
        filter: Mapping[str, Any] | None,
        mode: SearchMode | None,
    ) -> list[SearchResult]:
        # A query, top_k and mode are often the model's tool arguments: a bad one is data (the
        # model reads it and can correct it), not the developer's misuse (docs/architecture.md).
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("search query must be a non-empty string")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
            raise InvalidInputError(f"top_k must be a positive int, got {top_k!r}")
        mode = mode or self.default_mode
        if mode not in _MODES:
            raise InvalidInputError(f"unknown search mode {mode!r}; use one of {_MODES}")
        if mode != "vector" and self.keyword_index is None:
            raise ConfigurationError(
                f"search mode {mode!r} needs a keyword index: pass keyword_index= to Pipeline"
            )
        checked = check_filter(filter) or None
        # Candidates beyond top_k in every mode: copies of a passage merge into one result
        # (merge_copies), and the slots they took go to the next passages.
        n = max(top_k, self._candidates)

        async def vector_leg() -> list[SearchResult]:
            # The query vector compares only with vectors of the same embedder (see _indexing).
            vector, _ = await asyncio.gather(
                self.embedder.embed([TextBlock(query)]), self._check_embedder()
            )
            # With part vectors, twice as many rows, collapsed to chunks (see collapse_parts);
            # the threshold then applies to the chunk's combined score, after collapsing.
            k = 2 * n if self._part_vectors else n
            threshold = None if self._part_vectors else score_threshold
            options = SearchOptions(top_k=k, score_threshold=threshold, filter=checked)
            # Of ~30 candidates a few are returned: a store that keeps Python objects (the
            # in-memory one) hands them out uncopied, and only the returned ones are copied.
            hits, shared = await search_shared(self.store, vector, options)
            borrowed.append(shared)
            return [
                SearchResult(id=id, message=message, score=score, vector_score=score)
                for id, message, score in collapse_parts(hits, n)
                if score_threshold is None or score >= score_threshold  # a chunk's, not a part's
            ]

        async def keyword_leg() -> tuple[list[tuple[str, float]], dict[str, KeywordEntry]]:
            assert self.keyword_index is not None
            hits = await self.keyword_index.search(query, top_k=n, filter=checked)
            if mode == "keyword" and score_threshold is not None:
                hits = [(id, s) for id, s in hits if s >= score_threshold]
            # The texts of every hit, fetched while the query is still being embedded (the
            # slow leg), not after it: a hit the vector leg also finds reads its text twice.
            entries = await self.keyword_index.get([id for id, _ in hits]) if hits else {}
            return hits, entries

        borrowed: list[bool] = []  # whether the vector hits hold the store's own messages
        vector_hits: list[SearchResult] = []
        keyword_hits: list[tuple[str, float]] = []
        entries: dict[str, KeywordEntry] = {}
        if mode == "vector":
            vector_hits = await vector_leg()
        elif mode == "keyword":
            keyword_hits, entries = await keyword_leg()
        else:
            # Both legs at once: the embedding (torch) and SQLite both leave the GIL.
            legs = await asyncio.gather(vector_leg(), keyword_leg(), return_exceptions=True)
            for leg in legs:
                if isinstance(leg, BaseException):
                    raise leg
            vector_hits, (keyword_hits, entries) = legs  # type: ignore[assignment,misc]

        if mode == "vector":
            results = vector_hits
        else:
            keyword_scores = dict(keyword_hits)
            by_id = {r.id: r for r in vector_hits}
            if mode == "keyword":
                ranked = keyword_hits
            else:
                ranked = self.fusion.fuse(
                    query, [(r.id, r.score) for r in vector_hits], keyword_hits
                )
            results = []
            for id, score in ranked:
                if id in by_id:
                    message = by_id[id].message
                    vector_score = by_id[id].vector_score
                elif id in entries:
                    entry = entries[id]
                    message = Message(
                        Role.USER, [TextBlock(entry.text)], metadata=dict(entry.metadata)
                    )
                    vector_score = None
                else:  # deleted between the two queries
                    continue
                results.append(
                    SearchResult(
                        id=id,
                        message=message,
                        score=score,
                        vector_score=vector_score,
                        keyword_score=keyword_scores.get(id),
                    )
                )
        results = merge_copies(results)
        if self.reranker is not None and results:
            results = _owned(results[:n]) if any(borrowed) else results[:n]
            return list(await self.reranker.rerank(query, results, top_k=top_k))[:top_k]
        return _owned(results[:top_k]) if any(borrowed) else results[:top_k]

    # -- the agent's tool -------------------------------------------------------------------

    def as_tool(
        self,
        *,
        name: str = "search_knowledge_base",
        top_k: int = 3,
        description: str | None = None,
        score_threshold: float | None = None,
        filter: Mapping[str, Any] | None = None,
        mode: SearchMode | None = None,
        formatter: Formatter | None = None,
    ) -> KnowledgeBaseTool:
        """A tool the agent calls with ``{"query": ...}`` to search this pipeline.

        The result is numbered passages with source and location, marked as data (see
        :func:`~goagent_py.rag.format.format_passages`), so the model can cite them.
        """
        from goagent_py.rag.tool import KnowledgeBaseTool

        return KnowledgeBaseTool(
            self,
            name=name,
            top_k=top_k,
            description=description,
            score_threshold=score_threshold,
            filter=filter,
            mode=mode,
            formatter=formatter,
        )
