"""An MCP server's tool as a goagent-py tool, and listing the tools of several servers."""

from __future__ import annotations

import logging
from collections.abc import MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from goagent_py.errors import ConfigurationError
from goagent_py.mcp import _convert
from goagent_py.mcp._sdk import describe
from goagent_py.mcp.errors import (
    MCPConnectionError,
    MCPError,
    MCPServerRestartedError,
    MCPToolError,
)
from goagent_py.messages import ContentBlock
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import Tool, ToolDefinition

if TYPE_CHECKING:
    from goagent_py.mcp.client import MCPConnection

__all__ = ["MCPTool", "mcp_tools", "sync_mcp_tools"]

_log = logging.getLogger("goagent_py.mcp")


class _Lost(Exception):
    """Internal: the connection broke under a request (the owner is reconnecting)."""


class MCPTool:
    """One tool of an MCP server, as a goagent-py :class:`~goagent_py.tools.Tool`.

    ``execute`` sends the call through the connection's owner task; the agent's dispatch chain
    (timeout, breaker, retry, rate limit, hooks, spans) wraps it like any function tool.
    """

    def __init__(
        self,
        connection: MCPConnection,
        remote_name: str,
        definition: ToolDefinition,
        *,
        idempotent: bool,
    ) -> None:
        self.connection = connection
        self.remote_name = remote_name
        self.idempotent = idempotent
        self._definition = definition

    @property
    def definition(self) -> ToolDefinition:
        """The name (prefixed), capped description and input schema shown to the model."""
        return self._definition

    async def execute(self, args: dict[str, Any]) -> list[ContentBlock]:
        """Call the tool on the server and return its content.

        Raises:
            MCPToolError: the server answered with ``isError``.
            MCPConnectionError: the server could not be reached (or broke; see the module doc).
            MCPToolUnavailableError: the server no longer offers the tool.
            MCPToolChangedError: the tool changed and is blocked until re-approved.
        """
        ctx = current_tool_context()
        conn = self.connection
        server = conn.name

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if ctx is not None:
                ctx.report(
                    {
                        "server": server,
                        "tool": self.definition.name,
                        "progress": progress,
                        "total": total,
                        "message": message,
                    }
                )

        async def run(client: Any) -> Any:
            return await client.call_tool(self.remote_name, args, progress_callback=on_progress)

        for attempt in (1, 2):
            await conn._ensure_connected()
            conn._check_offered(self)
            try:
                result = await conn._submit(run)
            except _Lost as lost:
                if not self.idempotent:
                    raise MCPServerRestartedError(server, self.definition.name, str(lost)) from None
                if attempt == 2:
                    raise MCPConnectionError(
                        server, f"the connection broke again during the retry ({lost})"
                    ) from None
                _log.info("MCP server %r: retrying idempotent %r", server, self.remote_name)
                continue
            except (MCPError, ConfigurationError):
                raise
            except Exception as exc:
                code = getattr(getattr(exc, "error", None), "code", None)
                if code is not None:  # a JSON-RPC error answer: the server refused the call
                    raise MCPToolError(
                        server, self.definition.name, f"{getattr(exc, 'message', exc)} ({code})"
                    ) from exc
                raise MCPConnectionError(server, describe(exc)) from exc
            if result.is_error:
                raise MCPToolError(server, self.definition.name, _convert.error_text(result))
            return _convert.blocks_from_result(result)
        raise AssertionError("unreachable")

    def __repr__(self) -> str:
        return f"MCPTool({self._definition.name!r}, server={self.connection.name!r})"


async def mcp_tools(*connections: MCPConnection) -> list[Tool]:
    """Connect to every server and return all their tools, checking that names are unique.

    Raises:
        ConfigurationError: two servers offer a tool under the same name (use ``prefix=``).
        MCPConnectionError: a server could not be started or reached.
    """
    owners: dict[str, str] = {}
    out: list[Tool] = []
    for conn in connections:
        for t in await conn.tools():
            name = t.definition.name
            if name in owners:
                raise ConfigurationError(
                    f"tool {name!r} is offered by MCP servers {owners[name]!r} and {conn.name!r}; "
                    "give one of them a prefix= (or filter with allow=/deny=)"
                )
            owners[name] = conn.name
            out.append(t)
    return out


async def sync_mcp_tools(
    tools: MutableMapping[str, Tool], servers: Sequence[MCPConnection]
) -> bool:
    """Bring the MCP tools in ``tools`` (an agent's tools by name) up to date with ``servers``.

    The agent calls this before each run and between turns (never during a tool batch): it
    connects lazily, picks up changed tool lists, and leaves local tools alone. Returns True when
    the set of tool definitions changed.

    Raises:
        ConfigurationError: two servers, or a server and a local tool, use the same name; nothing
            is changed then.
        MCPConnectionError: a server could not be started or reached.
    """
    fresh = await mcp_tools(*servers)
    local = {n for n, t in tools.items() if not isinstance(t, MCPTool)}
    clash = sorted(local & {t.definition.name for t in fresh})
    if clash:
        raise ConfigurationError(
            f"MCP tools named like local tools: {', '.join(clash)}; give the server a prefix= "
            "(or filter it with allow=/deny=)"
        )
    before = {n: t.definition for n, t in tools.items() if isinstance(t, MCPTool)}
    after = {t.definition.name: t.definition for t in fresh}
    for name in before:
        del tools[name]
    tools.update({t.definition.name: t for t in fresh})
    return before != after
