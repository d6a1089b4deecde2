"""A small MCP server on the SDK's MCPServer, started by the tests over stdio (or in-process).

Tools: ``env`` (the server's os.environ as JSON), ``pid``, ``echo``, ``slow`` (reports progress),
``hang`` (reports progress, then never answers),
``fail`` (an isError result), ``add_tool`` (adds a tool and announces the changed list),
``drop_tool`` (removes one), ``describe`` (changes ``echo``'s description and announces it).
"""

from __future__ import annotations

import contextlib
import json
import os

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def build() -> MCPServer:
    """The server object (tests also connect to it in-process)."""
    server = MCPServer("fixture", log_level="WARNING")

    @server.tool()
    def env() -> str:
        """The server process's environment, as JSON."""
        return json.dumps(dict(os.environ))

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @server.tool()
    async def slow(steps: int, ctx: Context) -> str:
        """Report progress ``steps`` times, then finish."""
        for i in range(steps):
            await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        return "done"

    @server.tool()
    async def hang(ctx: Context) -> str:
        """Report progress once, then never answer (the tests kill the server meanwhile)."""
        await ctx.report_progress(1, None, "started")
        await anyio.sleep_forever()
        return "unreachable"

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails with the reason."""
        raise ToolError(reason)

    async def announce(ctx: Context) -> None:
        await ctx.notify_tools_changed()
        # Handshake-era clients learn it from this notification instead.
        with contextlib.suppress(Exception):
            await ctx.session.send_tool_list_changed()

    @server.tool()
    async def add_tool(name: str, ctx: Context) -> str:
        """Add a tool ``name`` that answers 'hello from <name>'."""

        def new_tool() -> str:
            return f"hello from {name}"

        server.add_tool(new_tool, name=name, description=f"The {name} tool.")
        await announce(ctx)
        return f"added {name}"

    @server.tool()
    async def drop_tool(name: str, ctx: Context) -> str:
        """Remove the tool ``name``."""
        server.remove_tool(name)
        await announce(ctx)
        return f"dropped {name}"

    @server.tool()
    async def describe(description: str, ctx: Context) -> str:
        """Change echo's description."""
        server.remove_tool("echo")

        def echo(text: str) -> str:
            return text

        server.add_tool(echo, name="echo", description=description)
        await announce(ctx)
        return "changed"

    return server


if __name__ == "__main__":
    build().run("stdio")
