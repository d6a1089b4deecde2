"""Server death: a SIGKILLed stdio server fails the next call fast, then comes back."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

import pytest
from mcp_helpers import child_pids, run_result, tool_results

from goagent_py import Agent
from goagent_py.mcp import MCPConnectionError, MCPServerRestartedError, MCPStdio, MCPTool
from goagent_py.messages import ToolCall
from goagent_py.testing import ScriptedProvider, tool_call_response
from goagent_py.tool_context import ToolContext, _current

pytestmark = pytest.mark.slow

FIXTURE = os.path.join(os.path.dirname(__file__), "fixture_server.py")


def by_name(tools: list[MCPTool] | list[object]) -> dict[str, MCPTool]:
    return {t.definition.name: t for t in tools if isinstance(t, MCPTool)}


async def test_killed_server_next_call_fails_fast_and_the_following_one_reconnects(
    time_server: str,
) -> None:
    # idempotent=False overrides the server's idempotentHint, so nothing is retried.
    time = MCPStdio(time_server, idempotent=False)
    args = {"timezone": "Asia/Tokyo"}
    p = ScriptedProvider(
        tool_call_response(("get_current_time", args)),
        "first",
        tool_call_response(("get_current_time", args)),
        "second",
        tool_call_response(("get_current_time", args)),
        "third",
    )
    async with Agent(
        provider=p, model="m", mcp_connectors=[time.connector()], tool_timeout=60
    ) as agent:
        await agent.run("time?")
        [pid] = child_pids("mcp-server-time")
        os.kill(pid, signal.SIGKILL)

        result = await run_result(agent, "time again?")
        [failed] = tool_results(p, 3)
        assert failed.is_error
        assert "call not retried" in failed.text
        assert "mcp-server-time" in failed.text
        assert "timed out" not in failed.text  # failed at once, not at the 60 s tool timeout
        assert result.text == "second"

        await agent.run("and now?")
        [ok] = tool_results(p, 5)
        assert not ok.is_error
        assert json.loads(ok.text)["timezone"] == "Asia/Tokyo"
    assert time.connects == 2
    assert child_pids("mcp-server-time") == []  # closed with the agent


async def test_an_idempotent_tool_is_retried_on_the_new_connection(time_server: str) -> None:
    async with MCPStdio(time_server) as time:  # get_current_time says idempotentHint=true
        tool = by_name(await time.tools())["get_current_time"]
        assert tool.idempotent
        [pid] = child_pids("mcp-server-time")
        os.kill(pid, signal.SIGKILL)
        [block] = await tool.execute({"timezone": "UTC"})
        assert json.loads(block.text)["timezone"] == "UTC"  # type: ignore[union-attr]
        assert time.connects == 2


async def test_a_call_in_flight_when_the_server_dies_fails_fast() -> None:
    async with MCPStdio(sys.executable, [FIXTURE], name="fixture") as conn:
        tools = by_name(await conn.tools())
        [pid_block] = await tools["pid"].execute({})
        started = asyncio.Event()
        ctx = ToolContext(call=ToolCall("c1", "hang", {}), reporter=lambda _: started.set())
        token = _current.set(ctx)
        try:
            call = asyncio.create_task(tools["hang"].execute({}))
        finally:
            _current.reset(token)
        await started.wait()  # the server is inside the tool
        os.kill(int(pid_block.text), signal.SIGKILL)  # type: ignore[union-attr]
        with pytest.raises(MCPServerRestartedError) as info:
            await asyncio.wait_for(call, 30)
        assert info.value.tool_name == "hang"
        assert "call not retried" in str(info.value)
        [echo] = await tools["echo"].execute({"text": "back"})
        assert echo.text == "back"  # type: ignore[union-attr]


async def test_a_server_that_cannot_start_is_a_connection_error_and_backs_off() -> None:
    conn = MCPStdio(sys.executable, ["-c", "import sys; sys.exit(3)"], name="broken")
    with pytest.raises(MCPConnectionError) as first:
        await conn.tools()
    assert first.value.server == "broken"
    # During the backoff a call fails at once with the last error, without starting anything.
    with pytest.raises(MCPConnectionError, match="next connection attempt in"):
        await conn.tools()
    await conn.aclose()
    with pytest.raises(MCPConnectionError, match="closed"):
        await conn.tools()


async def test_a_server_that_never_answers_fails_at_the_connect_timeout() -> None:
    silent = MCPStdio(
        sys.executable, ["-c", "import time; time.sleep(600)"], name="silent", connect_timeout=0.5
    )
    with pytest.raises(MCPConnectionError, match=r"connect_timeout=0\.5s"):
        await silent.tools()
    await silent.aclose()
    assert child_pids("time.sleep(600)") == []  # the SDK stopped the process


async def test_aclose_fails_a_call_in_flight_with_a_closed_error() -> None:
    conn = MCPStdio(sys.executable, [FIXTURE], name="fixture")
    tools = by_name(await conn.tools())
    started = asyncio.Event()
    token = _current.set(
        ToolContext(call=ToolCall("c", "hang", {}), reporter=lambda _: started.set())
    )
    try:
        call = asyncio.create_task(tools["hang"].execute({}))
    finally:
        _current.reset(token)
    await started.wait()
    await conn.aclose()
    with pytest.raises(MCPConnectionError, match="closed") as info:
        await call
    assert not isinstance(info.value, MCPServerRestartedError)
