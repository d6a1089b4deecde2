"""goagent-py's MCP server (serve_agent) driven by the SDK's own client."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_server import build_agent
from mcp import Client, StdioServerParameters

import goagent_py
from goagent_py.errors import ConfigurationError
from goagent_py.mcp import MCPHttp, MCPStdio
from goagent_py.mcp.server import serve_agent
from goagent_py.messages import TextBlock

AGENT_SERVER = os.path.join(os.path.dirname(__file__), "agent_server.py")
# The server process must import the goagent_py under test (not another installed copy).
SOURCE_ENV = {"PYTHONPATH": str(Path(goagent_py.__file__).parents[1])}


async def test_the_agent_answers_through_an_in_process_server_with_progress() -> None:
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async with Client(serve_agent(build_agent())) as client:
        [listed] = (await client.list_tools()).tools
        result = await client.call_tool(
            "ask", {"prompt": "What is 2 + 3?"}, progress_callback=on_progress
        )
    assert listed.name == "ask"
    assert listed.input_schema["required"] == ["prompt"]
    assert not result.is_error
    assert result.content[0].text == "2 + 3 = 5."
    assert progress == [(1, "turn 1"), (2, "calling tool add"), (3, "turn 2")]


async def test_function_tools_are_served_one_to_one_with_their_schemas() -> None:
    agent = build_agent()
    async with Client(serve_agent(agent, expose="tools")) as client:
        [listed] = (await client.list_tools()).tools
        ok = await client.call_tool("add", {"a": 40, "b": 2})
        bad = await client.call_tool("add", {"a": "forty", "b": 2})
    assert listed.name == "add"
    assert listed.input_schema == agent.tools[0].definition.parameters
    assert ok.content[0].text == "42"
    assert bad.is_error
    assert "invalid arguments for tool 'add'" in bad.content[0].text


async def test_a_failing_agent_is_an_error_result() -> None:
    from goagent_py import Agent
    from goagent_py.testing import ScriptedProvider

    agent = Agent(provider=ScriptedProvider(RuntimeError("model down")), model="m")
    async with Client(serve_agent(agent)) as client:
        result = await client.call_tool("ask", {"prompt": "hi"})
    assert result.is_error
    assert "model down" in result.content[0].text


def test_bad_settings_are_configuration_errors() -> None:
    agent = build_agent()
    with pytest.raises(ConfigurationError, match="expose"):
        serve_agent(agent, expose="everything")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="tool_name"):
        serve_agent(agent, tool_name="ask me")
    with pytest.raises(ConfigurationError, match="add"):
        serve_agent(agent, expose="both", tool_name="add")


@pytest.mark.slow
async def test_the_agent_answers_through_the_stdio_server() -> None:
    params = StdioServerParameters(command=sys.executable, args=[AGENT_SERVER], env=SOURCE_ENV)
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("ask", {"prompt": "What is 2 + 3?"})
    assert names == {"ask", "add"}
    assert result.content[0].text == "2 + 3 = 5."


@pytest.mark.slow
async def test_a_goagent_py_client_uses_a_goagent_py_server_over_stdio() -> None:
    async with MCPStdio(
        sys.executable, [AGENT_SERVER], env=SOURCE_ENV, name="calc", prefix="calc_"
    ) as conn:
        tools = {t.definition.name: t for t in await conn.tools()}
        assert await tools["calc_ask"].execute({"prompt": "What is 2 + 3?"}) == [
            TextBlock("2 + 3 = 5.")
        ]


@pytest.mark.slow
async def test_the_agent_answers_over_streamable_http() -> None:
    import uvicorn

    server = serve_agent(build_agent(), expose="both")
    app = server.streamable_http_app()
    # A socket bound and listening before the server starts: clients can connect at once.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    serving = asyncio.create_task(web.serve(sockets=[sock]))
    try:
        async with MCPHttp(f"http://127.0.0.1:{port}/mcp", headers={"X-Test": "1"}) as conn:
            tools: dict[str, Any] = {t.definition.name: t for t in await conn.tools()}
            assert set(tools) == {"ask", "add"}
            [answer] = await tools["ask"].execute({"prompt": "What is 2 + 3?"})
            assert answer == TextBlock("2 + 3 = 5.")
    finally:
        web.should_exit = True
        await serving
        sock.close()


def _gated_agents() -> list[tuple[str, Any]]:
    from goagent_py import Agent, tool
    from goagent_py.testing import ScriptedProvider

    @tool
    def wipe(path: str) -> str:
        """Delete a folder."""
        return "wiped " + path

    @tool(requires_approval=True)
    def wipe_marked(path: str) -> str:
        """Delete a folder."""
        return "wiped " + path

    def make(**settings: Any) -> Any:
        return Agent(provider=ScriptedProvider(), model="m", **settings)

    return [
        ("policy", make(tools=[wipe], requires_approval=lambda call: True)),
        ("gate", make(tools=[wipe], before_tool_call=lambda call: "blocked by policy")),
        ("tool", make(tools=[wipe_marked])),
    ]


@pytest.mark.parametrize("expose", ["tools", "both"])
@pytest.mark.parametrize("case", [0, 1, 2], ids=["policy", "gate", "tool"])
async def test_tools_behind_approvals_or_gates_are_not_served_bare(expose: str, case: int) -> None:
    # expose="tools" ran tool.execute directly: an MCP client's call skipped the agent's
    # approval policy and before_tool_call gate ("deleted /important" with a gate that blocks
    # every call; review7c). Such an agent is refused; its "ask" tool still goes through them.
    _, agent = _gated_agents()[case]
    with pytest.raises(ConfigurationError, match=r"wipe.*expose='agent'"):
        serve_agent(agent, expose=expose)  # type: ignore[arg-type]
    serve_agent(agent, expose="agent")
