"""goagent_py.otel with a span processor that raises (a vendor's exporter hook, a filter with a
bug): the run's outcome stands, every span still ends, and the caller's span is current again
after the run, as it is with a processor that works."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from goagent_py import Agent, ToolCall, tool
from goagent_py.orchestration import Pipeline
from goagent_py.otel import instrument
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response


class _Raising(SpanProcessor):
    """Raises when a span whose name starts with ``prefix`` ends."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def on_end(self, span: ReadableSpan) -> None:
        if span.name.startswith(self.prefix):
            raise RuntimeError(f"processor broke on {span.name}")


@tool
def lookup(q: str) -> str:
    """Look up."""
    return "found"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    return InMemorySpanExporter()


def _provider(exporter: InMemorySpanExporter, prefix: str) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(_Raising(prefix))  # first: the exporter after it still runs?
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@pytest.mark.parametrize("prefix", ["invoke_agent", "chat", "execute_tool", "invoke_workflow"])
async def test_a_raising_processor_leaves_no_span_current_and_the_run_stands(
    exporter: InMemorySpanExporter, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    provider = _provider(exporter, prefix)
    hooks = instrument(provider)
    agent = Agent(
        provider=ScriptedProvider(
            tool_call_response(ToolCall("c1", "lookup", {"q": "x"})), text_response("answer")
        ),
        model="m",
        name="a",
        tools=[lookup],
        hooks=hooks,
    )
    flow = Pipeline(agent, name="flow")
    app = provider.get_tracer("app")
    with caplog.at_level(logging.WARNING), app.start_as_current_span("request") as request:
        result = await flow.run("go")
        current = trace.get_current_span()
        with app.start_as_current_span("after"):
            pass
    assert result.text == "answer"
    assert current is request  # nothing of the run stays current in the caller
    after = next(s for s in exporter.get_finished_spans() if s.name == "after")
    assert after.parent is not None
    assert after.parent.span_id == request.get_span_context().span_id
    provider.shutdown()


async def test_a_raising_processor_on_a_plain_run_restores_the_callers_span(
    exporter: InMemorySpanExporter,
) -> None:
    provider = _provider(exporter, "invoke_agent")
    agent = Agent(
        provider=ScriptedProvider(text_response("hi")), model="m", hooks=instrument(provider)
    )
    app: Any = provider.get_tracer("app")
    with app.start_as_current_span("request") as request:
        await agent.run("go")
        assert trace.get_current_span() is request
    provider.shutdown()
