"""What the pipeline reports: search results, indexing reports, progress, observers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from goagent_py.messages import Message
from goagent_py.rag._location import describe_location

__all__ = [
    "DocumentReport",
    "IndexProgress",
    "IndexReport",
    "PipelineObserver",
    "SearchResult",
]


@dataclass(slots=True, frozen=True, kw_only=True)
class SearchResult:
    """One retrieved chunk.

    Attributes:
        id: the chunk id.
        message: the chunk as stored (role ``document``; metadata has ``source``, ``title``,
            ``chunk_index``, location keys and the document's own metadata).
        score: the ranking score, higher is better: cosine similarity (vector), BM25 (keyword),
            the fused score (hybrid; see :class:`~goagent_py.rag.fusion.Fusion`) or the reranker's
            score.
        vector_score: the cosine similarity, when the vector search found the chunk.
        keyword_score: the BM25 score, when the keyword search found the chunk.
    """

    id: str
    message: Message
    score: float
    vector_score: float | None = None
    keyword_score: float | None = None

    @property
    def metadata(self) -> dict[str, Any]:
        """The chunk's metadata."""
        return self.message.metadata

    @property
    def text(self) -> str:
        """The chunk's text."""
        return self.message.text

    @property
    def source(self) -> str:
        """The source of the document the chunk comes from ("" if unknown)."""
        source = self.message.metadata.get("source")
        return source if isinstance(source, str) else ""

    @property
    def title(self) -> str:
        """The document's title ("" if unknown)."""
        title = self.message.metadata.get("title")
        return title if isinstance(title, str) else ""

    @property
    def location(self) -> str:
        """Where the chunk is in its document ('section "A > B", lines 3-9'), or ""."""
        return describe_location(self.message.metadata)


@dataclass(slots=True, frozen=True, kw_only=True)
class DocumentReport:
    """What indexing one document did.

    Attributes:
        source: the document's source.
        chunks: chunks the document has now.
        written: chunks embedded and written (new or changed).
        unchanged: chunks already indexed with the same content (not embedded, not written).
        deleted: old chunks of the source removed (changed or gone).
        skipped: chunks with nothing the embedder could embed (not indexed).
        reembedded: whether every chunk was embedded again because the stored vectors were
            another embedder's (see ``docs/rag.md``, "Which embedder made the vectors").
    """

    source: str
    chunks: int = 0
    written: int = 0
    unchanged: int = 0
    deleted: int = 0
    skipped: int = 0
    reembedded: bool = False


@dataclass(slots=True, frozen=True, kw_only=True)
class IndexReport:
    """What one :meth:`Pipeline.index` call did, per document and in total.

    Attributes:
        documents: one report per document indexed, in order.
        dropped: sources removed because their vectors were another embedder's and this call
            did not index them (after an embedder change; index them again: see
            ``docs/rag.md``, "Which embedder made the vectors").
        duration: seconds the call took.
    """

    documents: list[DocumentReport] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    duration: float = 0.0

    @property
    def chunks(self) -> int:
        """Chunks the indexed documents have now."""
        return sum(d.chunks for d in self.documents)

    @property
    def written(self) -> int:
        """Chunks embedded and written."""
        return sum(d.written for d in self.documents)

    @property
    def unchanged(self) -> int:
        """Chunks left as they were."""
        return sum(d.unchanged for d in self.documents)

    @property
    def deleted(self) -> int:
        """Stale chunks deleted."""
        return sum(d.deleted for d in self.documents)

    @property
    def skipped(self) -> int:
        """Chunks with nothing to embed."""
        return sum(d.skipped for d in self.documents)

    @property
    def reembedded(self) -> int:
        """Documents embedded again because their vectors were another embedder's."""
        return sum(1 for d in self.documents if d.reembedded)


@dataclass(slots=True, frozen=True, kw_only=True)
class IndexProgress:
    """Progress of an :meth:`Pipeline.index` call, reported after each document.

    Attributes:
        done: documents indexed so far.
        total: documents to index: the length of a list, what is done plus the
            ``operator.length_hint`` of an iterator that gives one (the files
            :func:`~goagent_py.rag.documents.iter_directory` has still to read), else None.
        document: the report of the document just indexed.
        elapsed: seconds since the call started.
    """

    done: int
    total: int | None
    document: DocumentReport
    elapsed: float


@runtime_checkable
class PipelineObserver(Protocol):
    """Receives a report after each indexed document, search and removal, failed or not.

    Every method is optional and may be sync or async; subclass this protocol for no-op
    defaults. ``error`` is the exception the operation raised, or None. An observer that raises
    is logged and never breaks the pipeline. Cancellation is not reported.
    """

    def on_index(self, report: DocumentReport, duration: float, error: BaseException | None) -> Any:
        """A document was indexed (on error: the counts as of the failure)."""
        return None

    def on_search(
        self,
        query: str,
        results: Sequence[SearchResult],
        duration: float,
        error: BaseException | None,
    ) -> Any:
        """A search finished (``results`` is empty on error)."""
        return None

    def on_remove(
        self, source: str, deleted: int, duration: float, error: BaseException | None
    ) -> Any:
        """A source was removed (``deleted`` chunks)."""
        return None
