"""DurableAgent's settings: what crosses into the workflow, and misuse caught before any run."""

from __future__ import annotations

import json

import pytest

from goagent_py import Agent
from goagent_py.durable import DurableAgent, ProviderRegistry, activities_for, create_worker
from goagent_py.errors import ConfigurationError
from goagent_py.testing import FunctionProvider
from goagent_py.tools import tool


@tool
def add(a: int, b: int) -> int:
    """Add.

    Args:
        a: first.
        b: second.
    """
    return a + b


def make(name: str = "calc", **settings: object) -> Agent:
    return Agent(provider=FunctionProvider(lambda r: "x"), model="m", name=name, **settings)


def test_the_config_is_plain_json_with_the_tool_schemas() -> None:
    durable = DurableAgent(make(tools=[add], max_iterations=4), provider="anthropic:claude-x")
    config = durable.config()
    assert json.loads(json.dumps(config)) == config
    assert config["agent"] == "calc"
    assert config["provider"] == "anthropic:claude-x"
    assert config["max_iterations"] == 4
    assert [t["name"] for t in config["tools"]] == ["add"]
    assert set(config["tools"][0]["parameters"]["properties"]) == {"a", "b"}


def test_callables_that_would_run_in_the_workflow_are_refused() -> None:
    durable = DurableAgent(make(before_tool_call=lambda call: None), provider="fn:x")
    with pytest.raises(ConfigurationError, match="before_tool_call"):
        durable.config()


def test_activities_are_named_after_the_agent_and_its_tools() -> None:
    durable = DurableAgent(make(tools=[add]), provider="fn:x")
    names = sorted(
        getattr(fn, "__temporal_activity_definition").name
        for fn in activities_for([durable], ProviderRegistry())
    )
    assert names == [
        "goagent.memory.append.calc",
        "goagent.memory.load.calc",
        "goagent.memory.recall.calc",
        "goagent.memory.store.calc",
        "goagent.model.calc",
        "goagent.tool.calc.add",
    ]
    with pytest.raises(ConfigurationError, match="two durable agents are named 'calc'"):
        activities_for([durable, DurableAgent(make(), provider="fn:x")], ProviderRegistry())


def test_create_worker_misuse() -> None:
    with pytest.raises(ConfigurationError, match="at least one"):
        create_worker(object(), [])
    one = DurableAgent(make("a"), provider="fn:x", task_queue="q1")
    two = DurableAgent(make("b"), provider="fn:x", task_queue="q2")
    with pytest.raises(ConfigurationError, match="several task queues"):
        create_worker(object(), [one, two])


def test_the_registry_builds_each_spec_once() -> None:
    built: list[str] = []

    def factory(rest: str) -> FunctionProvider:
        built.append(rest)
        return FunctionProvider(lambda r: rest)

    registry = ProviderRegistry({"fn": factory})
    assert registry.resolve("fn:a") is registry.resolve("fn:a")
    registry.resolve("fn:b")
    assert built == ["a", "b"]
    with pytest.raises(ConfigurationError, match="without ':'"):
        registry.register("a:b", factory)
