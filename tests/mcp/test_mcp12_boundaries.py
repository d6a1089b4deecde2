"""What a tool server outside the process cannot do to a run (docs/mcp.md, "Boundaries").

A server's tool named like a local tool, or like another server's, is left out with a warning
instead of ending the run; results from any tool are capped by default; a call to an MCP server
that never answers ends at the connection's ``call_timeout``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import Any

import fixture_server
import pytest
from mcp_helpers import answer, offered, tool_results

from goagent_py import Agent, tool, with_max_tool_result_chars
from goagent_py.errors import ConfigurationError
from goagent_py.mcp import MCPInProcess, MCPStdio, MCPTool, sync_mcp_tools
from goagent_py.testing import ScriptedProvider, tool_call_response

FIXTURE_SERVER = os.path.join(os.path.dirname(__file__), "fixture_server.py")


@tool
def echo(text: str) -> str:
    """The local echo."""
    return f"local:{text}"


@tool
def greet() -> str:
    """The local greeting."""
    return "local greeting"


async def test_a_server_tool_named_like_a_local_tool_is_left_out_and_the_run_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    conn = MCPInProcess(fixture_server.build(), allow=["echo", "pid"])
    p = ScriptedProvider(tool_call_response(("echo", {"text": "hi"})), "done")
    agent = Agent(provider=p, model="m", tools=[echo], mcp_connectors=[conn.connector()])
    with caplog.at_level(logging.WARNING, logger="goagent_py"):
        assert await answer(agent, "go") == "done"
    assert [m.text for m in tool_results(p, 1)] == ["local:hi"]  # the local tool ran
    assert offered(p, 0) == {"echo", "pid"}
    described = {t.name: t.description for t in p.requests[0].tools}
    assert described["echo"] == "The local echo."  # the model is told of the local one only
    assert any("echo" in r.getMessage() and "local" in r.getMessage() for r in caplog.records)
    await agent.aclose()


async def test_a_server_renaming_a_tool_to_a_local_name_does_not_take_it_over_or_end_runs() -> None:
    conn = MCPInProcess(fixture_server.build(), allow=["add_tool", "greet"])
    p = ScriptedProvider(
        tool_call_response(("add_tool", {"name": "greet"})),  # now the server offers greet
        tool_call_response(("greet", {})),
        "done",
        tool_call_response(("greet", {})),
        "again",
    )
    agent = Agent(provider=p, model="m", tools=[greet], mcp_servers=[conn])
    assert await answer(agent, "go") == "done"
    assert [m.text for m in tool_results(p, 1)] == ["added greet"]
    assert [m.text for m in tool_results(p, 2)][-1] == "local greeting"
    assert await answer(agent, "again") == "again"  # the next run starts as well
    assert [m.text for m in tool_results(p, 4)][-1] == "local greeting"
    assert [t.description for t in p.requests[4].tools if t.name == "greet"] == [
        "The local greeting."
    ]
    await agent.aclose()


async def test_a_server_cannot_take_a_name_another_server_holds() -> None:
    first = MCPInProcess(fixture_server.build(), name="first", allow=["pid", "add_tool", "hello"])
    held = fixture_server.build()

    def hello() -> str:
        return "second says hi"

    held.add_tool(hello, name="hello", description="The second server's hello.")
    second = MCPInProcess(held, name="second", allow=["pid", "hello"])
    p = ScriptedProvider(
        tool_call_response(("add_tool", {"name": "hello"})),  # first now offers hello too
        tool_call_response(("hello", {})),
        "done",
        tool_call_response(("hello", {})),
        "again",
    )
    agent = Agent(provider=p, model="m", mcp_servers=[first, second])
    assert await answer(agent, "go") == "done"
    assert offered(p, 0) == {"pid", "add_tool", "hello"}  # pid: first's (the earlier server)
    assert [m.text for m in tool_results(p, 2)][-1] == "second says hi"
    assert await answer(agent, "again") == "again"
    assert [m.text for m in tool_results(p, 4)][-1] == "second says hi"
    await agent.aclose()


async def test_connector_tools_named_like_local_or_earlier_ones_are_left_out() -> None:
    first = MCPInProcess(fixture_server.build(), name="first", allow=["pid", "echo"])
    second = MCPInProcess(fixture_server.build(), name="second", allow=["pid", "slow"])
    p = ScriptedProvider(tool_call_response(("echo", {"text": "hi"})), "done")
    agent = Agent(
        provider=p,
        model="m",
        tools=[echo],
        mcp_connectors=[first.connector(), second.connector()],
    )
    assert await answer(agent, "go") == "done"
    assert [m.text for m in tool_results(p, 1)] == ["local:hi"]
    assert offered(p, 0) == {"echo", "pid", "slow"}
    assert [t.server_name for t in agent.tools if isinstance(t, MCPTool)] == ["first", "second"]
    await agent.aclose()


async def test_sync_mcp_tools_keeps_local_tools_and_leaves_clashing_server_tools_out() -> None:
    tools: dict[str, Any] = {"echo": echo}
    async with MCPInProcess(fixture_server.build(), allow=["echo", "pid"]) as conn:
        assert await sync_mcp_tools(tools, [conn])
        assert tools["echo"] is echo
        assert isinstance(tools["pid"], MCPTool)


async def test_a_huge_result_from_outside_the_process_is_capped_by_default() -> None:
    conn = MCPInProcess(fixture_server.build(), allow=["echo"])
    big = "y" * 1_000_000
    p = ScriptedProvider(tool_call_response(("echo", {"text": big})), "done")
    agent = Agent(provider=p, model="m", mcp_connectors=[conn.connector()])
    assert await answer(agent, "go") == "done"
    (seen,) = tool_results(p, 1)
    assert len(seen.text) < 101_000
    assert "[truncated: the result had 1000000 characters" in seen.text
    await agent.aclose()


async def test_a_huge_string_from_a_function_tool_is_capped_by_default_and_none_lifts_it() -> None:
    @tool
    def dump() -> str:
        """A lot of text."""
        return "z" * 500_000

    p = ScriptedProvider(tool_call_response(("dump", {})), "done")
    assert await answer(Agent(provider=p, model="m", tools=[dump]), "go") == "done"
    assert "[truncated: the result had 500000 characters" in tool_results(p, 1)[0].text

    p = ScriptedProvider(tool_call_response(("dump", {})), "done")
    agent = Agent(with_max_tool_result_chars(None), provider=p, model="m", tools=[dump])
    assert await answer(agent, "go") == "done"
    assert len(tool_results(p, 1)[0].text) == 500_000


def test_call_timeout_defaults_to_five_minutes_and_is_checked() -> None:
    assert MCPInProcess(fixture_server.build()).settings()["call_timeout"] == 300.0
    unbounded = MCPInProcess(fixture_server.build(), call_timeout=None)
    assert unbounded.settings()["call_timeout"] is None
    with pytest.raises(ConfigurationError, match="call_timeout"):
        MCPInProcess(fixture_server.build(), call_timeout=0)


@pytest.mark.slow
async def test_a_hanging_stdio_server_call_ends_at_call_timeout_and_the_connection_lives() -> None:
    conn = MCPStdio(sys.executable, [FIXTURE_SERVER], name="fx", call_timeout=1.0)
    p = ScriptedProvider(
        tool_call_response(("hang", {})),
        tool_call_response(("echo", {"text": "after"})),
        "done",
    )
    agent = Agent(provider=p, model="m", mcp_connectors=[conn.connector()])
    assert await asyncio.wait_for(answer(agent, "go"), 120) == "done"
    (hung,) = tool_results(p, 1)
    assert hung.is_error
    assert "call_timeout" in hung.text
    assert [m.text for m in tool_results(p, 2)][-1] == "after"
    await agent.aclose()


async def test_a_server_adding_a_tool_whose_name_maps_onto_another_of_its_own_keeps_the_first() -> (
    None
):
    conn = MCPInProcess(
        fixture_server.build(), allow=["add_tool", "drop_tool", "echo", "echo.x", "echo_x"]
    )
    p = ScriptedProvider(
        tool_call_response(("add_tool", {"name": "echo_x"})),
        tool_call_response(("add_tool", {"name": "echo.x"})),  # maps to echo_x as well
        tool_call_response(("echo_x", {})),
        tool_call_response(("drop_tool", {"name": "echo"})),
        "done",
    )
    agent = Agent(provider=p, model="m", mcp_servers=[conn])
    assert await answer(agent, "go") == "done"
    assert [m.text for m in tool_results(p, 3)][-1] == "hello from echo_x"
    assert offered(p, 3) == {"add_tool", "drop_tool", "echo", "echo_x"}
    # The list still follows the server: the clash did not freeze it.
    assert offered(p, 4) == {"add_tool", "drop_tool", "echo_x"}
    await agent.aclose()
