"""MCP for goagent-py, on the official ``mcp`` SDK (``pip install "goagent-py[mcp]"``).

Client: an MCP server's tools become the agent's tools, through the same dispatch chain as
function tools::

    from goagent_py.mcp import MCPStdio

    time = MCPStdio("mcp-server-time", prefix="time_")
    agent = Agent(provider=p, model="m", mcp_connectors=[time.connector()])

Server: :func:`serve_agent` exposes an agent (one tool: prompt in, answer out) and/or its
function tools over stdio, streamable HTTP or the legacy HTTP+SSE transport.

The SDK itself is imported only when a connection starts or a server is built.
"""

from goagent_py._tool_servers import server_tools as mcp_tools
from goagent_py._tool_servers import sync_server_tools as sync_mcp_tools
from goagent_py.mcp._pins import ToolChange, definition_hash
from goagent_py.mcp.client import MCPConnection, MCPTool
from goagent_py.mcp.errors import (
    MCPCallTimeoutError,
    MCPConnectionError,
    MCPError,
    MCPServerRestartedError,
    MCPToolChangedError,
    MCPToolError,
    MCPToolUnavailableError,
)
from goagent_py.mcp.server import http_app, run_http, run_sse, run_stdio, serve_agent, sse_app
from goagent_py.mcp.transports import MCPHttp, MCPInProcess, MCPStdio

__all__ = [
    "definition_hash",
    "http_app",
    "mcp_tools",
    "MCPCallTimeoutError",
    "MCPConnection",
    "MCPConnectionError",
    "MCPError",
    "MCPHttp",
    "MCPInProcess",
    "MCPServerRestartedError",
    "MCPStdio",
    "MCPTool",
    "MCPToolChangedError",
    "MCPToolError",
    "MCPToolUnavailableError",
    "run_http",
    "run_sse",
    "run_stdio",
    "serve_agent",
    "sse_app",
    "sync_mcp_tools",
    "ToolChange",
]
