"""A served agent's client agent (``Agent._sharing_tools``: an A2A context's, an MCP session's,
an OpenAI-compatible request's) builds only what differs: no dispatcher and no tool table of its
own, and the served agent's tools are not checked again; what depends on them (a tool behind an
approval) still holds. A client's own tools come after the agent's, under their own names."""

from __future__ import annotations

from typing import Any

import pytest

from goagent_py import Agent, tool
from goagent_py.dispatch import Dispatcher
from goagent_py.errors import ConfigurationError
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage.in_memory import InMemoryStorage
from goagent_py.testing import ScriptedProvider
from goagent_py.tools import Tool, ToolDefinition, tool_func


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(requires_approval=True)
def wipe(target: str) -> str:
    """Wipe something."""
    return target


class _Counted:
    """A tool of the protocol (not @tool) that counts how often its definition is read: the
    options' check reads it for every such tool."""

    reads = 0

    @property
    def definition(self) -> ToolDefinition:
        type(self).reads += 1
        return ToolDefinition("counted", "Counts.", {"type": "object", "properties": {}})

    async def execute(self, arguments: dict[str, Any]) -> list[Any]:
        return []


def test_a_clients_agent_builds_no_dispatcher_and_checks_no_served_tool_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counted: Tool = _Counted()  # type: ignore[assignment]
    served = Agent(provider=ScriptedProvider("ok"), model="m", tools=[add, wipe, counted])
    built: list[Dispatcher] = []
    made = Dispatcher.__init__

    def counting(self: Dispatcher, *args: Any, **kwargs: Any) -> None:
        built.append(self)
        made(self, *args, **kwargs)

    monkeypatch.setattr(Dispatcher, "__init__", counting)
    _Counted.reads = 0
    clone = served._sharing_tools(short_term_memory=ShortTermMemory(InMemoryStorage()))
    assert built == []  # the served agent's dispatcher is the clone's
    assert _Counted.reads == 0  # checked when the served agent was made
    assert clone._dispatcher is served._dispatcher
    assert clone.options.holds_calls  # wipe still waits for a decision
    assert [t.definition.name for t in clone.tools] == ["add", "wipe", "counted"]


def test_a_clients_own_tools_come_after_the_agents_and_may_not_take_their_names() -> None:
    served = Agent(provider=ScriptedProvider("ok"), model="m", tools=[add])

    async def run(arguments: dict[str, Any]) -> str:
        return "client's"

    lookup = tool_func("lookup", "Look up.", {"type": "object", "properties": {}}, run)
    clone = served._sharing_tools(client_tools=[lookup], client="c-1")
    assert [t.definition.name for t in clone.tools] == ["add", "lookup"]
    assert [t.definition.name for t in served.tools] == ["add"]
    mine = tool_func("add", "Mine.", {"type": "object", "properties": {}}, run)
    with pytest.raises(ConfigurationError, match="rename"):
        served._sharing_tools(client_tools=[mine], client="c-1")
    with pytest.raises(ConfigurationError, match="sequential_tools"):
        served._sharing_tools(sequential_tools=["add"])
