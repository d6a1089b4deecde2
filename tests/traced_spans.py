"""The span exporter set-up the OpenTelemetry tests share: an SDK tracer provider feeding an
in-memory exporter, and the lookups the tests make on what it recorded (docs/observability.md).
Imported only by tests that skip without the OpenTelemetry SDK."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from goagent_py.otel import instrument


class Traced:
    """A tracer provider whose finished spans are kept in memory, and the app's own tracer."""

    def __init__(self, provider: TracerProvider | None = None) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = provider if provider is not None else TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("app")

    def hooks(self, *, capture: bool = False) -> Any:
        """goagent-py's telemetry hooks on this provider."""
        return instrument(self.provider, capture_content=capture)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def one(self, name: str) -> ReadableSpan:
        return only(self.spans(), name)


def only(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    """The one span called ``name`` (the assertion lists every name when there is not one)."""
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None
