"""OpenTelemetry: a sub-agent's ``invoke_agent`` span nests under its parent's tool span."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from goagent_py import Agent
from goagent_py.agent_tool import as_tool
from goagent_py.otel import instrument
from goagent_py.testing import ScriptedProvider, tool_call_response


async def test_invoke_agent_nests_under_invoke_agent() -> None:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    hooks = instrument(tracer_provider)
    child = Agent(provider=ScriptedProvider("found"), model="m", name="researcher", hooks=hooks)
    lead = Agent(
        provider=ScriptedProvider(tool_call_response(("research", {"prompt": "q"})), "done"),
        model="m",
        name="lead",
        hooks=hooks,
        tools=[as_tool(child, name="research", description="R.")],
    )

    await lead.run("go")

    spans = {s.name: s for s in exporter.get_finished_spans()}
    outer, tool_span, inner = (
        spans["invoke_agent lead"],
        spans["execute_tool research"],
        spans["invoke_agent researcher"],
    )
    assert tool_span.parent is not None
    assert tool_span.parent.span_id == outer.context.span_id
    assert inner.parent is not None
    assert inner.parent.span_id == tool_span.context.span_id
    assert inner.context.trace_id == outer.context.trace_id
