"""What a composition spent counts once and at every level, a failure's included (review9b).

A failure's ``partial`` is what was done before it: its usage and model calls are what was
spent, so the node that failed (or ran out of budget) is in them, however deep it was, and a
retried node's failed attempts count too. A flow used as a tool hands that on to its caller.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from goagent_py import Agent, Role, Usage, tool
from goagent_py.budget import Budget, BudgetExceededError
from goagent_py.orchestration import (
    Handoffs,
    Node,
    Parallel,
    Pipeline,
    StepFailedError,
)
from goagent_py.resilience import RetryPolicy
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response


@tool
def noop() -> str:
    """Do nothing."""
    return "ok"


async def no_sleep(_: float) -> None:
    return None


def agent(name: str, *responses: Any, **settings: Any) -> Agent:
    return Agent(provider=ScriptedProvider(*responses), model="m", name=name, **settings)


def answers(name: str, tokens: int) -> Agent:
    return agent(name, text_response(f"{name} done", usage=Usage(tokens, 0)))


def gives_up(name: str, tokens: int) -> Agent:
    """One model call (a tool call) of ``tokens``, then MaxIterationsError."""
    call = tool_call_response(("noop", {}), usage=Usage(tokens, 0))
    return agent(name, call, tools=[noop], max_iterations=1)


def spends(name: str, tokens: int) -> Agent:
    """A tool call of ``tokens``, then a call the budget refuses."""
    call = tool_call_response(("noop", {}), usage=Usage(tokens, 0))
    return agent(name, call, "never", tools=[noop])


async def test_a_run_refused_by_the_budget_counts_only_the_model_calls_it_made() -> None:
    budget = Budget(max_iterations=1)
    with budget, pytest.raises(BudgetExceededError) as info:
        await spends("a", 7).run("go")
    assert budget.iterations == 1
    assert info.value.run_result.iterations == 1  # the refused call was not made


async def test_a_failed_steps_partial_counts_what_the_failing_agent_spent() -> None:
    with pytest.raises(StepFailedError) as info:
        await Pipeline(answers("a", 10), gives_up("b", 100)).run("x")
    partial = info.value.partial
    assert partial is not None
    assert partial.outputs == {"a": "a done"}  # b finished nothing
    assert partial.usage.total_tokens == 110
    assert partial.iterations == 2
    assert [s.path for s in partial.steps] == [("pipeline", "a"), ("pipeline", "b")]
    assert partial.steps[-1].error is info.value.cause


async def test_a_budget_partial_counts_the_usage_of_the_node_that_ran_out() -> None:
    budget = Budget(max_iterations=2)
    with pytest.raises(BudgetExceededError) as info:
        await Pipeline(answers("a", 10), spends("b", 100)).run("x", budget=budget)
    partial = info.value.partial
    assert partial is not None
    assert partial.usage.total_tokens == 110 == budget.tokens
    assert partial.iterations == 2 == budget.iterations


async def test_a_nested_flows_failure_keeps_what_the_inner_flow_did() -> None:
    inner = Pipeline(answers("a", 10), gives_up("b", 100), name="inner")
    with pytest.raises(StepFailedError) as info:
        await Pipeline(answers("z", 1000), inner).run("x")
    assert info.value.path == ("pipeline", "inner", "b")
    partial = info.value.partial
    assert partial is not None
    assert partial.trace == ("z",)
    assert partial.usage.total_tokens == 1110
    assert [s.path for s in partial.steps] == [
        ("pipeline", "z"),
        ("pipeline", "inner", "a"),
        ("pipeline", "inner", "b"),
    ]


async def test_a_handoffs_conversation_survives_in_an_outer_flows_partial() -> None:
    transfer = tool_call_response(("transfer_to_billing", {}), usage=Usage(3, 0))
    triage = agent("triage", transfer)
    billing = agent("billing", tool_call_response(("noop", {})), "never", tools=[noop])
    desk = Handoffs([triage, billing])
    with pytest.raises(BudgetExceededError) as info:
        await Pipeline(answers("first", 1), desk).run("refund", budget=Budget(max_iterations=3))
    partial = info.value.partial
    assert partial is not None
    calls = [c.name for m in partial.messages for c in m.tool_calls]
    assert calls == ["transfer_to_billing", "noop"]  # both agents' parts of the conversation
    assert partial.iterations == 3
    assert partial.usage.total_tokens == 4


async def test_a_retried_node_counts_its_failed_attempts() -> None:
    flaky = agent(
        "flaky",
        tool_call_response(("noop", {}), usage=Usage(100, 0)),
        text_response("fine", usage=Usage(5, 0)),
        tools=[noop],
        max_iterations=1,
    )
    policy = RetryPolicy(2, initial_delay=0, jitter=0, sleep=no_sleep)
    result = await Pipeline(Node(flaky, retry=policy)).run("x")
    assert result.text == "fine"
    assert result.usage.total_tokens == 105
    assert result.iterations == 2
    assert [s.error is not None for s in result.steps] == [True, False]


async def test_a_node_that_fails_after_retries_counts_every_attempt() -> None:
    twice = agent(
        "twice",
        *[tool_call_response(("noop", {}), usage=Usage(100, 0))] * 2,
        tools=[noop],
        max_iterations=1,
    )
    policy = RetryPolicy(2, initial_delay=0, jitter=0, sleep=no_sleep)
    with pytest.raises(StepFailedError) as info:
        await Pipeline(Node(twice, retry=policy)).run("x")
    partial = info.value.partial
    assert partial is not None
    assert (partial.usage.total_tokens, partial.iterations) == (200, 2)


async def test_a_flow_tool_that_fails_adds_the_failing_nodes_usage_to_its_caller() -> None:
    team = Pipeline(answers("a", 10), gives_up("b", 100)).as_tool(name="team", description="T.")
    lead = agent(
        "lead",
        tool_call_response(("team", {"prompt": "go"}), usage=Usage(1, 0)),
        text_response("sorry", usage=Usage(1, 0)),
        tools=[team],
    )
    result = await lead.run("go")
    tool_msg = next(m for m in result.messages if m.role is Role.TOOL)
    assert tool_msg.is_error
    assert result.usage.total_tokens == 112  # the lead's 2, a's 10 and b's 100


async def test_a_parallel_that_fails_fast_keeps_the_finished_branches_in_its_partial() -> None:
    flow = Parallel(answers("a", 10), gives_up("b", 100), max_concurrency=1)
    with pytest.raises(StepFailedError) as info:
        await flow.run("x")
    partial = info.value.partial
    assert partial is not None
    assert partial.outputs == {"a": "a done"}
    assert partial.usage.total_tokens == 110


async def test_a_handoffs_partial_counts_the_agent_that_ran_out() -> None:
    transfer = tool_call_response(("transfer_to_billing", {}), usage=Usage(3, 0))
    billing = agent(
        "billing", tool_call_response(("noop", {}), usage=Usage(50, 0)), "never", tools=[noop]
    )
    desk = Handoffs([agent("triage", transfer), billing])
    with pytest.raises(BudgetExceededError) as info:
        await desk.run("refund", budget=Budget(max_iterations=2))
    partial = info.value.partial
    assert partial is not None
    assert (partial.usage.total_tokens, partial.iterations) == (53, 2)
    assert partial.state == {"active": "billing", "handoffs": [["triage", "billing"]]}


async def test_a_parallel_that_collects_errors_counts_what_the_failed_branches_spent() -> None:
    flow = Parallel(answers("a", 10), gives_up("b", 100), fail_fast=False)
    result = await flow.run("x")
    assert set(result.errors) == {"b"}
    assert result.outputs == {"a": "a done"}
    assert (result.usage.total_tokens, result.iterations) == (110, 2)
    assert [s.path for s in result.steps] == [("parallel", "a"), ("parallel", "b")]


async def test_a_parallel_whose_every_branch_failed_counts_them_all() -> None:
    flow = Parallel(gives_up("a", 10), gives_up("b", 100), fail_fast=False)
    with pytest.raises(StepFailedError) as info:
        await flow.run("x")
    partial = info.value.partial
    assert partial is not None
    assert (partial.usage.total_tokens, partial.iterations) == (110, 2)


async def hangs_in_a_tool(name: str, tokens: int, started: asyncio.Event) -> Agent:
    @tool
    async def wait() -> str:
        """Wait for ever."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    call = tool_call_response(("wait", {}), usage=Usage(tokens, 0))
    return agent(name, call, tools=[wait])


