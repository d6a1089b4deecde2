"""A request's client tools do not give its run dispatch of its own (docs/serve.md, "Client
tools"): the agent's own tools keep the thread agent's circuit breakers and rate limits across
requests, and the client's tools count in breakers of that client (its user and thread), so one
client's failures never open another's circuit. The official ``openai`` SDK drives the app."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from down_host import DownHost  # tests/down_host.py

from goagent_py import Agent
from goagent_py.dispatch import CircuitBreakerConfig
from goagent_py.messages import Role
from goagent_py.serve import create_app
from goagent_py.testing import FunctionProvider, tool_call_response

openai = pytest.importorskip("openai")

_LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a word up (the client runs it).",
        "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
    },
}


def _sdk(app: Any) -> Any:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1234))
    http = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")
    return openai.AsyncOpenAI(base_url="http://127.0.0.1/v1", api_key="unused", http_client=http)


class _Model:
    """Calls ``tool`` on every user message and answers with the result it read; each result
    is kept in ``read`` and announced on ``answered`` (the run has its tool's outcome)."""

    def __init__(self, tool_name: str) -> None:
        self.tool_name = tool_name
        self.read: list[str] = []
        self.answered: asyncio.Queue[str] = asyncio.Queue()

    def __call__(self, request: Any) -> Any:
        last = request.messages[-1]
        if last.role is Role.USER:
            return tool_call_response((self.tool_name, {"word": "x"}))
        self.read.append(last.text)
        self.answered.put_nowait(last.text)
        return "read it"


async def test_the_agents_own_tool_keeps_its_breaker_across_requests_with_client_tools(
    db: str,
) -> None:
    host = DownHost()
    app = create_app(
        lambda ctx: host.agent(short_term_memory=ctx.short_term_memory), storage_path=db
    )
    try:
        async with _sdk(app) as client:
            for _ in range(3):  # each request declares a client tool: its run is adapted
                await client.chat.completions.create(
                    model="goagent",
                    messages=[{"role": "user", "content": "fetch it"}],
                    tools=[_LOOKUP],
                )
                await host.answered.get()
    finally:
        await app.aclose()
    assert host.calls == ["fetch", "fetch"]  # the third request met the open circuit
    assert "circuit" in host.read[-1].lower(), host.read


async def test_one_clients_failing_tool_never_opens_another_clients_circuit(db: str) -> None:
    model = _Model("lookup")
    # One agent for every thread (no memory of its own: the threads' runs are apart).
    shared = Agent(
        provider=FunctionProvider(model),
        model="m",
        circuit_breaker=CircuitBreakerConfig(max_failures=2, reset_timeout=3600),
    )
    # The client never sends its results: each call fails for want of one.
    app = create_app(lambda ctx: shared, storage_path=db, client_tool_timeout=0.001)
    try:
        async with _sdk(app) as client:
            for user in ("ana", "ana", "ana", "bob"):
                await client.chat.completions.create(
                    model="goagent",
                    messages=[{"role": "user", "content": "look x up"}],
                    tools=[_LOOKUP],
                    user=user,
                )
                await model.answered.get()
    finally:
        await app.aclose()
    ana, bob = model.read[:3], model.read[3]
    assert ["did not send" in r for r in ana] == [True, True, False], ana
    assert "circuit" in ana[2].lower(), ana  # ana's own two failures opened her circuit
    assert "did not send" in bob, bob  # bob's lookup is his: never opened by ana's
