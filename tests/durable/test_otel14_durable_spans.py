"""Durable runs traced on the worker: the same span tree as a plain run, under the caller's
span, and nothing recorded twice when Temporal replays the run's history (docs/scaling-out.md,
"Tracing durable runs"). A real Temporal dev server; the worker keeps no workflow in its cache,
so every workflow task replays the whole history before it goes on."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from temporalio.contrib.opentelemetry import create_tracer_provider

from goagent_py import Agent, ToolCall
from goagent_py.durable import DurableAgent, ProviderRegistry, create_worker
from goagent_py.errors import ConfigurationError
from goagent_py.memory import ShortTermMemory
from goagent_py.otel import instrument
from goagent_py.provider import CompletionRequest
from goagent_py.testing import FunctionProvider, text_response, tool_call_response
from goagent_py.tools import tool

INSIDE = TracerProvider()  # what the tool itself traces (an HTTP client, a database driver)
INSIDE_SPANS = InMemorySpanExporter()
INSIDE.add_span_processor(SimpleSpanProcessor(INSIDE_SPANS))


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: first.
        b: second.
    """
    with INSIDE.get_tracer("tool").start_as_current_span("inside add"):
        return a + b


def plan(request: CompletionRequest) -> Any:
    if len(request.messages) == 1:
        return tool_call_response(ToolCall("c1", "add", {"a": 2, "b": 3}))
    return text_response("5")


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def _id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def _agent() -> Agent:
    return Agent(provider=FunctionProvider(plan), model="m", name="calc", tools=[add])


async def _traced_run(temporal: Any, **worker_options: Any) -> tuple[list[ReadableSpan], Any]:
    """One durable run under the app's ``request`` span: every span, and the request span."""
    exporter = InMemorySpanExporter()
    provider = create_tracer_provider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = TracerProvider()  # the app's own tracing: another provider, one trace
    app.add_span_processor(SimpleSpanProcessor(exporter))
    durable = DurableAgent(_agent(), provider="fn:x", task_queue=f"q-{uuid.uuid4().hex[:8]}")
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    async with create_worker(
        temporal.client, [durable], registry=registry, tracer_provider=provider, **worker_options
    ):
        with app.get_tracer("app").start_as_current_span("request") as request:
            # Bounded by the server: a workflow task that fails (telemetry broken in the
            # sandbox) is retried forever, and the run would hang instead of failing.
            result = await durable.execute(
                temporal.client, "add 2 and 3", execution_timeout=timedelta(minutes=3)
            )
    assert result.text == "5"
    provider.shutdown()
    return list(exporter.get_finished_spans()), request


@pytest.mark.slow
async def test_a_durable_run_is_one_span_tree_under_the_callers_span(temporal: Any) -> None:
    # The worker keeps no workflow cached: every workflow task replays the history first.
    spans, request = await _traced_run(temporal, max_cached_workflows=0)
    counts = Counter(s.name for s in spans)
    # What a run that was never replayed records: one span per operation either way.
    cached, _ = await _traced_run(temporal)
    assert counts == Counter(s.name for s in cached), counts
    # The operations of a plain run of the agent (a durable run keeps its conversation: the
    # workers' memory, appended as the run goes, so its appends are spans of their own).
    plain = InMemorySpanExporter()
    local = TracerProvider()
    local.add_span_processor(SimpleSpanProcessor(plain))
    memory = ShortTermMemory()
    await _agent().replace(hooks=instrument(local), short_term_memory=memory).run("add 2 and 3")
    expected = Counter(s.name for s in plain.get_finished_spans())
    assert set(counts) == {"request", *expected}
    for name in ("invoke_agent calc", "chat m", "execute_tool add", "search_memory"):
        assert counts[name] == expected[name], name
    by_name = {s.name: s for s in spans}
    run = by_name["invoke_agent calc"]
    assert _parent(run) == request.get_span_context().span_id
    assert run.context is not None
    assert run.context.trace_id == request.get_span_context().trace_id
    for span in spans:
        if span.name not in ("request", "invoke_agent calc"):
            assert _parent(span) == _id(run), span.name
    attributes = dict(by_name["execute_tool add"].attributes or {})
    assert attributes["gen_ai.tool.name"] == "add"
    assert str(attributes["gen_ai.tool.description"]).startswith("Add two numbers.")
    assert run.status.status_code is StatusCode.OK
    # What the tool did on the worker nests under its call's span (the activity got its
    # trace context), once per call as the tool ran once in each run.
    parents = Counter(_parent(s) for s in INSIDE_SPANS.get_finished_spans())
    for call in (s for s in (*spans, *cached) if s.name == "execute_tool add"):
        assert parents[_id(call)] == 1


def test_a_provider_that_is_not_replay_safe_is_refused() -> None:
    durable = DurableAgent(_agent(), provider="fn:x")
    with pytest.raises(ConfigurationError, match="create_tracer_provider"):
        create_worker(object(), [durable], tracer_provider=TracerProvider())
    with pytest.raises(ConfigurationError, match="with tracer_provider="):
        create_worker(object(), [durable], capture_content=True)


@pytest.mark.slow
async def test_a_workflow_runner_that_does_not_pass_opentelemetry_through_keeps_the_trace(
    temporal: Any,
) -> None:
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    # A runner of the user's own, passing goagent-py through as the docs say, and nothing else.
    restrictions = SandboxRestrictions.default.with_passthrough_modules(
        "goagent_py", "pydantic", "pydantic_core", "annotated_types", "typing_extensions"
    )
    runner = SandboxedWorkflowRunner(restrictions=restrictions)
    spans, request = await _traced_run(temporal, workflow_runner=runner)
    run = next(s for s in spans if s.name == "invoke_agent calc")
    assert _parent(run) == request.get_span_context().span_id
    assert sum(1 for s in spans if _parent(s) == _id(run)) >= 3  # chat x2, execute_tool


@pytest.mark.parametrize("name", ["open_tail.json.gz", "tool_results.json.gz"])
async def test_a_history_recorded_without_telemetry_replays_with_it_and_records_nothing(
    name: str,
) -> None:
    import gzip
    from pathlib import Path

    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer

    from goagent_py.durable._activities import sandbox_runner
    from goagent_py.durable._telemetry import telemetry_for
    from goagent_py.durable._workflow import AgentWorkflow

    path = Path(__file__).parent / "histories" / name
    history = WorkflowHistory.from_json(name, gzip.decompress(path.read_bytes()).decode())
    exporter = InMemorySpanExporter()
    provider = create_tracer_provider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    replayer = Replayer(
        workflows=[AgentWorkflow],
        workflow_runner=sandbox_runner(),
        interceptors=[telemetry_for(provider, None, True)],
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None  # the same commands, in the same order
    assert list(exporter.get_finished_spans()) == []  # a replay records nothing
    provider.shutdown()