async def test_a_timed_out_node_counts_what_its_agent_spent() -> None:
    slow = await hangs_in_a_tool("slow", 100, asyncio.Event())
    with pytest.raises(StepFailedError) as info:
        await Pipeline(Node(slow, timeout=1.0)).run("x")
    partial = info.value.partial
    assert partial is not None
    assert partial.usage.total_tokens == 100


async def test_a_fail_fast_partial_counts_the_branches_it_cancelled() -> None:
    started = asyncio.Event()
    slow = await hangs_in_a_tool("slow", 100, started)

    async def fail_once_slow_started(text: str) -> str:
        await started.wait()
        raise RuntimeError("boom")

    with pytest.raises(StepFailedError) as info:
        await Parallel(slow, fail_once_slow_started).run("x")
    partial = info.value.partial
    assert partial is not None
    assert partial.usage.total_tokens == 100


async def test_a_timed_out_flow_counts_its_finished_and_its_cancelled_nodes() -> None:
    slow = await hangs_in_a_tool("slow", 100, asyncio.Event())
    with pytest.raises(StepFailedError) as info:
        await Pipeline(Node(Pipeline(answers("a", 10), slow, name="inner"), timeout=1.0)).run("x")
    partial = info.value.partial
    assert partial is not None
    assert (partial.usage.total_tokens, partial.iterations) == (110, 2)
    assert [s.path for s in partial.steps] == [
        ("pipeline", "inner", "a"),
        ("pipeline", "inner", "slow"),
    ]
