"""DurableAgent's settings: what crosses into the workflow, and misuse caught before any run."""

from __future__ import annotations

import json

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from goagent_py import Agent
from goagent_py.durable import (
    DurableAgent,
    MCPServerSpec,
    ProviderRegistry,
    activities_for,
    create_worker,
)
from goagent_py.durable._activities import _AgentActivities
from goagent_py.errors import ConfigurationError
from goagent_py.mcp import MCPHttp, MCPInProcess, MCPStdio
from goagent_py.memory import ShortTermMemory
from goagent_py.messages import Message, Role, TextBlock
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


def test_a_callable_that_would_run_in_the_workflow_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="transform_context"):
        DurableAgent(make(transform_context=lambda messages: messages), provider="fn:x")
    with pytest.raises(ConfigurationError, match="should_stop is not supported"):
        DurableAgent(make(should_stop=lambda state: True), provider="fn:x")
    with pytest.raises(ConfigurationError, match="prepare_turn is not supported"):
        DurableAgent(make(prepare_turn=lambda request: request), provider="fn:x")
    with pytest.raises(ConfigurationError, match="instructions are not supported"):
        DurableAgent(make(instructions=lambda run: "dynamic"), provider="fn:x")


def test_tool_gates_stay_on_the_workers_and_only_their_shape_is_in_the_config() -> None:
    def gate(call: object, message: object) -> None:
        return None

    config = DurableAgent(
        make(before_tool_call=gate, stop_on_denied=True), provider="fn:x"
    ).config()
    assert json.loads(json.dumps(config)) == config
    assert (config["stop_on_denied"], config["gate_sees_message"]) == (True, True)


def test_mcp_servers_become_specs_and_only_their_names_reach_the_workflow() -> None:
    server = MCPStdio("mcp-server-time", ["--local-timezone", "UTC"], env={"TOKEN": "s3cret"})
    web = MCPHttp("http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer s3cret"}, name="web")
    durable = DurableAgent(make(tools=[add], mcp_servers=[server, web]), provider="fn:x")
    stdio_spec, http_spec = durable.mcp_servers
    assert (stdio_spec.command, stdio_spec.args) == ("mcp-server-time", ("--local-timezone", "UTC"))
    assert MCPServerSpec.from_data(json.loads(json.dumps(stdio_spec.to_data()))) == stdio_spec
    assert MCPServerSpec.from_data(json.loads(json.dumps(http_spec.to_data()))) == http_spec
    config = durable.config()
    assert config["mcp_servers"] == ["mcp-server-time", "web"]
    assert "s3cret" not in json.dumps(config)  # secrets stay on the workers
    names = {
        getattr(fn, "__temporal_activity_definition").name
        for fn in activities_for([durable], ProviderRegistry())
    }
    assert {
        "goagent.mcp.list.calc.mcp-server-time",
        "goagent.mcp.call.calc.mcp-server-time",
        "goagent.mcp.list.calc.web",
        "goagent.mcp.call.calc.web",
    } <= names


def test_mcp_servers_that_cannot_be_config_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="MCPStdio"):
        DurableAgent(make(mcp_servers=[MCPInProcess(object(), name="x")]), provider="fn:x")
    with pytest.raises(ConfigurationError, match="auth="):
        DurableAgent(make(mcp_servers=[MCPHttp("http://h/mcp", auth=object())]), provider="fn:x")
    twins = [MCPStdio("a", name="same"), MCPStdio("b", name="same")]
    with pytest.raises(ConfigurationError, match="two MCP servers are named 'same'"):
        DurableAgent(make(mcp_servers=twins), provider="fn:x")

    async def connector() -> tuple[list[object], None]:
        return [], None

    with pytest.raises(ConfigurationError, match="mcp_servers="):
        DurableAgent(make(mcp_connectors=[connector]), provider="fn:x")


def test_activities_are_named_after_the_agent_and_its_tools() -> None:
    durable = DurableAgent(make(tools=[add]), provider="fn:x")
    names = sorted(
        getattr(fn, "__temporal_activity_definition").name
        for fn in activities_for([durable], ProviderRegistry())
    )
    assert names == [
        "goagent.approval.calc",
        "goagent.deps.calc",
        "goagent.guardrail.calc",
        "goagent.memory.append.calc",
        "goagent.memory.load.calc",
        "goagent.memory.recall.calc",
        "goagent.memory.settle.calc",
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


async def test_a_load_over_the_payload_limit_names_the_load_once() -> None:
    memory = ShortTermMemory()  # stand-ins of 20 messages: over 1,000 bytes
    await memory.append(*[Message(Role.USER, [TextBlock(f"q{i}")]) for i in range(20)])
    durable = DurableAgent(
        make(), provider="fn:x", short_term_memory=lambda _s: memory, payload_limit=1000
    )
    activities = _AgentActivities(durable, ProviderRegistry())
    with pytest.raises(ApplicationError) as caught:
        await ActivityEnvironment().run(activities.load, {"session_id": "s"})
    assert caught.value.type == "PayloadTooLargeError"
    assert caught.value.message.startswith("short-term memory load: the payload is ")
    assert caught.value.message.count("short-term memory load") == 1
    assert caught.value.details[0]["message"] == caught.value.message
