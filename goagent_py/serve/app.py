"""The ASGI app: threads, runs streamed as AG-UI events over SSE, the page, OpenAI-compatible
endpoints. See :func:`create_app`."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
import re
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal

from goagent_py.agent import Agent
from goagent_py.errors import ConfigurationError, GoAgentError, MissingExtraError
from goagent_py.events import ToolExecutionEnd
from goagent_py.memory.base import LongTermMemoryProtocol
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.serve._agui import AguiMapper
from goagent_py.serve._auth import Auth, NoAuth
from goagent_py.serve._threads import ThreadStore, session_key
from goagent_py.session import Session

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.types import ASGIApp, Receive, Scope, Send

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
_STATIC = {"app.js": "text/javascript", "app.css": "text/css", "icon.svg": "image/svg+xml"}
_COOKIE = "goagent_session"


@dataclass(frozen=True, slots=True)
class ThreadContext:
    """What an agent factory gets: whose thread it is and the memory bound to it.

    Attributes:
        user: the authenticated user.
        thread_id: the thread's id.
        short_term_memory: the thread's conversation in the server's SQLite file; pass it as
            the agent's ``short_term_memory``.
    """

    user: str
    thread_id: str
    short_term_memory: ShortTermMemory

    @property
    def memory_scope(self) -> str:
        """The agent name to give this user's agents: long-term memory is scoped by the
        agent's name, so every thread of a user shares memories and users never do."""
        return memory_scope(self.user)


def memory_scope(user: str) -> str:
    """The long-term memory scope (agent name) of ``user``."""
    if re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", user):
        return f"user-{user}"
    return "user-" + hashlib.sha256(user.encode()).hexdigest()[:32]


AgentFactory = Callable[[ThreadContext], Agent | Awaitable[Agent]]
"""Builds the agent of one (user, thread); share the provider, embedder and stores."""


