"""Print the OpenTelemetry spans and metrics of one agent run to the console.

Run it (offline)::

    pip install "goagent-py[otel-sdk]"
    python examples/otel_console.py                       # the embedded local model
    python examples/otel_console.py --provider scripted   # a scripted model: a fixed demo
    python examples/otel_console.py --provider anthropic:claude-sonnet-4-6

With ``--provider scripted`` it prints the span tree (``invoke_agent calculator`` with two
``chat scripted-model`` spans and two parallel ``execute_tool`` spans, one failing), then each
span as JSON from the SDK's ``ConsoleSpanExporter``, then the token-usage and duration metrics.
Set
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` to also see prompts, answers and
tool arguments on the spans.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from goagent_py import Agent, GoAgentError, ToolCall, Usage
from goagent_py.otel import instrument
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response
from goagent_py.tools import tool_func


async def multiply(args: dict[str, Any]) -> str:
    await asyncio.sleep(0.02)  # pretend to work, so the parallel spans visibly overlap
    return str(args["a"] * args["b"])


async def divide(args: dict[str, Any]) -> str:
    await asyncio.sleep(0.01)
    return str(args["a"] / args["b"])  # 1 / 0 fails: its span ends in ERROR


def tree(spans: list[ReadableSpan]) -> list[str]:
    """The spans as an indented tree, children in start order."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(by_parent.get(parent, []), key=lambda s: s.start_time or 0):
            ms = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
            status = span.status.status_code.name
            lines.append(f"{'  ' * depth}{span.name}  [{status}, {ms:.1f} ms]")
            assert span.context is not None
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines


async def main(provider_spec: str) -> None:
    resource = Resource.create({"service.name": "otel-console-example"})
    collected = InMemorySpanExporter()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    tracer_provider.add_span_processor(SimpleSpanProcessor(collected))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader], resource=resource)

    provider: Any
    if provider_spec != "scripted":
        from goagent_py.providers import provider_from_string

        provider, model = provider_from_string(provider_spec)
    else:
        model = "scripted-model"
        provider = ScriptedProvider(
            tool_call_response(
                ToolCall("call_1", "multiply", {"a": 6, "b": 7}),
                ToolCall("call_2", "divide", {"a": 1, "b": 0}),
                usage=Usage(input_tokens=120, output_tokens=30),
            ),
            text_response("6 x 7 = 42; 1 / 0 is undefined.", usage=Usage(180, 15)),
        )
    agent = Agent(
        provider=provider,
        model=model,
        name="calculator",
        max_iterations=4,
        tools=[
            tool_func("multiply", "Multiply a by b.", None, multiply),
            tool_func("divide", "Divide a by b.", None, divide),
        ],
        hooks=instrument(tracer_provider, meter_provider, provider=provider),
    )
    try:
        answer = (await agent.run("What are 6 x 7 and 1 / 0?")).text
    except GoAgentError as exc:  # a small local model may not finish; the spans still show it
        answer = f"(no answer: {exc})"

    print("answer:", answer)
    print("\nspan tree:")
    for line in tree(list(collected.get_finished_spans())):
        print("  " + line)
    print("\nmetrics:")
    data = reader.get_metrics_data()
    assert data is not None
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.data.data_points:
                    attrs = dict(point.attributes or {})
                    label = attrs.get("gen_ai.token.type") or attrs.get("gen_ai.tool.name") or ""
                    value = getattr(point, "sum", getattr(point, "value", None))
                    print(f"  {metric.name} {label} -> {value} {metric.unit}")
    tracer_provider.shutdown()
    meter_provider.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Print the spans and metrics of one run.")
    parser.add_argument(
        "--provider",
        default="local",
        help="local, scripted, anthropic:MODEL, openai:MODEL or ollama:MODEL",
    )
    asyncio.run(main(parser.parse_args().provider))
