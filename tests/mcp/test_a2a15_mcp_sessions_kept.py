"""An agent served over MCP to many sessions (docs/mcp.md, "How long a session is kept"): what
it keeps of each session is bounded (the session idle longest forgotten first, its stored
conversation and remembered facts deleted), and its tools' circuit breakers are the server's
whichever session calls (docs/mcp.md, "One conversation per client")."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from down_host import DownHost  # tests/down_host.py
from mcp_helpers import serving

from goagent_py import Agent
from goagent_py.mcp.server import http_app, serve_agent
from goagent_py.memory import LongTermMemory, ShortTermMemory, SQLiteStorage
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.testing import FakeEmbedder, FunctionProvider

pytestmark = pytest.mark.slow


def _sessions(path: str) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT DISTINCT session_id FROM goagent_messages")}


async def _ask(url: str, prompt: str) -> str:
    from mcp import Client

    async with Client(url, mode="legacy") as client:  # a session of its own
        result = await client.call_tool("ask", {"prompt": prompt})
    assert not result.is_error, result
    return str(result.content[0].text)


async def test_past_max_kept_sessions_the_one_idle_longest_is_forgotten(tmp_path: Any) -> None:
    path = str(tmp_path / "mcp.db")
    store = InMemoryVectorStore()
    agent = Agent(
        provider=FunctionProvider(lambda r: "noted: " + r.messages[-1].text),
        model="m",
        name="h",
        short_term_memory=ShortTermMemory(SQLiteStorage(path, session_id="helper")),
        long_term_memory=LongTermMemory(FakeEmbedder(64), store),
    )
    async with serving(http_app(serve_agent(agent, max_kept_sessions=2))) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        for who in ("Ana", "Bob", "Cy"):
            assert await _ask(url, f"I am {who}") == f"noted: I am {who}"
        kept = [s for s in _sessions(path) if s.startswith("helper/mcp/")]
        assert len(kept) == 2  # Ana's session, idle longest, went with Cy's
        texts = [s.message.text for s in await store.entries()]
        assert not [t for t in texts if "Ana" in t], texts
        assert [t for t in texts if "Bob" in t]
    await agent.options.short_term_memory.storage.aclose()  # type: ignore[union-attr]


async def test_a_tools_circuit_breaker_is_the_servers_whichever_session_calls_it() -> None:
    host = DownHost()
    agent = host.agent(long_term_memory=LongTermMemory(FakeEmbedder(64), InMemoryVectorStore()))
    async with serving(http_app(serve_agent(agent))) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        answers = [await _ask(url, "get it") for _ in range(3)]
    assert host.calls == ["fetch", "fetch"]  # the third session met the server's open circuit
    assert "circuit" in answers[-1].lower(), answers
