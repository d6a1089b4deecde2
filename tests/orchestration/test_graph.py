"""Graph: edges, conditions, state as plain data, and the max-steps guard."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from goagent_py import Agent, ConfigurationError
from goagent_py.orchestration import END, Branch, Graph, MaxStepsError, Node, StepFailedError
from goagent_py.testing import ScriptedProvider


def agent(name: str, *responses: Any) -> Agent:
    return Agent(provider=ScriptedProvider(*responses), model="m", name=name)


def review_cycle(reviewer: Agent, max_steps: int = 10) -> Graph:
    writer = agent("writer", "draft 1", "draft 2", "draft 3", "draft 4")
    return Graph(
        {"write": writer, "review": reviewer},
        edges={
            "write": "review",
            "review": Branch(lambda s: END if "APPROVED" in s["last"] else "write", "write", END),
        },
        start="write",
        max_steps=max_steps,
    )


async def test_a_write_review_cycle_ends_when_approved() -> None:
    graph = review_cycle(agent("reviewer", "needs work", "APPROVED"))

    result = await graph.run("topic")

    assert result.trace == ("write", "review", "write", "review")
    assert result.text == "APPROVED"
    assert result.state["outputs"] == {"write": "draft 2", "review": "APPROVED"}
    assert result.state["visits"] == {"write": 2, "review": 2}
    assert pickle.loads(pickle.dumps(result.state)) == result.state  # plain data


async def test_a_cycle_past_max_steps_fails_with_the_path_taken() -> None:
    graph = review_cycle(agent("reviewer", "no", "no", "no"), max_steps=5)

    with pytest.raises(MaxStepsError) as info:
        await graph.run("topic")

    assert info.value.taken == ("write", "review", "write", "review", "write")
    assert "path taken: write -> review -> write -> review -> write" in str(info.value)
    assert info.value.partial is not None
    assert info.value.partial.text == "draft 3"
    copy = pickle.loads(pickle.dumps(info.value))
    assert copy.taken == info.value.taken
    assert str(copy) == str(info.value)


async def test_node_input_from_state_and_function_edges() -> None:
    async def first(text: str) -> str:
        return "one"

    async def second(text: str) -> str:
        return text

    graph = Graph(
        {
            "first": first,
            "second": Node(second, input=lambda s: f"{s['input']}+{s['outputs']['first']}"),
        },
        edges={"first": lambda s: "second"},
        start="first",
    )
    result = await graph.run("in")
    assert result.text == "in+one"  # "second" has no edge: the run ends there


async def test_a_condition_naming_an_undeclared_target_is_misuse() -> None:
    async def a(text: str) -> str:
        return text

    graph = Graph({"a": a}, edges={"a": Branch(lambda s: "b", END)}, start="a")
    with pytest.raises(ConfigurationError, match="chose 'b'"):
        await graph.run("x")


async def test_a_failing_node_keeps_the_state_so_far() -> None:
    async def ok(text: str) -> str:
        return "fine"

    async def broken(text: str) -> str:
        raise RuntimeError("broken")

    graph = Graph({"ok": ok, "broken": broken}, edges={"ok": "broken"}, start="ok")
    with pytest.raises(StepFailedError) as info:
        await graph.run("x")
    assert info.value.path == ("graph", "broken")
    assert info.value.partial is not None
    assert info.value.partial.state["path"] == ["ok"]


async def noop(text: str) -> str:
    return text


@pytest.mark.parametrize(
    ("nodes", "edges", "start", "match"),
    [
        ({}, {}, "a", "at least one node"),
        ({"a": noop}, {}, "b", "start 'b' is not a node"),
        ({"a": noop}, {"a": "ghost"}, "a", "'a' -> 'ghost' leads to an unknown node"),
        ({"a": noop}, {"ghost": "a"}, "a", "leaves 'ghost', which is not a node"),
        ({"a": noop}, {"a": Branch(lambda s: END, "a", "x")}, "a", "'a' -> 'x'"),
        ({"a": noop}, {"a": 3}, "a", "must be a node name"),
    ],
)
def test_graph_misuse(nodes: Any, edges: Any, start: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        Graph(nodes, edges, start=start)


def test_max_steps_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="max_steps"):
        Graph({"a": noop}, {}, start="a", max_steps=0)


async def test_conditions_share_one_state_and_may_keep_counts_in_it() -> None:
    async def work(text: str) -> str:
        return text + "."

    def until_third_try(s: dict[str, Any]) -> str:
        s["tries"] = s.get("tries", 0) + 1
        return END if s["tries"] >= 3 else "work"

    graph = Graph(
        {"work": work}, edges={"work": Branch(until_third_try, "work", END)}, start="work"
    )
    result = await graph.run("x")

    assert result.trace == ("work", "work", "work")
    assert result.text == "x..."
    assert result.state["tries"] == 3


async def test_mermaid_draws_plain_conditional_and_implicit_edges() -> None:
    async def a(text: str) -> str:
        return text

    def approved(s: dict[str, Any]) -> str:
        return END

    graph = Graph(
        {"write": a, 'say "hi"': a, "review": a},
        edges={
            "write": 'say "hi"',
            'say "hi"': "review",
            "review": Branch(approved, "write", END),
        },
        start="write",
    )
    assert graph.mermaid() == (
        "flowchart TD\n"
        "    start([start])\n"
        "    stop([end])\n"
        '    n0["write"]\n'
        '    n1["say #quot;hi#quot;"]\n'
        '    n2["review"]\n'
        "    start --> n0\n"
        "    n0 --> n1\n"
        "    n1 --> n2\n"
        "    n2 -.->|approved| n0\n"
        "    n2 -.->|approved| stop\n"
    )
    loose = Graph({"a": a, "b": a}, edges={"a": lambda s: "b"}, start="a")
    assert loose.mermaid().splitlines()[-4:] == [
        "    n0 -.-> n0",
        "    n0 -.-> n1",
        "    n0 -.-> stop",
        "    n1 --> stop",
    ]
