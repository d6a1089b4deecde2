"""The three ways to reach an MCP server: a command over stdio, a URL (streamable HTTP or the
legacy HTTP+SSE transport), an in-process object."""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TextIO
from urllib.parse import urlsplit

from goagent_py.errors import ConfigurationError
from goagent_py.mcp._env import server_env
from goagent_py.mcp._sdk import require
from goagent_py.mcp.client import MCPConnection

__all__ = ["MCPHttp", "MCPInProcess", "MCPStdio"]

HttpTransport = Literal["streamable-http", "sse"]


class MCPStdio(MCPConnection):
    """A server started as a subprocess and spoken to over its stdin/stdout.

    The command and its arguments are a list, never a shell line. The process gets an
    environment built from an allowlist (PATH, HOME, LANG, LC_*, TERM, TMPDIR, USER, TZ) plus
    ``env``: provider API keys and other secrets of the parent never reach it. (The SDK adds
    LOGNAME and SHELL to what it is given.)

    Example::

        time = MCPStdio("uvx", ["mcp-server-time"], prefix="time_")
        agent = Agent(provider=p, model="m", mcp_connectors=[time.connector()])

    Args:
        command: the executable (looked up on PATH).
        args: its arguments.
        env: extra environment variables for the server (e.g. the one token it needs).
        cwd: the server's working directory.
        errlog: where the server's stderr goes (default: this process's stderr).
        **options: see :class:`~goagent_py.mcp.MCPConnection` (``name`` defaults to the
            command's file name).
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        errlog: TextIO | None = None,
        name: str | None = None,
        **options: Any,
    ) -> None:
        if not isinstance(command, str) or not command.strip():
            raise ConfigurationError(f"MCPStdio needs a command (str), got {command!r}")
        if isinstance(args, str):
            raise ConfigurationError(
                "MCPStdio args must be a list of str (no shell parsing): "
                f"MCPStdio({command!r}, {args.split()!r})"
            )
        if any(not isinstance(a, str) for a in args):
            raise ConfigurationError("MCPStdio args must all be str")
        if env is not None and any(
            not isinstance(k, str) or not isinstance(v, str) for k, v in env.items()
        ):
            raise ConfigurationError("MCPStdio env must map str to str")
        super().__init__(name=name or Path(command).name, **options)
        self.command = command
        self.args = list(args)
        self.env = dict(env or {})
        self.cwd = cwd
        self.errlog = errlog

    def environment(self) -> dict[str, str]:
        """The environment the server starts with (before the SDK's own additions)."""
        return server_env(self.env)

    async def _enter(self, stack: contextlib.AsyncExitStack) -> Any:
        mcp: Any = require("mcp")
        stdio: Any = require("mcp.client.stdio")
        command = shutil.which(self.command) or self.command
        params = mcp.StdioServerParameters(
            command=command, args=self.args, env=self.environment(), cwd=self.cwd
        )
        transport = stdio.stdio_client(params, errlog=self.errlog or sys.stderr)
        return await stack.enter_async_context(mcp.Client(transport, **self._client_kwargs()))


class MCPHttp(MCPConnection):
    """A server reached over HTTP: streamable HTTP, or the legacy HTTP+SSE transport.

    The transport follows the URL unless named: a path ending in ``/sse`` is the legacy
    HTTP+SSE transport (MCP 2024-11-05: an event stream, and messages posted to the endpoint
    it names), which many deployed servers still speak; any other path is streamable HTTP.

    Args:
        url: the MCP endpoint (e.g. ``http://127.0.0.1:8000/mcp`` or ``.../sse``).
        transport: "streamable-http" or "sse" (default: from the URL, as above).
        headers: headers sent with every request (e.g. an API key the server expects).
        auth: an ``httpx2.Auth`` (the SDK's HTTP client), e.g. the SDK's OAuth provider.
        timeout: seconds for connect/write; reads may last 300 s (server-sent event streams).
        **options: see :class:`~goagent_py.mcp.MCPConnection` (``name`` defaults to the URL's
            host).
    """

    def __init__(
        self,
        url: str,
        *,
        transport: HttpTransport | None = None,
        headers: Mapping[str, str] | None = None,
        auth: Any = None,
        timeout: float = 30.0,
        name: str | None = None,
        **options: Any,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"MCPHttp needs an http(s) URL, got {url!r}")
        if transport not in (None, "streamable-http", "sse"):
            raise ConfigurationError(
                f"MCPHttp transport must be 'sse' or 'streamable-http', got {transport!r}"
            )
        host = url.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1]
        super().__init__(name=name or host, **options)
        self.url = url
        self.transport: HttpTransport = transport or transport_of(url)
        self.headers = dict(headers or {})
        self.auth = auth
        self.timeout = timeout

    async def _enter(self, stack: contextlib.AsyncExitStack) -> Any:
        mcp: Any = require("mcp")
        if self.transport == "sse":
            sse: Any = require("mcp.client.sse")
            transport = sse.sse_client(
                self.url,
                headers=self.headers,
                timeout=self.timeout,
                sse_read_timeout=300.0,
                auth=self.auth,
            )
            return await stack.enter_async_context(mcp.Client(transport, **self._client_kwargs()))
        httpx2: Any = require("httpx2")
        shttp: Any = require("mcp.client.streamable_http")
        http = httpx2.AsyncClient(
            headers=self.headers,
            auth=self.auth,
            timeout=httpx2.Timeout(self.timeout, read=300.0),
        )
        await stack.enter_async_context(http)
        transport = shttp.streamable_http_client(self.url, http_client=http)
        return await stack.enter_async_context(mcp.Client(transport, **self._client_kwargs()))


def transport_of(url: str) -> HttpTransport:
    """The transport a URL names: "sse" for a path ending in ``/sse``, else streamable HTTP."""
    path = urlsplit(url).path.rstrip("/")
    return "sse" if path.endswith("/sse") else "streamable-http"


class MCPInProcess(MCPConnection):
    """A server object in this process (an SDK ``MCPServer`` or low-level ``Server``), spoken
    to directly: for tests, and for tools you write as an MCP server but run locally.

    Args:
        server: the server object.
        **options: see :class:`~goagent_py.mcp.MCPConnection` (``name`` defaults to the
            server's name).
    """

    def __init__(self, server: Any, *, name: str | None = None, **options: Any) -> None:
        super().__init__(name=name or str(getattr(server, "name", "") or "in-process"), **options)
        self.server = server

    def _client(self) -> Any:
        mcp: Any = require("mcp")
        return mcp.Client(self.server, **self._client_kwargs())
