"""One rule for an agent with memory served to many MCP clients (docs/mcp.md, "One
conversation per client"), the same as A2A's: each MCP session over HTTP or SSE gets a
conversation of its own in the served memory's storage kind, and long-term memory scoped to
the session unless the server opts in to one memory shared by every client. The SDK fact the
server tells sessions apart by is pinned here, so an SDK that changes it fails loudly."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from mcp_helpers import serving

from goagent_py import Agent
from goagent_py.errors import ConfigurationError
from goagent_py.mcp.server import http_app, serve_agent, sse_app
from goagent_py.memory import LongTermMemory, ShortTermMemory, SQLiteStorage
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.messages import Message, Role
from goagent_py.testing import FakeEmbedder, FunctionProvider


def _recalling(seen: list[str]) -> FunctionProvider:
    """Answers with every user message it was sent (recalled memories included), in order."""

    def answer(request: Any) -> str:
        text = " | ".join(m.text for m in request.messages if m.role is Role.USER)
        seen.append(text + " " + (request.system_prompt or ""))
        return text

    return FunctionProvider(answer)


async def _ask(client: Any, prompt: str) -> str:
    result = await client.call_tool("ask", {"prompt": prompt})
    assert not result.is_error, result
    return str(result.content[0].text)


def _client(port: int) -> Any:
    from mcp import Client

    return Client(f"http://127.0.0.1:{port}/mcp", mode="legacy")


def _stored_sessions(path: str) -> set[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT DISTINCT session_id FROM goagent_messages")
        return {row[0] for row in rows}


@pytest.mark.slow
async def test_two_http_clients_keep_their_conversations_in_the_served_storage(
    tmp_path: Any,
) -> None:
    path = str(tmp_path / "mcp.db")
    seen: list[str] = []
    memory = ShortTermMemory(SQLiteStorage(path, session_id="helper"))
    agent = Agent(provider=_recalling(seen), model="m", name="h", short_term_memory=memory)
    app = http_app(serve_agent(agent))
    async with serving(app) as port, _client(port) as a, _client(port) as b:
        assert await _ask(a, "I am Ana") == "I am Ana"
        assert await _ask(b, "I am Bob") == "I am Bob"
        assert await _ask(a, "who am I?") == "I am Ana | who am I?"
    sessions = _stored_sessions(path)
    assert len(sessions) == 2
    assert all(s.startswith("helper/mcp/") for s in sessions)
    assert "Ana" not in seen[1]


def _ltm_agent(seen: list[str], ltm: LongTermMemory) -> Agent:
    return Agent(provider=_recalling(seen), model="m", name="h", long_term_memory=ltm)


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_one_sessions_remembered_facts_are_not_recalled_in_another(transport: str) -> None:
    from mcp import Client
    from mcp.client.sse import sse_client

    ltm = LongTermMemory(FakeEmbedder(64), InMemoryVectorStore())
    seen: list[str] = []
    server = serve_agent(_ltm_agent(seen, ltm))
    app = http_app(server) if transport == "http" else sse_app(server)
    async with serving(app) as port:
        if transport == "http":
            first, second = _client(port), _client(port)
        else:
            url = f"http://127.0.0.1:{port}/sse"
            first, second = Client(sse_client(url)), Client(sse_client(url))
        async with first as a, second as b:
            await _ask(a, "My doctor is Dr. Secretson.")
            await _ask(b, "Who is my doctor?")
            await _ask(a, "Who is my doctor?")
    assert "Secretson" not in seen[1]
    assert "Secretson" in seen[2].rsplit("Who is my doctor?", 1)[0]


@pytest.mark.slow
async def test_a_server_that_opts_in_shares_one_long_term_memory_across_sessions() -> None:
    ltm = LongTermMemory(FakeEmbedder(64), InMemoryVectorStore())
    seen: list[str] = []
    app = http_app(serve_agent(_ltm_agent(seen, ltm), shared_memory=True))
    async with serving(app) as port, _client(port) as a, _client(port) as b:
        await _ask(a, "My doctor is Dr. Secretson.")
        await _ask(b, "Who is my doctor?")
    assert "Secretson" in seen[1]


class _Unkeyed:
    """A storage of the user's own that keeps one conversation and cannot name another."""

    async def load(self) -> list[Message]:
        return []

    async def append(self, messages: Any) -> None:
        return None

    async def clear(self) -> None:
        return None


