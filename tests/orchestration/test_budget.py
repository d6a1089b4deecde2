"""A run-wide budget that sub-agents and nodes draw from."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest

from goagent_py import Agent, ConfigurationError, Role, Usage, tool
from goagent_py.agent_tool import as_tool
from goagent_py.budget import Budget, BudgetExceededError, current_budget
from goagent_py.orchestration import (
    END,
    FlowResult,
    Graph,
    Loop,
    Parallel,
    Pipeline,
    Router,
    Supervisor,
)
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response


@tool
def noop() -> str:
    """Do nothing."""
    return "ok"


def agent(name: str, *responses: Any, **settings: Any) -> Agent:
    return Agent(provider=ScriptedProvider(*responses), model="m", name=name, **settings)


async def test_a_delegation_chain_stops_when_the_shared_iterations_run_out() -> None:
    child_p = ScriptedProvider(
        tool_call_response(("noop", {})), tool_call_response(("noop", {})), "never"
    )
    child = Agent(provider=child_p, model="m", name="child", tools=[noop])
    budget = Budget(max_iterations=3)
    lead = budget.guard(
        agent(
            "lead",
            tool_call_response(("child", {"prompt": "go"})),
            "never",
            tools=[as_tool(child, name="child", description="C.")],
        )
    )

    with budget, pytest.raises(BudgetExceededError) as info:
        await lead.run("start")

    assert (info.value.kind, info.value.limit, info.value.spent) == ("iterations", 3, 3)
    assert budget.iterations == 3
    assert len(child_p.requests) == 2  # the child's third call was refused
    run = info.value.run_result
    assert run is not None
    tool_msg = next(m for m in run.messages if m.role is Role.TOOL)
    assert tool_msg.is_error
    assert "budget is spent" in tool_msg.text
    assert current_budget() is None


async def test_pipeline_nodes_draw_tokens_from_the_budget() -> None:
    third_p = ScriptedProvider("never")
    flow = Pipeline(
        agent("a", text_response("1", usage=Usage(40, 10))),
        agent("b", text_response("2", usage=Usage(40, 10))),
        Agent(provider=third_p, model="m", name="c"),
    )
    budget = Budget(max_tokens=100)

    with pytest.raises(BudgetExceededError, match="tokens 100 of 100"):
        await flow.run("x", budget=budget)

    assert third_p.requests == []
    assert budget.tokens == 100


async def test_wall_time_is_checked_before_each_node() -> None:
    now = [0.0]

    async def slow_step(text: str) -> str:
        now[0] += 6
        return text + "."

    budget = Budget(max_seconds=10, clock=lambda: now[0])
    with pytest.raises(BudgetExceededError) as info:
        await Loop(slow_step, max_rounds=5).run("x", budget=budget)
    assert info.value.kind == "seconds"
    assert now[0] == 12  # two rounds ran; the third was refused


async def test_streams_draw_from_the_budget_too() -> None:
    budget = Budget(max_iterations=1)
    flow = Pipeline(agent("a", "1"), agent("b", "never"))
    with pytest.raises(BudgetExceededError):
        _ = [e async for e in flow.stream("x", budget=budget)]
    assert budget.iterations == 1


def test_budget_misuse_and_pickling() -> None:
    with pytest.raises(ConfigurationError, match="max_tokens"):
        Budget(max_tokens=0)
    error = BudgetExceededError("tokens", 10, 12)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.kind, copy.limit, copy.spent, str(copy)) == ("tokens", 10, 12, str(error))


# -- once per model call, however the agent is run (issue 30) ------------------------------------


def three_calls(name: str) -> tuple[Agent, ScriptedProvider]:
    """An agent that makes exactly three model calls (two tool rounds, then an answer)."""
    p = ScriptedProvider(tool_call_response(("noop", {})), tool_call_response(("noop", {})), "done")
    return Agent(provider=p, model="m", name=name, tools=[noop]), p


async def test_a_guarded_agent_as_a_flow_node_is_counted_once_per_call() -> None:
    budget = Budget(max_iterations=3)
    lead, p = three_calls("lead")

    result = await Pipeline(budget.guard(lead)).run("x", budget=budget)

    assert result.text == "done"
    assert len(p.requests) == 3
    assert (budget.iterations, result.iterations) == (3, 3)


async def test_a_guarded_agent_as_a_node_of_a_flow_with_its_own_budget() -> None:
    guard_budget, flow_budget = Budget(max_iterations=10), Budget(max_iterations=3)
    lead, _ = three_calls("lead")

    result = await Pipeline(guard_budget.guard(lead)).run("x", budget=flow_budget)

    assert result.text == "done"
    # Both draw, once per call each: the flow's budget and the guard's own (review6b; it
    # was not drawn inside an active budget, so a guard's cap did not hold in a flow).
    assert (flow_budget.iterations, guard_budget.iterations) == (3, 3)


async def test_a_guarded_child_through_as_tool_is_counted_once_per_call() -> None:
    budget = Budget(max_iterations=5)
    child, child_p = three_calls("child")
    lead = agent(
        "lead",
        tool_call_response(("child", {"prompt": "go"})),
        "all done",
        tools=[as_tool(budget.guard(child), name="child", description="C.")],
    )

    with budget:
        result = await lead.run("start")

    assert result.text == "all done"
    assert len(child_p.requests) == 3
    assert budget.iterations == 5  # the lead's two calls and the child's three


async def test_an_unguarded_agent_run_inside_with_budget_draws_from_it() -> None:
    budget = Budget(max_iterations=10, max_tokens=1_000)
    lead = agent("lead", text_response("hi", usage=Usage(30, 12)))

    with budget:
        await lead.run("x")

    assert (budget.iterations, budget.tokens) == (1, 42)

    small = Budget(max_iterations=2)
    runaway, p = three_calls("runaway")
    with small, pytest.raises(BudgetExceededError) as info:
        await runaway.run("x")
    assert (info.value.kind, info.value.spent) == ("iterations", 2)
    assert len(p.requests) == 2


async def test_a_guarded_agent_without_an_active_budget_draws_from_its_own() -> None:
    budget = Budget(max_iterations=2)
    runaway, p = three_calls("runaway")

    with pytest.raises(BudgetExceededError):
        await budget.guard(runaway).run("x")

    assert budget.iterations == 2
    assert len(p.requests) == 2


async def test_a_budget_error_in_a_parallel_branch_ends_the_whole_run() -> None:
    runaway = Agent(
        provider=ScriptedProvider(*[tool_call_response(("noop", {}))] * 10),
        model="m",
        name="runaway",
        tools=[noop],
    )

    async def fn(text: str) -> str:
        return text.upper()

    budget = Budget(max_iterations=4)
    with pytest.raises(BudgetExceededError) as info:
        await Parallel(runaway, fn, fail_fast=False).run("x", budget=budget)
    assert info.value.kind == "iterations"
    assert budget.iterations == 4


async def test_a_guarded_agent_run_on_its_own_covers_the_agents_it_calls_as_tools() -> None:
    budget = Budget(max_iterations=3)
    child, child_p = three_calls("child")
    lead = agent(
        "lead",
        tool_call_response(("child", {"prompt": "go"})),
        "never",
        tools=[as_tool(child, name="child", description="C.")],
    )

    with pytest.raises(BudgetExceededError):
        await budget.guard(lead).run("start")

    assert budget.iterations == 3  # the lead's first call and the child's two
    assert len(child_p.requests) == 2  # the child's third call was refused
    assert current_budget() is None


class SetsWhenDone:
    """A tool that sets ``done`` when the wrapped tool has returned."""

    def __init__(self, tool: Any, done: asyncio.Event) -> None:
        self.tool = tool
        self.done = done
        self.definition = tool.definition

    async def execute(self, args: dict[str, Any]) -> Any:
        try:
            return await self.tool.execute(args)
        finally:
            self.done.set()


async def test_a_guarded_agents_concurrent_tool_calls_each_draw_from_its_budget() -> None:
    # The first call ends while the second is still running (the order that broke a shared
    # token stack: the first call's exit reset the second call's token).
    second_inside, first_finished = asyncio.Event(), asyncio.Event()

    @tool
    async def hold() -> str:
        """Wait until the second sub-agent is running."""
        await second_inside.wait()
        return "held"

    @tool
    async def arrive() -> str:
        """Say the second sub-agent is running, then wait for the first to finish."""
        second_inside.set()
        await first_finished.wait()
        return "arrived"

    first_p = ScriptedProvider(tool_call_response(("hold", {})), "first done")
    second_p = ScriptedProvider(tool_call_response(("arrive", {})), "second done")
    first = Agent(provider=first_p, model="m", name="first", tools=[hold])
    second = Agent(provider=second_p, model="m", name="second", tools=[arrive])
    budget = Budget(max_iterations=10)
    lead = agent(
        "lead",
        tool_call_response(("first", {"prompt": "a"}), ("second", {"prompt": "b"})),
        "both done",
        tools=[
            SetsWhenDone(as_tool(first, name="first", description="F."), first_finished),
            as_tool(second, name="second", description="S."),
        ],
    )

    result = await budget.guard(lead).run("start")

    assert result.text == "both done"
    answers = [m for m in result.messages if m.role is Role.TOOL]
    assert [(m.is_error, m.text) for m in answers] == [
        (False, "first done"),
        (False, "second done"),
    ]
    assert budget.iterations == 6  # the lead's two calls and two for each child
    assert current_budget() is None


async def test_tasks_entering_one_budget_concurrently_may_leave_in_any_order() -> None:
    budget = Budget(max_iterations=10)
    both_inside, first_left = asyncio.Barrier(2), asyncio.Event()

    async def first() -> None:
        with budget:
            await both_inside.wait()
        first_left.set()

    async def second() -> None:
        with budget:
            await both_inside.wait()
            await first_left.wait()
            assert current_budget() is budget

    await asyncio.gather(asyncio.create_task(first()), asyncio.create_task(second()))
    assert current_budget() is None


# -- nested budgets (review6b) ------------------------------------------------------------------


async def test_a_flow_with_its_own_budget_inside_a_bigger_run_draws_from_both() -> None:
    outer = Budget(max_iterations=2, max_tokens=1_000)
    team, p = three_calls("team")

    with outer, pytest.raises(BudgetExceededError) as info:
        await Pipeline(team).run("x", budget=Budget(max_iterations=10))

    # The team's own budget allows 10 calls; the run around it allows 2, and it is still
    # active: each call counts once in each enclosing budget.
    assert len(p.requests) == 2
    assert (info.value.limit, outer.iterations) == (2, 2)
    assert current_budget() is None


async def test_nested_budgets_are_each_charged_the_tokens_once() -> None:
    outer, inner = Budget(), Budget()
    lead = agent("lead", text_response("hi", usage=Usage(30, 12)))

    with outer, inner, outer:  # entering one budget again does not count it twice
        await lead.run("x")

    assert (outer.iterations, outer.tokens) == (1, 42)
    assert (inner.iterations, inner.tokens) == (1, 42)


async def test_a_guarded_agent_keeps_its_own_cap_inside_a_bigger_budget() -> None:
    cap, flow_budget = Budget(max_iterations=2), Budget(max_iterations=10)
    runaway, p = three_calls("runaway")

    with pytest.raises(BudgetExceededError) as info:
        await Pipeline(cap.guard(runaway)).run("x", budget=flow_budget)

    assert len(p.requests) == 2
    assert info.value.limit == 2
    assert (cap.iterations, flow_budget.iterations) == (2, 2)


# -- budget8: a budget that runs out inside a composition carries what it had done --------------


def spender(name: str) -> Agent:
    """An agent whose tool call runs, then whose next model call the budget refuses."""
    return agent(name, tool_call_response(("noop", {})), "never", tools=[noop])


def assert_closed(messages: Any) -> None:
    """Every call has its result: the record of the agent that ran out is well formed."""
    calls = [c.id for m in messages for c in m.tool_calls]
    results = [m.tool_call_id for m in messages if m.role is Role.TOOL]
    assert calls
    assert calls == results


async def out_of_budget(flow: Any, iterations: int) -> BudgetExceededError:
    with pytest.raises(BudgetExceededError) as info:
        await flow.run("go", budget=Budget(max_iterations=iterations))
    return info.value


async def test_a_pipeline_out_of_budget_keeps_the_steps_it_finished() -> None:
    error = await out_of_budget(Pipeline(agent("a", "A done"), spender("b")), 2)
    assert isinstance(error.partial, FlowResult)
    assert error.partial.outputs == {"a": "A done"}
    assert error.partial.iterations == 2  # a's call and b's, made before it ran out
    assert_closed(error.run_result.messages)  # b's part: its call and its result


async def test_a_graph_out_of_budget_keeps_the_nodes_it_finished() -> None:
    graph = Graph({"a": agent("a", "A done"), "b": spender("b")}, {"a": "b", "b": END}, start="a")
    error = await out_of_budget(graph, 2)
    assert isinstance(error.partial, FlowResult)
    assert error.partial.outputs == {"a": "A done"}
    assert error.partial.state["path"] == ["a"]
    assert_closed(error.run_result.messages)


async def test_a_router_out_of_budget_keeps_the_classifiers_verdict() -> None:
    router = Router({"b": spender("b")}, classify=agent("classify", "b"))
    error = await out_of_budget(router, 2)
    assert isinstance(error.partial, FlowResult)
    assert error.partial.outputs == {"classify": "b"}
    assert_closed(error.run_result.messages)


async def test_a_loop_out_of_budget_keeps_its_finished_rounds() -> None:
    loop = Loop(agent("body", "one", "two", "never"), max_rounds=3)
    error = await out_of_budget(loop, 2)
    assert isinstance(error.partial, FlowResult)
    assert error.partial.trace == ("body", "body")
    assert error.partial.outputs == {"body": "two"}


async def test_a_parallel_out_of_budget_keeps_the_branches_that_finished() -> None:
    flow = Parallel(agent("a", "A done"), spender("b"), max_concurrency=1)
    error = await out_of_budget(flow, 2)
    assert isinstance(error.partial, FlowResult)
    assert error.partial.outputs == {"a": "A done"}
    assert_closed(error.run_result.messages)


async def test_a_broadcast_supervisor_out_of_budget_keeps_the_members_answers() -> None:
    supervisor = Supervisor(
        agent("lead", "never"), [agent("a", "A done"), agent("b", "B done")], mode="broadcast"
    )
    error = await out_of_budget(supervisor, 2)
    assert isinstance(error.partial, FlowResult)
    assert error.partial.trace == ("members",)
    assert "A done" in error.partial.outputs["members"]
    assert "B done" in error.partial.outputs["members"]


async def test_a_coordinating_supervisor_out_of_budget_keeps_the_leads_whole_turn() -> None:
    # The lead's run holds the member call with its (error) result: no flow part is missing.
    lead = agent("lead", tool_call_response(("b", {"prompt": "go"})), "never")
    error = await out_of_budget(Supervisor(lead, [spender("b")]), 2)
    messages = error.run_result.messages
    assert messages[0].text == "go"
    assert_closed(messages)
    assert [m.is_error for m in messages if m.role is Role.TOOL] == [True]


def test_a_budget_errors_partial_result_is_not_pickled() -> None:
    error = BudgetExceededError("iterations", 2, 2)
    error.partial = FlowResult("x")
    back = pickle.loads(pickle.dumps(error))
    assert (back.kind, back.limit, back.spent, back.partial) == ("iterations", 2, 2, None)


@pytest.mark.parametrize("how", ["run", "session"])
async def test_a_run_out_of_budget_stores_the_calls_that_ran(tmp_path: Any, how: str) -> None:
    # Rule 6 for the run-wide budget as for the iteration budget: the refund ran, so the
    # conversation keeps it (before, storage held nothing of the turn and a retry from memory
    # refunded again), closed by a note, and the error's result is the stored record.
    from goagent_py import Session, validate_transcript
    from goagent_py.memory import ShortTermMemory
    from goagent_py.memory.storage import SQLiteStorage

    refunds: list[int] = []

    @tool
    def refund(order: int) -> str:
        """Refund an order."""
        refunds.append(order)
        return f"refunded {order}"

    memory = ShortTermMemory(storage=SQLiteStorage(tmp_path / "b.db", session_id="b"))
    billing = agent(
        "billing",
        tool_call_response(("refund", {"order": 7})),
        "Done.",
        tools=[refund],
        short_term_memory=memory,
    )
    start = billing.run if how == "run" else Session(billing).prompt
    with Budget(max_iterations=1), pytest.raises(BudgetExceededError) as info:
        await start("refund order 7")
    assert refunds == [7]
    stored = await memory.transcript()
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert stored[2].text == "refunded 7"
    assert stored[3].metadata["goagent.synthetic"] == "budget"
    assert "budget is spent" in stored[3].text
    assert validate_transcript(stored, allow_pending=False) == []
    assert info.value.run_result is not None
    assert info.value.run_result.messages == stored
