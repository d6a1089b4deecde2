"""goagent_py.otel against the GenAI conventions where a model writes the values (review9d):
finish reasons in the convention's words, and a tool name the model made up kept out of span
names and metric attributes (content, and one metric series per name)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from goagent_py import Agent, StopReason, ToolCall, Usage, tool
from goagent_py.otel import instrument
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response

MADE_UP = "sk-ant-api03-Zq8vX2mN4pL7rT1"  # a key the model wrote as a tool name


class _Telemetry:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def hooks(self, *, capture: bool = False) -> Any:
        return instrument(self.tracer_provider, self.meter_provider, capture_content=capture)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def metric_attributes(self) -> list[dict[str, Any]]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            dict(p.attributes or {})
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            for p in m.data.data_points
        ]


@pytest.fixture
def telemetry() -> Iterator[_Telemetry]:
    found = _Telemetry()
    yield found
    found.tracer_provider.shutdown()
    found.meter_provider.shutdown()


@tool
def lookup(q: str) -> str:
    """Look something up.

    Args:
        q: what.
    """
    return f"found {q}"


async def test_finish_reasons_are_the_conventions_words_as_in_the_output_messages(
    telemetry: _Telemetry,
) -> None:
    provider = ScriptedProvider(
        tool_call_response(("lookup", {"q": "x"}), usage=Usage(input_tokens=3, output_tokens=2)),
        text_response("capped", stop_reason=StopReason.MAX_TOKENS, usage=Usage(1, 1)),
    )
    agent = Agent(provider=provider, model="m", tools=[lookup], hooks=telemetry.hooks())
    await agent.run("go")
    chats = [s for s in telemetry.spans() if s.name == "chat m"]
    reasons = [(s.attributes or {})["gen_ai.response.finish_reasons"] for s in chats]
    assert reasons == [("tool_call",), ("length",)]


async def test_finish_reasons_match_the_captured_output_message(telemetry: _Telemetry) -> None:
    import json

    agent = Agent(
        provider=ScriptedProvider(text_response("hi", usage=Usage(1, 1))),
        model="m",
        hooks=telemetry.hooks(capture=True),
    )
    await agent.run("go")
    (chat,) = [s for s in telemetry.spans() if s.name == "chat m"]
    attributes = chat.attributes or {}
    (said,) = json.loads(str(attributes["gen_ai.output.messages"]))
    assert attributes["gen_ai.response.finish_reasons"] == (said["finish_reason"],) == ("stop",)


@pytest.mark.parametrize("capture", [False, True])
async def test_a_tool_name_the_model_made_up_is_in_no_span_name_or_metric(
    telemetry: _Telemetry, capture: bool
) -> None:
    provider = ScriptedProvider(
        tool_call_response(
            ToolCall("c1", MADE_UP, {"q": "x"}),
            ToolCall("c2", "lookup", {"q": "y"}),
            usage=Usage(1, 1),
        ),
        text_response("done", usage=Usage(1, 1)),
    )
    agent = Agent(
        provider=provider, model="m", tools=[lookup], hooks=telemetry.hooks(capture=capture)
    )
    result = await agent.run("go")
    assert result.text == "done"
    names = sorted(s.name for s in telemetry.spans() if s.name.startswith("execute_tool"))
    assert names == ["execute_tool", "execute_tool lookup"]
    tools = {
        (s.attributes or {})["gen_ai.tool.call.id"]: s.attributes or {}
        for s in telemetry.spans()
        if s.name.startswith("execute_tool")
    }
    assert tools["c1"]["gen_ai.tool.name"] == "_OTHER"
    assert tools["c1"]["error.type"] == "goagent_py.errors.ToolNotFoundError"
    assert tools["c2"]["gen_ai.tool.name"] == "lookup"
    # with capture on, what the model asked for is kept as content: redacted
    assert tools["c1"].get("goagent.tool.requested_name") == ("[REDACTED]" if capture else None)
    seen = [str(v) for a in telemetry.metric_attributes() for v in a.values()]
    assert "_OTHER" in seen
    assert "lookup" in seen
    everything = [s.name for s in telemetry.spans()] + seen
    everything += [str(v) for s in telemetry.spans() for v in (s.attributes or {}).values()]
    everything += [s.status.description or "" for s in telemetry.spans()]
    assert not [v for v in everything if "Zq8vX2mN4pL7rT1" in v]
