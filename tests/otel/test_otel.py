"""goagent_py.otel: the span tree, metrics, content opt-in and exit paths of instrumented runs.

Providers are passed explicitly (never the global ones) with the SDK's in-memory exporter and
metric reader.
"""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from goagent_py import (
    Agent,
    CircuitBreakerConfig,
    ContentBlock,
    ImageBlock,
    MaxIterationsError,
    Message,
    ProviderError,
    ScoredMessage,
    StopReason,
    TextBlock,
    ToolCall,
    Usage,
    merge_hooks,
)
from goagent_py.hooks import Hooks
from goagent_py.memory.vector.base import (
    BulkVectorStore,
    CountableStore,
    SearchOptions,
    UpsertEntry,
    VectorStore,
)
from goagent_py.messages import Role
from goagent_py.otel import (
    CAPTURE_ENV,
    instrument,
    instrument_embedder,
    instrument_store,
    provider_name_of,
)
from goagent_py.otel._semconv import DB_DURATION_BUCKETS, DURATION_BUCKETS, TOKEN_BUCKETS
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.resilience import RetryPolicy
from goagent_py.testing import FunctionProvider, ScriptedProvider, tool_call_response
from goagent_py.tools import Tool, tool_func

SECRET = "SECRET-7f3a"


class OpenSpans(SpanProcessor):
    """Tracks spans started and not yet ended."""

    def __init__(self) -> None:
        self.open: dict[int, str] = {}

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.open[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        self.open.pop(span.context.span_id, None)


@dataclass
class Telemetry:
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracker: OpenSpans

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, [s.name for s in self.spans()]
        return found[0]

    def hooks(self, **kwargs: Any) -> Hooks:
        kwargs.setdefault("capture_content", False)
        return instrument(self.tracer_provider, self.meter_provider, **kwargs)

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        out: list[Any] = []
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == metric:
                        out.extend(m.data.data_points)
        return out

    def all_attribute_values(self) -> Iterator[str]:
        """Every attribute value, event attribute and status text of every span and metric."""
        for span in self.spans():
            yield span.name
            yield span.status.description or ""
            for value in (span.attributes or {}).values():
                yield str(value)
            for event in span.events:
                for value in (event.attributes or {}).values():
                    yield str(value)
        data = self.reader.get_metrics_data()
        if data is not None:
            for rm in data.resource_metrics:
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        for p in m.data.data_points:
                            yield from (str(v) for v in (p.attributes or {}).values())


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    tracker = OpenSpans()
    tp = TracerProvider()
    tp.add_span_processor(tracker)
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    yield Telemetry(tp, mp, exporter, reader, tracker)
    tp.shutdown()
    mp.shutdown()


def sid(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def _ns(span: ReadableSpan, end: bool = False) -> int:
    value = span.end_time if end else span.start_time
    assert value is not None
    return value


class Barrier:
    """Lets ``n`` concurrent tool calls proceed only once all have started (proves overlap)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.arrived = 0
        self.event = asyncio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived >= self.n:
            self.event.set()
        await self.event.wait()


def barrier_tools(barrier: Barrier) -> list[Tool]:
    async def lookup(args: dict[str, Any]) -> str:
        await barrier.wait()
        return f"found {args.get('q', '')}"

    async def explode(args: dict[str, Any]) -> str:
        await barrier.wait()
        raise RuntimeError(f"kaboom {args.get('q', '')}")

    return [
        tool_func("lookup", "Look something up.", None, lookup),
        tool_func("explode", "Always fails.", None, explode),
    ]


def two_tool_script(text: str = "done", arg: str = "x") -> ScriptedProvider:
    first = tool_call_response(
        ToolCall("call_a", "lookup", {"q": arg}),
        ToolCall("call_b", "explode", {"q": arg}),
        usage=Usage(input_tokens=10, output_tokens=5),
    )
    final = CompletionResponse(
        Message(Role.ASSISTANT, [TextBlock(text)]),
        StopReason.END_TURN,
        Usage(input_tokens=20, output_tokens=7, cache_read_input_tokens=3),
        model="test-model-2025",
    )
    return ScriptedProvider(first, final)


# -- the span tree -------------------------------------------------------------------------------


async def test_span_tree_of_a_run_with_two_parallel_tool_calls_one_failing(otel: Telemetry) -> None:
    provider = two_tool_script()
    agent = Agent(
        provider=provider,
        model="test-model",
        name="helper",
        tools=barrier_tools(Barrier(2)),
        hooks=otel.hooks(provider=provider),
    )
    assert (await agent.run("go")).text == "done"

    assert otel.tracker.open == {}
    root = otel.one("invoke_agent helper")
    chats = sorted(otel.named("chat test-model"), key=_ns)
    lookup = otel.one("execute_tool lookup")
    explode = otel.one("execute_tool explode")
    assert len(otel.spans()) == 5
    assert root.parent is None
    assert root.kind is SpanKind.INTERNAL
    for child in [*chats, lookup, explode]:
        assert parent_id(child) == sid(root)
        assert child.context is not None
        assert root.context is not None
        assert child.context.trace_id == root.context.trace_id

    attrs = dict(root.attributes or {})
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "helper"
    assert attrs["gen_ai.provider.name"] == "scripted"
    assert attrs["gen_ai.request.model"] == "test-model"
    assert attrs["gen_ai.usage.input_tokens"] == 33
    assert attrs["gen_ai.usage.output_tokens"] == 12
    assert attrs["goagent.run.iterations"] == 2
    assert attrs["goagent.run.tool_calls"] == 2
    assert root.status.status_code is StatusCode.OK

    first, second = chats
    assert first.kind is SpanKind.CLIENT
    a1 = dict(first.attributes or {})
    assert a1["gen_ai.operation.name"] == "chat"
    assert a1["gen_ai.provider.name"] == "scripted"
    assert a1["gen_ai.request.model"] == "test-model"
    assert "gen_ai.response.model" not in a1
    assert a1["gen_ai.usage.input_tokens"] == 10
    assert a1["gen_ai.usage.output_tokens"] == 5
    assert a1["gen_ai.response.finish_reasons"] == ("tool_call",)
    a2 = dict(second.attributes or {})
    assert a2["gen_ai.response.model"] == "test-model-2025"
    assert a2["gen_ai.usage.input_tokens"] == 23  # cached input counts as input
    assert a2["gen_ai.usage.cache_read.input_tokens"] == 3
    assert a2["gen_ai.response.finish_reasons"] == ("stop",)

    la = dict(lookup.attributes or {})
    assert la["gen_ai.operation.name"] == "execute_tool"
    assert la["gen_ai.tool.name"] == "lookup"
    assert la["gen_ai.tool.call.id"] == "call_a"
    assert "error.type" not in la
    assert lookup.status.status_code is StatusCode.OK
    ea = dict(explode.attributes or {})
    assert ea["gen_ai.tool.call.id"] == "call_b"
    assert ea["error.type"] == "RuntimeError"  # what the tool raised
    assert explode.status.status_code is StatusCode.ERROR
    assert lookup.kind is SpanKind.INTERNAL

    # Siblings with their real, overlapping times, between the two model calls.
    assert _ns(lookup) < _ns(explode, end=True)
    assert _ns(explode) < _ns(lookup, end=True)
    assert _ns(first, end=True) <= min(_ns(lookup), _ns(explode))
    assert max(_ns(lookup, end=True), _ns(explode, end=True)) <= _ns(second)
    assert _ns(root) <= _ns(first)
    assert _ns(second, end=True) <= _ns(root, end=True)

    # One point per attribute set: the second call also carries gen_ai.response.model.
    usage = otel.points("gen_ai.client.token.usage")
    seen = sorted(
        (
            p.attributes["gen_ai.token.type"],
            p.attributes.get("gen_ai.response.model", ""),
            p.count,
            p.sum,
        )
        for p in usage
    )
    assert seen == [
        ("input", "", 1, 10),
        ("input", "test-model-2025", 1, 23),
        ("output", "", 1, 5),
        ("output", "test-model-2025", 1, 7),
    ]
    for p in usage:
        assert isinstance(p, HistogramDataPoint)
        assert tuple(p.explicit_bounds) == TOKEN_BUCKETS
        attrs = dict(p.attributes or {})
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.provider.name"] == "scripted"
        assert attrs["gen_ai.request.model"] == "test-model"

    durations = otel.points("gen_ai.client.operation.duration")
    assert sum(p.count for p in durations) == 2
    assert all(tuple(p.explicit_bounds) == DURATION_BUCKETS for p in durations)

    errors = otel.points("goagent.tool.errors")
    assert [(p.value, p.attributes["gen_ai.tool.name"]) for p in errors] == [(1, "explode")]
    tool_durations = otel.points("gen_ai.execute_tool.duration")
    assert sum(p.count for p in tool_durations) == 2
    assert sum(p.count for p in otel.points("gen_ai.invoke_agent.duration")) == 1


async def test_run_span_nests_under_the_callers_span_and_context_is_restored(
    otel: Telemetry,
) -> None:
    provider = ScriptedProvider("hi")
    agent = Agent(provider=provider, model="m", hooks=otel.hooks(provider_name="acme"))
    tracer = otel.tracer_provider.get_tracer("caller")
    with tracer.start_as_current_span("request") as caller:
        await agent.run("hello")
        assert trace.get_current_span() is caller
    root = otel.one("invoke_agent")  # no agent name
    assert parent_id(root) == caller.get_span_context().span_id
    assert dict(root.attributes or {})["gen_ai.provider.name"] == "acme"
    assert trace.get_current_span() is trace.INVALID_SPAN


async def test_the_call_span_is_current_in_the_tool_the_chat_span_in_the_provider_call(
    otel: Telemetry,
) -> None:
    seen: dict[str, list[int]] = {"tool": [], "chat": [], "between": []}

    def current() -> int:
        return trace.get_current_span().get_span_context().span_id

    async def probe(args: dict[str, Any]) -> str:
        seen["tool"].append(current())
        return "ok"

    async def model(request: CompletionRequest) -> CompletionResponse | str:
        seen["chat"].append(current())
        if len(request.messages) == 1:
            return tool_call_response(("probe", {}))
        return "done"

    def transform(messages: list[Message]) -> list[Message]:
        seen["between"].append(current())  # in the run's task, before each model call
        return messages

    agent = Agent(
        provider=FunctionProvider(model),
        model="m",
        tools=[tool_func("probe", "Probe.", None, probe)],
        transform_context=transform,
        hooks=otel.hooks(),
    )
    await agent.run("go")
    root = otel.one("invoke_agent")
    chats = sorted(otel.named("chat m"), key=_ns)
    assert seen["chat"] == [sid(c) for c in chats]
    assert seen["tool"] == [sid(otel.one("execute_tool probe"))]
    # The call's span never leaked into the run's context (a lone call runs in a task too).
    assert seen["between"] == [sid(root), sid(root)]
    assert trace.get_current_span() is trace.INVALID_SPAN


@pytest.mark.parametrize("execution", ["parallel", "sequential"])
async def test_spans_made_inside_async_and_sync_tools_are_children_of_their_call_span(
    otel: Telemetry, execution: str
) -> None:
    tracer = otel.tracer_provider.get_tracer("inside-tools")
    barrier = Barrier(2 if execution == "parallel" else 1)
    threads: list[str] = []

    async def fetch(args: dict[str, Any]) -> str:
        with tracer.start_as_current_span(f"inner fetch {args['q']}"):
            await barrier.wait()  # in parallel, both fetch calls are in flight at once
            with tracer.start_as_current_span(f"innermost fetch {args['q']}"):
                return "fetched"

    def crunch(args: dict[str, Any]) -> str:  # sync: runs in a worker thread
        threads.append(threading.current_thread().name)
        with tracer.start_as_current_span("inner crunch"):
            return "crunched"

    provider = ScriptedProvider(
        tool_call_response(
            ToolCall("f1", "fetch", {"q": "one"}),
            ToolCall("f2", "fetch", {"q": "two"}),
            ToolCall("c1", "crunch", {}),
        ),
        "done",
    )
    agent = Agent(
        provider=provider,
        model="m",
        tools=[
            tool_func("fetch", "Fetch.", None, fetch),
            tool_func("crunch", "Crunch.", None, crunch),
        ],
        tool_execution=execution,  # type: ignore[arg-type]
        hooks=otel.hooks(),
    )
    assert (await agent.run("go")).text == "done"
    assert otel.tracker.open == {}
    [thread] = threads
    assert thread.startswith("goagent-tool-")  # not the event loop's thread

    root = otel.one("invoke_agent")
    calls = {
        dict(s.attributes or {})["gen_ai.tool.call.id"]: s
        for s in otel.spans()
        if s.name.startswith("execute_tool ")
    }
    assert sorted(calls) == ["c1", "f1", "f2"]
    assert all(parent_id(c) == sid(root) for c in calls.values())
    assert parent_id(otel.one("inner fetch one")) == sid(calls["f1"])
    assert parent_id(otel.one("inner fetch two")) == sid(calls["f2"])
    assert parent_id(otel.one("innermost fetch one")) == sid(otel.one("inner fetch one"))
    assert parent_id(otel.one("inner crunch")) == sid(calls["c1"])
    for name, call_id in [("inner fetch one", "f1"), ("inner crunch", "c1")]:
        inner, call = otel.one(name), calls[call_id]
        assert _ns(call) <= _ns(inner) <= _ns(inner, end=True) <= _ns(call, end=True)
    if execution == "parallel":  # real, overlapping times
        assert _ns(calls["f1"]) < _ns(calls["f2"], end=True)
        assert _ns(calls["f2"]) < _ns(calls["f1"], end=True)
    assert trace.get_current_span() is trace.INVALID_SPAN


async def test_a_blocked_call_gets_a_span_of_its_own_beside_its_running_sibling(
    otel: Telemetry,
) -> None:
    tracer = otel.tracer_provider.get_tracer("inside-tools")

    async def delete(args: dict[str, Any]) -> str:
        with tracer.start_as_current_span("inner delete"):
            await asyncio.sleep(0.01)
        return "deleted"

    def approve(call: ToolCall) -> str | None:
        return "too many" if call.arguments["n"] > 10 else None

    provider = ScriptedProvider(
        tool_call_response(
            ToolCall("big", "delete", {"n": 50}), ToolCall("small", "delete", {"n": 1})
        ),
        "ok",
    )
    agent = Agent(
        provider=provider,
        model="m",
        tools=[tool_func("delete", "Delete.", None, delete)],
        before_tool_call=approve,
        hooks=otel.hooks(),
    )
    assert (await agent.run("go")).text == "ok"
    assert otel.tracker.open == {}
    calls = {
        dict(s.attributes or {})["gen_ai.tool.call.id"]: s
        for s in otel.named("execute_tool delete")
    }
    blocked, ran = calls["big"], calls["small"]
    assert dict(blocked.attributes or {})["error.type"] == "goagent_py.errors.ToolBlockedError"
    assert blocked.status.status_code is StatusCode.ERROR
    assert _ns(blocked, end=True) == _ns(blocked)  # it never ran
    assert ran.status.status_code is StatusCode.OK
    assert _ns(ran, end=True) - _ns(ran) >= 5_000_000
    assert parent_id(otel.one("inner delete")) == sid(ran)
    # The blocked call's span did not last as long as its sibling.
    assert _ns(blocked, end=True) < _ns(ran, end=True)


# -- content -------------------------------------------------------------------------------------


def secret_agent(otel: Telemetry, **hook_kwargs: Any) -> Agent:
    async def echo(args: dict[str, Any]) -> str:
        return f"result {SECRET}"

    provider = ScriptedProvider(
        tool_call_response(("echo", {"text": SECRET}), usage=Usage(5, 5)),
        f"answer {SECRET}",
    )
    return Agent(
        provider=provider,
        model="m",
        system_prompt=f"system {SECRET}",
        tools=[tool_func("echo", "Echo.", None, echo)],
        hooks=otel.hooks(**hook_kwargs),
    )


async def test_no_content_in_spans_or_metrics_by_default(
    otel: Telemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CAPTURE_ENV, raising=False)
    agent = secret_agent(otel, capture_content=None)
    await agent.run(f"prompt {SECRET}")
    values = list(otel.all_attribute_values())
    assert values
    assert not [v for v in values if SECRET in v]
    for span in otel.spans():
        keys = set(span.attributes or {})
        assert not keys & {"gen_ai.input.messages", "gen_ai.output.messages"}


async def test_failures_do_not_leak_content_unless_opted_in(otel: Telemetry) -> None:
    # MaxIterationsError's message quotes the model's last thought.
    provider = ScriptedProvider(tool_call_response(("echo", {}), text=f"thinking {SECRET}"))

    async def echo(args: dict[str, Any]) -> str:
        raise ValueError(f"tool failed on {SECRET}")

    agent = Agent(
        provider=provider,
        model="m",
        max_iterations=1,
        tools=[tool_func("echo", "Echo.", None, echo)],
        hooks=otel.hooks(),
    )
    with pytest.raises(MaxIterationsError):
        await agent.run("go")
    assert not [v for v in otel.all_attribute_values() if SECRET in v]
    root = otel.one("invoke_agent")
    assert root.status.description == "goagent_py.errors.MaxIterationsError"


async def test_content_is_captured_when_opted_in(otel: Telemetry) -> None:
    agent = secret_agent(otel, capture_content=True)
    await agent.run(f"prompt {SECRET}")
    root = dict(otel.one("invoke_agent").attributes or {})
    assert f"prompt {SECRET}" in str(root["gen_ai.input.messages"])
    assert f"answer {SECRET}" in str(root["gen_ai.output.messages"])
    first, second = sorted(otel.named("chat m"), key=_ns)
    a1 = dict(first.attributes or {})
    assert f"system {SECRET}" in str(a1["gen_ai.system_instructions"])
    assert '"role":"user"' in str(a1["gen_ai.input.messages"])
    assert '"type":"tool_call"' in str(a1["gen_ai.output.messages"])
    assert '"finish_reason":"tool_call"' in str(a1["gen_ai.output.messages"])
    a2 = dict(second.attributes or {})
    assert f"answer {SECRET}" in str(a2["gen_ai.output.messages"])
    assert '"type":"tool_call_response"' in str(a2["gen_ai.input.messages"])
    tool = dict(otel.one("execute_tool echo").attributes or {})
    assert SECRET in str(tool["gen_ai.tool.call.arguments"])
    assert tool["gen_ai.tool.call.result"] == f"result {SECRET}"
    assert otel.tracker.open == {}
    # Metric attributes never hold content, even when spans do.
    for metric in ("gen_ai.client.operation.duration", "gen_ai.client.token.usage"):
        for p in otel.points(metric):
            assert not [v for v in p.attributes.values() if SECRET in str(v)]


@pytest.mark.parametrize(
    ("env", "explicit", "captured"),
    [
        ("true", None, True),
        ("TRUE", None, True),
        ("false", None, False),
        ("true", False, False),
        ("", True, True),
    ],
)
async def test_the_environment_variable_opts_in_unless_overridden(
    otel: Telemetry,
    monkeypatch: pytest.MonkeyPatch,
    env: str,
    explicit: bool | None,
    captured: bool,
) -> None:
    monkeypatch.setenv(CAPTURE_ENV, env)
    agent = secret_agent(otel, capture_content=explicit)
    await agent.run(f"prompt {SECRET}")
    leaked = any(SECRET in v for v in otel.all_attribute_values())
    assert leaked is captured


async def test_image_bytes_are_never_recorded(otel: Telemetry) -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"IMAGEBYTES" * 20
    provider = ScriptedProvider("a picture")
    agent = Agent(provider=provider, model="m", hooks=otel.hooks(capture_content=True))
    await agent.run([TextBlock("what is this?"), ImageBlock(png, "image/png")])
    encoded = base64.b64encode(png).decode()
    values = list(otel.all_attribute_values())
    assert any('"type":"image"' in v and '"mime_type":"image/png"' in v for v in values)
    assert not [v for v in values if "IMAGEBYTES" in v or encoded[:40] in v]


# -- exit paths ----------------------------------------------------------------------------------


async def test_provider_error_ends_every_span_with_error_status(otel: Telemetry) -> None:
    provider = ScriptedProvider(ProviderError("overloaded", provider="x", status=529))
    agent = Agent(provider=provider, model="m", name="a", hooks=otel.hooks())
    with pytest.raises(ProviderError):
        await agent.run("go")
    assert otel.tracker.open == {}
    chat = otel.one("chat m")
    assert chat.status.status_code is StatusCode.ERROR
    assert dict(chat.attributes or {})["error.type"] == "529"
    root = otel.one("invoke_agent a")
    assert root.status.status_code is StatusCode.ERROR
    assert dict(root.attributes or {})["error.type"] == "529"
    [point] = otel.points("gen_ai.client.operation.duration")
    assert point.attributes["error.type"] == "529"
    assert otel.points("gen_ai.client.token.usage") == []
    assert trace.get_current_span() is trace.INVALID_SPAN


async def test_a_mid_stream_overloaded_error_is_recorded_by_its_type_not_200(
    otel: Telemetry,
) -> None:
    """Issue 21 defect 9: the error event arrives after HTTP 200; its type is what went wrong."""
    import httpx

    from goagent_py.providers.anthropic import AnthropicProvider

    sse = (
        Path(__file__).parent.parent / "fixtures/anthropic/stream_error_overloaded.sse"
    ).read_bytes()
    transport = httpx.MockTransport(
        lambda _: httpx.Response(200, content=sse, headers={"content-type": "text/event-stream"})
    )
    async with httpx.AsyncClient(transport=transport) as client:
        provider = AnthropicProvider(api_key="k", http_client=client)
        agent = Agent(provider=provider, model="m", name="a", hooks=otel.hooks())
        with pytest.raises(ProviderError) as info:
            async for _ in agent.stream("go"):
                pass
    assert (info.value.status, info.value.error_type) == (200, "overloaded_error")
    assert dict(otel.one("chat m").attributes or {})["error.type"] == "overloaded_error"
    assert dict(otel.one("invoke_agent a").attributes or {})["error.type"] == "overloaded_error"
    [point] = otel.points("gen_ai.client.operation.duration")
    assert point.attributes["error.type"] == "overloaded_error"


async def test_error_type_falls_back_to_the_status_for_untyped_or_wordy_errors(
    otel: Telemetry,
) -> None:
    wordy = ProviderError("x", provider="p", status=502, error_type="Bad gateway, try later")
    provider = ScriptedProvider(ProviderError("x", provider="p", status=503), wordy)
    agent = Agent(provider=provider, model="m", hooks=otel.hooks())
    for _ in range(2):
        with pytest.raises(ProviderError):
            await agent.run("go")
    assert [dict(s.attributes or {})["error.type"] for s in otel.named("chat m")] == ["503", "502"]


async def test_a_key_echoed_by_the_provider_is_in_no_span_even_when_capturing(
    otel: Telemetry,
) -> None:
    """Issue 21 defect 6: with content capture on, the exception message goes into spans."""
    import httpx

    from goagent_py.providers.anthropic import AnthropicProvider

    key = "Zq81mXk2Lw9Pq3Rt7Yv5Nb6Hc4Jd0Fs1Ga8Ke2W"

    def echo(request: httpx.Request) -> httpx.Response:
        body = {"type": "error", "error": {"type": "authentication_error", "message": key}}
        return httpx.Response(401, json=body)

    async with httpx.AsyncClient(transport=httpx.MockTransport(echo)) as client:
        provider = AnthropicProvider(api_key=key, http_client=client)
        agent = Agent(provider=provider, model="m", hooks=otel.hooks(capture_content=True))
        with pytest.raises(ProviderError):
            await agent.run("go")
    values = list(otel.all_attribute_values())
    assert any("authentication_error" in v for v in values)  # the error was recorded...
    assert not [v for v in values if key in v]  # ...without the key
    for span in otel.spans():
        for event in span.events:
            assert key not in str(dict(event.attributes or {}))


async def test_max_iterations_ends_every_span(otel: Telemetry) -> None:
    async def noop(args: dict[str, Any]) -> str:
        return "ok"

    provider = ScriptedProvider(tool_call_response(("noop", {})), tool_call_response(("noop", {})))
    agent = Agent(
        provider=provider,
        model="m",
        max_iterations=2,
        tools=[tool_func("noop", "Nothing.", None, noop)],
        hooks=otel.hooks(capture_content=True),
    )
    with pytest.raises(MaxIterationsError):
        await agent.run("go")
    assert otel.tracker.open == {}
    assert len(otel.named("chat m")) == 2
    assert len(otel.named("execute_tool noop")) == 2
    root = otel.one("invoke_agent")
    assert dict(root.attributes or {})["error.type"] == "goagent_py.errors.MaxIterationsError"


async def test_cancelling_the_run_task_ends_every_span(otel: Telemetry) -> None:
    called = asyncio.Event()

    async def hang(request: CompletionRequest) -> CompletionResponse:
        called.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    agent = Agent(provider=FunctionProvider(hang), model="m", hooks=otel.hooks())
    task = asyncio.create_task(agent.run("go"))
    await called.wait()
    assert set(otel.tracker.open.values()) == {"invoke_agent", "chat m"}
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert otel.tracker.open == {}
    chat = otel.one("chat m")
    assert chat.status.status_code is StatusCode.ERROR
    assert dict(chat.attributes or {})["error.type"] == "asyncio.exceptions.CancelledError"
    assert otel.one("invoke_agent").status.status_code is StatusCode.ERROR


async def test_cancelling_during_parallel_tools_ends_every_span(otel: Telemetry) -> None:
    started = asyncio.Event()

    async def hang(args: dict[str, Any]) -> str:
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    provider = ScriptedProvider(tool_call_response(("hang", {}), ("hang", {})))
    agent = Agent(
        provider=provider,
        model="m",
        tools=[tool_func("hang", "Hang.", None, hang)],
        hooks=otel.hooks(capture_content=True),
    )
    task = asyncio.create_task(agent.run("go"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert otel.tracker.open == {}
    assert otel.one("chat m").end_time is not None  # deferred for content, still ended
    hung = otel.named("execute_tool hang")
    assert len(hung) == 2
    for span in hung:
        assert span.status.status_code is StatusCode.ERROR
        assert dict(span.attributes or {})["error.type"] == "asyncio.exceptions.CancelledError"
    assert otel.one("invoke_agent").status.status_code is StatusCode.ERROR


async def test_closing_a_stream_early_ends_every_span(otel: Telemetry) -> None:
    provider = ScriptedProvider("one two three")
    agent = Agent(provider=provider, model="m", hooks=otel.hooks())
    stream = agent.stream("go")
    async for _ in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    assert otel.tracker.open == {}
    assert trace.get_current_span() is trace.INVALID_SPAN


async def test_a_user_hook_still_runs_alongside(otel: Telemetry) -> None:
    ended: list[str] = []
    hooks = merge_hooks(otel.hooks(), Hooks(on_run_end=lambda r: ended.append(r.text)))
    agent = Agent(provider=ScriptedProvider("ok"), model="m", hooks=hooks)
    await agent.run("go")
    assert ended == ["ok"]
    assert otel.one("invoke_agent").end_time is not None


# -- concurrency ---------------------------------------------------------------------------------


async def test_two_concurrent_runs_of_one_agent_make_two_separate_trees(otel: Telemetry) -> None:
    barrier = Barrier(2)

    async def wait(args: dict[str, Any]) -> str:
        await barrier.wait()  # both runs are inside a tool call at once
        return "ok"

    provider = ScriptedProvider(
        tool_call_response(("wait", {})), tool_call_response(("wait", {})), "a", "b"
    )
    agent = Agent(
        provider=provider,
        model="m",
        name="twin",
        tools=[tool_func("wait", "Wait.", None, wait)],
        hooks=otel.hooks(),
    )
    tracer = otel.tracer_provider.get_tracer("caller")

    async def run(label: str) -> str:
        with tracer.start_as_current_span(f"caller {label}"):
            return (await agent.run(label)).text

    assert sorted(await asyncio.gather(run("one"), run("two"))) == ["a", "b"]
    assert otel.tracker.open == {}
    roots = otel.named("invoke_agent twin")
    assert len(roots) == 2
    callers = {sid(s): s for s in otel.spans() if s.name.startswith("caller ")}
    for root in roots:
        assert parent_id(root) in callers
        children = [s for s in otel.spans() if parent_id(s) == sid(root)]
        assert sorted(s.name for s in children) == ["chat m", "chat m", "execute_tool wait"]
        assert root.context is not None
        assert all(
            c.context is not None and c.context.trace_id == root.context.trace_id for c in children
        )
    trace_ids = {r.context.trace_id for r in roots if r.context is not None}
    assert len(trace_ids) == 2


# -- tool events ---------------------------------------------------------------------------------


async def test_timeout_and_circuit_open_become_events_of_the_tool_span(otel: Telemetry) -> None:
    async def stuck(args: dict[str, Any]) -> str:
        await asyncio.Event().wait()
        return "unreachable"

    provider = ScriptedProvider(
        tool_call_response(("stuck", {})), tool_call_response(("stuck", {})), "gave up"
    )
    agent = Agent(
        provider=provider,
        model="m",
        tools=[tool_func("stuck", "Stuck.", None, stuck)],
        tool_timeout=0.01,
        circuit_breaker=CircuitBreakerConfig(1, 60.0),
        hooks=otel.hooks(),
    )
    assert (await agent.run("go")).text == "gave up"
    first, second = sorted(otel.named("execute_tool stuck"), key=_ns)
    assert [e.name for e in first.events if e.name.startswith("goagent.")] == [
        "goagent.tool.timeout"
    ]
    assert dict(first.attributes or {})["error.type"] == "goagent_py.errors.ToolTimeoutError"
    assert [e.name for e in second.events if e.name.startswith("goagent.")] == [
        "goagent.tool.circuit_open"
    ]
    assert dict(second.attributes or {})["error.type"] == "goagent_py.errors.CircuitOpenError"
    for span in (first, second):
        for event in span.events:
            assert _ns(span) - 5_000_000 <= event.timestamp <= _ns(span, end=True) + 5_000_000


async def test_tool_events_land_on_the_span_of_their_call_among_parallel_calls_of_one_tool(
    otel: Telemetry,
) -> None:
    """Of two overlapping calls of one tool, only "b" retries then times out: only its span has
    the events, though "a" ends first and its time window holds the retry."""
    retried = asyncio.Event()
    attempts = 0

    async def fetch(args: dict[str, Any]) -> str:
        nonlocal attempts
        if args["q"] == "ok":
            await retried.wait()  # overlaps b's retry
            return "fetched"
        attempts += 1
        if attempts == 1:
            raise ConnectionError("reset")
        await asyncio.Event().wait()  # the second attempt hangs until the timeout
        return "unreachable"

    async def no_sleep(_: float) -> None:
        return None

    provider = ScriptedProvider(
        tool_call_response(
            ToolCall("call_a", "fetch", {"q": "ok"}), ToolCall("call_b", "fetch", {"q": "bad"})
        ),
        "done",
    )
    agent = Agent(
        provider=provider,
        model="m",
        tools=[tool_func("fetch", "Fetch.", None, fetch)],
        # The timeout bounds "a" too, which waits for b's retry: at 0.05 s a busy machine could
        # time "a" out before b retried (it did, at load 20). b's hang costs this second.
        tool_timeout=1.0,
        tool_retry=RetryPolicy(sleep=no_sleep),
        hooks=merge_hooks(otel.hooks(), Hooks(on_tool_retry=lambda *a: retried.set())),
    )
    assert (await agent.run("go")).text == "done"
    spans = {
        dict(s.attributes or {})["gen_ai.tool.call.id"]: s for s in otel.named("execute_tool fetch")
    }
    a, b = spans["call_a"], spans["call_b"]
    assert a.status.status_code is StatusCode.OK
    assert [e.name for e in a.events] == []
    assert dict(b.attributes or {})["error.type"] == "goagent_py.errors.ToolTimeoutError"
    assert [e.name for e in b.events if e.name.startswith("goagent.")] == [
        "goagent.tool.retry",
        "goagent.tool.timeout",
    ]
    retry = next(e for e in b.events if e.name == "goagent.tool.retry")
    assert dict(retry.attributes or {})["goagent.tool.retry.attempt"] == 1
    assert _ns(a) <= retry.timestamp <= _ns(a, end=True)  # a time window could not tell


# -- memory --------------------------------------------------------------------------------------


class ListMemory:
    def __init__(self) -> None:
        self.items: list[Message] = []

    async def messages(self) -> list[Message]:
        return list(self.items)

    async def append(self, *messages: Message) -> None:
        self.items.extend(messages)


class RecallMemory:
    def __init__(self) -> None:
        self.stored: list[Message] = []

    async def retrieve(
        self, query: list[ContentBlock], *, top_k: int, session: str = ""
    ) -> list[ScoredMessage]:
        return [ScoredMessage(Message(Role.USER, [TextBlock(f"old {SECRET}")]), 0.9, "m1")]

    async def store(self, messages: list[Message], *, session: str = "") -> None:
        self.stored.extend(messages)


async def test_memory_spans_are_children_of_the_run(otel: Telemetry) -> None:
    agent = Agent(
        provider=ScriptedProvider("ok"),
        model="m",
        short_term_memory=ListMemory(),
        long_term_memory=RecallMemory(),
        hooks=otel.hooks(),
    )
    await agent.run("go")
    root = otel.one("invoke_agent")
    memory = sorted((s for s in otel.spans() if s.name.endswith("_memory")), key=lambda s: _ns(s))
    seen = [
        (
            s.name,
            dict(s.attributes or {})["gen_ai.memory.store.id"],
            dict(s.attributes or {})["gen_ai.memory.record.count"],
        )
        for s in memory
    ]
    assert seen == [
        ("search_memory", "long_term", 1),
        ("search_memory", "short_term", 0),
        ("create_memory", "short_term", 2),
        ("upsert_memory", "long_term", 2),
    ]
    assert all(parent_id(s) == sid(root) for s in memory)
    assert all(_ns(s, end=True) <= _ns(root, end=True) for s in memory)
    assert not [v for v in otel.all_attribute_values() if SECRET in v]


# -- vector stores and embedders -----------------------------------------------------------------


class DictStore:
    """A plain VectorStore (no bulk, no count)."""

    def __init__(self) -> None:
        self.entries: dict[str, Message] = {}

    async def upsert(self, id: str, vector: Any, message: Message) -> None:
        self.entries[id] = message

    async def search(
        self, vector: Any, options: SearchOptions | None = None
    ) -> list[ScoredMessage]:
        if options is not None and options.filter == {"fail": True}:
            raise ConnectionError(f"lost {SECRET}")
        k = (options or SearchOptions()).top_k
        return [ScoredMessage(m, 1.0, i) for i, m in list(self.entries.items())[:k]]

    async def delete(self, id: str) -> None:
        self.entries.pop(id, None)


class BulkDictStore(DictStore):
    async def upsert_batch(self, entries: Sequence[UpsertEntry]) -> None:
        for e in entries:
            self.entries[e.id] = e.message

    async def delete_batch(self, ids: Sequence[str]) -> None:
        for i in ids:
            self.entries.pop(i, None)

    async def count(self) -> int:
        return len(self.entries)


async def test_instrument_store_spans_metrics_and_capabilities(otel: Telemetry) -> None:
    plain = instrument_store(
        DictStore(), tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider
    )
    assert isinstance(plain, VectorStore)
    assert not isinstance(plain, BulkVectorStore)
    assert not isinstance(plain, CountableStore)

    store = instrument_store(
        BulkDictStore(),
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        system="testdb",
        collection="docs",
        capture_content=False,
    )
    assert isinstance(store, BulkVectorStore)
    assert isinstance(store, CountableStore)
    tracer = otel.tracer_provider.get_tracer("caller")
    msg = Message(Role.USER, [TextBlock("hello")])
    with tracer.start_as_current_span("caller") as caller:
        await store.upsert("a", [1.0, 0.0], msg)
        await store.upsert_batch(
            [UpsertEntry("b", [0.0, 1.0], msg), UpsertEntry("c", [1.0, 1.0], msg)]
        )
        found = await store.search([1.0, 0.0], SearchOptions(top_k=2))
        with pytest.raises(ConnectionError):
            await store.search([1.0, 0.0], SearchOptions(filter={"fail": True}))
        await store.delete("a")
        await store.delete_batch(["b"])
        assert await store.count() == 1
    assert len(found) == 2
    names = [s.name for s in sorted(otel.spans(), key=_ns) if s.name != "caller"]
    assert names == [
        "upsert docs",
        "upsert_batch docs",
        "search docs",
        "search docs",
        "delete docs",
        "delete_batch docs",
        "count docs",
    ]
    caller_id = caller.get_span_context().span_id
    for span in otel.spans():
        if span.name == "caller":
            continue
        attrs = dict(span.attributes or {})
        assert parent_id(span) == caller_id
        assert span.kind is SpanKind.CLIENT
        assert attrs["db.system.name"] == "testdb"
        assert attrs["db.collection.name"] == "docs"
    ok, failed = otel.named("search docs")
    assert dict(ok.attributes or {})["db.response.returned_rows"] == 2
    assert dict(ok.attributes or {})["goagent.vector.top_k"] == 2
    assert failed.status.status_code is StatusCode.ERROR
    assert dict(failed.attributes or {})["error.type"] == "ConnectionError"
    assert dict(otel.one("upsert_batch docs").attributes or {})["db.operation.batch.size"] == 2
    assert not [v for v in otel.all_attribute_values() if SECRET in v]

    points = otel.points("db.client.operation.duration")
    assert sum(p.count for p in points) == 7
    assert all(tuple(p.explicit_bounds) == DB_DURATION_BUCKETS for p in points)
    assert [p.attributes.get("error.type") for p in points if "error.type" in p.attributes] == [
        "ConnectionError"
    ]


async def test_an_instrumented_store_keeps_listing_and_guarded_writes(
    otel: Telemetry, tmp_path: Path
) -> None:
    from goagent_py.memory.vector import GuardedStore, ListableStore, SqliteVecStore

    pytest.importorskip("sqlite_vec")
    inner = SqliteVecStore(tmp_path / "v.db", dimensions=2)
    store = instrument_store(
        inner, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider
    )
    assert isinstance(store, GuardedStore)
    assert isinstance(store, ListableStore)
    msg = Message(Role.USER, [TextBlock("hello")], metadata={"session": "s"})
    version = await store.version({"session": "s"})
    entry = UpsertEntry("a", [1.0, 0.0], msg)
    assert await store.upsert_batch_if([entry], filter={"session": "s"}, version=version)
    assert not await store.upsert_batch_if([entry], filter={"session": "s"}, version=version)
    assert len(await store.entries({"session": "s"})) == 1
    written = [
        dict(s.attributes or {})["goagent.vector.written"]
        for s in sorted(otel.spans(), key=_ns)
        if s.name.startswith("upsert_batch_if")
    ]
    assert written == [True, False]
    [listing] = [s for s in otel.spans() if s.name.startswith("entries")]
    assert dict(listing.attributes or {})["db.response.returned_rows"] == 1
    await store.aclose()


async def test_store_calls_made_by_a_tool_nest_under_its_call_span(otel: Telemetry) -> None:
    store = instrument_store(DictStore(), tracer_provider=otel.tracer_provider, system="t")

    async def remember(args: dict[str, Any]) -> str:
        await store.upsert("k", [1.0], Message(Role.USER, [TextBlock("x")]))
        return "stored"

    provider = ScriptedProvider(tool_call_response(("remember", {})), "ok")
    agent = Agent(
        provider=provider,
        model="m",
        tools=[tool_func("remember", "Remember.", None, remember)],
        hooks=otel.hooks(),
    )
    await agent.run("go")
    call_span = otel.one("execute_tool remember")
    assert parent_id(otel.one("upsert t")) == sid(call_span)
    assert parent_id(call_span) == sid(otel.one("invoke_agent"))


class FakeEmbedder:
    model = "fake-embed-1"

    async def embed(self, blocks: Sequence[ContentBlock]) -> Any:
        return np.zeros(4, dtype=np.float32)


class FakeBatchEmbedder(FakeEmbedder):
    async def embed_batch(self, inputs: Sequence[Sequence[ContentBlock]]) -> Any:
        if not inputs:
            raise ValueError("nothing to embed")
        return np.zeros((len(inputs), 4), dtype=np.float32)


async def test_instrument_embedder(otel: Telemetry) -> None:
    from goagent_py.memory.base import BatchEmbedder, Embedder

    plain = instrument_embedder(FakeEmbedder(), tracer_provider=otel.tracer_provider)
    assert isinstance(plain, Embedder)
    assert not isinstance(plain, BatchEmbedder)
    batch = instrument_embedder(
        FakeBatchEmbedder(),
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        provider_name="local",
    )
    assert isinstance(batch, BatchEmbedder)
    await plain.embed([TextBlock("a")])
    await batch.embed_batch([[TextBlock("a")], [TextBlock("b")]])
    with pytest.raises(ValueError, match="nothing"):
        await batch.embed_batch([])
    spans = otel.named("embeddings fake-embed-1")
    assert len(spans) == 3
    first = dict(spans[0].attributes or {})
    assert first["gen_ai.operation.name"] == "embeddings"
    assert first["gen_ai.provider.name"] == "fake"
    assert first["gen_ai.embeddings.dimension.count"] == 4
    assert dict(spans[1].attributes or {})["gen_ai.provider.name"] == "local"
    assert spans[2].status.status_code is StatusCode.ERROR
    points = otel.points("gen_ai.client.operation.duration")
    assert sum(p.count for p in points) == 2  # the plain one went to the global (no-op) meter


# -- naming and packaging ------------------------------------------------------------------------


def test_provider_names_follow_the_convention() -> None:
    def named(cls_name: str, **attrs: Any) -> object:
        return type(cls_name, (), attrs)()

    assert provider_name_of(named("AnthropicProvider")) == "anthropic"
    assert provider_name_of(named("OpenAIProvider")) == "openai"
    assert provider_name_of(named("OllamaProvider")) == "ollama"
    assert provider_name_of(named("LlamaCppProvider")) == "llama_cpp"
    assert provider_name_of(named("GeminiProvider")) == "gcp.gemini"
    assert provider_name_of(named("MistralProvider")) == "mistral_ai"
    assert provider_name_of(named("VoyageEmbedder")) == "voyage"
    assert provider_name_of(named("Custom", provider_name="my.llm")) == "my.llm"
    assert provider_name_of(ScriptedProvider()) == "scripted"


def test_importing_goagent_py_does_not_import_opentelemetry() -> None:
    code = (
        "import sys, goagent_py, goagent_py.testing; "
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')]; "
        "import goagent_py.otel; "
        "assert 'opentelemetry.trace' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_public_names() -> None:
    import goagent_py.otel as otel_module

    assert otel_module.__all__ == sorted(otel_module.__all__, key=str.casefold)
    for name in otel_module.__all__:
        assert getattr(otel_module, name).__doc__ or name == "CAPTURE_ENV"


def test_the_console_example_prints_the_span_tree() -> None:
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, str(root / "examples" / "otel_console.py"), "--provider", "scripted"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=root,
    ).stdout
    assert "invoke_agent calculator  [OK" in out
    assert "execute_tool divide  [ERROR" in out
    assert "gen_ai.client.token.usage input -> 300 {token}" in out


async def test_each_guardrail_decision_is_a_span_under_the_run(otel: Telemetry) -> None:
    from goagent_py import GuardrailContext, GuardrailTripped

    def no_secrets(prompt: list[Message], ctx: GuardrailContext) -> str | None:
        return "holds a key" if "sk-" in prompt[-1].text else None

    def fine(prompt: list[Message], ctx: GuardrailContext) -> None:
        return None

    agent = Agent(
        provider=ScriptedProvider("hi"),
        hooks=otel.hooks(),
        input_guardrails=[fine, no_secrets],
    )
    with pytest.raises(GuardrailTripped):
        await agent.run("sk-1")

    tripped = otel.one("guardrail no_secrets")
    passed = otel.one("guardrail fine")
    assert tripped.status.status_code is StatusCode.ERROR
    assert tripped.status.description == "tripped"  # the reason is content (capture off)
    assert passed.status.status_code is StatusCode.OK
    assert dict(tripped.attributes or {}) == {
        "goagent.guardrail.name": "no_secrets",
        "goagent.guardrail.kind": "input",
        "goagent.guardrail.tripped": True,
    }
    (run,) = [s for s in otel.spans() if s.name.startswith("invoke_agent")]
    assert parent_id(tripped) == sid(run)


# -- secrets (review7d) --------------------------------------------------------------------------

OPENAI_SHAPED = "sk-proj-Qw7Er5Ty3Ui1Op9As7Df5Gh3"


def _no_key_anywhere(otel: Telemetry, key: str) -> None:
    for span in otel.spans():
        assert key not in (span.status.description or ""), span.name
        assert key not in str(dict(span.attributes or {})), span.name
        for event in span.events:
            assert key not in str(dict(event.attributes or {})), (span.name, event.name)


async def test_a_key_in_a_tool_argument_or_tool_error_is_in_no_span_even_when_capturing(
    otel: Telemetry,
) -> None:
    """Content capture records arguments and the exception (message and stack trace): a key in
    them, or in a URL a tool's HTTP error quotes, must come out redacted, the rest kept."""
    url_key = "Zx9Yw8Vu7Ts6Rq5Po4Nm"

    async def fetch(args: dict[str, Any]) -> str:
        raise RuntimeError(
            f"GET https://maps.example/geo?key={url_key}&q=x failed; "
            f"https://bob:{url_key}@db.example/ refused; header was Bearer {OPENAI_SHAPED}"
        )

    provider = ScriptedProvider(
        tool_call_response(("fetch", {"api_key": url_key, "auth": OPENAI_SHAPED, "q": "Lisbon"})),
        "done",
    )
    agent = Agent(
        provider=provider,
        model="m",
        tools=[tool_func("fetch", "Fetch.", None, fetch)],
        hooks=otel.hooks(capture_content=True),
    )
    await agent.run("go")
    span = otel.one("execute_tool fetch")
    assert "Lisbon" in str(dict(span.attributes or {})["gen_ai.tool.call.arguments"])
    assert any("maps.example" in str(dict(e.attributes or {})) for e in span.events)
    for key in (url_key, OPENAI_SHAPED):
        _no_key_anywhere(otel, key)


async def test_a_key_the_user_pastes_is_in_no_captured_message(otel: Telemetry) -> None:
    provider = ScriptedProvider(f"I will not repeat {OPENAI_SHAPED}")
    agent = Agent(provider=provider, model="m", hooks=otel.hooks(capture_content=True))
    await agent.run(f"my key is {OPENAI_SHAPED}, keep it")
    root = dict(otel.one("invoke_agent").attributes or {})
    assert "keep it" in str(root["gen_ai.input.messages"])
    _no_key_anywhere(otel, OPENAI_SHAPED)


async def test_a_guardrail_reason_is_content_kept_out_of_spans_unless_opted_in(
    otel: Telemetry,
) -> None:
    from goagent_py import GuardrailContext, GuardrailTripped

    def no_keys(prompt: list[Message], ctx: GuardrailContext) -> str | None:
        text = prompt[-1].text
        return f"the prompt quotes {text}" if "sk-" in text else None

    for capture in (False, True):
        agent = Agent(
            provider=ScriptedProvider("hi"),
            hooks=otel.hooks(capture_content=capture),
            input_guardrails=[no_keys],
        )
        with pytest.raises(GuardrailTripped):
            await agent.run(f"{SECRET} {OPENAI_SHAPED}")
    off, on = sorted(otel.named("guardrail no_keys"), key=_ns)
    assert off.status.status_code is StatusCode.ERROR
    assert SECRET not in (off.status.description or "")
    assert SECRET in (on.status.description or "")  # opted in: the reason, redacted
    _no_key_anywhere(otel, OPENAI_SHAPED)


async def test_a_stream_dropped_unclosed_leaves_no_span_current_for_the_next_run(
    otel: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """review7d: the stream's run span was attached in the consumer's context; ended by the
    event loop's finalizer (another context), it stayed current there, so the next run of the
    task nested under the dead run (and detaching logged "Failed to detach context")."""
    import gc

    ended = asyncio.Event()
    hooks = merge_hooks(otel.hooks(), Hooks(on_run_end=lambda r: ended.set()))
    agent = Agent(
        provider=ScriptedProvider("one two three", "again", "more"), model="m", hooks=hooks
    )
    stream = agent.stream("go")
    async for _ in stream:
        break
    del stream
    gc.collect()
    await asyncio.wait_for(ended.wait(), 60)  # the finalizer's aclose() is a task of its own
    await agent.run("next")
    first, second = sorted(otel.named("invoke_agent"), key=_ns)
    assert first.end_time is not None
    assert second.parent is None  # a root, as the first one
    assert otel.tracker.open == {}
    assert trace.get_current_span() is trace.INVALID_SPAN
    assert not [r for r in caplog.records if "detach" in r.getMessage()]
    # A later run under a span of the caller's still nests under it.
    with otel.tracer_provider.get_tracer("test").start_as_current_span("outer") as outer:
        await agent.run("third")
    third = max(otel.named("invoke_agent"), key=_ns)
    assert parent_id(third) == outer.get_span_context().span_id
