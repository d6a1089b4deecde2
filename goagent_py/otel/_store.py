"""Spans and metrics for vector stores (an ObservableStore observer) and embedders (a wrapper)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.util.types import AttributeValue

from goagent_py.memory.base import BatchEmbedder, Embedder, embedder_identity
from goagent_py.memory.vector.base import VectorStore
from goagent_py.memory.vector.observable import ObservableStore, merge_observers
from goagent_py.messages import ContentBlock
from goagent_py.otel import _semconv as sc
from goagent_py.otel._hooks import end_span, meter_for, set_error, tracer_for

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


def db_system_of(store: object) -> str:
    """A ``db.system.name`` for a vector store, from its class name."""
    cls = type(store).__name__
    lower = cls.lower()
    if "sqlite" in lower:
        return "sqlite"
    if "pgvector" in lower or "postgres" in lower:
        return "postgresql"
    if "qdrant" in lower:
        return "qdrant"
    if "inmemory" in lower:
        return "goagent.in_memory"
    return sc.snake_case(cls.removesuffix("Store") or cls)


class StoreTelemetry:
    """An ObservableStore observer: one ``{operation} {target}`` CLIENT span per store call
    (database-client conventions), and ``db.client.operation.duration``."""

    def __init__(
        self,
        *,
        system: str,
        collection: str,
        tracer_provider: TracerProvider | None,
        meter_provider: MeterProvider | None,
        capture_content: bool,
    ) -> None:
        self.tracer = tracer_for(tracer_provider)
        self.system = system
        self.collection = collection
        self.capture = capture_content
        self.duration = meter_for(meter_provider).create_histogram(
            sc.METRIC_DB_DURATION,
            unit="s",
            description="Duration of vector-store operations.",
            explicit_bucket_boundaries_advisory=sc.DB_DURATION_BUCKETS,
        )

    def _report(
        self,
        operation: str,
        duration: float,
        error: BaseException | None,
        attrs: dict[str, AttributeValue],
    ) -> None:
        end_ns = time.time_ns()
        base: dict[str, AttributeValue] = {sc.DB_SYSTEM: self.system, sc.DB_OPERATION: operation}
        if self.collection:
            base[sc.DB_COLLECTION] = self.collection
        target = self.collection or self.system
        # The call already finished: the span is placed at its real start, under whatever span
        # was current around the call (the run span inside an instrumented run).
        span = self.tracer.start_span(
            f"{operation} {target}",
            kind=SpanKind.CLIENT,
            attributes={**base, **attrs},
            start_time=end_ns - max(0, int(duration * 1e9)),
        )
        metric = dict(base)
        if error is not None:
            metric[sc.ERROR_TYPE] = set_error(span, error, capture=self.capture)
        else:
            span.set_status(Status(StatusCode.OK))
        end_span(span, end_ns)
        self.duration.record(duration, metric)

    def on_upsert(self, id: str, duration: float, error: BaseException | None) -> None:
        """An upsert finished."""
        self._report("upsert", duration, error, {sc.VECTOR_ID: id})

    def on_search(
        self, top_k: int, results: int, duration: float, error: BaseException | None
    ) -> None:
        """A search finished."""
        self._report(
            "search", duration, error, {sc.VECTOR_TOP_K: top_k, sc.DB_RETURNED_ROWS: results}
        )

    def on_delete(self, id: str, duration: float, error: BaseException | None) -> None:
        """A delete finished."""
        self._report("delete", duration, error, {sc.VECTOR_ID: id})

    def on_upsert_batch(self, count: int, duration: float, error: BaseException | None) -> None:
        """A bulk upsert finished."""
        self._report("upsert_batch", duration, error, {sc.DB_BATCH_SIZE: count})

    def on_delete_batch(self, count: int, duration: float, error: BaseException | None) -> None:
        """A bulk delete finished."""
        self._report("delete_batch", duration, error, {sc.DB_BATCH_SIZE: count})

    def on_count(self, count: int, duration: float, error: BaseException | None) -> None:
        """A count finished."""
        self._report("count", duration, error, {sc.DB_RETURNED_ROWS: count})

    def on_entries(self, count: int, duration: float, error: BaseException | None) -> None:
        """A listing finished."""
        self._report("entries", duration, error, {sc.DB_RETURNED_ROWS: count})

    def on_upsert_batch_if(
        self, count: int, written: bool, duration: float, error: BaseException | None
    ) -> None:
        """A guarded bulk upsert finished (``written`` False: the scope had changed)."""
        attrs: dict[str, AttributeValue] = {sc.DB_BATCH_SIZE: count, sc.VECTOR_WRITTEN: written}
        self._report("upsert_batch_if", duration, error, attrs)


def wrap_store(
    store: VectorStore,
    *,
    tracer_provider: TracerProvider | None,
    meter_provider: MeterProvider | None,
    system: str | None,
    collection: str,
    observer: object | None,
    capture_content: bool,
) -> ObservableStore:
    """``ObservableStore(store, StoreTelemetry(...))``, merged with the caller's observer."""
    telemetry = StoreTelemetry(
        system=system or db_system_of(store),
        collection=collection,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_content=capture_content,
    )
    chosen: object = telemetry if observer is None else merge_observers(telemetry, observer)
    return ObservableStore(store, chosen)


