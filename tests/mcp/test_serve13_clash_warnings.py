"""A tool-name clash between an MCP server and the agent's own tools (or another server) is
warned about once while it lasts, not at every sync between turns (docs/mcp.md, "Name
clashes"); a clash that ends and comes back is warned about again."""

from __future__ import annotations

import logging

import fixture_server
import pytest
from mcp_helpers import answer

from goagent_py import Agent, tool
from goagent_py.mcp import MCPInProcess
from goagent_py.testing import ScriptedProvider, tool_call_response


@tool
def echo(text: str) -> str:
    """The local echo."""
    return f"local:{text}"


@tool
def greet() -> str:
    """The local greeting."""
    return "local greeting"


def _clash_warnings(caplog: pytest.LogCaptureFixture, name: str) -> int:
    return sum(
        1
        for r in caplog.records
        if r.levelno == logging.WARNING and r.getMessage().startswith(f"tool {name!r}")
    )


async def test_a_lasting_clash_is_warned_about_once_and_again_only_when_it_comes_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    conn = MCPInProcess(
        fixture_server.build(), allow=["echo", "greet", "pid", "add_tool", "drop_tool"]
    )
    p = ScriptedProvider(
        tool_call_response(("pid", {})),
        tool_call_response(("pid", {})),
        "one",
        tool_call_response(("add_tool", {"name": "greet"})),  # a second clash
        tool_call_response(("pid", {})),
        "two",
        tool_call_response(("pid", {})),
        "three",
        tool_call_response(("drop_tool", {"name": "echo"})),  # the echo clash ends...
        tool_call_response(("add_tool", {"name": "echo"})),  # ...and comes back
        tool_call_response(("pid", {})),
        "four",
    )
    agent = Agent(provider=p, model="m", tools=[echo, greet], mcp_servers=[conn])
    with caplog.at_level(logging.WARNING, logger="goagent_py"):
        assert await answer(agent, "go") == "one"
        assert _clash_warnings(caplog, "echo") == 1
        assert await answer(agent, "go") == "two"
        assert await answer(agent, "go") == "three"
        assert _clash_warnings(caplog, "echo") == 1
        assert _clash_warnings(caplog, "greet") == 1
        assert await answer(agent, "go") == "four"
    assert _clash_warnings(caplog, "echo") == 2
    assert _clash_warnings(caplog, "greet") == 1
    await agent.aclose()
