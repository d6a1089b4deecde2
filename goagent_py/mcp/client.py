"""MCP client: an MCP server's tools as goagent-py tools, over one owned connection.

Each connection (:class:`MCPStdio`, :class:`MCPHttp`, :class:`MCPInProcess`) has **one owner
task**. It enters the SDK's client session, serves the calls queued by any task, and exits the
session itself: the SDK's session must be entered and exited in the same task (closing it from
another raises "Attempted to exit cancel scope in a different task"). So connecting lazily from
any run, calling from concurrent runs and ``aclose()`` from anywhere are all safe.

- **Lazy**: nothing starts until the first run (or ``await conn.tools()``); concurrent first uses
  share one connection attempt.
- **Server death**: a call on a broken connection fails at once with a typed error (never hangs
  until the tool timeout); the owner reconnects right away, then with backoff after failed
  attempts (calls during a backoff fail fast, naming the last error). A call is retried on the
  new connection only when the tool is idempotent (its ``idempotentHint`` annotation or your
  ``idempotent=`` option); otherwise the model reads "server restarted; call not retried".
- **Tool lists that change**: the list is cached; the list-changed notification (or the
  2026-07-28 ``subscriptions/listen`` event) marks it stale and the owner refetches it; a listing
  fetched late never overwrites a newer one. :meth:`MCPConnection.tools` returns the current
  tools (the agent calls it between turns); a call to a tool the server no longer offers is an
  error result naming the tools it offers now.
- **Security**: pinned definitions (see :mod:`goagent_py.mcp._pins`), capped descriptions, and
  for stdio an allowlisted environment (see :mod:`goagent_py.mcp._env`).
- ``isError`` results raise :class:`MCPToolError`, so the model reads an error result; progress
  notifications become ``ToolExecutionUpdate`` events through the call's
  :func:`~goagent_py.tool_context.current_tool_context`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import fnmatch
import logging
import time
from collections.abc import Callable, Collection, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from goagent_py._json_schema import schema_problem
from goagent_py.errors import ConfigurationError
from goagent_py.mcp import _convert
from goagent_py.mcp._pins import ToolChange, _Pins
from goagent_py.mcp._sdk import describe, is_lost, is_modern, require
from goagent_py.mcp.errors import (
    MCPCallTimeoutError,
    MCPConnectionError,
    MCPError,
    MCPServerRestartedError,
    MCPToolChangedError,
    MCPToolError,
    MCPToolUnavailableError,
)
from goagent_py.messages import ContentBlock
from goagent_py.options import MCPConnector
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import Tool, ToolDefinition

__all__ = ["MCPConnection", "MCPTool"]

_log = logging.getLogger("goagent_py.mcp")

DEFAULT_CALL_TIMEOUT = 300.0
"""Seconds a call to an MCP server may wait for its answer unless ``call_timeout=`` says
otherwise: as long as an A2A send may take (``A2AClient(timeout=)``), so a server that never
answers cannot hang a run that set no ``tool_timeout`` (docs/mcp.md, "Boundaries")."""

_BACKOFF_START = 0.5
_BACKOFF_MAX = 10.0
_LIST_PAGE_CAP = 100


@dataclass(slots=True, eq=False)
class _Request:
    """One unit of work for the owner: ``run(client)`` in the owner's task group, in the
    context of the task that asked for it (``context``)."""

    run: Callable[[Any], Any]
    future: asyncio.Future[Any]
    context: contextvars.Context = field(default_factory=contextvars.copy_context)
    scope: Any = None
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True
        if self.scope is not None:
            self.scope.cancel()


_CLOSE = object()
_LOST = object()
_REFRESH = object()


@dataclass(slots=True)
class _Remote:
    """What the connection knows about one tool the server lists."""

    name: str
    tool: MCPTool
    usable: bool = True


@dataclass(slots=True)
class _Settings:
    name: str
    prefix: str = ""
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    idempotent: bool | frozenset[str] | None = None
    max_description_chars: int = 1024
    connect_timeout: float = 30.0
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT
    extra: dict[str, Any] = field(default_factory=dict)


class _Lost(Exception):
    """Internal: the connection broke under a request (the owner is reconnecting)."""


# What the SDK client raises (a RuntimeError) when a result does not fit the tool's declared
# outputSchema; the server answered, so it is the tool's error, not a connection failure.
_BAD_STRUCTURED = "Invalid structured content returned by tool "
_NO_STRUCTURED = "has an output schema but did not return structured content"


def _output_schema_refusal(exc: BaseException) -> str | None:
    """What the model reads when ``exc`` is the SDK's refusal of a result for its output
    schema, or None for any other error."""
    if not isinstance(exc, RuntimeError):
        return None
    text = str(exc)
    if text.startswith(_BAD_STRUCTURED):
        detail = text.split(": ", 1)[1] if ": " in text else text
        return f"the result does not match its output schema: {detail}"
    if _NO_STRUCTURED in text:
        return "the tool returned no structured content, though it declares an output schema"
    return None


def _answer_refusal(exc: BaseException) -> str | None:
    """What the model reads when ``exc`` is the server's answer to a call (a JSON-RPC error,
    a result that is not a valid MCP result, one that misses its output schema), capped; None
    when the call did not get an answer (the connection failed)."""
    from pydantic import ValidationError  # the SDK's models are pydantic: loaded already

    refused = _output_schema_refusal(exc)
    if refused is not None:
        return _convert.capped(refused)
    if isinstance(exc, ValidationError):
        return _convert.capped(f"the server's answer is not a valid MCP result: {exc}")
    code = getattr(getattr(exc, "error", None), "code", None)
    if code is not None:  # a JSON-RPC error answer: the server refused the call
        return f"{_convert.capped(str(getattr(exc, 'message', exc)))} ({code})"
    return None


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
    def server_name(self) -> str:
        """The name of the server that offers the tool (a :class:`ServerTool`)."""
        return self.connection.name

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
            limit = conn._settings.call_timeout
            deadline = asyncio.timeout(limit)
            try:
                async with deadline:
                    result = await conn._submit(run)
            except TimeoutError as exc:
                if limit is None or not deadline.expired():  # a TimeoutError of the transport
                    raise MCPConnectionError(server, describe(exc)) from exc
                # _submit saw the cancellation and cancelled the request on the server.
                raise MCPCallTimeoutError(server, self.definition.name, limit) from None
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
                refused = _answer_refusal(exc)
                if refused is not None:  # the server's answer, not its connection, was wrong
                    raise MCPToolError(server, self.definition.name, refused) from exc
                raise MCPConnectionError(server, describe(exc)) from exc
            if result.is_error:
                raise MCPToolError(server, self.definition.name, _convert.error_text(result))
            if ctx is not None and result.structured_content is not None:
                # Validated against the tool's outputSchema by the SDK (see
                # _output_schema_refusal): the calling code gets the data itself.
                ctx.set_details(result.structured_content)
            return _convert.blocks_from_result(result)
        raise AssertionError("unreachable")

    def __repr__(self) -> str:
        return f"MCPTool({self._definition.name!r}, server={self.connection.name!r})"


class MCPConnection:
    """Base of the MCP connections: tools, the owner task, reconnects, pins and filters.

    Use a subclass (:class:`MCPStdio`, :class:`MCPHttp`, :class:`MCPInProcess`). Keyword
    options, shared by all:

    Args:
        name: the connection's name in errors and logs.
        prefix: put before every tool name (``"git_"``), to keep servers apart.
        allow: only these tools (names on the server; ``fnmatch`` patterns like ``"git_*"``).
        deny: never these tools (same patterns); deny wins over allow.
        idempotent: None (default) trusts each tool's ``idempotentHint`` annotation; True/False
            for every tool; or a collection of tool names that are idempotent (the others
            follow their annotation). Only idempotent calls are retried after a reconnect.
        pins: tool name -> definition hash; pass your own (e.g. loaded from a reviewed file) and
            it is updated in place with tools seen for the first time.
        on_tool_changed: called with a :class:`~goagent_py.mcp.ToolChange` when a pinned tool's
            definition changes.
        block_changed: withhold changed tools until :meth:`approve` (default: report and use).
        max_description_chars: cap on server-provided descriptions (default 1024).
        connect_timeout: seconds for starting the server and listing its tools (default 30).
        call_timeout: seconds one call may wait for the server's answer (default 300; None:
            no limit); past it the call is cancelled on the server and the model reads an
            :class:`~goagent_py.mcp.MCPCallTimeoutError`. The agent's ``tool_timeout``, when
            shorter, ends the call first.
    """

    def __init__(
        self,
        *,
        name: str,
        prefix: str = "",
        allow: Collection[str] | None = None,
        deny: Collection[str] = (),
        idempotent: bool | Collection[str] | None = None,
        pins: MutableMapping[str, str] | None = None,
        on_tool_changed: Callable[[ToolChange], Any] | None = None,
        block_changed: bool = False,
        max_description_chars: int = 1024,
        connect_timeout: float = 30.0,
        call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"MCP connection name must be a non-empty str, got {name!r}")
        if not isinstance(prefix, str):
            raise ConfigurationError(f"prefix must be a str, got {type(prefix).__name__}")
        if isinstance(allow, str) or isinstance(deny, str):
            raise ConfigurationError("allow= and deny= take a list of tool names, not one str")
        if connect_timeout <= 0:
            raise ConfigurationError(f"connect_timeout must be > 0, got {connect_timeout!r}")
        if call_timeout is not None and (
            isinstance(call_timeout, bool)
            or not isinstance(call_timeout, int | float)
            or not call_timeout > 0
        ):
            raise ConfigurationError(
                f"call_timeout must be a number of seconds > 0 (or None for no limit), got "
                f"{call_timeout!r}"
            )
        if idempotent is not None and not isinstance(idempotent, bool):
            if isinstance(idempotent, str):
                raise ConfigurationError("idempotent= takes a bool or a list of tool names")
            idempotent = frozenset(idempotent)
        self._settings = _Settings(
            name=name,
            prefix=prefix,
            allow=None if allow is None else tuple(allow),
            deny=tuple(deny),
            idempotent=idempotent,
            max_description_chars=max_description_chars,
            connect_timeout=connect_timeout,
            call_timeout=None if call_timeout is None else float(call_timeout),
        )
        self._pins = _Pins(name, pins, on_tool_changed, block_changed)
        self._remote: dict[str, _Remote] = {}
        self._tools_seen = False
        self._warned_schemas: set[tuple[str, str]] = set()  # (tool, problem), warned once
        self._fetch_seq = 0
        self._applied_seq = 0
        self._stale = False
        self._generation = 0
        self._changed: asyncio.Event | None = None
        # Owner state; all of it lives in the event loop of the first use.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._owner: asyncio.Task[None] | None = None
        self._queue: asyncio.Queue[object] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._wanted: asyncio.Event | None = None
        self._connected = False
        self._closed = False
        self._attempts = 0
        self._retry_at = 0.0
        self._last_error = ""
        self._connection_id = 0
        self._connects = 0

    # ----------------------------------------------------------------- public API

    @property
    def name(self) -> str:
        """The connection's name."""
        return self._settings.name

    @property
    def generation(self) -> int:
        """Grows each time the list of tools changes (compare to know when to re-read it)."""
        return self._generation

    @property
    def connects(self) -> int:
        """How many times the connection was established (1 + reconnects)."""
        return self._connects

    @property
    def pins(self) -> Mapping[str, str]:
        """The pinned definition hashes, by tool name on the server."""
        return self._pins.pins

    def settings(self) -> dict[str, Any]:
        """The connection's settings, by the constructor's keyword (``allow``/``deny`` as
        tuples, ``idempotent`` as a bool, None or a frozenset of names, ``pins`` a copy): what
        it takes to open the same connection elsewhere (a durable agent's workers do)."""
        s, pins = self._settings, self._pins
        return {
            "name": s.name,
            "prefix": s.prefix,
            "allow": s.allow,
            "deny": s.deny,
            "idempotent": s.idempotent,
            "pins": dict(pins.pins),
            "on_tool_changed": pins.on_changed,
            "block_changed": pins.block_changed,
            "max_description_chars": s.max_description_chars,
            "connect_timeout": s.connect_timeout,
            "call_timeout": s.call_timeout,
        }

    async def tools(self) -> list[Tool]:
        """Connect if needed, and return the current tools (refetched if the list changed).

        Tools withheld by ``block_changed`` are left out. The agent calls this between turns.

        Raises:
            MCPConnectionError: the server could not be started or reached.
        """
        await self._ensure_connected()
        if self._stale or self._applied_seq < self._fetch_seq or not self._tools_seen:
            await self._refresh_now()  # newer than any listing in flight, so it is applied
        return [r.tool for r in self._remote.values() if r.usable]

    def connector(self) -> MCPConnector:
        """The connector for ``Agent(mcp_connectors=[...])`` / ``with_mcp_connector``: it
        connects, returns the tools and this connection's ``aclose``."""

        async def connect() -> tuple[Sequence[Tool], Callable[[], Any] | None]:
            if self._closed:
                # The agent closed it after a failed connect (or its own aclose) and connects
                # again: start afresh rather than fail forever.
                await self.aclose()
                self._closed = False
                self._owner = self._queue = self._ready = self._wanted = None
            return await self.tools(), self.aclose

        return connect

    def approve(self, tool_name: str) -> bool:
        """Accept the changed definition of a blocked tool (name on the server); True if one
        was waiting. It is offered again from the next :meth:`tools`."""
        approved = self._pins.approve(tool_name)
        remote = self._remote.get(tool_name)
        if approved and remote is not None:
            remote.usable = True
            self._bump()
        return approved

    async def wait_changed(self, generation: int) -> int:
        """Wait until :attr:`generation` is past ``generation`` (the list changed and was
        refetched); return the new generation. Bound it with ``asyncio.timeout``."""
        while self._generation <= generation:
            if self._changed is None:
                self._changed = asyncio.Event()
            await self._changed.wait()
            self._changed.clear()
        return self._generation

    async def aclose(self) -> None:
        """Close the connection (the owner task exits the session). Idempotent, from any task."""
        self._closed = True
        owner = self._owner
        if owner is None or owner.done():
            return
        assert self._queue is not None
        assert self._wanted is not None
        self._queue.put_nowait(_CLOSE)
        self._wanted.set()
        # Shielded: a cancelled caller still lets the owner finish closing the server.
        with contextlib.suppress(Exception):
            await asyncio.shield(owner)

    async def __aenter__(self) -> MCPConnection:
        await self.tools()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    # ------------------------------------------------------- what subclasses give

    def _client(self) -> Any:
        """A new, un-entered ``mcp.Client`` (plus anything to enter first via _enter)."""
        raise NotImplementedError

    async def _enter(self, stack: contextlib.AsyncExitStack) -> Any:
        """Enter the transport and the SDK client on ``stack``; return the client."""
        return await stack.enter_async_context(self._client())

    def _client_kwargs(self) -> dict[str, Any]:
        return {"message_handler": self._on_message, "cache": None}

    # ------------------------------------------------------------ the owner task

    def _start_owner(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop:
            if self._loop.is_running():
                raise ConfigurationError(
                    f"MCP connection {self.name!r} is in use by another event loop; "
                    "use one connection per event loop"
                )
            # The previous loop ended (e.g. run_sync called twice): its owner went with it.
            self._owner = self._queue = self._ready = self._wanted = self._changed = None
        self._loop = loop
        # No await between the check and the creation: concurrent first uses share one owner.
        if self._owner is None:
            self._queue = asyncio.Queue()
            self._wanted = asyncio.Event()
            self._owner = loop.create_task(self._own(), name=f"goagent-mcp-{self.name}")

    async def _ensure_connected(self) -> None:
        if self._closed:
            raise MCPConnectionError(self.name, "the connection is closed")
        self._start_owner()
        assert self._wanted is not None
        ready = self._ready
        if ready is None or (ready.done() and ready.exception() is not None):
            wait = self._retry_at - time.monotonic()
            if ready is not None and wait > 0:
                raise MCPConnectionError(
                    self.name,
                    f"unavailable ({self._last_error}); next connection attempt in {wait:.1f}s",
                )
            ready = self._ready = asyncio.get_running_loop().create_future()
            self._wanted.set()
        await asyncio.shield(ready)

    async def _own(self) -> None:
        assert self._wanted is not None
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        try:
            while not self._closed:
                await self._wanted.wait()
                if self._closed:
                    break
                if self._ready is None or self._ready.done():
                    self._ready = loop.create_future()
                ready = self._ready
                try:
                    await self._session(ready)
                except Exception as exc:
                    self._attempts += 1
                    self._last_error = describe(exc)
                    delay = min(_BACKOFF_MAX, _BACKOFF_START * 2 ** (self._attempts - 1))
                    self._retry_at = time.monotonic() + delay
                    self._wanted.clear()
                    _log.warning(
                        "MCP server %r: connection failed (%s); next attempt in %.1fs at the "
                        "earliest",
                        self.name,
                        self._last_error,
                        delay,
                    )
                    error = (
                        exc
                        if isinstance(exc, ConfigurationError)
                        else MCPConnectionError(self.name, self._last_error)
                    )
                    if not ready.done():
                        ready.set_exception(error)
                        ready.exception()  # retrieved: nobody may be waiting
                    self._fail_queued(error)
                    continue
                if not self._closed:
                    # Lost: reconnect right away (wanted stays set) with a fresh future.
                    self._ready = loop.create_future()
        finally:
            self._connected = False
            self._fail_queued(MCPConnectionError(self.name, "the connection is closed"))
            if self._ready is not None and not self._ready.done():
                self._ready.set_exception(MCPConnectionError(self.name, "the connection is closed"))
                self._ready.exception()

    async def _session(self, ready: asyncio.Future[None]) -> None:
        """One connection's life: enter, list tools, serve the queue, exit (all in this task)."""
        anyio: Any = require("anyio")
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        self._connection_id += 1
        connection_id = self._connection_id
        with anyio.CancelScope() as scope:
            # A server that never answers the handshake must not hang the first run.
            timer = loop.call_later(self._settings.connect_timeout, scope.cancel)
            try:
                async with contextlib.AsyncExitStack() as stack:
                    client = await self._enter(stack)
                    await self._list(client)
                    timer.cancel()
                    async with anyio.create_task_group() as tg:
                        if is_modern(client):
                            tg.start_soon(self._listen, client)
                        self._connected = True
                        self._connects += 1
                        self._attempts = 0
                        if not ready.done():
                            ready.set_result(None)
                        _log.info("MCP server %r connected", self.name)
                        try:
                            await self._serve(client, tg, connection_id)
                        finally:
                            self._connected = False
                            tg.cancel_scope.cancel()
            finally:
                timer.cancel()
        if scope.cancelled_caught and not ready.done():
            raise TimeoutError(
                f"no answer within connect_timeout={self._settings.connect_timeout:g}s"
            )

    async def _serve(self, client: Any, tg: Any, connection_id: int) -> None:
        assert self._queue is not None
        while True:
            item = await self._queue.get()
            if item is _CLOSE:
                return
            if isinstance(item, tuple) and item[0] is _LOST:
                if item[1] == connection_id:
                    _log.warning("MCP server %r: connection lost (%s)", self.name, item[2])
                    return
                continue  # a loss reported for an earlier connection
            if item is _REFRESH:
                tg.start_soon(self._refresh_task, client)
                continue
            assert isinstance(item, _Request)
            if item.cancelled or item.future.done():
                continue
            # The request's task starts in (a copy of) its caller's context, not the owner's:
            # the SDK makes its client span and injects the W3C trace context there, so the
            # call joins the caller's trace (its execute_tool span), and whatever else the
            # caller's context holds reaches the call, as if it had been made in place.
            item.context.run(tg.start_soon, self._run_request, client, item, connection_id)

    async def _run_request(self, client: Any, req: _Request, connection_id: int) -> None:
        anyio: Any = require("anyio")
        with anyio.CancelScope() as scope:
            req.scope = scope
            try:
                result = await req.run(client)
            except Exception as exc:
                if is_lost(exc):
                    assert self._queue is not None
                    self._queue.put_nowait((_LOST, connection_id, describe(exc)))
                    exc = _Lost(describe(exc))
                if not req.future.done():
                    req.future.set_exception(exc)
                return
            except BaseException:
                if not req.future.done() and not req.cancelled:
                    # Cancelled by the owner (closing, or the connection was lost), not the caller.
                    req.future.set_exception(
                        MCPConnectionError(self.name, "the connection was closed during the call")
                        if self._closed
                        else _Lost("the connection was lost during the call")
                    )
                raise
            if not req.future.done():
                req.future.set_result(result)

    def _fail_queued(self, error: Exception) -> None:
        if self._queue is None:
            return
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if isinstance(item, _Request) and not item.future.done():
                item.future.set_exception(error)

    async def _submit(self, run: Callable[[Any], Any]) -> Any:
        assert self._queue is not None
        req = _Request(run, asyncio.get_running_loop().create_future())
        self._queue.put_nowait(req)
        try:
            return await req.future
        except asyncio.CancelledError:
            req.cancel()  # the call's timeout or the run's cancellation: stop it on the server
            raise

    # ------------------------------------------------------------------ tool lists

    async def _on_message(self, message: Any) -> None:
        # Runs in the SDK's receive path: only mark and wake the owner, never do I/O here.
        if type(message).__name__ == "ToolListChangedNotification":
            self._stale = True
            if self._queue is not None:
                self._queue.put_nowait(_REFRESH)

    async def _listen(self, client: Any) -> None:
        """On 2026-07-28 connections list changes come through ``subscriptions/listen``."""
        try:
            async with client.listen(tools_list_changed=True) as sub:
                async for _event in sub:
                    # The event is also teed to the message handler, which marks the list stale.
                    self._stale = True
        except Exception as exc:  # a server without the subscription: notifications only
            _log.debug("MCP server %r: no tools subscription (%s)", self.name, describe(exc))

    async def _refresh_task(self, client: Any) -> None:
        try:
            await self._list(client)
        except Exception as exc:
            _log.warning("MCP server %r: refreshing tools failed: %s", self.name, describe(exc))

    async def _refresh_now(self) -> None:
        await self._submit(self._list)

    async def _list(self, client: Any) -> None:
        """Fetch the whole listing and apply it unless a newer one was applied meanwhile."""
        self._fetch_seq += 1
        seq = self._fetch_seq
        self._stale = False
        listed: list[Any] = []
        cursor: str | None = None
        for _ in range(_LIST_PAGE_CAP):
            page = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        if seq < self._applied_seq:
            return  # a stale listing that arrived late
        self._applied_seq = seq
        self._apply(listed)

    def _selected(self, name: str) -> bool:
        s = self._settings
        if any(fnmatch.fnmatchcase(name, p) for p in s.deny):
            return False
        return s.allow is None or any(fnmatch.fnmatchcase(name, p) for p in s.allow)

    def _is_idempotent(self, name: str, annotations: Any) -> bool:
        option = self._settings.idempotent
        if isinstance(option, bool):
            return option
        if option is not None and name in option:
            return True
        return bool(getattr(annotations, "idempotent_hint", None))

    def _apply(self, listed: list[Any]) -> None:
        s = self._settings
        remote: dict[str, _Remote] = {}
        by_local: dict[str, str] = {}
        for t in listed:
            if not self._selected(t.name):
                continue
            description = t.description or ""
            schema = _convert.input_schema(t.input_schema)
            problem = schema_problem(schema)
            if problem is not None:
                # Sent on, it is a 400 from the vendor for the whole request: one bad tool of
                # a server failed every turn. Withheld, the server's other tools still work.
                if (t.name, problem) not in self._warned_schemas:
                    self._warned_schemas.add((t.name, problem))
                    _log.warning(
                        "MCP server %r: tool %r withheld: its input schema is not valid JSON "
                        "Schema at %s",
                        self.name,
                        t.name,
                        problem,
                    )
                continue
            local = _convert.local_name(s.prefix, t.name)
            if local in by_local:
                # Raised, any server could end every run by listing two such names.
                if (t.name, "clash") not in self._warned_schemas:
                    self._warned_schemas.add((t.name, "clash"))
                    _log.warning(
                        "MCP server %r: tool %r left out: %r maps to the same name %r first; "
                        "use allow=/deny= to choose",
                        self.name,
                        t.name,
                        by_local[local],
                        local,
                    )
                continue
            by_local[local] = t.name
            usable = self._pins.check(t.name, description, t.input_schema or {})
            definition = ToolDefinition(
                name=local,
                description=_convert.cap_description(description, s.max_description_chars),
                parameters=schema,
            )
            old = self._remote.get(t.name)
            tool = (
                old.tool
                if old is not None and old.tool.definition == definition
                else MCPTool(
                    self,
                    t.name,
                    definition,
                    idempotent=self._is_idempotent(t.name, getattr(t, "annotations", None)),
                )
            )
            remote[t.name] = _Remote(t.name, tool, usable)
        changed = self._tools_seen and (
            [(n, r.tool.definition, r.usable) for n, r in remote.items()]
            != [(n, r.tool.definition, r.usable) for n, r in self._remote.items()]
        )
        self._remote = remote
        self._tools_seen = True
        if changed:
            self._bump()
            _log.info("MCP server %r: tool list changed: %s", self.name, ", ".join(remote))

    # ----------------------------------------------------------------------- calls

    def _bump(self) -> None:
        self._generation += 1
        if self._changed is not None:
            self._changed.set()

    def _check_offered(self, tool: MCPTool) -> None:
        current = self._remote.get(tool.remote_name)
        if current is None:
            names = tuple(r.tool.definition.name for r in self._remote.values() if r.usable)
            raise MCPToolUnavailableError(self.name, tool.definition.name, names)
        if not current.usable:
            raise MCPToolChangedError(self.name, tool.definition.name)