class HttpError(GoAgentError):
    """A request refused with ``status`` and a message for the client."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(f"{status}: {message}")

    def __reduce__(self) -> Any:
        return self._reduce_with(self.status, self.message)


@dataclass
class _Run:
    run_id: str
    user: str
    thread_id: str
    queue: asyncio.Queue[dict[str, Any] | None]
    mapper: AguiMapper
    task: asyncio.Task[None] | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    # An abort asked for before the session's run began (a client gone before the first
    # frame): Session.abort is a no-op then, so _drive delivers it at the run's first event.
    abort_reason: str = ""
    abort_sent: bool = False


@dataclass
class _Live:
    session: Session
    storage: SQLiteStorage
    run: _Run | None = None


def _require_starlette() -> None:
    try:
        import sse_starlette  # noqa: F401
        import starlette  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError(exc.name or "starlette", "serve", feature="serve") from exc


class _Server:
    def __init__(
        self,
        factory: AgentFactory,
        storage_path: str,
        auth: Auth,
        max_body: int,
        cookie_ttl: float,
        model_name: str,
        busy: str = "refuse",
        long_term_memory: LongTermMemoryProtocol | None = None,
    ) -> None:
        self.long_term_memory = long_term_memory
        self.busy = busy
        self.max_live = 256
        self.factory = factory
        self.storage_path = storage_path
        self.auth = auth
        self.max_body = max_body
        self.cookie_ttl = cookie_ttl
        self.model_name = model_name
        self.threads = ThreadStore(storage_path)
        self.live: dict[tuple[str, str], _Live] = {}
        self.runs: dict[str, _Run] = {}
        self.cookies: dict[str, tuple[str, float]] = {}
        self._building = asyncio.Lock()

    # -- who is asking -------------------------------------------------------------------

    def user(self, request: Request) -> str:
        headers = {k.lower(): v for k, v in request.headers.items()}
        client = request.client.host if request.client else ""
        token = request.cookies.get(_COOKIE) or ""
        bearer = headers.get("authorization", "")
        if not token and bearer.lower().startswith("bearer "):
            token = bearer[7:].strip() if bearer[7:].strip() in self.cookies else ""
        if token:
            found = self.cookies.get(token)
            if found is None:
                raise HttpError(401, "unknown session; log in again")
            user, deadline = found
            if time.time() >= deadline:
                del self.cookies[token]
                raise HttpError(401, "session expired; log in again")
            return user
        found_user = self.auth.authenticate(headers, client)
        if found_user is None:
            if isinstance(self.auth, NoAuth):
                raise HttpError(403, "this server accepts local clients only")
            raise HttpError(401, "missing, wrong or expired credentials")
        return found_user

    async def body(self, request: Request) -> dict[str, Any]:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise HttpError(415, "send JSON (Content-Type: application/json)")
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            raise HttpError(413, f"body larger than {self.max_body} bytes")
        raw = bytearray()
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > self.max_body:
                raise HttpError(413, f"body larger than {self.max_body} bytes")
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise HttpError(400, f"invalid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise HttpError(400, "the body must be a JSON object")
        return data

    # -- threads and sessions ------------------------------------------------------------

    async def thread(self, user: str, thread_id: str) -> dict[str, Any]:
        found = await self.threads.get(user, thread_id)
        if found is None:
            raise HttpError(404, "no such thread")
        return found

    async def live_of(self, user: str, thread_id: str) -> _Live:
        key = (user, thread_id)
        async with self._building:
            live = self.live.get(key)
            if live is None:
                storage = SQLiteStorage(self.storage_path, session_id=session_key(user, thread_id))
                memory = ShortTermMemory(storage)
                agent = self.factory(ThreadContext(user, thread_id, memory))
                if inspect.isawaitable(agent):
                    agent = await agent
                if not isinstance(agent, Agent):
                    raise ConfigurationError("the agent factory must return an Agent")
                live = _Live(Session(agent), storage)
                self.live[key] = live
            else:  # most recently used last, for _evict
                self.live[key] = self.live.pop(key)
            return live

    async def drop(self, user: str, thread_id: str) -> None:
        live = self.live.pop((user, thread_id), None)
        if live is not None:
            if live.run is not None:
                self._abort(live, live.run, "thread deleted")
                await live.run.done.wait()
            await live.storage.aclose()

    async def close(self) -> None:
        for user, thread_id in list(self.live):
            await self.drop(user, thread_id)
        self.threads.close()

    # -- runs ----------------------------------------------------------------------------

    async def start_run(self, user: str, thread_id: str, text: str) -> _Run:
        live = await self.live_of(user, thread_id)
        while live.run is not None:
            if self.busy == "refuse":
                raise HttpError(409, "a run is in progress in this thread; stop or steer it")
            # busy="interrupt": the new message wins; the old run ends aborted (and stored).
            current = live.run
            self._abort(live, current, "interrupted by a new message")
            await current.done.wait()
        run_id = "run_" + secrets.token_hex(8)
        run = _Run(run_id, user, thread_id, asyncio.Queue(), AguiMapper(thread_id, run_id))
        live.run = run
        self.runs[run_id] = run
        run.task = asyncio.create_task(self._drive(live, run, text))
        return run

    async def _drive(self, live: _Live, run: _Run, text: str) -> None:
        put = run.queue.put_nowait
        put(run.mapper.started())
        durations: dict[str, float] = {}
        try:
            async for event in live.session.stream(text):
                if run.abort_reason and not run.abort_sent:
                    self._abort(live, run, run.abort_reason)
                if isinstance(event, ToolExecutionEnd):
                    durations[event.result.call.id] = round(event.result.duration, 6)
                for item in run.mapper.map(event):
                    put(item)
        except Exception as exc:  # the client gets it as RUN_ERROR; the server goes on
            put(run.mapper.error(f"{type(exc).__name__}: {exc}", type(exc).__name__))
        finally:
            live.run = None
            self.runs.pop(run.run_id, None)
            await self.threads.record_durations(run.user, run.thread_id, durations)
            await self.threads.update(run.user, run.thread_id)
            put(None)
            run.done.set()
            await self._evict()

    async def _evict(self) -> None:
        # Each live thread holds a session and a SQLite connection: keep the most recently
        # used ones; an evicted thread is rebuilt from storage on its next request.
        idle = [key for key, live in self.live.items() if live.run is None]
        for key in idle[: max(0, len(self.live) - self.max_live)]:
            live = self.live.pop(key)
            await live.storage.aclose()

    async def events(self, run: _Run) -> AsyncIterator[dict[str, Any]]:
        """The run's AG-UI events; leaving early (a closed tab) aborts the run."""
        finished = False
        try:
            while True:
                item = await run.queue.get()
                if item is None:
                    finished = True
                    return
                yield item
        finally:
            if not finished:
                self.stop(run)

    def stop(self, run: _Run) -> bool:
        live = self.live.get((run.user, run.thread_id))
        if live is None or live.run is not run:
            return False
        self._abort(live, run, "stopped by the client")
        return True

    @staticmethod
    def _abort(live: _Live, run: _Run, reason: str) -> None:
        run.abort_reason = run.abort_reason or reason
        if live.session.state.running and not run.abort_sent:
            run.abort_sent = True
            live.session.abort("now", reason=run.abort_reason)


