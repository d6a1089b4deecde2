"""Pipeline, Parallel, Router and Loop: the happy paths and the edge cases."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from goagent_py import Agent, ConfigurationError, ProviderError, Usage
from goagent_py.budget import Budget, BudgetExceededError
from goagent_py.events import AgentStart
from goagent_py.orchestration import (
    FlowResult,
    Loop,
    MaxStepsError,
    Node,
    NodeEnd,
    NodeStart,
    NodeTimeoutError,
    Parallel,
    Pipeline,
    RouteError,
    Router,
    StepFailedError,
)
from goagent_py.resilience import RetryPolicy
from goagent_py.testing import ScriptedProvider, text_response


def agent(name: str, *responses: Any) -> Agent:
    return Agent(provider=ScriptedProvider(*responses), model="m", name=name)


async def upper(text: str) -> str:
    return text.upper()


async def exclaim(text: str) -> str:
    return text + "!"


async def boom(text: str) -> str:
    raise RuntimeError("boom")


# -- Pipeline ----------------------------------------------------------------------------------


async def test_pipeline_feeds_each_output_to_the_next() -> None:
    result = await Pipeline(upper, exclaim).run("hi")
    assert result.text == "HI!"
    assert result.trace == ("upper", "exclaim")
    assert result.outputs == {"upper": "HI", "exclaim": "HI!"}
    assert [s.path for s in result.steps] == [("pipeline", "upper"), ("pipeline", "exclaim")]


async def test_a_step_repeated_without_a_name_is_numbered() -> None:
    result = await Pipeline(exclaim, exclaim, exclaim).run("a")
    assert result.text == "a!!!"
    assert result.trace == ("exclaim", "exclaim-2", "exclaim-3")


async def test_pipeline_of_agents_sums_usage_and_maps_inputs() -> None:
    researcher = agent("researcher", text_response("notes", usage=Usage(10, 1)))
    writer_p = ScriptedProvider(text_response("article", usage=Usage(20, 2)))
    writer = Agent(provider=writer_p, model="m", name="writer")
    flow = Pipeline(researcher, Node(writer, input=lambda notes: f"Write from: {notes}"))

    result = await flow.run("topic")

    assert result.text == "article"
    assert result.usage == Usage(30, 3)
    assert result.iterations == 2
    assert writer_p.requests[0].messages[0].text == "Write from: notes"


async def test_pipeline_failure_names_the_step_and_keeps_what_was_done() -> None:
    ran: list[str] = []

    async def last(text: str) -> str:
        ran.append(text)
        return text

    flow = Pipeline(upper, Node(agent("writer", ProviderError("down")), name="w"), last)
    with pytest.raises(StepFailedError) as info:
        await flow.run("x")
    assert info.value.path == ("pipeline", "w")
    assert isinstance(info.value.__cause__, ProviderError)
    assert info.value.partial is not None
    assert info.value.partial.trace == ("upper",)
    assert ran == []


async def test_pipeline_streams_node_and_agent_events_with_paths() -> None:
    inner = Pipeline(agent("writer", "draft"), exclaim, name="inner")
    events = [e async for e in Pipeline(upper, inner).stream("x")]

    starts = [e.path for e in events if isinstance(e, NodeStart)]
    assert starts == [
        ("pipeline",),
        ("pipeline", "upper"),
        ("pipeline", "inner"),
        ("pipeline", "inner", "writer"),
        ("pipeline", "inner", "exclaim"),
    ]
    agent_start = next(e for e in events if isinstance(e, AgentStart))
    assert agent_start.path == ("pipeline", "inner", "writer")
    last = events[-1]
    assert isinstance(last, NodeEnd)
    assert last.path == ("pipeline",)
    assert isinstance(last.result, FlowResult)
    assert last.result.text == "draft!"


async def test_a_node_retries_by_its_policy() -> None:
    calls: list[int] = []

    async def flaky(text: str) -> str:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("flaky")
        return "ok"

    async def no_sleep(_: float) -> None:
        return None

    policy = RetryPolicy(3, initial_delay=0, jitter=0, sleep=no_sleep)
    assert (await Pipeline(Node(flaky, retry=policy)).run("x")).text == "ok"
    assert len(calls) == 3


async def test_a_retry_policy_judges_the_agents_own_error() -> None:
    seen: list[BaseException] = []

    def retryable(error: BaseException) -> bool:
        seen.append(error)
        return isinstance(error, ProviderError)

    async def no_sleep(_: float) -> None:
        return None

    flaky = agent("flaky", ProviderError("overloaded"), "second try")
    policy = RetryPolicy(2, initial_delay=0, jitter=0, retryable=retryable, sleep=no_sleep)
    result = await Pipeline(Node(flaky, retry=policy)).run("x")
    assert result.text == "second try"
    assert [type(e) for e in seen] == [ProviderError]


def test_pipeline_misuse() -> None:
    with pytest.raises(ConfigurationError, match="at least one step"):
        Pipeline()
    with pytest.raises(ConfigurationError, match="two nodes are named 'u'"):
        Pipeline(Node(upper, name="u"), Node(exclaim, name="u"))
    with pytest.raises(ConfigurationError, match="a node must be"):
        Pipeline(42)  # type: ignore[arg-type]


async def test_a_function_returning_no_str_is_misuse() -> None:
    async def bad(text: str) -> Any:
        return 3

    with pytest.raises(ConfigurationError, match="returns a str"):
        await Pipeline(bad).run("x")


# -- Parallel ----------------------------------------------------------------------------------


async def test_parallel_joins_outputs_in_branch_order() -> None:
    result = await Parallel(upper, exclaim, join=lambda o: " | ".join(o.values())).run("a")
    assert result.text == "A | a!"
    default = await Parallel(upper, exclaim).run("a")
    assert default.text == "[upper]\nA\n\n[exclaim]\na!"


async def test_parallel_runs_at_most_max_concurrency_branches() -> None:
    active = 0
    peak = 0
    both = asyncio.Barrier(2)

    def branch(name: str) -> Node:
        async def body(text: str) -> str:
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            if name in ("a", "b"):
                await both.wait()  # a and b must run together, or this never returns
            await asyncio.sleep(0)
            active -= 1
            return name

        return Node(body, name=name)

    result = await Parallel(branch("a"), branch("b"), branch("c"), max_concurrency=2).run("x")
    assert peak == 2
    assert result.outputs == {"a": "a", "b": "b", "c": "c"}


async def test_parallel_fail_fast_cancels_the_other_branches() -> None:
    entered = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow(text: str) -> str:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    async def fail_after_slow(text: str) -> str:
        await entered.wait()
        raise RuntimeError("branch failed")

    with pytest.raises(StepFailedError) as info:
        await Parallel(slow, fail_after_slow).run("x")
    assert info.value.path == ("parallel", "fail_after_slow")
    assert cancelled.is_set()
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_parallel_collects_errors_when_asked() -> None:
    result = await Parallel(upper, boom, fail_fast=False).run("a")
    assert result.text == "[upper]\nA"
    assert set(result.errors) == {"boom"}
    assert isinstance(result.errors["boom"], StepFailedError)
    with pytest.raises(StepFailedError, match="boom"):
        await Parallel(boom, fail_fast=False).run("a")


def test_parallel_misuse() -> None:
    with pytest.raises(ConfigurationError, match="at least one branch"):
        Parallel()
    with pytest.raises(ConfigurationError, match="max_concurrency"):
        Parallel(upper, max_concurrency=0)


# -- Router ------------------------------------------------------------------------------------


async def test_router_with_a_function() -> None:
    router = Router({"shout": upper, "cheer": exclaim}, classify=lambda t: "cheer")
    result = await router.run("hi")
    assert result.text == "hi!"
    assert result.trace == ("cheer",)


async def test_router_with_a_classifier_agent() -> None:
    classifier_p = ScriptedProvider(text_response("Billing.", usage=Usage(5, 1)))
    classifier = Agent(provider=classifier_p, model="m", name="triage")
    billing = agent("billing", text_response("refund issued", usage=Usage(3, 3)))
    router = Router({"billing": billing, "tech": agent("tech")}, classify=classifier)

    result = await router.run("I was charged twice")

    assert result.text == "refund issued"
    assert result.trace == ("classify", "billing")
    assert result.usage == Usage(8, 4)
    prompt = classifier_p.requests[0].messages[0].text
    assert "billing, tech" in prompt
    assert "I was charged twice" in prompt


async def test_router_default_and_no_route() -> None:
    routes = {"shout": upper, "cheer": exclaim}
    assert (await Router(routes, classify=lambda t: "??", default="shout").run("a")).text == "A"
    with pytest.raises(RouteError, match="names none of the routes"):
        await Router(routes, classify=lambda t: "both shout and cheer").run("a")


async def test_a_failing_route_names_itself_and_keeps_the_classification() -> None:
    classifier = agent("triage", text_response("broken", usage=Usage(4, 1)))
    router = Router({"broken": boom, "fine": upper}, classify=classifier)
    with pytest.raises(StepFailedError) as info:
        await router.run("x")
    assert info.value.path == ("router", "broken")
    assert info.value.partial is not None
    assert info.value.partial.trace == ("classify",)
    assert info.value.partial.usage == Usage(4, 1)


def test_router_misuse() -> None:
    with pytest.raises(ConfigurationError, match="at least one route"):
        Router({}, classify=lambda t: "x")
    with pytest.raises(ConfigurationError, match="default 'nope' is not a route"):
        Router({"a": upper}, classify=lambda t: "a", default="nope")


# -- Loop --------------------------------------------------------------------------------------


async def test_loop_until_a_predicate_holds() -> None:
    result = await Loop(exclaim, until=lambda out, n: out.endswith("!!"), max_rounds=5).run("a")
    assert result.text == "a!!"
    assert result.trace == ("exclaim", "exclaim")


async def test_loop_at_its_limit_returns_or_raises() -> None:
    never = Loop(exclaim, until=lambda out, n: False, max_rounds=3)
    assert (await never.run("a")).text == "a!!!"
    with pytest.raises(MaxStepsError) as info:
        await Loop(exclaim, until=lambda o, n: False, max_rounds=2, on_limit="raise").run("a")
    assert info.value.taken == ("exclaim", "exclaim")
    assert "exclaim -> exclaim" in str(info.value)
    assert (await Loop(exclaim, max_rounds=2).run("a")).text == "a!!"


async def test_loop_body_failure() -> None:
    with pytest.raises(StepFailedError) as info:
        await Loop(boom).run("a")
    assert info.value.path == ("loop", "boom")


def test_loop_misuse() -> None:
    with pytest.raises(ConfigurationError, match="max_rounds"):
        Loop(upper, max_rounds=0)
    with pytest.raises(ConfigurationError, match="on_limit"):
        Loop(upper, on_limit="ignore")  # type: ignore[arg-type]


# -- timeouts ----------------------------------------------------------------------------------


async def test_a_node_past_its_timeout_is_cancelled_and_may_be_retried() -> None:
    attempts: list[int] = []
    cancelled = asyncio.Event()

    async def stuck(text: str) -> str:
        attempts.append(1)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    async def no_sleep(_: float) -> None:
        return None

    policy = RetryPolicy(2, initial_delay=0, jitter=0, sleep=no_sleep)
    flow = Pipeline(upper, Node(stuck, timeout=0.05, retry=policy))
    with pytest.raises(StepFailedError) as info:
        await flow.run("x")
    assert info.value.path == ("pipeline", "stuck")
    assert isinstance(info.value.cause, NodeTimeoutError)
    assert info.value.cause.timeout == 0.05
    assert "ran past its 0.05s timeout" in str(info.value)
    assert len(attempts) == 2
    assert cancelled.is_set()


async def test_a_node_under_the_budgets_wall_time_is_stopped_when_it_is_up() -> None:
    cancelled = asyncio.Event()

    async def two_seconds(text: str) -> str:
        try:
            await asyncio.sleep(2)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "ran to the end"

    with pytest.raises(BudgetExceededError) as info:
        await Pipeline(upper, two_seconds).run("x", budget=Budget(max_seconds=0.2))
    assert info.value.kind == "seconds"
    assert cancelled.is_set()


async def test_the_budgets_wall_time_stops_every_parallel_branch() -> None:
    cancelled: list[str] = []

    def sleeper(name: str) -> Node:
        async def run(text: str) -> str:
            try:
                await asyncio.sleep(2)
            except asyncio.CancelledError:
                cancelled.append(name)
                raise
            return name

        return Node(run, name=name)

    with pytest.raises(BudgetExceededError):
        await Parallel(sleeper("a"), sleeper("b"), fail_fast=False).run(
            "x", budget=Budget(max_seconds=0.2)
        )
    assert sorted(cancelled) == ["a", "b"]


def test_node_timeout_misuse() -> None:
    with pytest.raises(ConfigurationError, match="timeout must be a positive number"):
        Node(upper, timeout=0)
