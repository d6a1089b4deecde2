"""A server's own answers, however odd, are the tool's result or error, never a lost connection,
and what it says reaches the model capped (docs/mcp.md).

- A JSON-RPC error answer with code -32000 (the first code of JSON-RPC's "server error" range,
  which servers use for their own errors) was taken for the SDK's "connection closed": the
  connection was torn down and the server restarted after every such answer, the model read
  "the connection broke ... server is being restarted", and the server's message went whole
  into the log and the error (100,000 characters here).
- A result that is not a valid MCP result was a "connection" error, though the server answered.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp_helpers import tool_results

from goagent_py import Agent
from goagent_py.mcp import MCPConnectionError, MCPStdio, MCPToolError
from goagent_py.testing import ScriptedProvider, tool_call_response

pytestmark = pytest.mark.slow

RAW_SERVER = str(Path(__file__).parent / "proto11_raw_server.py")


def _raw(mode: str) -> MCPStdio:
    return MCPStdio(sys.executable, [RAW_SERVER, mode], name="raw")


async def test_a_json_rpc_error_answer_is_the_tools_error_and_keeps_the_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with _raw("error") as conn:
        [echo] = await conn.tools()
        for _ in range(2):
            with pytest.raises(MCPToolError) as failed:
                await echo.execute({"text": "hi"})
            assert not isinstance(failed.value, MCPConnectionError)
        connects = conn.connects
    # was: MCPServerRestartedError, and a new server process after each answer
    assert connects == 1
    assert "(-32000)" in failed.value.text
    assert failed.value.text.startswith("EEEE")
    assert len(failed.value.text) < 5_000  # capped, with a marker
    assert "truncated" in failed.value.text
    assert all(len(r.getMessage()) < 5_000 for r in caplog.records)


async def test_a_malformed_result_is_the_tools_error_and_keeps_the_connection() -> None:
    async with _raw("malformed") as conn:
        [echo] = await conn.tools()
        with pytest.raises(MCPToolError) as failed:
            await echo.execute({"text": "hi"})
        connects = conn.connects
    assert not isinstance(failed.value, MCPConnectionError)
    assert "not a valid MCP result" in failed.value.text
    assert len(failed.value.text) < 5_000
    assert connects == 1


async def test_what_the_model_reads_of_an_error_answer_is_the_capped_tool_error() -> None:
    provider = ScriptedProvider(tool_call_response(("echo", {"text": "hi"})), "Noted.")
    conn = _raw("error")
    agent = Agent(provider=provider, model="m", mcp_servers=[conn])
    async with agent:
        await agent.run("Echo hi.")
    [result] = tool_results(provider, 1)
    text = result.text
    assert result.is_error
    assert "EEEE" in text
    assert "restarted" not in text
    assert len(text) < 5_000
