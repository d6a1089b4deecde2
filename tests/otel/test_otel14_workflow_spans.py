"""goagent_py.otel over orchestrations: each run of a flow is an ``invoke_workflow {name}`` span,
the parent of the runs of its agents (the GenAI agent spans convention, "Invoke workflow
span"), with parent and child right under parallel branches, nested flows, a flow called as a
tool, handoffs, failures and a stream closed early.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.trace import SpanKind, StatusCode
from traced_spans import Traced, parent_id, span_id  # tests/traced_spans.py

from goagent_py import Agent, ProviderError
from goagent_py.orchestration import Handoffs, Parallel, Pipeline, StepFailedError, Supervisor
from goagent_py.orchestration.handoff import transfer_tool_name
from goagent_py.testing import ScriptedProvider, tool_call_response


@pytest.fixture
def traced() -> Iterator[Traced]:
    found = Traced()
    yield found
    found.provider.shutdown()


def agent(name: str, hooks: Any, *responses: Any, **settings: Any) -> Agent:
    return Agent(
        provider=ScriptedProvider(*responses), model="m", name=name, hooks=hooks, **settings
    )


async def test_a_pipeline_is_the_parent_of_its_agents_runs(traced: Traced) -> None:
    hooks = traced.hooks()
    flow = Pipeline(agent("drafter", hooks, "draft"), agent("editor", hooks, "final"), name="docs")
    with traced.tracer.start_as_current_span("request") as request:
        result = await flow.run("write")
    assert result.text == "final"
    workflow = traced.one("invoke_workflow docs")
    assert parent_id(workflow) == request.get_span_context().span_id
    assert workflow.kind is SpanKind.INTERNAL
    attributes = dict(workflow.attributes or {})
    assert attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert attributes["gen_ai.workflow.name"] == "docs"
    assert "gen_ai.input.messages" not in attributes  # content only when opted in
    assert workflow.status.status_code is StatusCode.OK
    for name in ("invoke_agent drafter", "invoke_agent editor"):
        run = traced.one(name)
        assert parent_id(run) == span_id(workflow)
        assert run.context is not None
        assert workflow.context is not None
        assert run.context.trace_id == workflow.context.trace_id
        assert workflow.start_time is not None
        assert run.start_time is not None
        assert workflow.end_time is not None
        assert run.end_time is not None
        assert workflow.start_time <= run.start_time <= run.end_time <= workflow.end_time


async def test_parallel_branches_inside_a_pipeline_nest_each_under_their_own_flow(
    traced: Traced,
) -> None:
    hooks = traced.hooks()
    both = asyncio.Event()
    arrived = 0

    async def meet(text: str) -> str:  # both branches are running at once
        nonlocal arrived
        arrived += 1
        if arrived == 2:
            both.set()
        await both.wait()
        return text

    fan = Parallel(
        Pipeline(meet, agent("a", hooks, "from a"), name="left"),
        Pipeline(meet, agent("b", hooks, "from b"), name="right"),
        name="fan",
    )
    flow = Pipeline(fan, agent("join", hooks, "joined"), name="outer")
    await flow.run("go")

    outer = traced.one("invoke_workflow outer")
    fan_span = traced.one("invoke_workflow fan")
    left, right = traced.one("invoke_workflow left"), traced.one("invoke_workflow right")
    assert parent_id(outer) is None
    assert parent_id(fan_span) == span_id(outer)
    assert parent_id(left) == span_id(fan_span)
    assert parent_id(right) == span_id(fan_span)
    assert parent_id(traced.one("invoke_agent a")) == span_id(left)
    assert parent_id(traced.one("invoke_agent b")) == span_id(right)
    assert parent_id(traced.one("invoke_agent join")) == span_id(outer)


async def test_two_flows_run_at_once_keep_their_own_agents(traced: Traced) -> None:
    hooks = traced.hooks()
    one = Pipeline(agent("x", hooks, "1"), name="one")
    two = Pipeline(agent("y", hooks, "2"), name="two")
    await asyncio.gather(one.run("a"), two.run("b"))
    assert parent_id(traced.one("invoke_agent x")) == span_id(traced.one("invoke_workflow one"))
    assert parent_id(traced.one("invoke_agent y")) == span_id(traced.one("invoke_workflow two"))


async def test_a_flow_called_as_a_tool_nests_under_the_tool_call(traced: Traced) -> None:
    hooks = traced.hooks()
    team = Pipeline(agent("writer", hooks, "poem"), name="team")
    lead = agent(
        "lead",
        hooks,
        tool_call_response(("write", {"prompt": "a poem"})),
        "done",
        tools=[team.as_tool(name="write", description="Write.")],
    )
    await lead.run("go")
    call = traced.one("execute_tool write")
    workflow = traced.one("invoke_workflow team")
    assert parent_id(call) == span_id(traced.one("invoke_agent lead"))
    assert parent_id(workflow) == span_id(call)
    assert parent_id(traced.one("invoke_agent writer")) == span_id(workflow)


async def test_handoffs_group_every_agent_that_took_the_conversation(traced: Traced) -> None:
    hooks = traced.hooks()
    triage = agent(
        "triage", hooks, tool_call_response((transfer_tool_name("billing"), {"reason": "money"}))
    )
    billing = agent("billing", hooks, "refunded")
    desk = Handoffs([triage, billing], name="desk")
    result = await desk.run("charged twice")
    assert result.text == "refunded"
    workflow = traced.one("invoke_workflow desk")
    assert parent_id(traced.one("invoke_agent triage")) == span_id(workflow)
    assert parent_id(traced.one("invoke_agent billing")) == span_id(workflow)


async def test_a_supervisor_is_one_workflow(traced: Traced) -> None:
    from goagent_py.agent_tool import as_tool

    hooks = traced.hooks()
    member = agent("researcher", hooks, "facts")
    lead = agent(
        "lead",
        hooks,
        tool_call_response(("research", {"prompt": "q"})),
        "summary",
    )
    boss = Supervisor(lead, [as_tool(member, name="research", description="R.")], name="boss")
    await boss.run("go")
    workflows = [s for s in traced.spans() if s.name.startswith("invoke_workflow")]
    assert [s.name for s in workflows] == ["invoke_workflow boss"]
    assert parent_id(traced.one("invoke_agent lead")) == span_id(workflows[0])


async def test_a_failed_flow_is_an_error_with_the_failure_type(traced: Traced) -> None:
    hooks = traced.hooks()
    flow = Pipeline(agent("a", hooks, "ok"), agent("b", hooks, ProviderError("down")), name="f")
    with pytest.raises(StepFailedError):
        await flow.run("go")
    workflow = traced.one("invoke_workflow f")
    assert workflow.status.status_code is StatusCode.ERROR
    error_type = dict(workflow.attributes or {})["error.type"]
    assert str(error_type).endswith("StepFailedError")
    assert parent_id(traced.one("invoke_agent b")) == span_id(workflow)


async def test_a_stream_closed_early_ends_the_workflow_span(traced: Traced) -> None:
    hooks = traced.hooks()
    release = asyncio.Event()

    async def hold(text: str) -> str:
        await release.wait()
        return text

    flow = Pipeline(agent("a", hooks, "first"), hold, name="held")
    events: AsyncIterator[Any] = flow.stream("go")
    async for event in events:
        if getattr(event, "path", ()) == ("held", "hold"):  # the function node started
            break
    await events.aclose()  # type: ignore[attr-defined]
    workflow = traced.one("invoke_workflow held")
    assert workflow.status.status_code is StatusCode.ERROR
    assert dict(workflow.attributes or {})["error.type"] == "asyncio.exceptions.CancelledError"
    assert parent_id(traced.one("invoke_agent a")) == span_id(workflow)


async def test_with_capture_the_workflow_records_its_input_and_output(traced: Traced) -> None:
    hooks = traced.hooks(capture=True)
    flow = Pipeline(agent("a", hooks, "the answer"), name="cap")
    await flow.run("the question")
    attributes = dict(traced.one("invoke_workflow cap").attributes or {})
    assert "the question" in str(attributes["gen_ai.input.messages"])
    assert "the answer" in str(attributes["gen_ai.output.messages"])


async def test_a_flow_of_functions_only_has_no_workflow_span(traced: Traced) -> None:
    async def shout(text: str) -> str:
        return text.upper()

    hooks = traced.hooks()
    plain = Pipeline(shout, name="plain")
    with traced.tracer.start_as_current_span("request"):
        await plain.run("x")
        await Pipeline(agent("a", hooks, "ok"), name="real").run("y")
    names = sorted(s.name for s in traced.spans())
    assert names == ["chat m", "invoke_agent a", "invoke_workflow real", "request"]


async def test_a_run_a_flow_left_behind_does_not_open_a_span_that_never_ends(
    traced: Traced,
) -> None:
    hooks = traced.hooks()
    late = agent("late", hooks, "after the flow")
    left: list[asyncio.Task[Any]] = []

    async def spawn(text: str) -> str:  # starts a run it does not wait for
        left.append(asyncio.create_task(late.run("later")))
        return text

    with traced.tracer.start_as_current_span("request") as request:
        await Pipeline(spawn, name="spawner").run("go")
        await left[0]
    names = [s.name for s in traced.spans()]
    assert "invoke_workflow spawner" not in names  # it had ended: nothing ran in it
    run = traced.one("invoke_agent late")
    assert parent_id(run) == request.get_span_context().span_id


async def test_a_graph_that_loops_holds_every_visit_of_its_agents(traced: Traced) -> None:
    from goagent_py.orchestration import END, Branch, Graph

    hooks = traced.hooks()
    graph = Graph(
        {
            "write": agent("writer", hooks, "draft 1", "draft 2"),
            "review": agent("reviewer", hooks, "again", "APPROVED"),
        },
        edges={
            "write": "review",
            "review": Branch(lambda s: END if "APPROVED" in s["last"] else "write", "write", END),
        },
        start="write",
        name="editing",
    )
    await graph.run("a poem")
    workflow = traced.one("invoke_workflow editing")
    runs = [s for s in traced.spans() if s.name.startswith("invoke_agent")]
    assert len(runs) == 4
    assert {parent_id(s) for s in runs} == {span_id(workflow)}
