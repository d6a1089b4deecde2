"""goagent_py.otel over orchestrations: a flow's ``invoke_workflow`` span is the current span for
everything that runs inside the flow, from its start: the spans a step function opens with the
application's own tracer nest under it, as its agents' runs do (docs/observability.md,
"Orchestrations")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from goagent_py import Agent
from goagent_py.hooks import Hooks, merge_hooks
from goagent_py.orchestration import Parallel, Pipeline, StepFailedError
from goagent_py.otel import instrument
from goagent_py.testing import ScriptedProvider


class _Traced:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("app")

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def one(self, name: str) -> ReadableSpan:
        found = [s for s in self.spans() if s.name == name]
        assert len(found) == 1, (name, [s.name for s in self.spans()])
        return found[0]


@pytest.fixture
def traced() -> Iterator[_Traced]:
    found = _Traced()
    yield found
    found.provider.shutdown()


def _id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def _agent(name: str, hooks: Any, *responses: Any) -> Agent:
    return Agent(provider=ScriptedProvider(*responses), model="m", name=name, hooks=hooks)


async def test_a_span_a_step_opens_before_any_agent_nests_under_the_flow(
    traced: _Traced,
) -> None:
    hooks = instrument(traced.provider)

    async def fetch(text: str) -> str:
        with traced.tracer.start_as_current_span("fetch page"):
            return text + " page"

    flow = Pipeline(fetch, _agent("summarizer", hooks, "short"), name="digest")
    with traced.tracer.start_as_current_span("request") as request:
        await flow.run("url")
    workflow = traced.one("invoke_workflow digest")
    assert _parent(workflow) == request.get_span_context().span_id
    assert _parent(traced.one("fetch page")) == _id(workflow)
    assert _parent(traced.one("invoke_agent summarizer")) == _id(workflow)


async def test_an_agent_run_inside_a_step_span_nests_under_it_inside_the_flow(
    traced: _Traced,
) -> None:
    hooks = instrument(traced.provider)
    writer = _agent("writer", hooks, "text")

    async def step(text: str) -> str:
        with traced.tracer.start_as_current_span("prepare"):
            return (await writer.run(text)).text

    flow = Pipeline(step, _agent("editor", hooks, "edited"), name="docs")
    await flow.run("go")
    workflow = traced.one("invoke_workflow docs")
    prepare = traced.one("prepare")
    assert _parent(prepare) == _id(workflow)
    assert _parent(traced.one("invoke_agent writer")) == _id(prepare)
    assert _parent(traced.one("invoke_agent editor")) == _id(workflow)


async def test_the_flow_span_is_current_in_parallel_branches_and_nested_flows(
    traced: _Traced,
) -> None:
    # The instrumented hooks merged with the application's own: still found.
    hooks = merge_hooks(instrument(traced.provider), Hooks(on_run_end=lambda result: None))

    def marked(name: str) -> Any:
        async def step(text: str) -> str:
            with traced.tracer.start_as_current_span(name):
                return text

        step.__name__ = name
        return step

    inner = Pipeline(marked("left step"), _agent("a", hooks, "from a"), name="left")
    fan = Parallel(inner, marked("right step"), name="fan")
    await Pipeline(fan, name="outer").run("go")
    outer = traced.one("invoke_workflow outer")
    fan_span = traced.one("invoke_workflow fan")
    left = traced.one("invoke_workflow left")
    assert _parent(fan_span) == _id(outer)
    assert _parent(left) == _id(fan_span)
    assert _parent(traced.one("left step")) == _id(left)
    assert _parent(traced.one("right step")) == _id(fan_span)
    assert _parent(traced.one("invoke_agent a")) == _id(left)


async def test_after_the_flow_the_callers_span_is_current_again(traced: _Traced) -> None:
    hooks = instrument(traced.provider)

    async def boom(text: str) -> str:
        raise ValueError("no")

    with traced.tracer.start_as_current_span("request") as request:
        await Pipeline(_agent("a", hooks, "ok"), name="fine").run("go")
        assert trace.get_current_span() is request
        with pytest.raises(StepFailedError):
            await Pipeline(_agent("b", hooks, "ok"), boom, name="broken").run("go")
        assert trace.get_current_span() is request
    broken = traced.one("invoke_workflow broken")
    assert broken.end_time is not None
    assert str(dict(broken.attributes or {})["error.type"]).endswith("StepFailedError")
