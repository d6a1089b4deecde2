"""MCP server: an agent (one tool, prompt in, answer out) and/or its function tools, served by
the SDK's ``MCPServer`` over stdio, streamable HTTP or the legacy HTTP+SSE transport::

    server = serve_agent(agent, name="helper", expose="both")
    await run_stdio(server)        # or: await run_http(server, port=8000), run_sse(server, ...)

Any MCP client (Claude Desktop, an IDE, another goagent-py agent through ``MCPStdio``) can then
call ``ask(prompt)`` and read the agent's answer, with progress notifications while it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import re
import secrets
import socket
import weakref
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from goagent_py._conversation import ConversationOwners
from goagent_py._describe import described, message_of
from goagent_py._prompt import to_messages
from goagent_py.errors import ConfigurationError, InvalidInputError
from goagent_py.events import AgentEnd, ToolExecutionStart, TurnStart
from goagent_py.mcp._sdk import require
from goagent_py.memory._clients import (
    ClientAgent,
    ClientLedger,
    check_forget_after,
    client_agent,
    client_key,
    clients_stored,
    forget_client,
    recall_key,
    sweeping,
    unkeyable,
)
from goagent_py.messages import ContentBlock, DocumentBlock, ImageBlock, TextBlock, ThinkingBlock
from goagent_py.tools import Tool

__all__ = ["http_app", "run_http", "run_sse", "run_stdio", "serve_agent", "sse_app"]

Expose = Literal["agent", "tools", "both"]
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

AgentFactory = Callable[[str], Any]
"""Builds the agent of one MCP session from its id (sync or async): ``serve_agent(factory)``."""


class _Conversations:
    """The agent each MCP session gets (docs/mcp.md, "One conversation per client").

    A session's conversation is a :class:`~goagent_py.Session` of the session's agent: the
    factory's agent for that session, or the served agent as that session gets it (a
    short-term memory keeping the session's own conversation in the served storage's kind,
    long-term memory scoped to the session unless ``shared_memory``; see
    :func:`goagent_py._conversation.client_agent`). An agent without short-term memory runs
    each ask on its own (no conversation). It lives as long as the SDK keeps the MCP session
    (a client's DELETE, a closed SSE stream, the SDK's idle timeout end it) and at most
    ``max_sessions`` are kept: past that, the least recently used idle one is dropped (its
    client's next ask reads its stored conversation again, or starts afresh in memory). What
    was opened for a session (a factory's agent, a storage) is closed when it goes. One ask of
    a session runs at a time; another waits for it. What the served agent keeps of a session
    (its stored conversation, its remembered facts) is deleted once the session has been idle
    ``forget_after`` seconds, or past ``max_kept`` sessions for the one idle longest, never
    while one of its asks runs (docs/mcp.md, "How long a session is kept").
    """

    def __init__(
        self,
        agent: Any,
        *,
        factory: bool,
        shared_memory: bool,
        max_sessions: int = 256,
        forget_after: float | None = None,
        max_kept: int = 10_000,
    ) -> None:
        self._agent = agent
        self._factory = factory
        self._shared_memory = shared_memory
        self.max_sessions = max_sessions
        # Served over stdio (run_stdio): one client for the process's life, so the served
        # agent is its agent as it is (its memory's storage: kept across restarts).
        self.one_client = False
        # By the SDK's connection object (weak: the SDK's end of a session ends its conversation).
        self._by_session: weakref.WeakKeyDictionary[Any, _Conversation] = (
            weakref.WeakKeyDictionary()
        )
        self._building = asyncio.Lock()
        # A factory's agent keeping another session's conversation or facts is refused.
        self._owners = ConversationOwners()
        # How many live conversations hold each thing to close (by id): a factory may give
        # several sessions one agent, closed only when the last of them goes.
        self._holders: dict[int, int] = {}
        # When each session of the served agent was last used (a factory's agents keep what
        # they store themselves: nothing here to forget).
        self.ledger = ClientLedger(forget_after=forget_after, max_kept=max_kept)
        self._met = False

    def check_many_clients(self) -> None:
        """Refuse, for a transport of many clients, a served memory that cannot keep a
        conversation per session."""
        memory = None if self._factory else self._agent.options.short_term_memory
        why = None if memory is None else unkeyable(memory)
        if why is not None:
            raise ConfigurationError(
                f"the served agent cannot keep a conversation per MCP session: {why}. Serve it "
                "over stdio (one client), or pass a factory, serve_agent(make_agent, name=...), "
                "where make_agent(session_id) returns an agent whose memory keeps that session's "
                "conversation"
            )

    async def of(self, ctx: Any) -> _Conversation:
        """The conversation of the MCP session ``ctx`` belongs to (made on its first ask)."""
        key = connection_of(ctx)
        async with self._building:
            found = self._by_session.pop(key, None)
            if found is None:
                session_id = _session_id(ctx)
                found = await self._made(session_id)
                found.key = client_key(session_id) if self._forgets else ""
                if found.holder is not None:  # the SDK's end of the session lets go of it
                    self._holders[id(found.holder)] = self._holders.get(id(found.holder), 0) + 1
                    weakref.finalize(key, self._release, found)
            self._by_session[key] = found  # most recently used last
            if found.key:
                await self._meet()
                self.ledger.hold(found.key)
                try:
                    await self._forget(self.ledger.due())
                except BaseException:
                    self.ledger.release(found.key)
                    raise
            idle = [k for k, c in self._by_session.items() if not c.lock.locked()]
            for old in idle[: max(0, len(self._by_session) - self.max_sessions)]:
                self._release(self._by_session.pop(old))
            return found

    async def _meet(self) -> None:
        """Put on the ledger, once, the sessions a server on this storage met before a restart
        (call it holding ``_building``)."""
        if not self._met:
            self._met = True
            self.ledger.met(await clients_stored(self._agent, "mcp"))

    async def sweep(self) -> None:
        """Forget the sessions due now, with no ask arriving (the HTTP app's periodic sweep)."""
        if not self._forgets:
            return
        async with self._building:
            await self._meet()
            await self._forget(self.ledger.due())

    def with_sweeps(self, app: Any) -> Any:
        """``app`` (an SDK transport's Starlette app) whose lifespan also sweeps the idle
        sessions (docs/mcp.md, "How long a session is kept"), when the served agent's are
        forgotten at all."""
        if not self._forgets:
            return app
        inner = app.router.lifespan_context

        @contextlib.asynccontextmanager
        async def lifespan(served: Any) -> AsyncIterator[Any]:
            async with inner(served) as state, sweeping(self.sweep, self.ledger, what="mcp"):
                yield state

        app.router.lifespan_context = lifespan
        return app

    @property
    def _forgets(self) -> bool:
        """Whether sessions are kept on the ledger: the served agent's, to many clients."""
        return not self._factory and not self.one_client

    def done(self, conversation: _Conversation) -> None:
        """An ask of ``conversation``'s session ended (its idle time starts)."""
        if conversation.key:
            self.ledger.release(conversation.key)

    async def _forget(self, keys: list[str]) -> None:
        """Delete what the served agent keeps of the sessions ``keys`` (none has an ask
        running): their conversations here and stored, their remembered facts."""
        if not keys:
            return
        gone = set(keys)
        for old in [k for k, c in self._by_session.items() if c.key in gone]:
            self._release(self._by_session.pop(old))
        for key in keys:
            try:
                if not await forget_client(
                    self._agent, key, protocol="mcp", shared_memory=self._shared_memory
                ):
                    self.ledger.seen(key)  # an ask of it runs on another server: kept
            except Exception as exc:  # the ask goes on; the next one tries the others
                _LOG.warning("mcp: the idle session %s could not be forgotten: %s", key, exc)

    def _release(self, conversation: _Conversation) -> None:
        """Let go of a conversation (dropped, or its session ended: once): what was opened for
        it is closed when no other live conversation holds it."""
        holder, conversation.holder = conversation.holder, None
        if holder is None:
            return
        left = self._holders.pop(id(holder), 1) - 1
        if left:
            self._holders[id(holder)] = left
        else:
            _close_later(holder.aclose)

    async def _made(self, session_id: str) -> _Conversation:
        from goagent_py.agent import Agent
        from goagent_py.session import Session

        if self._factory:
            built = self._agent(session_id)
            agent = await built if inspect.isawaitable(built) else built
            if not isinstance(agent, Agent):
                raise ConfigurationError(
                    f"the agent factory must return an Agent, got {type(agent).__name__}"
                )
            self._claim(session_id, agent)
            return _Conversation(Session(agent), agent)
        if self.one_client:  # stdio: one client, the served agent is its agent
            agent, holder = self._agent, None
        else:
            opened: ClientAgent = client_agent(
                self._agent, session_id, protocol="mcp", shared_memory=self._shared_memory
            )
            agent, holder = opened.agent, opened
        # Without short-term memory each ask is a run of its own, as the served agent's are.
        runner = agent if agent.options.short_term_memory is None else Session(agent)
        return _Conversation(runner, holder)

    def _claim(self, session_id: str, agent: Any) -> None:
        if self._owners.claim(session_id, agent.options.short_term_memory) is not None:
            raise ConfigurationError(
                "the agent factory returned an agent whose short-term memory keeps another MCP "
                "session's conversation: each session must get its own (e.g. storage keyed by "
                "the session id the factory is given), or every client would read the others' "
                "messages"
            )
        scope = None if self._shared_memory else recall_key(agent)
        if scope is not None and self._owners.claim_key(session_id, scope) is not None:
            raise ConfigurationError(
                "the agent factory returned an agent whose long-term memory recalls another MCP "
                "session's facts (the same memory and agent name): name each session's agent "
                "apart (long-term memory is scoped by the agent's name), or pass "
                "shared_memory=True to serve_agent to have every client's facts recalled for "
                "every other client"
            )


@dataclass(slots=True, eq=False)
class _Conversation:
    runner: Any  # a goagent_py.Session (a conversation), or an Agent (a run per ask)
    # What was opened for the session, closed (``aclose()``) when no conversation holds it:
    # a factory's agent, or the storage of the served agent's client (a ClientAgent).
    holder: Any
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    key: str = ""  # the session's name on the ledger (client_key), "" when not on it


_LOG = logging.getLogger(__name__)
_WARNED: list[bool] = []


def connection_of(ctx: Any) -> Any:
    """The SDK's object for the MCP session of ``ctx``: what tells one client from another.

    SDK 2.x makes a ``ServerSession`` per request; the per-client object is the
    ``mcp.server.connection.Connection`` behind it, which the tool context reaches only
    through a private attribute (``ServerSession._connection``; the public
    ``mcp.server.context.Context.connection`` is not what tools are given). This is the one
    place that reads it; ``tests/mcp/test_proto14_mcp_client_memory.py`` pins it. Without it (an
    SDK that changed it), the request's session: a conversation per ask, never one shared by
    two clients, and a warning says so once."""
    session = ctx.session
    found = getattr(session, "_connection", None)
    if found is None:
        if not _WARNED:
            _WARNED.append(True)
            _LOG.warning(
                "this MCP SDK gives tools no per-client connection (ServerSession._connection): "
                "each ask of a served agent with memory is a conversation of its own"
            )
        return session
    return found


def _session_id(ctx: Any) -> str:
    """The MCP session's id as its transport names it (the ``mcp-session-id`` header of
    streamable HTTP, the ``session_id`` of the legacy SSE transport), else a new random one
    (stdio, in-process, sessionless): what a session's stored conversation is keyed by."""
    found = getattr(connection_of(ctx), "session_id", None)
    request = getattr(ctx.request_context, "request", None)
    if not found:
        headers = getattr(request, "headers", None)
        found = headers.get("mcp-session-id") if headers is not None else None
    if not found:
        query = getattr(request, "query_params", None)
        found = query.get("session_id") if query is not None else None
    return str(found) if found else secrets.token_hex(16)


def _close_later(close: Callable[[], Any]) -> None:
    """Await ``close()`` (a factory agent's ``aclose``, a session storage's) on the running
    loop, when there is one."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return  # the process is ending: nothing to close on
    task = loop.create_task(close())
    _CLOSING.add(task)
    task.add_done_callback(_CLOSING.discard)


_CLOSING: set[asyncio.Task[Any]] = set()


async def _run_agent(agent: Any, prompt: str, progress: Any) -> str:
    """The answer of ``agent`` (an Agent, or a Session: a conversation) to ``prompt``;
    ``progress(message)`` is awaited at each turn and tool.

    The one place that knows how to run the agent and read its answer (its run API is moving).
    """
    answer = ""
    async for event in agent.stream(prompt):
        if isinstance(event, TurnStart):
            await progress(f"turn {event.iteration + 1}")
        elif isinstance(event, ToolExecutionStart):
            await progress(f"calling tool {event.call.name}")
        elif isinstance(event, AgentEnd):
            answer = event.result.text
    return answer


def _content(blocks: list[ContentBlock]) -> list[Any]:
    """Our content blocks as MCP content (images as images, the rest as text)."""
    import base64

    types: Any = require("mcp_types")
    out: list[Any] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            out.append(types.TextContent(type="text", text=block.text))
        elif isinstance(block, ImageBlock):
            data = base64.b64encode(block.data).decode()
            out.append(types.ImageContent(type="image", data=data, mime_type=block.media_type))
        elif isinstance(block, DocumentBlock):
            if block.media_type == "text/plain":
                text = block.data.decode(errors="replace")
            else:
                text = f"[document {block.title or ''} ({block.media_type}) omitted]"
            out.append(types.TextContent(type="text", text=text))
        elif isinstance(block, ThinkingBlock):
            continue  # the tool's reasoning is not its result
    return out or [types.TextContent(type="text", text="")]


def _forwarded_tool(tool: Tool) -> Any:
    """An SDK tool that lists ``tool``'s own JSON schema and runs ``tool.execute``."""
    base: Any = require("mcp.server.mcpserver.tools.base")
    meta: Any = require("mcp.server.mcpserver.utilities.func_metadata")
    exceptions: Any = require("mcp.server.mcpserver.exceptions")
    types: Any = require("mcp_types")

    async def _placeholder() -> None:
        """Never called: the subclass below runs the goagent-py tool."""

    class _Forwarded(base.Tool):  # type: ignore[misc]
        async def run(
            self, arguments: dict[str, Any], context: Any, convert_result: bool = False
        ) -> Any:
            try:
                blocks = await tool.execute(dict(arguments))
            except Exception as exc:
                # Sent back as an isError result; the exception's text is the tool's message.
                raise exceptions.ToolError(described(exc)) from exc
            return types.CallToolResult(content=_content(blocks))

    d = tool.definition
    return _Forwarded(
        fn=_placeholder,
        name=d.name,
        description=d.description,
        parameters=dict(d.parameters),
        fn_metadata=meta.func_metadata(_placeholder, structured_output=False),
        is_async=True,
    )


def serve_agent(
    agent: Any,
    *,
    name: str | None = None,
    expose: Expose = "agent",
    tool_name: str = "ask",
    description: str | None = None,
    instructions: str | None = None,
    shared_memory: bool = False,
    forget_after: float | None = 30 * 86400.0,
    max_kept_sessions: int = 10_000,
) -> Any:
    """Build an SDK ``MCPServer`` that serves ``agent``.

    Args:
        agent: the :class:`~goagent_py.Agent` to serve, or a factory called with each MCP
            session's id that returns the agent of that session (sync or async; e.g. with its
            own stored memory): each MCP session is then one conversation. An agent with
            short-term memory has one conversation per MCP session too, in its storage's kind
            (docs/mcp.md, "One conversation per client").
        name: the server's name (default: the agent's name, or "goagent-py"; required with a
            factory).
        expose: "agent" (one tool ``tool_name(prompt) -> answer``), "tools" (the agent's function
            tools one to one, with their own schemas), or "both".
        tool_name: the agent tool's name.
        description: the agent tool's description (default: says to send a task in plain text).
        instructions: the server's instructions for clients.
        shared_memory: recall every session's remembered facts in every other session (one
            long-term memory scope for all clients: one user's deployment). By default each
            session recalls its own only (over stdio, one client: the agent's own scope).
        forget_after: seconds an MCP session may stay idle (no ask) before what the served
            agent keeps of it is deleted: its stored conversation and its remembered facts
            (docs/mcp.md, "How long a session is kept"); None: kept however long. 30 days by
            default. Never while an ask of it runs; not over stdio (one client).
        max_kept_sessions: sessions kept at most; past it, the one idle longest is forgotten
            first (10,000 by default).

    Returns:
        An ``mcp.server.mcpserver.MCPServer``: run it with :func:`run_stdio` or :func:`run_http`,
        or connect to it in-process with ``mcp.Client(server)``.

    Raises:
        MissingExtraError: the ``mcp`` extra is not installed.
        ConfigurationError: a bad ``expose`` or tool name, an agent tool named like one of the
            agent's function tools, (``expose`` "tools" or "both") function tools behind an
            approval or a ``before_tool_call`` gate, which a served tool's call would skip, or
            a factory without ``name=`` or with ``expose`` other than "agent".
    """
    if expose not in ("agent", "tools", "both"):
        raise ConfigurationError(f"expose must be 'agent', 'tools' or 'both', got {expose!r}")
    from goagent_py.agent import Agent

    factory = not isinstance(agent, Agent)
    if factory:
        if not callable(agent):
            raise ConfigurationError(
                f"serve_agent takes an Agent or a factory of agents, got {type(agent).__name__}"
            )
        if not name or expose != "agent":
            raise ConfigurationError(
                "serve_agent with an agent factory needs name= and expose='agent' (the tools "
                "of agents not built yet cannot be listed)"
            )
    if not _NAME_RE.match(tool_name):
        raise ConfigurationError(f"invalid tool_name {tool_name!r}: use [A-Za-z0-9_-]{{1,64}}")
    mcpserver: Any = require("mcp.server.mcpserver")
    server_name = name or getattr(agent, "name", "") or "goagent-py"
    tools = list(agent.tools) if expose in ("tools", "both") else []
    if not isinstance(shared_memory, bool):
        raise ConfigurationError(f"shared_memory must be True or False, got {shared_memory!r}")
    check_forget_after(forget_after)
    if (
        isinstance(max_kept_sessions, bool)
        or not isinstance(max_kept_sessions, int)
        or max_kept_sessions < 1
    ):
        raise ConfigurationError(f"max_kept_sessions must be >= 1, got {max_kept_sessions!r}")
    conversations: _Conversations | None = None
    if (
        factory
        or agent.options.short_term_memory is not None
        or (agent.options.long_term_memory is not None and not shared_memory)
    ):
        conversations = _Conversations(
            agent,
            factory=factory,
            shared_memory=shared_memory,
            forget_after=forget_after,
            max_kept=max_kept_sessions,
        )
    if expose == "both" and any(t.definition.name == tool_name for t in tools):
        raise ConfigurationError(
            f"the agent has a tool named {tool_name!r}: pick another tool_name= for the agent"
        )
    gated = [] if factory else _gated(agent, tools)
    if gated:
        # A served tool runs tool.execute directly, outside any run: an MCP client's call
        # would skip the approval or gate the agent puts in front of it (review7c).
        raise ConfigurationError(
            f"the agent's tools {', '.join(map(repr, gated))} go through an approval or a "
            "before_tool_call gate, which an MCP client's call would skip: serve them with "
            "expose='agent' (the agent applies them), or serve an agent without them"
        )
    server = mcpserver.MCPServer(
        server_name,
        instructions=instructions,
        tools=[_forwarded_tool(t) for t in tools],
        log_level="WARNING",
    )
    if expose in ("agent", "both"):
        exceptions: Any = require("mcp.server.mcpserver.exceptions")

        async def ask(prompt: str, ctx: Any) -> str:
            if not _is_prompt(prompt):  # the agent would be run on nothing
                raise exceptions.ToolError(
                    "the prompt is empty: send the task or question in plain language"
                )
            step = 0

            async def progress(message: str) -> None:
                nonlocal step
                step += 1
                await ctx.report_progress(step, None, message)

            try:
                if conversations is None:  # no memory: each ask is a run of its own
                    return await _run_agent(agent, prompt, progress)
                conversation = await conversations.of(ctx)
                try:
                    async with conversation.lock:
                        return await _run_agent(conversation.runner, prompt, progress)
                finally:
                    conversations.done(conversation)
            except Exception as exc:
                raise exceptions.ToolError(f"the agent failed: {message_of(exc)}") from exc

        # The SDK finds the context parameter by its annotation, resolved at run time here.
        ask.__annotations__ = {"prompt": str, "ctx": mcpserver.Context, "return": str}
        server.add_tool(
            ask,
            name=tool_name,
            description=description
            or (
                f"Ask the agent {server_name!r}: send a task or question in plain language; it "
                "works on it (using its own tools) and answers in text."
            ),
            structured_output=False,
        )
    if conversations is not None:
        _SERVED[server] = conversations
    return server


# The conversations of each served agent's server: run_stdio says it has one client, the
# HTTP transports check its memory can keep one conversation per session.
_SERVED: weakref.WeakKeyDictionary[Any, _Conversations] = weakref.WeakKeyDictionary()


def _gated(agent: Any, tools: list[Tool]) -> list[str]:
    """The names of ``tools`` whose calls the agent puts behind an approval (its policy, or
    the tool's own ``requires_approval``/``external``) or a ``before_tool_call`` gate."""
    options = getattr(agent, "options", None)
    everything = options is not None and (
        getattr(options, "requires_approval", None) is not None
        or getattr(options, "before_tool_call", None) is not None
    )
    return [
        t.definition.name
        for t in tools
        if everything or getattr(t, "requires_approval", False) or getattr(t, "external", False)
    ]


async def run_stdio(server: Any) -> None:
    """Serve ``server`` on this process's stdin/stdout until the client disconnects.

    One client: a served agent (not a factory) with short-term memory keeps its conversation
    in that memory, its storage included (docs/mcp.md, "One conversation per client")."""
    conversations = _SERVED.get(server)
    if conversations is not None:
        conversations.one_client = True
    await server.run_stdio_async()


def _many_clients(server: Any) -> None:
    """Refuse to serve to many clients an agent that cannot keep a conversation per client."""
    conversations = _SERVED.get(server)
    if conversations is not None:
        conversations.check_many_clients()


def _sweeping(server: Any, app: Any) -> Any:
    """``app``, sweeping the idle sessions of ``server``'s served agent while it runs."""
    conversations = _SERVED.get(server)
    return app if conversations is None else conversations.with_sweeps(app)


_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def _security(host: str, allowed_hosts: Iterable[str]) -> Any:
    """The SDK's DNS-rebinding checks for a server bound to ``host``, on for every host.

    The SDK turns them on by itself only for a loopback ``host``: bound to ``0.0.0.0`` (or a
    LAN address) it answered any ``Host`` and ``Origin``, so a page in the user's browser
    could reach the agent under a rebound name. Accepted: localhost, ``host`` itself (unless
    a wildcard) and ``allowed_hosts``, on any port; an ``Origin``, when sent, of one of them.
    """
    security: Any = require("mcp.server.transport_security")
    names = ["127.0.0.1", "localhost", "[::1]"]
    for name in [host if host not in _WILDCARDS else "", *allowed_hosts]:
        name = name.strip().strip("[]").lower()
        if name:
            names.append(f"[{name}]" if ":" in name else name)
    names = list(dict.fromkeys(names))
    return security.TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*names, *(f"{n}:*" for n in names)],
        allowed_origins=[
            f"{scheme}://{n}{port}"
            for n in names
            for scheme in ("http", "https")
            for port in ("", ":*")
        ],
    )


def http_app(
    server: Any,
    *,
    path: str = "/mcp",
    host: str = "127.0.0.1",
    allowed_hosts: Iterable[str] = (),
) -> Any:
    """The streamable HTTP transport for ``server``, as an ASGI app (run it with its lifespan).

    Args:
        server: the server built by :func:`serve_agent` (or any SDK ``MCPServer``).
        path: the endpoint's path.
        host: the address it will be served on.
        allowed_hosts: names clients reach it by besides localhost and ``host`` (a LAN or
            public name, needed when ``host`` is ``0.0.0.0``): any other ``Host`` gets 421, a
            foreign ``Origin`` 403, so a page in your browser cannot make the agent run. The
            transport has no auth: keep it on 127.0.0.1 or behind a proxy that authenticates
            (docs/security.md).

    Raises:
        ConfigurationError: a bad path, or a served agent whose short-term memory cannot keep
            a conversation per session (docs/mcp.md, "One conversation per client").
    """
    if not path.startswith("/"):
        raise ConfigurationError(f"the HTTP path must start with '/', got {path!r}")
    _many_clients(server)
    app = server.streamable_http_app(
        streamable_http_path=path, host=host, transport_security=_security(host, allowed_hosts)
    )
    return _sweeping(server, app)


async def run_http(
    server: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    allowed_hosts: Iterable[str] = (),
    sock: socket.socket | None = None,
) -> None:
    """Serve ``server`` over streamable HTTP at ``http://host:port/path`` until cancelled; see
    :func:`http_app`. ``sock``: a socket already listening, served instead of binding
    ``host:port`` (bind it first to know the port ``port=0`` got, or to fail before announcing)."""
    app = http_app(server, path=path, host=host, allowed_hosts=allowed_hosts)
    await _serve(app, host, port, sock)


def sse_app(
    server: Any,
    *,
    path: str = "/sse",
    message_path: str = "/messages/",
    host: str = "127.0.0.1",
    allowed_hosts: Iterable[str] = (),
) -> Any:
    """The legacy HTTP+SSE transport (MCP 2024-11-05) for ``server``, as an ASGI app.

    A client opens ``GET path`` (an event stream whose first event names the message
    endpoint) and posts its JSON-RPC messages to ``message_path?session_id=...``. Many
    deployed clients still speak only this transport; new ones should use :func:`run_http`.

    Args:
        server: the server built by :func:`serve_agent` (or any SDK ``MCPServer``).
        path: the event stream's path.
        message_path: where clients post their messages.
        host: the address it will be served on.
        allowed_hosts: names clients reach it by besides localhost and ``host``; the Host and
            Origin checks are those of :func:`http_app`, whatever the host.

    Raises:
        ConfigurationError: a bad path, or a served agent whose short-term memory cannot keep
            a conversation per session (docs/mcp.md, "One conversation per client").
    """
    if not path.startswith("/") or not message_path.startswith("/"):
        raise ConfigurationError(
            f"SSE paths must start with '/', got path={path!r}, message_path={message_path!r}"
        )
    _many_clients(server)
    app = server.sse_app(
        sse_path=path,
        message_path=message_path,
        host=host,
        transport_security=_security(host, allowed_hosts),
    )
    return _sweeping(server, app)


async def run_sse(
    server: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/sse",
    allowed_hosts: Iterable[str] = (),
    sock: socket.socket | None = None,
) -> None:
    """Serve ``server`` over the legacy HTTP+SSE transport at ``http://host:port/path`` (the
    messages go to ``/messages/``) until cancelled; see :func:`sse_app`. ``sock``: as for
    :func:`run_http`."""
    app = sse_app(server, path=path, host=host, allowed_hosts=allowed_hosts)
    await _serve(app, host, port, sock)


async def _serve(app: Any, host: str, port: int, sock: socket.socket | None) -> None:
    """Run ``app`` under uvicorn on ``sock`` when given, else on ``host:port``."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    await server.serve(sockets=None if sock is None else [sock])


def _is_prompt(text: object) -> bool:
    """Whether ``text`` may start a run, by the rule every run's prompt follows
    (goagent_py/_prompt.py): not empty, not only whitespace."""
    try:
        to_messages(text, "ask")  # type: ignore[arg-type]
    except (InvalidInputError, ConfigurationError):
        return False
    return True
