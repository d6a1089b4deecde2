"""A vector store in a Chroma collection (the ``chromadb`` package, persistent local client).

Each entry is one Chroma record: its id is the entry id, its embedding the vector, its document
the message JSON, and its metadata the message metadata's scalar values (what a filter can
match). The collection's metadata records the dimensions, metric and schema version, checked
when the store opens it. Chroma's index is HNSW (approximate, like pgvector's); results are
re-ranked here by distance and then id, so ties break as in every other store.

Numbers in metadata are kept as floats (Chroma would otherwise not match ``1`` with ``1.0``,
which every other store does); integers beyond 2**53 lose precision there.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from goagent_py._describe import message_of
from goagent_py._workers import to_thread
from goagent_py.errors import ConfigurationError, MemoryStoreError, MissingExtraError
from goagent_py.memory.vector._common import (
    FilterValue,
    as_vector,
    check_dimensions,
    check_filter,
    serialize_entries,
    validate_identifier,
)
from goagent_py.memory.vector.base import (
    Metric,
    SearchOptions,
    UpsertEntry,
    Vector,
    check_metric,
    score_of,
)
from goagent_py.messages import Message, ScoredMessage, messages_from_json

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["ChromaStore"]

SCHEMA_VERSION = 1
# Chroma's own rule for collection names, on top of the plain-identifier check.
_COLLECTION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_]{1,61}[A-Za-z0-9]")
_FILTERABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]{0,63}")  # keys a filter may name

T = TypeVar("T")


def _chromadb() -> Any:
    try:
        import chromadb
    except ImportError as exc:
        raise MissingExtraError("chromadb", "chroma", feature="ChromaStore") from exc
    return chromadb


def _scalar_metadata(metadata: Mapping[str, Any]) -> dict[str, str | float | bool] | None:
    """The metadata values a filter can match, as Chroma stores them (numbers as floats)."""
    out: dict[str, str | float | bool] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not _FILTERABLE.fullmatch(key):
            continue
        if isinstance(value, bool | str):
            out[key] = value
        elif isinstance(value, int | float):
            out[key] = float(value)
    return out or None  # Chroma refuses an empty metadata dict


def _where(filter: Mapping[str, FilterValue]) -> dict[str, Any] | None:
    terms = [
        {key: {"$eq": value if isinstance(value, bool | str) else float(value)}}
        for key, value in filter.items()
    ]
    if not terms:
        return None
    return terms[0] if len(terms) == 1 else {"$and": terms}


class ChromaStore:
    """A vector store in a Chroma collection, on disk with Chroma's persistent client.

    Implements ``VectorStore``, ``BulkVectorStore``, ``CountableStore`` and ``ListableStore``.
    Chroma's client is synchronous: its calls run in a worker thread, one at a time.

    Args:
        path_or_client: a directory for ``chromadb.PersistentClient`` (the store creates the
            client; Chroma keeps it for the process), or a Chroma client you made (e.g.
            ``chromadb.EphemeralClient()``).
        collection: the collection name (letters, digits and '_', 3-63 characters, starting
            and ending with a letter or digit); created on first use.
        dimensions: the vector length; must match what the collection was created with.
        metric: ``"cosine"`` (score = cosine similarity) or ``"l2"`` (score = ``1 / (1 + d)``
            for the Euclidean distance ``d``); must match what the collection was created with.

    Raises:
        ConfigurationError: a bad collection name, dimensions or metric (also when they differ
            from the collection's, on first use).
        MissingExtraError: chromadb is not installed (``pip install "goagent-py[chroma]"``).
    """

    def __init__(
        self,
        path_or_client: str | os.PathLike[str] | Any,
        *,
        collection: str = "memories",
        dimensions: int,
        metric: Metric = "cosine",
    ) -> None:
        chromadb = _chromadb()
        validate_identifier(collection, what="collection name")
        if not _COLLECTION.fullmatch(collection):
            raise ConfigurationError(
                f"invalid collection name {collection!r}: Chroma needs 3-63 characters that "
                "start and end with a letter or digit"
            )
        self._name = collection
        try:
            self._dims = check_dimensions(dimensions)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        self._metric = check_metric(metric)
        if isinstance(path_or_client, str | os.PathLike):
            from chromadb.config import Settings

            self._where_ = os.fspath(path_or_client)
            self._client: Any = chromadb.PersistentClient(
                path=self._where_, settings=Settings(anonymized_telemetry=False)
            )
        else:
            self._where_ = repr(path_or_client)
            self._client = path_or_client
        self._collection: Any = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def dimensions(self) -> int:
        """The vector length."""
        return self._dims

    @property
    def metric(self) -> Metric:
        """How nearness is measured: ``"cosine"`` or ``"l2"``."""
        return self._metric

    def __repr__(self) -> str:
        return (
            f"ChromaStore({self._where_!r}, collection={self._name!r}, "
            f"dimensions={self._dims}, metric={self._metric!r})"
        )

    # -- plumbing ------------------------------------------------------------------------------

    async def _run(self, fn: Callable[[Any], T]) -> T:
        return await to_thread(self._locked, fn)

    def _locked(self, fn: Callable[[Any], T]) -> T:
        with self._lock:
            if self._closed:
                raise MemoryStoreError(f"{self!r} is closed")
            try:
                if self._collection is None:
                    self._collection = self._open()
                return fn(self._collection)
            except (ValueError, ConfigurationError, MemoryStoreError):
                raise
            except Exception as exc:
                raise MemoryStoreError(f"{self!r}: {message_of(exc)}") from exc

    def _open(self) -> Any:
        wanted = {
            "hnsw:space": self._metric,  # Chroma's spaces are named like our metrics
            "goagent_dimensions": self._dims,
            "goagent_metric": self._metric,
            "goagent_schema": SCHEMA_VERSION,
        }
        collection = self._client.get_or_create_collection(
            self._name, metadata=wanted, embedding_function=None
        )
        found = collection.metadata or {}
        where = f"collection {self._name!r} in {self._where_!r}"
        dims = found.get("goagent_dimensions")
        if dims != self._dims:
            raise ConfigurationError(
                f"{where} holds {dims}-dimensional vectors, but the store was opened with "
                f"dimensions={self._dims}; use the embedder it was made with, or another "
                "collection"
            )
        made_with = found.get("goagent_metric")
        if made_with != self._metric:
            raise ConfigurationError(
                f"{where} was made with metric={made_with!r}, but the store was opened with "
                f"metric={self._metric!r}; open it with metric={made_with!r}, or use another "
                "collection"
            )
        version = found.get("goagent_schema", 0)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise ConfigurationError(
                f"{where} has schema version {version}, newer than this goagent-py "
                f"understands ({SCHEMA_VERSION}); upgrade goagent-py"
            )
        return collection

    async def aclose(self) -> None:
        """Stop using the collection. Later calls raise :class:`MemoryStoreError`.

        Chroma keeps its persistent clients for the life of the process, so nothing is closed
        beyond this store.
        """

        def close() -> None:
            with self._lock:
                self._closed = True
                self._collection = None

        await to_thread(close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- writes --------------------------------------------------------------------------------

    async def upsert(self, id: str, vector: Vector, message: Message) -> None:
        """Insert or replace entry ``id``.

        Raises:
            ValueError: a bad vector, id or metadata; nothing is written.
            MemoryStoreError: Chroma failed.
        """
        await self.upsert_batch([UpsertEntry(id, vector, message)])

    async def upsert_batch(self, entries: Sequence[UpsertEntry]) -> None:
        """Insert or replace all ``entries`` in one call; the last of duplicate ids wins."""
        records: dict[str, tuple[list[float], str, dict[str, Any] | None]] = {}
        for e in serialize_entries(entries, self._dims, self._metric):
            records.pop(e.id, None)  # the last one wins, in its own position
            records[e.id] = (e.vector.tolist(), e.message, _scalar_metadata(json.loads(e.metadata)))
        if not records:
            return
        ids = list(records)
        vectors = [r[0] for r in records.values()]
        documents = [r[1] for r in records.values()]
        metadatas = [r[2] for r in records.values()]

        def write(c: Any) -> None:
            c.upsert(ids=ids, embeddings=vectors, documents=documents, metadatas=metadatas)

        await self._run(write)

    async def delete(self, id: str) -> None:
        """Remove entry ``id`` (no error if it does not exist)."""
        await self.delete_batch([id])

    async def delete_batch(self, ids: Sequence[str]) -> None:
        """Remove all ``ids`` in one call (missing ones are ignored)."""
        if not ids:
            return
        wanted = list(dict.fromkeys(ids))

        def delete(c: Any) -> None:
            c.delete(ids=wanted)

        await self._run(delete)

    async def count(self, filter: Mapping[str, Any] | None = None) -> int:
        """How many entries the collection holds, or how many match ``filter``.

        Raises:
            InvalidInputError: a bad filter (a ValueError too).
        """
        where = _where(check_filter(filter))

        def count(c: Any) -> int:
            if where is None:
                return int(c.count())
            return len(c.get(where=where, include=[])["ids"])

        return await self._run(count)

    async def entries(self, filter: Mapping[str, Any] | None = None) -> list[ScoredMessage]:
        """Every entry matching ``filter``, by id, with score 0.

        Raises:
            InvalidInputError: a bad filter (a ValueError too).
            MemoryStoreError: Chroma failed, or a stored record is corrupted.
        """
        where = _where(check_filter(filter))

        def get(c: Any) -> list[tuple[str, str]]:
            got = c.get(where=where, include=["documents"])
            return list(zip(got["ids"], got["documents"], strict=True))

        rows = await self._run(get)
        return sorted(
            (ScoredMessage(self._load(id, doc), 0.0, id) for id, doc in rows), key=lambda s: s.id
        )

    # -- search --------------------------------------------------------------------------------

    async def search(
        self, vector: Vector, options: SearchOptions | None = None
    ) -> list[ScoredMessage]:
        """The entries nearest ``vector`` under the store's metric, best first (ties by id).

        Raises:
            ValueError: a bad vector or filter.
            MemoryStoreError: Chroma failed, or a stored record is corrupted.
        """
        options = options or SearchOptions()
        where = _where(check_filter(options.filter))
        query = as_vector(vector, self._dims, what="query vector", metric=self._metric)
        k = options.top_k

        def run(c: Any) -> list[tuple[float, str, str]]:
            total = int(c.count())
            if total == 0:
                return []
            # A few extra results show whether a tie crosses the k-th place; only then are all
            # matching entries scored here, so ties break by id as in every store.
            fetch = min(2 * k + 8, total)
            found = c.query(
                query_embeddings=[query.tolist()],
                n_results=fetch,
                where=where,
                include=["documents", "distances"],
            )
            rows = sorted(
                (self._distance(d), i, doc)
                for i, doc, d in zip(
                    found["ids"][0], found["documents"][0], found["distances"][0], strict=True
                )
            )
            if len(rows) > k and rows[k][0] == rows[k - 1][0] and len(rows) == fetch:
                rows = self._exact(c, query, where)
            return rows[:k]

        rows = await self._run(run)
        threshold = options.score_threshold
        out = []
        for distance, id, doc in rows:
            score = score_of(self._metric, distance)
            if threshold is not None and score < threshold:
                continue
            out.append(ScoredMessage(self._load(id, doc), score, id))
        return out

    def _distance(self, chroma_distance: float) -> float:
        # Chroma's "l2" space reports the squared Euclidean distance.
        d = float(chroma_distance)
        return max(0.0, d) ** 0.5 if self._metric == "l2" else d

    def _exact(
        self, c: Any, query: NDArray[np.float32], where: dict[str, Any] | None
    ) -> list[tuple[float, str, str]]:
        import numpy as np

        got = c.get(where=where, include=["embeddings", "documents"])
        if not got["ids"]:
            return []
        matrix = np.asarray(got["embeddings"], dtype=np.float32)
        if self._metric == "cosine":
            norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(query)
            distances = 1.0 - (matrix @ query) / norms
        else:
            distances = np.linalg.norm(matrix - query, axis=1)
        return sorted(
            zip(distances.tolist(), got["ids"], got["documents"], strict=True),
        )

    def _load(self, id: str, data: str | None) -> Message:
        try:
            (message,) = messages_from_json(data or "")
        except Exception as exc:
            raise MemoryStoreError(
                f"entry {id!r} in collection {self._name!r} of {self._where_!r} is corrupted: {exc}"
            ) from exc
        return message
