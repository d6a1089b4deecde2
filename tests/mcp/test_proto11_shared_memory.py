"""An agent with short-term memory, served over MCP's HTTP transports, would keep ONE
conversation for every client: a second client's run saw the first one's prompts and answers
(docs/mcp.md). Over stdio a server has one client, so it stays allowed there; over HTTP and SSE
(many clients) it is refused with a ConfigurationError that says what to do."""

from __future__ import annotations

import pytest

from goagent_py import Agent
from goagent_py.errors import ConfigurationError
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
@pytest.mark.parametrize("expose", ["agent", "both"])
def test_an_agent_with_short_term_memory_is_refused_over_http(
    make_app: object, expose: str
) -> None:
    server = serve_agent(_agent(memory=True), expose=expose)  # type: ignore[arg-type]
    # was: served, and every HTTP client read and wrote the same conversation
    with pytest.raises(ConfigurationError, match="every client"):
        make_app(server)  # type: ignore[operator]


@pytest.mark.parametrize("make_app", [http_app, sse_app])
def test_without_memory_or_with_tools_only_http_is_served(make_app: object) -> None:
    make_app(serve_agent(_agent(memory=False)))  # type: ignore[operator]
    make_app(serve_agent(_agent(memory=True), expose="tools"))  # type: ignore[operator]