class ServeApp:
    """The ASGI app :func:`create_app` returns: Host and Origin checks and security headers
    around the routes. ``await app.aclose()`` ends runs and closes the storage (done at the
    ASGI lifespan shutdown too)."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str], server: _Server) -> None:
        self.app = app
        self.hosts = hosts
        self.server = server

    async def aclose(self) -> None:
        """Abort running runs and close every connection."""
        await self.server.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        name = name.strip("[]").lower()
        if name not in self.hosts:
            await _send_error(send, 421, f"unexpected Host {host!r}")
            return
        origin = headers.get("origin")
        if scope["method"] not in ("GET", "HEAD") and origin is not None:
            scheme = scope.get("scheme", "http")
            if origin != f"{scheme}://{host}":
                await _send_error(send, 403, f"cross-origin request from {origin!r} refused")
                return

        async def secure(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                extra = [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"x-frame-options", b"DENY"),
                ]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, secure)


async def _send_error(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(body)),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


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
) -> ServeApp:
    """An ASGI app that serves agents built per (user, thread) by ``agent_factory``.

    Args:
        agent_factory: builds the agent of a thread from a :class:`ThreadContext` (sync or
            async); give the agent ``context.short_term_memory``.
        storage_path: the SQLite file of threads and conversations (the server owns history).
        auth: a :class:`~goagent_py.serve.NoAuth` (default: local clients only),
            :class:`~goagent_py.serve.TokenAuth`, :class:`~goagent_py.serve.UsersFileAuth` or
            :class:`~goagent_py.serve.TrustedProxyAuth`.
        allowed_hosts: Host names accepted besides localhost (the public name when served
            behind a proxy or on a LAN address).
        max_body: the largest JSON body accepted, in bytes (413 above).
        cookie_ttl: seconds a login cookie lasts.
        model_name: the model id ``/v1/models`` lists.
        busy: a message sent while the thread's run is going: "refuse" it with 409 (steer
            instead), or "interrupt" the run (abort it, then run the new message).
        long_term_memory: the long-term memory your agents share, to let users search and
            forget their memories (``/api/memories``); give the agents
            ``name=context.memory_scope`` so each user has their own.

    Raises:
        MissingExtraError: starlette or sse-starlette is missing (``goagent-py[serve]``).
    """
    _require_starlette()
    from starlette.applications import Starlette
    from starlette.routing import Route

    from goagent_py.serve import _routes

    if busy not in ("refuse", "interrupt"):
        raise ConfigurationError(f"busy={busy!r}: use 'refuse' or 'interrupt'")
    server = _Server(
        agent_factory,
        storage_path,
        auth or NoAuth(),
        max_body,
        cookie_ttl,
        model_name,
        busy,
        long_term_memory,
    )
    routes = [Route(path, fn, methods=methods) for path, fn, methods in _routes.table(server)]

    @contextlib.asynccontextmanager
    async def lifespan(app: object) -> AsyncIterator[None]:
        yield
        await server.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    hosts = frozenset({"127.0.0.1", "localhost", "::1", *(h.lower() for h in allowed_hosts)})
    return ServeApp(app, hosts, server)


def static_file(name: str) -> tuple[bytes, str]:
    """A file of the page shipped in the package, with its media type."""
    if name == "index.html":
        media = "text/html; charset=utf-8"
    elif name in _STATIC:
        media = _STATIC[name] + "; charset=utf-8"
    else:
        raise HttpError(404, "no such file")
    return resources.files("goagent_py.serve").joinpath("static", name).read_bytes(), media
