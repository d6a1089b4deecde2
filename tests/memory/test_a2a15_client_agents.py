"""A served agent's client (an A2A context, an MCP session) gets a conversation of its own but
the served agent's tools, tool dispatch and MCP connections (docs/a2a.md, "One conversation per
client")."""

from __future__ import annotations

from typing import Any

import pytest

from goagent_py import Agent, tool
from goagent_py.errors import ConfigurationError
from goagent_py.memory import ShortTermMemory
from goagent_py.memory._clients import ClientLedger, check_forget_after, client_agent
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


def test_the_ledger_orders_what_it_forgets() -> None:
    now = [1000.0]
    ledger = ClientLedger(forget_after=60.0, max_kept=3, clock=lambda: now[0])
    for key in ("a", "busy", "b"):
        ledger.hold(key)
        if key != "busy":
            ledger.release(key)
        now[0] += 10
    assert ledger.due() == []  # three kept, none idle 60 s
    ledger.hold("c")
    ledger.release("c")
    assert ledger.due() == ["a"]  # past the bound: the one idle longest
    now[0] += 50  # b idle 60 s now, busy longer but held, c 50 s
    assert ledger.due() == ["b"]
    ledger.release("busy")
    assert ledger.due() == []  # released just now: its idle time starts here
    now[0] += 60
    assert ledger.due() == ["c", "busy"]
    ledger.met(["stored"])  # met before a restart: a full idle time from now
    now[0] += 59
    assert ledger.due() == []
    now[0] += 1
    assert ledger.due() == ["stored"]


def test_forget_after_must_be_seconds_or_none() -> None:
    check_forget_after(None)
    check_forget_after(1)
    for bad in (0, -1, True, "1d", float("nan"), float("inf")):
        with pytest.raises(ConfigurationError, match="forget_after"):
            check_forget_after(bad)
