"""MCP servers in durable runs: described as config, connected by the worker, called as
activities.

An agent's :class:`~goagent_py.mcp.MCPStdio` / :class:`~goagent_py.mcp.MCPHttp` servers become
:class:`MCPServerSpec`\\ s (plain config: command, args, env, cwd or URL, headers, and the
connection's filters). Each worker opens its own connection from its own definition of the
agent and keeps it for its lifetime; no client ever crosses a process. The workflow knows only
the server's name: its history never holds a command, an environment or a header (they may
carry secrets, and a workflow's input must not be able to start a program on a worker).

Two activities per server, named after the agent and the server:

- ``goagent.mcp.list.<agent>.<server>``: the server's tools, listed once at the start of each
  run. The list is recorded in the workflow's history, so a replay sees the tools the run saw
  (a server that changed its tools meanwhile does not change a run in flight).
- ``goagent.mcp.call.<agent>.<server>``: one tool call, through the worker's dispatch chain like
  any tool (see :mod:`goagent_py.durable._activities`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from goagent_py.errors import ConfigurationError
from goagent_py.tools import Tool, ToolDefinition

__all__ = ["MCPServerSpec", "specs_of"]


@dataclass(slots=True, frozen=True)
class MCPServerSpec:
    """An MCP server as plain, serialisable config (stdio: ``command``; HTTP: ``url``).

    Built from an agent's ``MCPStdio``/``MCPHttp`` by :class:`~goagent_py.durable.DurableAgent`;
    :meth:`connect` builds a fresh connection from it (in a worker).

    Attributes:
        name: the server's name (the stem of its activity names: keep it stable).
        command: the executable of a stdio server.
        args: its arguments.
        env: extra environment variables for it.
        cwd: its working directory.
        url: the endpoint of an HTTP server.
        headers: headers sent with every HTTP request.
        timeout: HTTP connect/write timeout in seconds.
        prefix, allow, deny, idempotent, max_description_chars, connect_timeout, call_timeout,
            pins, block_changed: the connection's options (see
            :class:`~goagent_py.mcp.MCPConnection`).
    """

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 30.0
    prefix: str = ""
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    idempotent: bool | tuple[str, ...] | None = None
    max_description_chars: int = 1024
    connect_timeout: float = 30.0
    call_timeout: float | None = 300.0
    pins: Mapping[str, str] | None = None
    block_changed: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigurationError("MCPServerSpec needs a name")
        if bool(self.command) == bool(self.url):
            raise ConfigurationError(
                f"MCPServerSpec {self.name!r}: give either a command (stdio) or a url (HTTP)"
            )

    @classmethod
    def from_connection(cls, connection: Any) -> MCPServerSpec:
        """The spec of an ``MCPStdio`` or ``MCPHttp`` connection.

        Raises:
            ConfigurationError: the connection cannot be described as config (an in-process
                server, an ``auth=`` object, an ``on_tool_changed`` callback, an ``errlog``).
        """
        from goagent_py.mcp import MCPHttp, MCPStdio
        from goagent_py.mcp.transports import transport_of

        name = getattr(connection, "name", repr(connection))
        if not isinstance(connection, MCPStdio | MCPHttp):
            raise ConfigurationError(
                f"DurableAgent: MCP server {name!r} ({type(connection).__name__}) cannot be "
                "described as config for the workers; use MCPStdio(...) or MCPHttp(...)"
            )
        settings = connection.settings()
        if settings["on_tool_changed"] is not None:
            raise ConfigurationError(
                f"DurableAgent: MCP server {name!r} has an on_tool_changed callback, which "
                "cannot reach the workers; use block_changed=True with reviewed pins= instead"
            )
        idempotent = settings["idempotent"]
        common: dict[str, Any] = {
            "name": settings["name"],
            "prefix": settings["prefix"],
            "allow": settings["allow"],
            "deny": settings["deny"],
            "idempotent": tuple(sorted(idempotent))
            if isinstance(idempotent, frozenset)
            else idempotent,
            "max_description_chars": settings["max_description_chars"],
            "connect_timeout": settings["connect_timeout"],
            "call_timeout": settings["call_timeout"],
            "pins": settings["pins"] or None,
            "block_changed": settings["block_changed"],
        }
        if isinstance(connection, MCPStdio):
            if connection.errlog is not None:
                raise ConfigurationError(
                    f"DurableAgent: MCP server {name!r} has an errlog=, which cannot reach the "
                    "workers (their servers write to the worker's stderr)"
                )
            cwd = None if connection.cwd is None else str(connection.cwd)
            return cls(
                command=connection.command,
                args=tuple(connection.args),
                env=dict(connection.env),
                cwd=cwd,
                **common,
            )
        if connection.transport != transport_of(connection.url):
            # The spec carries the URL alone, and the workers read the transport off it.
            raise ConfigurationError(
                f"DurableAgent: MCP server {name!r} names transport={connection.transport!r} "
                "for a URL that says otherwise; the workers only see the URL: use a URL whose "
                "path ends in /sse for the SSE transport (and any other for streamable HTTP)"
            )
        if connection.auth is not None:
            raise ConfigurationError(
                f"DurableAgent: MCP server {name!r} has an auth= object, which cannot reach the "
                "workers; pass the credentials as headers= (they stay on the workers)"
            )
        return cls(
            url=connection.url,
            headers=dict(connection.headers),
            timeout=connection.timeout,
            **common,
        )

    def to_data(self) -> dict[str, Any]:
        """As JSON-ready data."""
        return {
            "name": self.name,
            "command": self.command,
            "args": list(self.args),
            "env": dict(self.env),
            "cwd": self.cwd,
            "url": self.url,
            "headers": dict(self.headers),
            "timeout": self.timeout,
            "prefix": self.prefix,
            "allow": None if self.allow is None else list(self.allow),
            "deny": list(self.deny),
            "idempotent": list(self.idempotent)
            if isinstance(self.idempotent, tuple)
            else self.idempotent,
            "max_description_chars": self.max_description_chars,
            "connect_timeout": self.connect_timeout,
            "call_timeout": self.call_timeout,
            "pins": None if self.pins is None else dict(self.pins),
            "block_changed": self.block_changed,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> MCPServerSpec:
        """From :meth:`to_data`'s dict."""
        idempotent = data.get("idempotent")
        allow = data.get("allow")
        call_timeout = data.get("call_timeout", 300.0)
        return cls(
            name=str(data["name"]),
            command=str(data.get("command", "")),
            args=tuple(data.get("args", ())),
            env=dict(data.get("env") or {}),
            cwd=data.get("cwd"),
            url=str(data.get("url", "")),
            headers=dict(data.get("headers") or {}),
            timeout=float(data.get("timeout", 30.0)),
            prefix=str(data.get("prefix", "")),
            allow=None if allow is None else tuple(allow),
            deny=tuple(data.get("deny", ())),
            idempotent=tuple(idempotent) if isinstance(idempotent, list) else idempotent,
            max_description_chars=int(data.get("max_description_chars", 1024)),
            connect_timeout=float(data.get("connect_timeout", 30.0)),
            call_timeout=None if call_timeout is None else float(call_timeout),
            pins=None if data.get("pins") is None else dict(data["pins"]),
            block_changed=bool(data.get("block_changed", False)),
        )

    def connect(self) -> Any:
        """A new, unconnected :class:`~goagent_py.mcp.MCPConnection` for this server (it
        connects on first use)."""
        from goagent_py.mcp import MCPHttp, MCPStdio

        options: dict[str, Any] = {
            "name": self.name,
            "prefix": self.prefix,
            "allow": self.allow,
            "deny": self.deny,
            "idempotent": self.idempotent,
            "max_description_chars": self.max_description_chars,
            "connect_timeout": self.connect_timeout,
            "call_timeout": self.call_timeout,
            "pins": None if self.pins is None else dict(self.pins),
            "block_changed": self.block_changed,
        }
        if self.command:
            return MCPStdio(self.command, self.args, env=self.env, cwd=self.cwd, **options)
        return MCPHttp(self.url, headers=self.headers, timeout=self.timeout, **options)


