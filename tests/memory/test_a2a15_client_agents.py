"""A served agent's client (an A2A context, an MCP session) gets a conversation of its own but
the served agent's tools, tool dispatch and MCP connections (docs/a2a.md, "One conversation per
client")."""

from __future__ import annotations

from typing import Any

from goagent_py import Agent, tool
from goagent_py.memory import ShortTermMemory
from goagent_py.memory._clients import client_agent
from goagent_py.memory.storage.in_memory import InMemoryStorage
from goagent_py.messages import Role
from goagent_py.testing import FunctionProvider, tool_call_response


async def test_clients_use_the_served_agents_connections_made_once_and_never_close_them() -> None:
    opened: list[str] = []
    closed: list[str] = []

    @tool
    async def lookup() -> str:
        """Look it up on the connected server."""
        return "found"

    async def connector() -> tuple[list[Any], Any]:
        opened.append("connection")

        async def close() -> None:
            closed.append("connection")

        return [lookup], close

    def model(request: Any) -> Any:
        if request.messages[-1].role is Role.USER:
            return tool_call_response(("lookup", {}))
        return "done"

    served = Agent(
        provider=FunctionProvider(model),
        model="m",
        short_term_memory=ShortTermMemory(InMemoryStorage()),
        mcp_connectors=[connector],
    )
    clients = [client_agent(served, c, protocol="a2a", shared_memory=False) for c in ("one", "two")]
    for client in clients:
        result = await client.agent.run("look it up")
        assert result.text == "done"
        assert "lookup" in [t.definition.name for t in client.agent.tools]
    assert opened == ["connection"]  # each client made a connection of its own, never closed
    for client in clients:
        await client.agent.aclose()
        await client.aclose()
    assert closed == []  # the served agent's: a client going does not close them
    await served.aclose()
    assert closed == ["connection"]
