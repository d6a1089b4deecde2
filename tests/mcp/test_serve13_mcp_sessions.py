"""An agent with short-term memory served over MCP's HTTP transports: one conversation per MCP
session (docs/mcp.md, "One conversation per client"). Two real SDK clients over HTTP never see
each other's messages; each sees its own earlier turns (clients of the session-based protocol,
the initialize handshake); a factory builds the agent of each session (its own stored memory).
A client of the sessionless protocol (2026-07-28: no session to key by) has a conversation per
ask: never another client's."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest
from mcp_helpers import serving

from goagent_py import Agent
from goagent_py.mcp.server import http_app, serve_agent, sse_app
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.messages import Role
from goagent_py.testing import FunctionProvider

pytestmark = pytest.mark.slow


def _recalling() -> FunctionProvider:
    """Answers with every user message it was sent, in order."""

    def answer(request: Any) -> str:
        return " | ".join(m.text for m in request.messages if m.role is Role.USER)

    return FunctionProvider(answer)


async def _ask(client: Any, prompt: str) -> str:
    result = await client.call_tool("ask", {"prompt": prompt})
    assert not result.is_error, result
    return str(result.content[0].text)


def _clients(transport: str, port: int, mode: str = "legacy") -> tuple[Any, Any]:
    from mcp import Client
    from mcp.client.sse import sse_client

    if transport == "http":
        url = f"http://127.0.0.1:{port}/mcp"
        return Client(url, mode=mode), Client(url, mode=mode)
    url = f"http://127.0.0.1:{port}/sse"
    return Client(sse_client(url), mode=mode), Client(sse_client(url), mode=mode)


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_two_clients_over_http_have_a_conversation_each(transport: str) -> None:
    agent = Agent(provider=_recalling(), model="m", short_term_memory=ShortTermMemory())
    server = serve_agent(agent)
    app = http_app(server) if transport == "http" else sse_app(server)  # was: refused
    async with serving(app) as port:
        first, second = _clients(transport, port)
        async with first as a, second as b:
            assert await _ask(a, "I am Ana") == "I am Ana"
            assert await _ask(b, "I am Bo") == "I am Bo"  # nothing of Ana's
            assert await _ask(a, "who am I?") == "I am Ana | who am I?"
            assert await _ask(b, "who am I?") == "I am Bo | who am I?"
            # two asks of one client at once: answered one after the other, none refused
            both = await asyncio.gather(_ask(a, "x"), _ask(a, "y"))
            assert sorted(both) == sorted(
                ["I am Ana | who am I? | x", "I am Ana | who am I? | x | y"]
            ) or sorted(both) == sorted(
                ["I am Ana | who am I? | y", "I am Ana | who am I? | y | x"]
            )
    # the agent's own memory (one conversation) was never the clients'
    assert await agent.options.short_term_memory.messages() == []  # type: ignore[union-attr]


async def test_a_factory_builds_the_agent_of_each_mcp_session_and_its_end_closes_it() -> None:
    made: list[str] = []
    provider = _recalling()
    closed: list[str] = []
    both_closed = asyncio.Event()

    class _Closing(Agent):
        async def aclose(self) -> None:
            closed.append(self.name or "")
            if len(closed) == 2:
                both_closed.set()
            await super().aclose()

    def build(session_id: str) -> Agent:
        made.append(session_id)
        return _Closing(
            provider=provider,
            model="m",
            name="a" + session_id[:8],
            short_term_memory=ShortTermMemory(),
        )

    app = http_app(serve_agent(build, name="helper"))
    async with serving(app) as port:
        first, second = _clients("http", port)
        async with first as a, second as b:
            assert await _ask(a, "one") == "one"
            assert await _ask(a, "two") == "one | two"
            assert await _ask(b, "three") == "three"
        assert len(set(made)) == 2
        assert all(made)
        # The clients ended their sessions: the SDK lets go of them, their agents are closed.
        gc.collect()
        await asyncio.wait_for(both_closed.wait(), 30)
    assert sorted(closed) == sorted("a" + m[:8] for m in made)


async def test_sessionless_clients_get_a_conversation_per_ask_never_anothers() -> None:
    agent = Agent(provider=_recalling(), model="m", short_term_memory=ShortTermMemory())
    async with serving(http_app(serve_agent(agent))) as port:
        first, second = _clients("http", port, mode="auto")  # the SDK's default: sessionless
        async with first as a, second as b:
            assert await _ask(a, "I am Ana") == "I am Ana"
            assert await _ask(b, "who am I?") == "who am I?"
            assert await _ask(a, "who am I?") == "who am I?"


async def test_a_factory_giving_every_session_one_memory_is_refused_not_shared() -> None:
    shared = ShortTermMemory()
    provider = _recalling()

    def build(session_id: str) -> Agent:
        return Agent(provider=provider, model="m", short_term_memory=shared)

    app = http_app(serve_agent(build, name="helper"))
    async with serving(app) as port:
        first, second = _clients("http", port)
        async with first as a, second as b:
            assert await _ask(a, "my secret is 42") == "my secret is 42"
            refused = await b.call_tool("ask", {"prompt": "what is the secret?"})
            assert refused.is_error
            assert "another MCP session's conversation" in refused.content[0].text
            assert "42" not in refused.content[0].text
    assert [m.text for m in await shared.messages() if m.role is Role.USER] == ["my secret is 42"]
