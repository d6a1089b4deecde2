"""A vector store on Qdrant (server, cloud, or qdrant-client's embedded local mode).

Each entry is one point: its id is a UUID derived from the entry id (``uuid5``), so the same
entry id always lands on the same point; the payload holds the entry id, the message JSON and
the metadata. Session and metadata filters are Qdrant payload filters on ``metadata.<key>``
and the score threshold is applied by Qdrant, so ``top_k`` counts matching points.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from goagent_py._describe import message_of
from goagent_py.errors import (
    ConfigurationError,
    InvalidInputError,
    MemoryStoreError,
    MissingExtraError,
)
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
    max_distance,
    score_of,
)
from goagent_py.messages import Message, ScoredMessage, messages_from_json

if TYPE_CHECKING:
    from qdrant_client import AsyncQdrantClient

__all__ = ["QdrantStore", "point_id"]

_NAMESPACE = uuid.NAMESPACE_DNS


def point_id(id: str) -> str:
    """The Qdrant point id (a UUID string) for entry ``id``: ``uuid5(NAMESPACE_DNS, id)``."""
    return str(uuid.uuid5(_NAMESPACE, id))


def _qdrant() -> Any:
    try:
        import qdrant_client
    except ImportError as exc:
        raise MissingExtraError("qdrant-client", "qdrant", feature="QdrantStore") from exc
    return qdrant_client


def _condition(models: Any, key: str, value: FilterValue) -> Any:
    field = f"metadata.{key}"
    if isinstance(value, bool | str):
        return models.FieldCondition(key=field, match=models.MatchValue(value=value))
    # A range matches ints and floats alike (1 == 1.0, as in the other stores), never bools.
    return models.FieldCondition(key=field, range=models.Range(gte=value, lte=value))


class QdrantStore:
    """A vector store in a Qdrant collection (cosine or Euclidean distance).

    Implements ``VectorStore``, ``BulkVectorStore``, ``CountableStore`` and ``ListableStore``.

    Args:
        client_or_location: an ``AsyncQdrantClient`` (the caller keeps and closes it), a URL
            (``http://localhost:6333``), a directory for qdrant-client's embedded local mode,
            or ``":memory:"``. For a URL or directory the store creates and closes the client.
        collection: the collection name (a plain identifier); created on first use.
        dimensions: the vector length; must match the collection's.
        metric: ``"cosine"`` (score = cosine similarity) or ``"l2"`` (Qdrant's Euclid distance,
            score = ``1 / (1 + d)``); must match the collection's distance.

    Raises:
        ConfigurationError: a bad collection name, dimensions or metric (also when they differ
            from the collection's, on first use).
        MissingExtraError: qdrant-client is not installed (``pip install "goagent-py[qdrant]"``).
    """

    def __init__(
        self,
        client_or_location: AsyncQdrantClient | str,
        *,
        collection: str = "memories",
        dimensions: int,
        metric: Metric = "cosine",
    ) -> None:
        qdrant_client = _qdrant()
        self._models = qdrant_client.models
        validate_identifier(collection, what="collection name")
        self._collection = collection
        try:
            self._dims = check_dimensions(dimensions)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        self._metric = check_metric(metric)
        distances = self._models.Distance
        self._distance = distances.COSINE if self._metric == "cosine" else distances.EUCLID
        self._local = False
        if isinstance(client_or_location, str):
            location = client_or_location
            if location == ":memory:":
                self._local = True
                client = qdrant_client.AsyncQdrantClient(location=":memory:")
            elif location.startswith(("http://", "https://")):
                client = qdrant_client.AsyncQdrantClient(url=location)
            else:
                self._local = True
                client = qdrant_client.AsyncQdrantClient(path=location)
            self._owns_client = True
        else:
            client = client_or_location
            self._owns_client = False
        self._client: Any = client
        self._ready = False
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
            f"QdrantStore(collection={self._collection!r}, dimensions={self._dims}, "
            f"metric={self._metric!r})"
        )

    async def _ensure(self) -> None:
        if self._closed:
            raise MemoryStoreError(f"{self!r} is closed")
        if self._ready:
            return
        m, c, name = self._models, self._client, self._collection
        if await c.collection_exists(name):
            info = await c.get_collection(name)
            vectors = info.config.params.vectors
            size = getattr(vectors, "size", None)
            if size != self._dims:
                raise ConfigurationError(
                    f"collection {name!r} holds {size}-dimensional vectors (or named vectors), "
                    f"but the store was opened with dimensions={self._dims}"
                )
            distance = getattr(vectors, "distance", None)
            if distance != self._distance:
                raise ConfigurationError(
                    f"collection {name!r} uses distance {distance}, but the store was opened "
                    f"with metric={self._metric!r}; open it with the collection's metric, or "
                    "use another collection"
                )
        else:
            await c.create_collection(
                name, vectors_config=m.VectorParams(size=self._dims, distance=self._distance)
            )
            if not self._local:  # the local mode has no payload indexes (and warns)
                await c.create_payload_index(
                    name, "metadata.session", field_schema=m.PayloadSchemaType.KEYWORD
                )
        self._ready = True

    async def _call(self, work: Any) -> Any:
        try:
            await self._ensure()
            return await work()
        except (ConfigurationError, InvalidInputError, MemoryStoreError):
            raise
        except Exception as exc:
            raise MemoryStoreError(f"{self!r}: {message_of(exc)}") from exc

    async def aclose(self) -> None:
        """Close the client if the store created it."""
        self._closed = True
        if self._owns_client:
            await self._client.close()

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

    def _points(self, entries: Sequence[UpsertEntry]) -> list[Any]:
        points: dict[str, Any] = {}  # the last of duplicate ids wins
        for e in serialize_entries(entries, self._dims, self._metric):
            payload = {"id": e.id, "message": e.message, "metadata": json.loads(e.metadata)}
            points[e.id] = self._models.PointStruct(
                id=point_id(e.id), vector=e.vector.tolist(), payload=payload
            )
        return list(points.values())

    async def upsert(self, id: str, vector: Vector, message: Message) -> None:
        """Insert or replace entry ``id``.

        Raises:
            ConfigurationError: a bad vector, id or metadata; nothing is written.
            MemoryStoreError: Qdrant failed.
        """
        await self.upsert_batch([UpsertEntry(id, vector, message)])

    async def upsert_batch(self, entries: Sequence[UpsertEntry]) -> None:
        """Insert or replace all ``entries`` in one request; the last of duplicate ids wins."""
        points = self._points(entries)
        if not points:
            return

        async def write() -> None:
            await self._client.upsert(self._collection, points=points, wait=True)

        await self._call(write)

    async def delete(self, id: str) -> None:
        """Remove entry ``id`` (no error if it does not exist)."""
        await self.delete_batch([id])

    async def delete_batch(self, ids: Sequence[str]) -> None:
        """Remove all ``ids`` in one request (missing ones are ignored)."""
        if not ids:
            return
        selector = self._models.PointIdsList(points=[point_id(i) for i in ids])

        async def delete() -> None:
            await self._client.delete(self._collection, points_selector=selector, wait=True)

        await self._call(delete)

    async def count(self, filter: Mapping[str, Any] | None = None) -> int:
        """How many points the collection holds, or how many match ``filter`` (exact).

        Raises:
            InvalidInputError: a bad filter.
        """
        count_filter = self._filter(check_filter(filter))

        async def count() -> int:
            result = await self._client.count(
                self._collection, count_filter=count_filter, exact=True
            )
            return int(result.count)

        n: int = await self._call(count)
        return n

    async def entries(self, filter: Mapping[str, Any] | None = None) -> list[ScoredMessage]:
        """Every point matching ``filter``, by id, with score 0 (scrolled 256 at a time).

        Raises:
            InvalidInputError: a bad filter.
            MemoryStoreError: Qdrant failed, or a stored point is corrupted.
        """
        scroll_filter = self._filter(check_filter(filter))

        async def scroll() -> list[Any]:
            points: list[Any] = []
            offset = None
            while True:
                page, offset = await self._client.scroll(
                    self._collection,
                    scroll_filter=scroll_filter,
                    limit=256,
                    offset=offset,
                    with_payload=True,
                )
                points.extend(page)
                if offset is None:
                    return points

        found = [self._load(p, 0.0) for p in await self._call(scroll)]
        return sorted(found, key=lambda s: s.id)

    # -- search --------------------------------------------------------------------------------

    async def search(
        self, vector: Vector, options: SearchOptions | None = None
    ) -> list[ScoredMessage]:
        """The entries nearest ``vector`` under the store's metric, best first.

        Raises:
            ConfigurationError: a bad vector or filter.
            MemoryStoreError: Qdrant failed, or a stored point is corrupted.
        """
        options = options or SearchOptions()
        filter = check_filter(options.filter)
        query = as_vector(vector, self._dims, what="query vector", metric=self._metric).tolist()
        # Qdrant's threshold is a minimum similarity for cosine, a maximum distance for Euclid,
        # and its local mode drops scores equal to it; so it gets a little slack, and the exact
        # ">= score_threshold" is applied below.
        threshold = options.score_threshold
        if threshold is not None:
            if self._metric == "cosine":
                threshold -= 1e-6
            else:
                bound = max_distance("l2", threshold)
                threshold = None if bound is None else bound + 1e-6 * (1.0 + abs(bound))
        query_filter = self._filter(filter)

        async def run() -> list[Any]:
            result = await self._client.query_points(
                self._collection,
                query=query,
                limit=options.top_k,
                query_filter=query_filter,
                score_threshold=threshold,
                with_payload=True,
            )
            return list(result.points)

        points = await self._call(run)
        out = []
        for p in points:
            # Qdrant reports cosine similarity for cosine, the distance itself for Euclid.
            if self._metric == "cosine":
                score = min(1.0, max(-1.0, float(p.score)))
            else:
                score = score_of("l2", float(p.score))
            if options.score_threshold is not None and score < options.score_threshold:
                continue
            out.append(self._load(p, score))
        return out

    def _filter(self, filter: Mapping[str, FilterValue]) -> Any:
        m = self._models
        return m.Filter(must=[_condition(m, k, v) for k, v in filter.items()]) if filter else None

    def _load(self, point: Any, score: float) -> ScoredMessage:
        payload = point.payload or {}
        try:
            id = payload["id"]
            (message,) = messages_from_json(payload["message"])
        except Exception as exc:
            raise MemoryStoreError(
                f"point {point.id} in collection {self._collection!r} is corrupted: {exc}"
            ) from exc
        return ScoredMessage(message, score, id)
