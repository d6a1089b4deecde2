"""The stored session id and memory scope of a served agent's client (an A2A context, an MCP
session): any client id gives a valid, distinct one (docs/a2a.md, "One conversation per
client")."""

from __future__ import annotations

import pytest

from goagent_py import Agent
from goagent_py._conversation import client_scope, client_session_id
from goagent_py.memory.storage._parts import check_session_id
from goagent_py.testing import ScriptedProvider


@pytest.mark.parametrize(
    "client",
    ["ctx-1", "a\x00b", "a\x1fb", "\ud800", "x" * 5000, "../../etc", "sha256-" + "0" * 64, "é"],
)
@pytest.mark.parametrize("base", ["default", "b" * 1000, "é" * 600])
def test_any_client_id_gives_a_valid_session_id_and_agent_name(base: str, client: str) -> None:
    session_id = client_session_id(base, "a2a", client)
    assert check_session_id(session_id, "test") == session_id
    name = client_scope("helper", "a2a", client)
    # A valid agent name (it scopes long-term memory): refused otherwise.
    assert Agent(provider=ScriptedProvider(), model="m", name=name).name == name


def test_distinct_clients_never_share_a_session_id_or_a_scope() -> None:
    clients = ["ctx-1", "ctx-2", "sha256-" + "0" * 64, "a\x00b", "a\x00c", "x" * 5000, "x" * 5001]
    assert len({client_session_id("d", "mcp", c) for c in clients}) == len(clients)
    assert len({client_scope("h", "mcp", c) for c in clients}) == len(clients)
    assert client_session_id("d", "a2a", "c") != client_session_id("d", "mcp", "c")
