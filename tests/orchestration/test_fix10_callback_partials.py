"""Orchestration against failing callbacks and unprintable errors (fix10)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from goagent_py import Agent, Usage
from goagent_py.errors import ConfigurationError
from goagent_py.orchestration import (
    Graph,
    Handoffs,
    Loop,
    Parallel,
    Pipeline,
    Router,
    StepFailedError,
)
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str() of this error raises")


def test_a_step_failure_whose_cause_cannot_be_written_names_the_cause() -> None:
    error = StepFailedError(("a", "b"), UnprintableError())
    assert str(error).startswith("node 'a/b' failed: UnprintableError")
    assert isinstance(error.cause, UnprintableError)
    assert str(pickle.loads(pickle.dumps(error))) == str(error)


# -- a pattern's own callback that raises: the error keeps its type and carries the partial --


def answers(name: str, tokens: int) -> Agent:
    return Agent(
        provider=ScriptedProvider(text_response(f"{name} done", usage=Usage(tokens, 0))),
        model="m",
        name=name,
    )


class CallbackError(Exception):
    pass


def broken(*args: Any) -> Any:
    raise CallbackError("the callback broke")


async def test_a_graph_condition_that_raises_keeps_what_the_nodes_before_it_spent() -> None:
    graph = Graph({"a": answers("a", 10), "b": answers("b", 1)}, {"a": broken}, start="a")
    with pytest.raises(CallbackError) as info:
        await graph.run("x")
    partial = info.value.partial  # type: ignore[attr-defined]
    assert partial.trace == ("a",)
    assert partial.usage.input_tokens == 10
    assert partial.state["path"] == ["a"]


async def test_a_graph_condition_naming_an_unknown_node_keeps_what_was_spent() -> None:
    graph = Graph({"a": answers("a", 10)}, {"a": lambda state: "nowhere"}, start="a")
    with pytest.raises(ConfigurationError, match="nowhere") as info:
        await graph.run("x")
    assert info.value.partial.usage.input_tokens == 10  # type: ignore[attr-defined]


async def test_a_loop_until_that_raises_keeps_the_rounds_it_ran() -> None:
    loop = Loop(answers("a", 10), until=broken, max_rounds=3)
    with pytest.raises(CallbackError) as info:
        await loop.run("x")
    partial = info.value.partial  # type: ignore[attr-defined]
    assert partial.trace == ("a",)
    assert partial.usage.input_tokens == 10


async def test_a_parallel_join_that_raises_keeps_what_the_branches_spent() -> None:
    parallel = Parallel(answers("a", 10), answers("b", 20), join=broken)
    with pytest.raises(CallbackError) as info:
        await parallel.run("x")
    partial = info.value.partial  # type: ignore[attr-defined]
    assert set(partial.trace) == {"a", "b"}
    assert partial.usage.input_tokens == 30


async def test_a_router_classify_function_that_raises_carries_a_partial() -> None:
    router = Router({"x": answers("x", 1)}, classify=broken, name="route")
    with pytest.raises(CallbackError) as info:
        await router.run("x")
    partial = info.value.partial  # type: ignore[attr-defined]
    assert partial.trace == ()
    assert partial.usage.total_tokens == 0


async def test_a_router_classify_function_that_raises_in_a_pipeline_keeps_earlier_steps() -> None:
    router = Router({"x": answers("x", 1)}, classify=broken, name="route")
    with pytest.raises(StepFailedError) as info:
        await Pipeline(answers("a", 10), router).run("x")
    # A nested pattern's error reaches the outer flow as a StepFailedError naming its path
    # (as any failing node does), the callback's error its cause; the partial has step "a".
    assert isinstance(info.value.cause, CallbackError)
    partial = info.value.partial
    assert partial is not None
    assert partial.trace == ("a",)
    assert partial.usage.input_tokens == 10


async def test_a_nested_graph_naming_an_unknown_node_keeps_the_outer_steps_spent() -> None:
    inner = Graph({"b": answers("b", 100)}, {"b": lambda state: "nowhere"}, start="b", name="g")
    with pytest.raises(ConfigurationError) as info:
        await Pipeline(answers("a", 10), inner).run("x")
    partial = info.value.partial  # type: ignore[attr-defined]
    assert partial.trace == ("a",)
    assert partial.usage.input_tokens == 110


async def test_a_handoffs_input_filter_that_raises_keeps_what_the_first_agent_spent() -> None:
    first = Agent(
        provider=ScriptedProvider(
            tool_call_response(("transfer_to_second", {"reason": "theirs"}), usage=Usage(10, 0))
        ),
        model="m",
        name="first",
    )
    second = answers("second", 1)
    group = Handoffs([first, second], input_filter=broken)
    with pytest.raises(CallbackError) as info:
        await group.run("x")
    partial = info.value.partial  # type: ignore[attr-defined]
    assert partial.usage.input_tokens == 10
    assert partial.state["handoffs"] == [["first", "second"]]
    assert partial.messages  # the conversation so far
