"""A traced durable run whose workflow is closed from outside (terminated, timed out,
cancelled) still ends every span it opened, with an error status and an ``error.type`` that
says why (docs/scaling-out.md, "Tracing durable runs"). A terminated or timed-out workflow is
never told: the worker learns it from the server, and evicts the run, so its loop ends on its
own workflow thread and not where the garbage collector drops it after the worker (which
raised there from the loop's ``finally`` blocks, failing whatever test ran next: the cancel
case, otel15). A cancelled workflow is told: its spans end with the cancellation. A real
Temporal dev server."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from hanging_tool import ENTERED, hang, plan  # tests/durable/hanging_tool.py
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from temporalio.client import WorkflowFailureError
from traced_spans import only  # tests/traced_spans.py

from goagent_py import Agent
from goagent_py.durable import DurableAgent, ProviderRegistry, create_worker
from goagent_py.testing import FunctionProvider


@pytest.mark.slow
@pytest.mark.parametrize(
    ("how", "kind"),
    [
        ("terminate", "workflow_terminated"),
        ("cancel", "asyncio.exceptions.CancelledError"),  # told: the loop's own end
    ],
)
async def test_a_closed_workflow_ends_every_span_it_opened(
    temporal: Any, how: str, kind: str
) -> None:
    from temporalio.contrib.opentelemetry import create_tracer_provider

    label = f"{how}-{uuid.uuid4().hex[:6]}"
    ENTERED[label] = asyncio.Event()
    exporter = InMemorySpanExporter()
    provider = create_tracer_provider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = Agent(provider=FunctionProvider(plan), model="m", name="waiter", tools=[hang])
    durable = DurableAgent(
        agent,
        provider="fn:x",
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
        tool_timeout=600,
    )
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    worker = create_worker(temporal.client, [durable], registry=registry, tracer_provider=provider)
    async with worker:
        handle = await durable.start(temporal.client, label)
        await ENTERED[label].wait()  # the tool call is in flight
        if how == "terminate":
            await handle.terminate("stop it")
        elif how == "cancel":
            await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
    # The stopped worker holds no run: none is left for the garbage collector to close
    # wherever it drops the worker (Temporal's worker keeps no public list of its runs).
    assert worker._workflow_worker is not None
    assert not worker._workflow_worker._running_workflows
    provider.shutdown()
    spans = list(exporter.get_finished_spans())
    run = only(spans, "invoke_agent waiter")
    call = only(spans, "execute_tool hang")
    for span in (run, call):
        assert span.status.status_code is StatusCode.ERROR, span.name
        assert dict(span.attributes or {})["error.type"] == kind, span.name
        assert span.end_time is not None
        assert span.start_time is not None
        assert span.start_time <= span.end_time
    assert call.end_time is not None
    assert run.end_time is not None
    assert call.end_time <= run.end_time