@pytest.mark.parametrize("transport", [http_app, sse_app])
def test_a_memory_that_cannot_be_keyed_per_session_is_refused_for_http(transport: Any) -> None:
    agent = Agent(
        provider=FunctionProvider(lambda r: "x"),
        model="m",
        short_term_memory=ShortTermMemory(_Unkeyed()),
    )
    server = serve_agent(agent)  # stdio would serve it: one client, its memory as it is
    with pytest.raises(ConfigurationError, match="factory") as caught:
        transport(server)
    assert "_Unkeyed" in str(caught.value)


@pytest.mark.slow
async def test_the_sdk_still_gives_each_mcp_session_one_connection_object() -> None:
    """The one private SDK attribute the server relies on (``connection_of``): if a new SDK
    drops or changes it, this fails instead of every ask silently becoming a conversation of
    its own."""
    from mcp.server.connection import Connection
    from mcp.server.mcpserver import Context, MCPServer

    from goagent_py.mcp.server import connection_of

    seen: list[tuple[Any, str | None]] = []
    server = MCPServer("probe")

    async def probe(ctx: Context) -> str:
        seen.append(
            (connection_of(ctx), ctx.headers.get("mcp-session-id") if ctx.headers else None)
        )
        return "ok"

    probe.__annotations__ = {"ctx": Context, "return": str}  # resolved here, not at run time
    server.add_tool(probe, name="probe", structured_output=False)
    async with serving(http_app(server)) as port, _client(port) as a, _client(port) as b:
        for client in (a, a, b):
            await client.call_tool("probe", {})
    (first, id_a), (again, id_a2), (other, id_b) = seen
    assert all(isinstance(c, Connection) for c in (first, again, other))
    assert first is again
    assert first is not other
    assert first.session_id == id_a == id_a2
    assert other.session_id == id_b != id_a


@pytest.mark.slow
@pytest.mark.parametrize("prompt", ["", "  \n "])
async def test_an_empty_prompt_is_refused_and_never_reaches_the_model(prompt: str) -> None:
    from mcp import Client

    seen: list[str] = []
    server = serve_agent(Agent(provider=_recalling(seen), model="m"))
    async with Client(server) as client:
        result = await client.call_tool("ask", {"prompt": prompt})
    assert result.is_error
    assert "empty" in result.content[0].text
    assert seen == []


@pytest.mark.slow
async def test_an_agent_a_factory_gives_two_sessions_is_closed_when_the_last_one_ends() -> None:
    import asyncio
    import contextlib
    import gc

    from mcp import Client

    closed: list[str] = []
    events = {"shared": asyncio.Event(), "own": asyncio.Event()}

    class _Closing(Agent):
        async def aclose(self) -> None:
            closed.append(self.name or "")
            events[self.name or ""].set()
            await super().aclose()

    seen: list[str] = []
    shared = _Closing(provider=_recalling(seen), model="m", name="shared")
    made: list[str] = []

    def build(session_id: str) -> Agent:
        made.append(session_id)
        if len(made) <= 2:  # the first two sessions get one agent (it keeps no memory)
            return shared
        return _Closing(provider=_recalling(seen), model="m", name="own")

    async def ended(name: str) -> None:
        """Until ``name``'s agent is closed: collect what the SDK let go of (an ended
        session's connection), and wait for the close that starts."""
        while not events[name].is_set():
            gc.collect()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(events[name].wait(), 0.05)

    async with serving(http_app(serve_agent(build, name="helper"))) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, mode="legacy") as b:
            async with Client(url, mode="legacy") as a, Client(url, mode="legacy") as c:
                await _ask(a, "one")
                await _ask(b, "two")
                await _ask(c, "three")
            await asyncio.wait_for(ended("own"), 60)  # a and c ended
            gc.collect()
            assert closed == ["own"]  # the agent b still uses stays open
            assert await _ask(b, "four") == "two | four"
        await asyncio.wait_for(ended("shared"), 60)
    assert sorted(closed) == ["own", "shared"]
