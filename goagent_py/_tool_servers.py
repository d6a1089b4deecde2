"""What the agent needs of a server that offers tools (an MCP server, or any other source).

The agent knows servers only through :class:`ToolServer`: it lists their tools before each turn
and closes them with itself. :mod:`goagent_py.mcp` implements the protocol; this module keeps
the agent's tool list in step with the servers, so the core never imports an integration
(docs/architecture.md, "Layers").
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from typing import Protocol, runtime_checkable

from goagent_py.errors import ConfigurationError
from goagent_py.tools import Tool

__all__ = ["ServerTool", "ToolServer", "server_tools", "sync_server_tools"]


@runtime_checkable
class ToolServer(Protocol):
    """A source of tools the agent lists before each turn (``MCPStdio``, ``MCPHttp``, ...)."""

    @property
    def name(self) -> str: ...

    async def tools(self) -> list[Tool]:
        """The tools offered now (connecting first if needed)."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class ServerTool(Protocol):
    """A tool that a :class:`ToolServer` offers (as opposed to the agent's own tools)."""

    @property
    def server_name(self) -> str: ...


async def server_tools(*servers: ToolServer) -> list[Tool]:
    """Every server's tools, checking that names are unique across servers.

    Raises:
        ConfigurationError: two servers offer a tool under the same name (use ``prefix=``).
    """
    owners: dict[str, str] = {}
    out: list[Tool] = []
    for server in servers:
        for t in await server.tools():
            name = t.definition.name
            if name in owners:
                raise ConfigurationError(
                    f"tool {name!r} is offered by MCP servers {owners[name]!r} and "
                    f"{server.name!r}; give one of them a prefix= (or filter with allow=/deny=)"
                )
            owners[name] = server.name
            out.append(t)
    return out


async def sync_server_tools(
    tools: MutableMapping[str, Tool], servers: Sequence[ToolServer]
) -> bool:
    """Bring the server tools in ``tools`` (an agent's tools by name) up to date with ``servers``.

    The agent calls this before each run and between turns (never during a tool batch): it
    connects lazily, picks up changed tool lists, and leaves local tools alone. Returns True when
    the set of tool definitions changed.

    Raises:
        ConfigurationError: two servers, or a server and a local tool, use the same name; nothing
            is changed then.
        MCPConnectionError: a server could not be started or reached.
    """
    fresh = await server_tools(*servers)
    local = {n for n, t in tools.items() if not isinstance(t, ServerTool)}
    clash = sorted(local & {t.definition.name for t in fresh})
    if clash:
        raise ConfigurationError(
            f"MCP tools named like local tools: {', '.join(clash)}; give the server a prefix= "
            "(or filter it with allow=/deny=)"
        )
    before = {n: t.definition for n, t in tools.items() if isinstance(t, ServerTool)}
    after = {t.definition.name: t.definition for t in fresh}
    for name in before:
        del tools[name]
    tools.update({t.definition.name: t for t in fresh})
    return before != after