def specs_of(connections: Any) -> list[MCPServerSpec]:
    """The specs of an agent's MCP servers; their names must be unique (activity names)."""
    specs = [MCPServerSpec.from_connection(c) for c in connections]
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ConfigurationError(
                f"DurableAgent: two MCP servers are named {spec.name!r}; their activities are "
                "named after them: give one a name="
            )
        seen.add(spec.name)
    return specs


# -- worker side -------------------------------------------------------------------------------


class MCPServers:
    """A worker's connections to one agent's MCP servers: opened on first use, kept open."""

    def __init__(self, specs: list[MCPServerSpec]) -> None:
        self.specs = {s.name: s for s in specs}
        self._connections: dict[str, Any] = {}
        self.tools: dict[str, Tool] = {}  # by local name, for the dispatcher

    def connection(self, server: str) -> Any:
        conn = self._connections.get(server)
        if conn is None:
            conn = self._connections[server] = self.specs[server].connect()
        return conn

    async def list(self, server: str) -> list[Tool]:
        """The server's current tools (also made known to the worker's dispatcher)."""
        conn = self.connection(server)
        tools: list[Tool] = await conn.tools()
        gone = [n for n, t in self.tools.items() if getattr(t, "connection", None) is conn]
        for name in gone:  # tools the server no longer offers (or renamed)
            del self.tools[name]
        self.tools.update((t.definition.name, t) for t in tools)
        return tools

    async def find(self, server: str, name: str) -> Tool | None:
        """The tool ``name`` of ``server`` (listing it first on a worker that never did)."""
        if name not in self.tools:
            await self.list(server)
        return self.tools.get(name)

    async def aclose(self) -> None:
        connections, self._connections = self._connections, {}
        for conn in connections.values():
            await conn.aclose()


# -- workflow side -----------------------------------------------------------------------------


class _Calls(Protocol):
    agent: str

    def activity(self, name: str, data: dict[str, Any], timeout_key: str) -> Awaitable[Any]: ...


def list_activity(agent: str, server: str) -> str:
    """The name of the activity that lists ``server``'s tools."""
    return f"goagent.mcp.list.{agent}.{server}"


def call_activity(agent: str, server: str) -> str:
    """The name of the activity that calls one of ``server``'s tools."""
    return f"goagent.mcp.call.{agent}.{server}"


async def listed_definitions(
    calls: _Calls, servers: list[str], on_error: Callable[[str, BaseException], BaseException]
) -> list[tuple[str, ToolDefinition]]:
    """List each server's tools through its activity (recorded, so replays see the same)."""
    out: list[tuple[str, ToolDefinition]] = []
    for server in servers:
        try:
            data = await calls.activity(
                list_activity(calls.agent, server), {"server": server}, "tool_timeout"
            )
        except Exception as exc:
            raise on_error(server, exc) from None
        out.extend(
            (server, ToolDefinition(t["name"], t["description"], t["parameters"]))
            for t in data["tools"]
        )
    return out
