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
from traced_spans import Traced, parent_id, span_id  # tests/traced_spans.py

from goagent_py import Agent
from goagent_py.hooks import Hooks, merge_hooks
from goagent_py.orchestration import Parallel, Pipeline, StepFailedError
from goagent_py.otel import instrument
from goagent_py.testing import ScriptedProvider


@pytest.fixture
def traced() -> Iterator[Traced]:
    found = Traced()
    yield found
    found.provider.shutdown()


def _agent(name: str, hooks: Any, *responses: Any) -> Agent:
    return Agent(provider=ScriptedProvider(*responses), model="m", name=name, hooks=hooks)


async def test_a_span_a_step_opens_before_any_agent_nests_under_the_flow(
    traced: Traced,
) -> None:
    hooks = instrument(traced.provider)

    async def fetch(text: str) -> str:
        with traced.tracer.start_as_current_span("fetch page"):
            return text + " page"

    flow = Pipeline(fetch, _agent("summarizer", hooks, "short"), name="digest")
    with traced.tracer.start_as_current_span("request") as request:
        await flow.run("url")
    workflow = traced.one("invoke_workflow digest")
    assert parent_id(workflow) == request.get_span_context().span_id
    assert parent_id(traced.one("fetch page")) == span_id(workflow)
    assert parent_id(traced.one("invoke_agent summarizer")) == span_id(workflow)


async def test_an_agent_run_inside_a_step_span_nests_under_it_inside_the_flow(
    traced: Traced,
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
    assert parent_id(prepare) == span_id(workflow)
    assert parent_id(traced.one("invoke_agent writer")) == span_id(prepare)
    assert parent_id(traced.one("invoke_agent editor")) == span_id(workflow)


async def test_the_flow_span_is_current_in_parallel_branches_and_nested_flows(
    traced: Traced,
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
    assert parent_id(fan_span) == span_id(outer)
    assert parent_id(left) == span_id(fan_span)
    assert parent_id(traced.one("left step")) == span_id(left)
    assert parent_id(traced.one("right step")) == span_id(fan_span)
    assert parent_id(traced.one("invoke_agent a")) == span_id(left)


async def test_after_the_flow_the_callers_span_is_current_again(traced: Traced) -> None:
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
