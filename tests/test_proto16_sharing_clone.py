"""A served agent's client agent (``Agent._sharing_tools``: an A2A context's, an MCP session's,
an OpenAI-compatible request's) builds only what differs: no dispatcher and no tool table of its
own; what depends on the tools (a tool behind an approval, a typed output's tool name) still
holds. A client's own tools come after the agent's, under their own names."""

from __future__ import annotations

from typing import Any

import pytest

from goagent_py import Agent, tool
from goagent_py.dispatch import Dispatcher
from goagent_py.errors import ConfigurationError
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage.in_memory import InMemoryStorage
from goagent_py.testing import ScriptedProvider
from goagent_py.tools import tool_func


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(requires_approval=True)
def wipe(target: str) -> str:
    """Wipe something."""
    return target


def test_a_clients_agent_builds_no_dispatcher_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    served = Agent(provider=ScriptedProvider("ok"), model="m", tools=[add, wipe])
    built: list[Dispatcher] = []
    made = Dispatcher.__init__

    def counting(self: Dispatcher, *args: Any, **kwargs: Any) -> None:
        built.append(self)
        made(self, *args, **kwargs)

    monkeypatch.setattr(Dispatcher, "__init__", counting)
    clone = served._sharing_tools(short_term_memory=ShortTermMemory(InMemoryStorage()))
    assert built == []  # the served agent's dispatcher is the clone's
    assert clone._dispatcher is served._dispatcher
    assert clone.options.holds_calls  # wipe still waits for a decision
    assert [t.definition.name for t in clone.tools] == ["add", "wipe"]


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


def test_a_typed_output_of_a_client_is_checked_against_the_clients_tools() -> None:
    # A client's tool named like the output tool would be a second tool of that name.
    served = Agent(provider=ScriptedProvider("ok"), model="m", tools=[add])

    async def run(arguments: dict[str, Any]) -> str:
        return ""

    final = tool_func("final_result", "Mine.", {"type": "object", "properties": {}}, run)
    with pytest.raises(ConfigurationError, match="final_result"):
        served._sharing_tools(client_tools=[final], client="c-1", output_type=dict)
