"""OpenTelemetry: the run's spans stay where they belong however its hooks are awaited.

A ``Session`` awaits an async hook in a task of its own (so an abort can give it up) and copies
the context variables it set back into the run's context. The documented way to add telemetry
to your own hooks, ``hooks=[otel.instrument(), mine]``, makes every merged hook async: the
telemetry hooks then run in that copy, and what they made current must still be undone in the
run's context when the run ends (docs/sessions.md, docs/architecture.md "Hooks").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from goagent_py import Agent, ToolCall
from goagent_py.hooks import Hooks
from goagent_py.otel import instrument
from goagent_py.provider import CompletionRequest
from goagent_py.session import Session
from goagent_py.testing import FunctionProvider, text_response, tool_call_response
from goagent_py.tools import tool_func


@pytest.fixture
def traced() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _by_name(exporter: InMemorySpanExporter) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for span in exporter.get_finished_spans():
        out.setdefault(span.name, []).append(span)
    return out


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def _id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


async def test_a_session_with_merged_async_hooks_keeps_and_restores_the_callers_span(
    traced: tuple[TracerProvider, InMemorySpanExporter], caplog: pytest.LogCaptureFixture
) -> None:
    provider, exporter = traced
    tracer = provider.get_tracer("app")
    seen: list[str] = []

    async def mine(*args: Any) -> None:
        seen.append("hook")

    def model(request: CompletionRequest) -> Any:
        # What the provider does (an HTTP client's span) nests under the model call's span.
        with tracer.start_as_current_span("http"):
            pass
        if len(request.messages) == 1:
            return tool_call_response(ToolCall("c1", "lookup", {}))
        return text_response("done")

    async def lookup(args: dict[str, Any]) -> str:
        with tracer.start_as_current_span("inside tool"):
            return "found"

    mine_hooks = Hooks(
        on_run_start=mine, on_provider_request=mine, on_provider_response=mine, on_run_end=mine
    )
    agent = Agent(
        provider=FunctionProvider(model),
        model="m",
        name="a",
        tools=[tool_func("lookup", "Look it up.", None, lookup)],
        hooks=[instrument(provider), mine_hooks],
    )
    session = Session(agent)
    with caplog.at_level(logging.WARNING), tracer.start_as_current_span("request") as outer:
        await session.prompt("hi")
        # The run is over: what is current is the caller's span again, not a finished span
        # of the run (whatever the caller does next would nest under it, in a closed trace).
        assert trace.get_current_span() is outer
        await session.prompt("again")
        assert trace.get_current_span() is outer
    assert seen  # the async hook ran (the hooks were merged, so all of them were awaited)

    spans = _by_name(exporter)
    runs = spans["invoke_agent a"]
    assert len(runs) == 2
    request = spans["request"][0]
    # Each run is a child of the caller's span, not of the run before it.
    assert [_parent(r) for r in runs] == [_id(request), _id(request)]
    run_ids = {_id(r) for r in runs}
    assert all(_parent(c) in run_ids for c in spans["chat m"])
    chat_ids = {_id(c) for c in spans["chat m"]}
    assert len(spans["http"]) == 3  # two model calls for "hi", one for "again"
    assert all(_parent(h) in chat_ids for h in spans["http"])
    tool_ids = {_id(t) for t in spans["execute_tool lookup"]}
    assert all(_parent(s) in tool_ids for s in spans["inside tool"])
    # Nothing failed to detach (OpenTelemetry logs that at ERROR).
    assert not [r for r in caplog.records if "detach" in r.getMessage()]


async def test_a_model_call_cut_by_an_abort_is_recorded_as_aborted_not_as_a_crash(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced
    calling = asyncio.Event()

    async def model(request: CompletionRequest) -> Any:
        calling.set()
        await asyncio.Event().wait()  # never answers: the abort ends the call

    agent = Agent(provider=FunctionProvider(model), model="m", name="a", hooks=instrument(provider))
    session = Session(agent)
    task = asyncio.create_task(session.prompt("hi"))
    await calling.wait()
    session.abort("now")
    result = await task

    assert result.stop_reason == "aborted"
    [chat] = [s for s in exporter.get_finished_spans() if s.name == "chat m"]
    assert chat.status.status_code is StatusCode.ERROR
    # The user stopped it: "aborted" (low cardinality, like a tool call's ToolAbortedError),
    # not a RuntimeError that reads like a crash on every dashboard.
    assert (chat.attributes or {})["error.type"] == "aborted"


async def test_a_stream_closed_from_inside_another_run_ends_its_own_span_not_that_runs(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """A stream closed from another task (a "stop" handler, another run's tool) ends in that
    task's context: the run it ends is found by its run id, never by what is current there."""
    provider, exporter = traced
    hooks = instrument(provider)
    first = Agent(
        provider=FunctionProvider(lambda request: text_response("never read")),
        model="m",
        name="first",
        hooks=hooks,
    )
    stream = first.stream("go")
    await anext(stream)  # AgentStart: the first run's span is open

    async def close_it(args: dict[str, Any]) -> str:
        await stream.aclose()  # here, the second run (and its tool call) is current
        return "closed"

    second = Agent(
        provider=FunctionProvider(
            lambda request: (
                tool_call_response(ToolCall("c1", "close_it", {}))
                if len(request.messages) == 1
                else text_response("done")
            )
        ),
        model="m",
        name="second",
        tools=[tool_func("close_it", "Close the other stream.", None, close_it)],
        hooks=hooks,
    )
    result = await second.run("close it")

    assert result.text == "done"
    spans = _by_name(exporter)
    # Each run's span ended once, by its own end: both are there, and the second run's span
    # holds its own result (two model calls), not the closed stream's.
    assert len(spans["invoke_agent first"]) == 1
    [run] = spans["invoke_agent second"]
    assert (run.attributes or {})["goagent.run.iterations"] == 2
    assert run.status.status_code is StatusCode.OK
    assert [_parent(c) for c in spans["chat m"] if _parent(c) == _id(run)] != []


async def test_a_stream_driven_from_another_task_than_the_one_that_began_it_keeps_its_tree(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """Every hook finds its run by the run id the loop gives it (``current_hook_context``), so
    a stream whose first event was read in one task and the rest in another still records its
    model and tool calls, under its own span."""
    provider, exporter = traced

    async def lookup(args: dict[str, Any]) -> str:
        return "found"

    agent = Agent(
        provider=FunctionProvider(
            lambda request: (
                tool_call_response(ToolCall("c1", "lookup", {}))
                if len(request.messages) == 1
                else text_response("done")
            )
        ),
        model="m",
        name="a",
        tools=[tool_func("lookup", "Look it up.", None, lookup)],
        hooks=instrument(provider),
    )
    stream = agent.stream("go")
    await asyncio.create_task(anext(stream))  # AgentStart, read in a task of its own
    async for _event in stream:  # the rest, read here
        pass
    assert not trace.get_current_span().get_span_context().is_valid  # nothing left current

    spans = _by_name(exporter)
    [run] = spans["invoke_agent a"]
    assert len(spans["chat m"]) == 2
    assert [_parent(c) for c in spans["chat m"]] == [_id(run), _id(run)]
    [call] = spans["execute_tool lookup"]
    assert _parent(call) == _id(run)


class _Ends(SpanProcessor):
    """The spans started and not yet ended, by id."""

    def __init__(self) -> None:
        self.open: dict[int, str] = {}

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.open[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        self.open.pop(span.context.span_id, None)


@pytest.mark.parametrize("telemetry_first", [True, False])
async def test_a_hook_given_up_at_the_runs_end_leaves_no_span_open_or_current(
    traced: tuple[TracerProvider, InMemorySpanExporter], telemetry_first: bool
) -> None:
    """A second ``abort("now")`` gives up an ``on_run_end`` that hangs (docs/sessions.md):
    the telemetry's own ``on_run_end``, merged before or after it, still ends the run's spans
    and puts the caller's span back."""
    provider, _exporter = traced
    ends = _Ends()
    provider.add_span_processor(ends)
    calling = asyncio.Event()
    ending = asyncio.Event()

    async def model(request: CompletionRequest) -> Any:
        calling.set()
        await asyncio.Event().wait()

    async def hangs(result: Any) -> None:
        ending.set()
        await asyncio.Event().wait()

    mine = Hooks(on_run_end=hangs)
    telemetry = instrument(provider)
    agent = Agent(
        provider=FunctionProvider(model),
        model="m",
        name="a",
        hooks=[telemetry, mine] if telemetry_first else [mine, telemetry],
    )
    session = Session(agent)
    tracer = provider.get_tracer("app")

    async def aborts() -> None:
        await calling.wait()
        session.abort("now")
        await ending.wait()
        session.abort("now")  # gives the hanging hook up

    aborter = asyncio.create_task(aborts())
    with tracer.start_as_current_span("request") as outer:
        result = await session.prompt("hi")  # here: the run's context is this task's
        assert trace.get_current_span() is outer
    await aborter

    assert result.stop_reason == "aborted"
    assert ends.open == {}
