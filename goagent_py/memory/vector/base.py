"""The vector-store interface shared by long-term memory and RAG.

A store keeps (id, vector, message) entries and finds the messages nearest a query vector.
Optional capabilities are separate protocols checked with ``isinstance``: bulk writes
(:class:`BulkVectorStore`), counting (:class:`CountableStore`) and listing without a query
(:class:`ListableStore`, how long-term memory shows its records and their history) and writes
guarded by a version of a set of entries (:class:`GuardedStore`, how two processes
consolidating the same memories never lose an update) and the record of which embedder made the
vectors (:class:`EmbedderRecordStore`, how long-term memory refuses to compare vectors of two
models).

Every backend takes ``metric="cosine"`` (the default) or ``metric="l2"`` (Euclidean distance).
Scores are "higher is better" everywhere: cosine similarity ``1 - d`` in [-1, 1] for cosine,
``1 / (1 + d)`` in (0, 1] for l2, so one ``score_threshold`` means the same in every store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from goagent_py.errors import ConfigurationError
from goagent_py.messages import Message, ScoredMessage

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Vector = NDArray[np.float32] | Sequence[float]
else:
    Vector = Any

__all__ = [
    "METRICS",
    "BulkVectorStore",
    "CountableStore",
    "EmbedderRecordStore",
    "GuardedStore",
    "ListableStore",
    "ScoredMessage",
    "SearchOptions",
    "UpsertEntry",
    "Metric",
    "Vector",
    "VectorStore",
    "check_metric",
    "check_registered",
    "max_distance",
    "score_of",
]

Metric = Literal["cosine", "l2"]
"""How stores measure nearness: cosine distance (``1 - cos``) or Euclidean distance."""

METRICS: tuple[Metric, ...] = ("cosine", "l2")


def check_metric(metric: str) -> Metric:
    """Validate a store's ``metric`` argument.

    Raises:
        ConfigurationError: not one of :data:`METRICS`.
    """
    if metric == "cosine":
        return "cosine"
    if metric == "l2":
        return "l2"
    raise ConfigurationError(f"unknown metric {metric!r}: use 'cosine' or 'l2'")


def check_registered(
    table: str,
    registered: tuple[int, int, str],
    *,
    dimensions: int,
    metric: Metric,
    schema_version: int,
) -> None:
    """Check a table's registry row ``(schema_version, dimensions, metric)`` against how a
    persistent store was opened; ``table`` names it in the messages.

    Raises:
        ConfigurationError: other dimensions, another metric, or a newer schema.
    """
    version, dims, made_with = registered
    if dims != dimensions:
        raise ConfigurationError(
            f"{table} holds {dims}-dimensional vectors, but the store was opened with "
            f"dimensions={dimensions}; use the embedder the table was made with, or another table"
        )
    if made_with != metric:
        raise ConfigurationError(
            f"{table} was made with metric={made_with!r}, but the store was opened with "
            f"metric={metric!r}; open it with metric={made_with!r}, or use another table"
        )
    if version > schema_version:
        raise ConfigurationError(
            f"{table} has schema version {version}, newer than this goagent-py understands "
            f"({schema_version}); upgrade goagent-py"
        )


def score_of(metric: Metric, distance: float) -> float:
    """The score (higher is better) of a ``distance`` under ``metric``."""
    if metric == "l2":
        return 1.0 / (1.0 + max(0.0, distance))
    return min(1.0, max(-1.0, 1.0 - distance))


def max_distance(metric: Metric, threshold: float) -> float | None:
    """The largest distance whose score is still ``>= threshold`` (None: every distance is).

    Lets a backend apply the score threshold in its own query, on the distance it indexes.
    """
    if metric == "l2":
        return None if threshold <= 0 else 1.0 / threshold - 1.0
    return 1.0 - threshold


@dataclass(slots=True, frozen=True)
class SearchOptions:
    """How to search.

    Attributes:
        top_k: the most results to return (> 0).
        score_threshold: drop results scoring below this (None: keep all).
        filter: metadata that results must match exactly (every key, AND), e.g.
            ``{"session": "alice"}``; None for no filter.
    """

    top_k: int = 3
    score_threshold: float | None = None
    filter: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.top_k <= 0:
            raise ConfigurationError(f"SearchOptions.top_k must be > 0, got {self.top_k}")


@dataclass(slots=True, frozen=True)
class UpsertEntry:
    """One entry of a bulk upsert."""

    id: str
    vector: Vector
    message: Message


@runtime_checkable
class VectorStore(Protocol):
    """Stores message vectors and finds the nearest ones."""

    async def upsert(self, id: str, vector: Vector, message: Message) -> None:
        """Insert or replace the entry ``id``. The message's metadata is stored and filterable."""
        ...

    async def search(
        self, vector: Vector, options: SearchOptions | None = None
    ) -> list[ScoredMessage]:
        """The entries nearest ``vector``, best first, honouring ``options``."""
        ...

    async def delete(self, id: str) -> None:
        """Remove the entry ``id`` (no error if it does not exist)."""
        ...


@runtime_checkable
class BulkVectorStore(VectorStore, Protocol):
    """A store that writes and deletes many entries in one transaction or request."""

    async def upsert_batch(self, entries: Sequence[UpsertEntry]) -> None:
        """Insert or replace all ``entries`` atomically where the backend allows."""
        ...

    async def delete_batch(self, ids: Sequence[str]) -> None:
        """Remove all ``ids``."""
        ...


@runtime_checkable
class CountableStore(VectorStore, Protocol):
    """A store that can count its entries."""

    async def count(self, filter: Mapping[str, Any] | None = None) -> int:
        """How many entries the store holds, or how many match ``filter`` (as in a search)."""
        ...


@runtime_checkable
class ListableStore(VectorStore, Protocol):
    """A store that can list its entries without a query vector."""

    async def entries(self, filter: Mapping[str, Any] | None = None) -> list[ScoredMessage]:
        """Every entry matching ``filter`` (as in a search), in insertion order, score 0."""
        ...


@runtime_checkable
class GuardedStore(VectorStore, Protocol):
    """A store that writes only while a set of entries is as it was read (compare-and-set).

    Long-term memory reads the memories a turn may change, decides, then writes; another
    process may have changed them in between. It takes :meth:`version` of the scope before
    reading and writes with :meth:`upsert_batch_if`, which writes nothing when the scope
    changed meanwhile (then it reads and decides again).
    """

    async def version(self, filter: Mapping[str, Any]) -> str:
        """A token of the entries matching ``filter`` (ids and messages): it changes whenever
        one of them is written, replaced or deleted."""
        ...

    async def upsert_batch_if(
        self, entries: Sequence[UpsertEntry], *, filter: Mapping[str, Any], version: str
    ) -> bool:
        """Write all ``entries`` in one transaction if ``version(filter)`` is still
        ``version``, checked and written atomically against other writers (other processes
        included); otherwise write nothing and return False."""
        ...


@runtime_checkable
class EmbedderRecordStore(VectorStore, Protocol):
    """A store that records which embedder made its vectors (one record per store or table).

    Long-term memory records its embedder's identity here (``goagent_py.memory.base.
    embedder_identity``) and refuses another's (``docs/memory.md``, "Which embedder made the
    memories"). The record is a string the store keeps as it is given; None until one is set.
    """

    async def embedder_record(self) -> str | None:
        """The recorded string (None: nothing recorded, e.g. a table made before records)."""
        ...

    async def replace_embedder_record(self, expected: str | None, record: str) -> bool:
        """Record ``record`` if the record is still ``expected``, checked and written
        atomically against other writers (other processes too, where the store is shared);
        whether it did."""
        ...
