"""``DurableAgent.run`` inside a workflow of the user's own is traced as a run of the library's
workflow is, when the user's worker has the telemetry interceptor (docs/scaling-out.md,
"Tracing durable runs"): the same spans, under the span current in the workflow, nothing
recorded twice when Temporal replays the history. A real Temporal dev server."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import own_workflow_app  # tests/durable/own_workflow_app.py
import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor, create_tracer_provider
from temporalio.worker import Worker

from goagent_py.durable import ProviderRegistry, activities_for, sandbox_runner
from goagent_py.errors import ConfigurationError
from goagent_py.testing import FunctionProvider


def _id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def test_the_interceptor_for_your_own_worker_refuses_a_provider_that_is_not_replay_safe() -> None:
    from goagent_py.durable import telemetry_interceptor

    with pytest.raises(ConfigurationError, match="create_tracer_provider"):
        telemetry_interceptor(TracerProvider())


@pytest.mark.slow
async def test_a_run_inside_your_own_workflow_is_traced_once_under_the_workflow(
    temporal: Any,
) -> None:
    from goagent_py.durable import telemetry_interceptor

    exporter = InMemorySpanExporter()
    provider = create_tracer_provider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    durable = own_workflow_app.DURABLE
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(own_workflow_app.plan)})
    # Temporal's own tracing (its own provider: it records completed spans, never on a
    # replay) carries the client's span into the workflow, where it is current.
    plain = TracerProvider()
    plain.add_span_processor(SimpleSpanProcessor(exporter))
    temporal_tracing = TracingInterceptor(plain.get_tracer("temporal"))
    client = Client(**{**temporal.client.config(), "interceptors": [temporal_tracing]})
    async with Worker(
        client,
        task_queue=durable.task_queue,
        workflows=[own_workflow_app.ReportWorkflow],
        activities=activities_for([durable], registry),
        workflow_runner=sandbox_runner(),
        interceptors=[temporal_tracing, telemetry_interceptor(provider)],
        max_cached_workflows=0,  # every workflow task replays the whole history first
    ):
        out = await client.execute_workflow(
            own_workflow_app.ReportWorkflow.run,
            "doubling",
            id=f"report-{uuid.uuid4().hex[:8]}",
            task_queue=durable.task_queue,
        )
    assert out["text"] == "twice 21 is 42"
    provider.shutdown()
    plain.shutdown()
    spans = list(exporter.get_finished_spans())
    counts = Counter(s.name for s in spans)
    assert counts["invoke_agent doubler"] == 1, counts
    assert counts["chat m"] == 2, counts
    assert counts["execute_tool double"] == 1, counts
    run = next(s for s in spans if s.name == "invoke_agent doubler")
    started = next(s for s in spans if s.name == "StartWorkflow:ReportWorkflow")
    assert _parent(run) == _id(started)
    assert run.context is not None
    assert started.context is not None
    assert run.context.trace_id == started.context.trace_id
    for span in spans:
        if span.name in ("chat m", "execute_tool double"):
            assert _parent(span) == _id(run), span.name
