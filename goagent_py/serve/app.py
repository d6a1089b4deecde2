"""The ASGI app: threads, runs streamed as AG-UI events over SSE, the page, OpenAI-compatible
endpoints. See :func:`create_app`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Literal

from goagent_py._http_guard import LOCAL_HOSTS, refusal, send_json
from goagent_py.errors import ConfigurationError, MissingExtraError
from goagent_py.memory.base import LongTermMemoryProtocol
from goagent_py.serve._auth import Auth, NoAuth, is_loopback_peer
from goagent_py.serve._server import (
    LOCAL_ONLY,
    AgentFactory,
    HttpError,
    Server,
    ThreadContext,
    error_body,
    memory_scope,
)

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from goagent_py.serve._routes import Endpoint

__all__ = [
    "AgentFactory",
    "HttpError",
    "ServeApp",
    "ThreadContext",
    "create_app",
    "memory_scope",
]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

_SECURITY_HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
)


RUNS = "/api/threads/{thread_id:str}/runs"
# The routes of a turn (each a POST): ServeApp calls them directly.
_HOT = frozenset({RUNS, "/v1/chat/completions", "/v1/responses"})


def _require_starlette() -> None:
    try:
        import ag_ui  # noqa: F401
        import jsonschema  # noqa: F401
        import starlette  # noqa: F401
    except ImportError as exc:
        package = {"ag_ui": "ag-ui-protocol"}.get(exc.name or "", exc.name or "starlette")
        raise MissingExtraError(package, "serve", feature="serve") from exc


class ServeApp:
    """The ASGI app :func:`create_app` returns: Host and Origin checks and security headers
    around the routes. ``await app.aclose()`` ends runs and closes the storage (done at the
    ASGI lifespan shutdown too)."""

    def __init__(
        self,
        app: ASGIApp,
        hosts: frozenset[str],
        server: Server,
        hot: Mapping[str, Endpoint] | None = None,
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.server = server
        # The streaming routes, called without Starlette's router and middlewares (issue 36:
        # ~35% of the server's CPU per turn went through them, and they do nothing for these
        # routes): path template -> endpoint.
        hot = hot or {}
        self._runs = hot.get(RUNS)
        self._v1 = {path: fn for path, fn in hot.items() if path.startswith("/v1/")}

    async def aclose(self) -> None:
        """Abort running runs and close every connection."""
        await self.server.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if isinstance(self.server.auth, NoAuth):
            # Without auth the socket's peer address is the only credential: checked first, on
            # every request (the page too), never from a header or a cookie (issue 29).
            client = scope.get("client")
            if not is_loopback_peer(client[0] if client else None):
                await _send_error(scope, send, 403, LOCAL_ONLY)
                return
        refused = refusal(scope, self.hosts)  # Host and Origin (_http_guard.py)
        if refused is not None:
            await _send_error(scope, send, *refused)
            return
        hot = self._hot(scope)
        if hot is not None:
            await _call(hot[0], {**scope, "path_params": hot[1]}, receive, send)
            return

        async def secure(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), *_SECURITY_HEADERS]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, secure)

    def _hot(self, scope: Scope) -> tuple[Endpoint, dict[str, str]] | None:
        """The streaming route ``scope`` asks for and its path parameters, or None (anything
        else, a mounted app included, goes through Starlette)."""
        if scope["method"] != "POST" or scope.get("root_path"):
            return None
        path: str = scope["path"]
        if path.startswith("/v1/"):
            fn = self._v1.get(path)
            return None if fn is None else (fn, {})
        if self._runs is not None and path.startswith("/api/threads/") and path.endswith("/runs"):
            thread_id = path[len("/api/threads/") : -len("/runs")]
            if thread_id and "/" not in thread_id:  # Starlette's {thread_id:str}
                return self._runs, {"thread_id": thread_id}
        return None


async def _call(endpoint: Endpoint, scope: Scope, receive: Receive, send: Send) -> None:
    """A route's endpoint as Starlette's router calls it, with what its middlewares do for it:
    an unexpected error is a plain 500 and goes on to the server (which logs it); the security
    headers go into the response's own."""
    from starlette.requests import Request

    try:
        response = await endpoint(Request(scope, receive, send))
    except Exception:
        await send(
            {
                "type": "http.response.start",
                "status": 500,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", b"21"),
                    *_SECURITY_HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": b"Internal Server Error"})
        raise
    response.raw_headers = [*response.raw_headers, *_SECURITY_HEADERS]
    await response(scope, receive, send)


async def _send_error(scope: Scope, send: Send, status: int, message: str) -> None:
    status, data = error_body(status, message, path=scope.get("path", ""))
    await send_json(send, status, data)


def create_app(
    agent_factory: AgentFactory,
    *,
    storage_path: str,
    auth: Auth | None = None,
    allowed_hosts: tuple[str, ...] = (),
    max_body: int = 1 << 20,
    cookie_ttl: float = 12 * 3600,
    model_name: str = "goagent",
    busy: Literal["refuse", "interrupt"] = "refuse",
    long_term_memory: LongTermMemoryProtocol | None = None,
    client_tool_timeout: float = 600.0,
    max_parked_runs: int = 16,
    body_timeout: float = 60.0,
) -> ServeApp:
    """An ASGI app that serves agents built per (user, thread) by ``agent_factory``.

    Args:
        agent_factory: builds the agent of a thread from a :class:`ThreadContext` (sync or
            async); give the agent ``context.short_term_memory``.
        storage_path: the SQLite file of threads and conversations (the server owns history).
        auth: a :class:`~goagent_py.serve.NoAuth` (default: loopback peers only, checked on
            every request),
            :class:`~goagent_py.serve.TokenAuth`, :class:`~goagent_py.serve.UsersFileAuth` or
            :class:`~goagent_py.serve.TrustedProxyAuth`.
        allowed_hosts: Host names accepted besides localhost (the public name when served
            behind a proxy or on a LAN address).
        max_body: the largest JSON body accepted, in bytes (413 above).
        cookie_ttl: seconds a login session (cookie) lasts at most; it ends earlier when the
            token that opened it expires. Sessions are kept in ``storage_path``.
        model_name: the model id ``/v1/models`` lists.
        busy: a message sent while the thread's run is going: "refuse" it with 409 (steer
            instead), or "interrupt" the run (abort it, then run the new message).
        long_term_memory: the long-term memory your agents share, to let users search and
            forget their memories (``/api/memories``); give the agents
            ``name=context.memory_scope`` so each user has their own.
        client_tool_timeout: seconds a run waits for an OpenAI client to send the results of
            its own tools (``tools`` in a ``/v1`` request) before those calls fail with an error
            the model reads, and the run goes on without the client.
        max_parked_runs: runs one user may have waiting for their tools' results at once
            (one per thread); past it, the run that has waited longest is ended, and results
            sent for it later get a 409 that says so.
        body_timeout: seconds a request's JSON body may take to arrive in full (408 past it;
            uvicorn itself has no read timeout for a body).

    Raises:
        MissingExtraError: starlette, ag-ui-protocol or jsonschema is missing
            (``goagent-py[serve]``).
    """
    _require_starlette()
    from starlette.applications import Starlette
    from starlette.routing import Route

    # The AG-UI mapping (ag-ui-protocol and pydantic's models) loads with the app, not on the
    # first run: under load that import held every request of the first second (issue 36).
    # So does the messages' JSON adapter, which reading a conversation builds on first use.
    from goagent_py.messages import messages_from_json
    from goagent_py.serve import _agui, _routes

    del _agui
    messages_from_json(b"[]")

    if busy not in ("refuse", "interrupt"):
        raise ConfigurationError(f"busy={busy!r}: use 'refuse' or 'interrupt'")
    if not isinstance(client_tool_timeout, int | float) or not client_tool_timeout > 0:
        raise ConfigurationError(
            f"client_tool_timeout={client_tool_timeout!r}: give a number of seconds above 0"
        )
    if not isinstance(body_timeout, int | float) or not body_timeout > 0:
        raise ConfigurationError(f"body_timeout={body_timeout!r}: give a number of seconds above 0")
    if isinstance(max_parked_runs, bool) or not isinstance(max_parked_runs, int):
        max_parked_runs = 0
    if max_parked_runs < 1:
        raise ConfigurationError(f"max_parked_runs={max_parked_runs!r}: give a number above 0")
    server = Server(
        agent_factory,
        storage_path,
        auth or NoAuth(),
        max_body,
        cookie_ttl,
        model_name,
        busy,
        long_term_memory,
    )
    server.client_tool_timeout = float(client_tool_timeout)
    server.max_parked_runs = max_parked_runs
    server.body_timeout = float(body_timeout)
    table = _routes.table(server)
    routes = [Route(path, fn, methods=methods) for path, fn, methods in table]
    hot = {path: fn for path, fn, _ in table if path in _HOT}

    @contextlib.asynccontextmanager
    async def lifespan(app: object) -> AsyncIterator[None]:
        yield
        await server.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    hosts = LOCAL_HOSTS | {h.lower() for h in allowed_hosts}
    return ServeApp(app, hosts, server, hot)
