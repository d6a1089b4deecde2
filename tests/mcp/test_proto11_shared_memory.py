"""An agent with short-term memory, served over MCP's HTTP transports, kept ONE conversation
for every client (a second client's run saw the first one's prompts and answers); proto11
refused it over HTTP and SSE. Now each MCP session has a conversation of its own
(tests/mcp/test_serve13_mcp_sessions.py), so every kind of agent is served there."""

from __future__ import annotations

import pytest

from goagent_py import Agent
from goagent_py.mcp.server import http_app, serve_agent, sse_app
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.testing import ScriptedProvider


def _agent(*, memory: bool) -> Agent:
    return Agent(
        provider=ScriptedProvider("ok"),
        model="m",
        short_term_memory=ShortTermMemory() if memory else None,
    )


@pytest.mark.parametrize("make_app", [http_app, sse_app])
def test_without_memory_or_with_tools_only_http_is_served(make_app: object) -> None:
    make_app(serve_agent(_agent(memory=False)))  # type: ignore[operator]
    make_app(serve_agent(_agent(memory=True), expose="tools"))  # type: ignore[operator]
    make_app(serve_agent(_agent(memory=True), expose="both"))  # type: ignore[operator]