class InstrumentedEmbedder:
    """An embedder whose calls are ``embeddings {model}`` spans (see ``instrument_embedder``)."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        model: str,
        provider_name: str,
        tracer_provider: TracerProvider | None,
        meter_provider: MeterProvider | None,
        capture_content: bool,
    ) -> None:
        self.inner = embedder
        self.model = model
        self.provider_name = provider_name
        self._capture = capture_content
        self._tracer = tracer_for(tracer_provider)
        self._duration = meter_for(meter_provider).create_histogram(
            sc.METRIC_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=sc.DURATION_BUCKETS,
        )

    def __repr__(self) -> str:
        return f"instrument_embedder({self.inner!r})"

    @property
    def embedder_identity(self) -> str:
        """The wrapped embedder's (same vectors: a RAG index sees no change), derived from its
        class when it declares none (see ``goagent_py.memory.base.embedder_identity``)."""
        return embedder_identity(self.inner)

    async def _traced(self, call: Any, batch: int | None) -> NDArray[np.float32]:
        attrs: dict[str, AttributeValue] = {
            sc.OPERATION: sc.OP_EMBEDDINGS,
            sc.PROVIDER: self.provider_name,
        }
        if self.model:
            attrs[sc.REQUEST_MODEL] = self.model
        metric = dict(attrs)
        name = f"embeddings {self.model}" if self.model else "embeddings"
        start = time.perf_counter()
        with self._tracer.start_as_current_span(
            name,
            kind=SpanKind.CLIENT,
            attributes=attrs,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            if batch is not None:
                span.set_attribute(sc.DB_BATCH_SIZE, batch)
            try:
                vectors: NDArray[np.float32] = await call
            except BaseException as exc:
                metric[sc.ERROR_TYPE] = set_error(span, exc, capture=self._capture)
                self._duration.record(time.perf_counter() - start, metric)
                raise
            shape = getattr(vectors, "shape", ())
            if shape:
                span.set_attribute(sc.EMBEDDINGS_DIMENSION, int(shape[-1]))
            span.set_status(Status(StatusCode.OK))
        self._duration.record(time.perf_counter() - start, metric)
        return vectors

    async def embed(self, blocks: Sequence[ContentBlock]) -> NDArray[np.float32]:
        """Embed through the wrapped embedder, in an ``embeddings`` span."""
        return await self._traced(self.inner.embed(blocks), None)


class InstrumentedBatchEmbedder(InstrumentedEmbedder):
    """:class:`InstrumentedEmbedder` for an embedder that also embeds in batches."""

    async def embed_batch(self, inputs: Sequence[Sequence[ContentBlock]]) -> NDArray[np.float32]:
        """Embed a batch through the wrapped embedder, in one ``embeddings`` span."""
        inner = self.inner
        assert isinstance(inner, BatchEmbedder)
        return await self._traced(inner.embed_batch(inputs), len(inputs))


def wrap_embedder(
    embedder: Embedder,
    *,
    model: str | None,
    provider_name: str | None,
    tracer_provider: TracerProvider | None,
    meter_provider: MeterProvider | None,
    capture_content: bool,
) -> InstrumentedEmbedder:
    """The right wrapper class for ``embedder``'s capabilities."""
    cls = InstrumentedBatchEmbedder if isinstance(embedder, BatchEmbedder) else InstrumentedEmbedder
    found = getattr(embedder, "model", "")
    return cls(
        embedder,
        model=model if model is not None else (found if isinstance(found, str) else ""),
        provider_name=provider_name or sc.provider_name_of(embedder),
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_content=capture_content,
    )
