"""Durable runs traced on the worker keep the times of the history: a span made in the workflow
starts when the work it stands for really started, however often Temporal replays it
(docs/scaling-out.md, "Tracing durable runs"). A real Temporal dev server."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.contrib.opentelemetry import create_tracer_provider
from traced_spans import only  # tests/traced_spans.py

from goagent_py import Agent, ToolCall
from goagent_py.durable import DurableAgent, ProviderRegistry, create_worker
from goagent_py.provider import CompletionRequest
from goagent_py.testing import FunctionProvider, text_response, tool_call_response
from goagent_py.tools import tool

RAN: list[tuple[int, int]] = []  # (start, end) of each run of the tool, in ns since the epoch


@tool
def stamp(label: str) -> str:
    """Stamp a label.

    Args:
        label: what to stamp.
    """
    start = time.time_ns()
    RAN.append((start, time.time_ns()))
    return f"stamped {label}"


def plan(request: CompletionRequest) -> Any:
    if len(request.messages) == 1:
        return tool_call_response(ToolCall("c1", "stamp", {"label": "x"}))
    return text_response("done")


@pytest.mark.slow
async def test_a_replayed_tool_call_keeps_the_time_it_really_started(temporal: Any) -> None:
    RAN.clear()
    exporter = InMemorySpanExporter()
    provider = create_tracer_provider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = Agent(provider=FunctionProvider(plan), model="m", name="stamper", tools=[stamp])
    durable = DurableAgent(agent, provider="fn:x", task_queue=f"q-{uuid.uuid4().hex[:8]}")
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    # No workflow cached: the task that gets the tool's result replays the whole history,
    # the call's start included, after the tool ran (a worker that picks a run up after a
    # crash does the same).
    async with create_worker(
        temporal.client,
        [durable],
        registry=registry,
        tracer_provider=provider,
        max_cached_workflows=0,
    ):
        result = await durable.execute(
            temporal.client, "stamp x", execution_timeout=timedelta(minutes=3)
        )
    assert result.text == "done"
    provider.shutdown()
    spans = list(exporter.get_finished_spans())
    call = only(spans, "execute_tool stamp")
    run = only(spans, "invoke_agent stamper")
    assert len(RAN) == 1
    started, ended = RAN[0]
    assert call.start_time is not None
    assert call.end_time is not None
    # The span holds the work: it started no later than the tool did, ended no earlier.
    assert call.start_time <= started
    assert call.end_time >= ended
    assert run.start_time is not None
    assert run.end_time is not None
    assert run.start_time <= call.start_time <= call.end_time <= run.end_time
    for span in spans:  # every span made in the workflow, in order
        assert span.start_time is not None
        assert span.end_time is not None
        assert span.start_time <= span.end_time, span.name
