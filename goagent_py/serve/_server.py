"""The server's state behind the routes: who is asking, the live sessions of threads, the runs
and their AG-UI event queues, login sessions (kept with the threads in SQLite).

The routes (:mod:`goagent_py.serve._routes`) and the ASGI app (:mod:`goagent_py.serve.app`)
both build on this module; it imports neither.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import inspect
import itertools
import json
import logging
import re
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol

from goagent_py._conversation import conversation_key
from goagent_py._prompt import to_messages
from goagent_py.agent import Agent
from goagent_py.approvals import ToolDecision, answered_at, record_of
from goagent_py.errors import ApprovalError, ConfigurationError, GoAgentError, InvalidInputError
from goagent_py.events import (
    AgentEnd,
    AgentEvent,
    ToolExecutionEnd,
)
from goagent_py.memory.base import LongTermMemoryProtocol
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.serve._approvals import abandoned, auto_decisions, check_against, waiting_calls
from goagent_py.serve._auth import Auth, Login, NoAuth, RevocableAuth
from goagent_py.serve._threads import ThreadStore, session_key
from goagent_py.session import Session

_log = logging.getLogger("goagent_py.serve")

if TYPE_CHECKING:
    from starlette.requests import Request

    from goagent_py.serve._agui import AguiMapper

__all__ = [
    "COOKIE",
    "LOCAL_ONLY",
    "Affinity",
    "AgentFactory",
    "HttpError",
    "Live",
    "Run",
    "Server",
    "ThreadContext",
    "error_body",
    "memory_scope",
    "static_file",
]

COOKIE = "goagent_session"
LOCAL_ONLY = (
    "this server has no auth and serves this machine only (loopback peers); to reach it from "
    "elsewhere restart it with --auth token, users or proxy"
)
_STATIC = {"app.js": "text/javascript", "app.css": "text/css", "icon.svg": "image/svg+xml"}


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

    def __init__(self, status: int, message: str, *, code: str | None = None) -> None:
        self.status = status
        self.message = message
        self.code = code  # the OpenAI error code under /v1 (None: the status's own)
        super().__init__(f"{status}: {message}")

    def __reduce__(self) -> Any:
        return self._reduce_with(self.status, self.message, code=self.code)


def prompt_text(text: object, refusal: str) -> str:
    """``text`` as a run's prompt, checked by the rule every run's prompt follows
    (goagent_py/_prompt.py); anything else, an empty or whitespace-only text included, is a
    400 with ``refusal``, before a thread is made or a title stored."""
    if isinstance(text, str):
        try:
            to_messages(text, "the message")
        except InvalidInputError:
            pass
        else:
            return text
    raise HttpError(400, refusal)


# Why a parked run ended early (Server.park): the message of the 409 its late results get.
PARKED_DROPPED = (
    "the run that waited for these tool results was ended: more than {limit} runs of yours "
    "waited for your tools' results at once (the server's max_parked_runs); send the message "
    "again"
)


class Affinity(Protocol):
    """Which worker process a thread's run belongs to, under ``serve --workers N``
    (implemented by :class:`goagent_py.serve._cluster.Cluster`; None in one process)."""

    def check(self, user: str, thread_id: str) -> None:
        """Raise when another worker runs the thread (the request goes there)."""

    def claim(self, user: str, thread_id: str, busy: str) -> None:
        """Take the thread for a run of this worker, or raise (``busy``: the 409's message)."""

    def release(self, user: str, thread_id: str) -> None:
        """Let go of the thread after its run."""

    def holder(self, user: str, thread_id: str) -> int | None:
        """The process of another worker that runs the thread, or None."""

    def relay(self, user: str, event: dict[str, Any]) -> None:
        """Send a change of ``user``'s threads to the other workers' change streams."""

    def others(self) -> list[int]:
        """The other workers to ask about a run this one does not know."""


class RunEvents:
    """A run's AG-UI events, kept for the run's life (``None`` ends them): its own stream
    reads them as they come (:meth:`get`, :meth:`take`), and a stream that follows the run
    from another tab reads them from the start (:meth:`follow`), so both see one run.

    The run's :class:`~goagent_py.serve._agui.AguiMapper` puts them (this is its sink): whole
    events with :meth:`put_nowait`, deltas with :meth:`put_delta`. Consecutive deltas of one
    message (or one call's arguments) that nobody has read yet are one event, their deltas
    joined: a client gets the same text in fewer events (issue 36: each event was a dict, a
    JSON encoding and a frame), and a delta that joins builds no event at all. An event once
    read, by any reader, is never changed. The part of ``asyncio.Queue`` the OpenAI streams use
    (``put_nowait``, ``get``, ``get_nowait``, ``empty``) reads as the run's own stream.
    """

    def __init__(self) -> None:
        self._log: list[dict[str, Any] | None] = []
        # The last event's deltas while nobody has read it (None: it is not open to joins),
        # what built it, and its target (the message or call id).
        self._pieces: list[str] | None = None
        self._make: Callable[[str, str], dict[str, Any]] | None = None
        self._target = ""
        self._read = 0  # the run's own stream has read the events before this one
        self._sealed = 0  # the events before this one were read: never joined into
        self._ready = asyncio.Event()

    def put_nowait(self, item: dict[str, Any] | None) -> None:
        """Add a whole event (None: the run's end)."""
        if self._pieces is not None:
            self._seal()
        self._log.append(item)
        if not self._ready.is_set():
            self._ready.set()

    def put_delta(
        self, make: Callable[[str, str], dict[str, Any]], target: str, delta: str
    ) -> None:
        """Add a delta of ``target`` (``make(target, delta)`` is its event): joined into the
        last event when that is one of ``make``'s for ``target`` nobody has read yet."""
        pieces = self._pieces
        if pieces is not None and make is self._make and target == self._target:
            pieces.append(delta)
            return
        self.put_nowait(make(target, delta))
        self._pieces, self._make, self._target = [delta], make, target

    def _seal(self) -> None:
        """The events so far as read: the last one's deltas joined, nothing joined into it."""
        pieces = self._pieces
        if pieces is not None:
            self._pieces = None
            if len(pieces) > 1:
                assert self._make is not None
                self._log[-1] = self._make(self._target, "".join(pieces))
        self._sealed = len(self._log)

    def empty(self) -> bool:
        return self._read >= len(self._log)

    def ended(self) -> bool:
        """Whether the run's end is among its events."""
        return bool(self._log) and self._log[-1] is None

    def get_nowait(self) -> dict[str, Any] | None:
        if self._read >= len(self._log):
            raise asyncio.QueueEmpty
        if self._read >= self._sealed:
            self._seal()
        item = self._log[self._read]
        self._read += 1
        return item

    async def get(self) -> dict[str, Any] | None:
        await self.get_ready()
        return self.get_nowait()

    async def get_ready(self) -> None:
        """Wait until the run's own stream has an event to read."""
        while self._read >= len(self._log):
            await self._wait()

    def take(self) -> list[dict[str, Any] | None]:
        """Every event the run's own stream has not read yet (the end, None, included)."""
        # Sealed whatever this reads: a follower may have read (and sealed) further than this
        # stream, and the events after that are still open to joins.
        self._seal()
        taken = self._log[self._read :]
        self._read = len(self._log)
        return taken

    async def _wait(self) -> None:
        # One event for every reader: a reader clears it only when it has read everything,
        # and a set wakes every reader waiting then.
        self._ready.clear()
        await self._ready.wait()

    async def follow(self) -> AsyncIterator[list[dict[str, Any]]]:
        """Every event of the run from its first, in batches as they are ready, until its
        end (a reader from elsewhere: leaving early does nothing to the run)."""
        at = 0
        while True:
            while at >= len(self._log):
                await self._wait()
            self._seal()
            batch = self._log[at:]
            at = len(self._log)
            if batch[-1] is None:
                if len(batch) > 1:
                    yield batch[:-1]  # type: ignore[misc]
                return
            yield batch  # type: ignore[misc]


@dataclass(eq=False)  # one run is one run (its own stream's mark among its readers)
class Run:
    run_id: str
    user: str
    thread_id: str
    queue: RunEvents
    mapper: AguiMapper
    task: asyncio.Task[None] | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    # An abort asked for before the session's run began (a client gone before the first
    # frame): Session.abort is a no-op then, so _drive delivers it at the run's first event.
    abort_reason: str = ""
    abort_sent: bool = False
    # Steers this run never took (it was stopped, failed or waits for decisions): told to the
    # client before the run's end, never kept for a later turn (docs/serve.md, "Steering").
    not_taken: list[str] = field(default_factory=list)
    # Waiting for an OpenAI client to run its own tools: the response that saw the calls has
    # ended, the run has not (the next request's tool results continue it).
    parked: bool = False
    waiting_for: list[str] = field(default_factory=list)  # the client's call ids, when parked
    parked_order: int = 0  # when it last parked, in Server.park's count: the oldest goes first
    seen_calls: dict[str, list[str]] = field(default_factory=dict)  # id -> [name, arguments]
    # What the OpenAI request that started the run asked for, kept for the requests that
    # continue it: the names of the client's tools, and whether the answer is typed JSON.
    client_tools: frozenset[str] = frozenset()
    typed: bool = False
    # For a stream that follows the run from elsewhere (Server.follow): how many messages of
    # the thread's transcript were stored before it (set before its first event), and the
    # person's message it runs ("" for decisions).
    stored_before: int = 0
    message: str = ""
    # Who reads the run's events: the stream that started it (the run itself stands for it)
    # and each stream following it (Server.join). The run is stopped when the last one
    # leaves before its end (Server.leave), never while another still reads it.
    readers: set[object] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.readers.add(self)


@dataclass
class Live:
    session: Session
    storage: SQLiteStorage
    run: Run | None = None
    # The thread's own agent while a run uses one adapted for its request (an OpenAI client's
    # tools or response_format); put back when the run ends.
    base_agent: Agent | None = None
    # Results of tools an OpenAI client runs, by call id: the tool waits on its future, the
    # client's next request fills it (whichever comes first creates it).
    client_calls: dict[str, asyncio.Future[str]] = field(default_factory=dict)
    # The call ids of this thread's run that Server.park ended (too many parked): results sent
    # for them are refused with PARKED_DROPPED, not taken for approval decisions.
    dropped_calls: frozenset[str] = frozenset()


class Server:
    """The state behind the routes: auth, threads and login sessions (SQLite), live sessions,
    runs. ``clock`` (Unix seconds) dates login sessions; tests replace it."""

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
        # How long a run waits for an OpenAI client to send its tools' results before those
        # calls fail (the model reads the error) and the run goes on without the client.
        self.client_tool_timeout = 600.0
        self.sse_ping = 15.0  # seconds of silence before a stream sends a keep-alive comment
        self.max_live = 256
        # Runs one user may have parked for their tools' results at once (Server.park).
        self.max_parked_runs = 16
        self.body_timeout = 60.0  # seconds a request's body may take to arrive (Server.body)
        self._parks = itertools.count(1)
        self.factory = factory
        self.storage_path = storage_path
        self.auth = auth
        self.max_body = max_body
        self.cookie_ttl = cookie_ttl
        self.model_name = model_name
        self.threads = ThreadStore(storage_path)
        self.live: dict[tuple[str, str], Live] = {}
        self.runs: dict[str, Run] = {}
        self.clock: Callable[[], float] = time.time
        self._building = asyncio.Lock()
        # Open change streams (GET /api/events), by user: each queue gets the changes of that
        # user's threads; None ends the stream (docs/serve.md, "Several tabs").
        self.watchers: dict[str, list[asyncio.Queue[dict[str, Any] | None]]] = {}
        self.max_watchers = 32  # per user; past it the oldest stream ends (the page reopens it)
        self._closed = False
        # Under serve --workers N: the thread leases and change relay (docs/serve.md).
        self.cluster: Affinity | None = None

    # -- who is asking -------------------------------------------------------------------

    async def user(self, request: Request) -> str:
        """The user of ``request``.

        Raises:
            HttpError: 403 for a non-loopback peer without auth, 401 without a valid
                credential or login session.
        """
        headers = {k.lower(): v for k, v in request.headers.items()}
        peer = request.client.host if request.client else ""
        if isinstance(self.auth, NoAuth):
            # The peer address decides, never a cookie or a header (the ASGI app checked it
            # before routing too; this keeps every route safe on its own).
            found = self.auth.authenticate(headers, peer)
            if found is None:
                raise HttpError(403, LOCAL_ONLY)
            return found
        token = request.cookies.get(COOKIE, "")
        if token:
            return await self._session_user(token)
        found = self.auth.authenticate(headers, peer)
        if found is not None:
            return found
        bearer = headers.get("authorization", "")
        if bearer.lower().startswith("bearer ") and bearer[7:].strip():
            # A login session's token sent as a bearer (API clients without cookies).
            with contextlib.suppress(HttpError):
                return await self._session_user(bearer[7:].strip())
        raise HttpError(401, "missing, wrong or expired credentials")

    async def _session_user(self, token: str) -> str:
        found = await self.threads.login_of(token)
        if found is None:
            raise HttpError(401, "unknown session; log in again")
        user, deadline, proof = found
        if self.clock() >= deadline:
            await self.threads.remove_login(token)
            raise HttpError(401, "session expired; log in again")
        auth = self.auth
        if isinstance(auth, RevocableAuth) and not auth.holds(Login(user=user, proof=proof)):
            # The token was removed or the password changed (a restart keeps sessions).
            await self.threads.remove_login(token)
            raise HttpError(401, "the credential that opened this session no longer works")
        return user

    async def open_session(self, login: Login) -> tuple[str, float]:
        """A new login session for ``login``: its token and how many seconds it lasts (the
        cookie's lifetime, cut short by the credential's own expiry)."""
        now = self.clock()
        deadline = now + self.cookie_ttl
        if login.expires_at is not None:
            deadline = min(deadline, login.expires_at)
        if deadline <= now:
            raise HttpError(401, "the credential has expired; get a new one")
        token = await self.threads.add_login(login.user, deadline, now=now, proof=login.proof)
        return token, deadline - now

    async def close_session(self, token: str) -> None:
        """End a login session (logout); an unknown token is ignored."""
        if token:
            await self.threads.remove_login(token)

    async def body(self, request: Request) -> dict[str, Any]:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise HttpError(415, "send JSON (Content-Type: application/json)")
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            raise HttpError(413, f"body larger than {self.max_body} bytes")
        raw = bytearray()
        try:
            # A client that sends part of a body and then nothing held its request (and a
            # connection's slot) for ever: uvicorn has no read timeout for a body.
            async with asyncio.timeout(self.body_timeout):
                async for chunk in request.stream():
                    raw += chunk
                    if len(raw) > self.max_body:
                        raise HttpError(413, f"body larger than {self.max_body} bytes")
        except TimeoutError:
            raise HttpError(
                408, f"the body did not arrive within {self.body_timeout:g} s (body_timeout)"
            ) from None
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise HttpError(400, f"invalid JSON: {exc}") from exc
        except RecursionError:
            # Deep nesting ("[" * 100_000 fits under the cap) exhausts the parser's stack: the
            # client's fault, not a server error (it was a 500 with a logged traceback).
            raise HttpError(400, "invalid JSON: nested too deeply") from None
        if b"\\u" in raw and _lone_surrogate(data):
            # "\ud800" is JSON grammar but no Unicode: SQLite could not store the str it
            # parses to (a 500 from the thread's title update).
            raise HttpError(400, "invalid JSON: a string holds a lone surrogate (\\ud800-\\udfff)")
        if not isinstance(data, dict):
            raise HttpError(400, "the body must be a JSON object")
        return data

    # -- threads and sessions ------------------------------------------------------------

    async def thread(self, user: str, thread_id: str) -> dict[str, Any]:
        found = await self.threads.get(user, thread_id)
        if found is None:
            raise HttpError(404, "no such thread")
        if self.cluster is not None:  # its run is in another worker: the request goes there
            self.cluster.check(user, thread_id)
        return found

    def running(self, user: str, thread_id: str) -> bool:
        """Whether a run of the thread is going on (in this worker or another)."""
        live = self.live.get((user, thread_id))
        if live is not None and live.run is not None:
            return True
        return self.cluster is not None and self.cluster.holder(user, thread_id) is not None

    async def live_of(self, user: str, thread_id: str) -> Live:
        key = (user, thread_id)
        if self.cluster is not None:  # its run is in another worker: the request goes there
            self.cluster.check(user, thread_id)
        async with self._building:
            live = self.live.get(key)
            if live is not None and live.run is None:
                # The database restored from a backup (or deleted) under this idle thread: the
                # storage its agent uses goes on with the file now at the path and the session
                # reads the conversation from it, by the rule the chat and the coding session
                # follow (Session.reopen; docs/serve.md). A stat when nothing changed.
                await live.session.reopen()
            if live is None:
                storage = SQLiteStorage(self.storage_path, session_id=session_key(user, thread_id))
                memory = ShortTermMemory(storage)
                agent = self.factory(ThreadContext(user, thread_id, memory))
                if inspect.isawaitable(agent):
                    agent = await agent
                if not isinstance(agent, Agent):
                    raise ConfigurationError("the agent factory must return an Agent")
                own = agent.options.short_term_memory
                if own is not None and conversation_key(own) != conversation_key(memory):
                    # One memory for every thread: each user would read the others' messages.
                    await storage.aclose()
                    raise HttpError(
                        500,
                        "the agent factory returned an agent whose short_term_memory is not this "
                        "thread's: pass ThreadContext.short_term_memory (or a ShortTermMemory on "
                        "its storage) as the agent's short_term_memory",
                    )
                if agent.options.long_term_memory is not None and agent.name != memory_scope(user):
                    # Long-term memory is scoped by the agent's name: one name for every user
                    # recalled each user's facts (a doctor, an address) in the others' runs.
                    await storage.aclose()
                    raise HttpError(
                        500,
                        f"the agent factory returned an agent with long-term memory named "
                        f"{agent.name!r}, which is not this user's scope: pass "
                        "name=ThreadContext.memory_scope (long-term memory is kept and recalled "
                        "per agent name, so one name would share every user's memories)",
                    )
                live = Live(Session(agent), storage)
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

    # -- change streams (several tabs, several clients) ----------------------------------

    def watch(self, user: str) -> asyncio.Queue[dict[str, Any] | None]:
        """A queue of the changes to ``user``'s threads, until :meth:`unwatch` (past
        ``max_watchers`` of theirs, the oldest one's stream is ended)."""
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        if self._closed:  # a stream opened while the server shuts down ends at once
            queue.put_nowait(None)
            return queue
        theirs = self.watchers.setdefault(user, [])
        theirs.append(queue)
        while len(theirs) > self.max_watchers:
            theirs.pop(0).put_nowait(None)
        return queue

    def unwatch(self, user: str, queue: asyncio.Queue[dict[str, Any] | None]) -> None:
        theirs = self.watchers.get(user)
        if theirs is not None and queue in theirs:
            theirs.remove(queue)
            if not theirs:
                del self.watchers[user]

    def changed(self, user: str, kind: str, thread_id: str, **more: Any) -> None:
        """Tell ``user``'s change streams that ``thread_id`` changed (``kind``: "running",
        "ran", "renamed", "created", "deleted")."""
        event = {"type": kind, "threadId": thread_id, **more}
        self.deliver(user, event)
        if self.cluster is not None:
            self.cluster.relay(user, event)

    def deliver(self, user: str, event: dict[str, Any]) -> None:
        """Put a change ``event`` in this process's change streams of ``user``."""
        theirs = self.watchers.get(user)
        if theirs:
            for queue in theirs:
                queue.put_nowait(event)

    async def close(self) -> None:
        self._closed = True
        for queues in self.watchers.values():
            for queue in queues:
                queue.put_nowait(None)
        self.watchers.clear()
        for user, thread_id in list(self.live):
            await self.drop(user, thread_id)
        # A run that ended (its stream closed) may still be writing its turn's record.
        await self.threads.recorded()
        self.threads.close()

    # -- runs ----------------------------------------------------------------------------

    async def start_run(
        self,
        user: str,
        thread_id: str,
        text: str,
        *,
        adapt: Callable[[Live], Agent | None] | None = None,
        decisions: Mapping[str, ToolDecision] | None = None,
    ) -> Run:
        """Start a run of ``text`` in the thread; ``adapt`` may give the agent this one run
        uses (the thread's own agent is put back when it ends); ``decisions`` resumes the
        thread's waiting calls instead (serve/_approvals.py)."""
        live = await self.live_of(user, thread_id)
        decide_after = "a run is in progress in this thread; decide after it"
        busy = "a run is in progress in this thread; stop or steer it"
        while live.run is not None:
            if decisions is not None:  # a decision never interrupts: the first one wins
                raise HttpError(409, decide_after)
            if self.busy == "refuse" and not live.run.parked:
                raise HttpError(409, busy)
            # busy="interrupt", or a run still waiting for a client's tool results: the new
            # message wins; the old run ends aborted (and stored).
            current = live.run
            self._abort(live, current, "interrupted by a new message")
            await current.done.wait()
        if adapt is not None:
            try:
                agent = adapt(live)
            except ConfigurationError as exc:
                raise HttpError(400, str(exc)) from exc
            if agent is not None:
                live.base_agent = live.session.agent
                live.session.set_agent(agent)
        from goagent_py.serve._agui import AguiMapper  # ag-ui-protocol: loaded with the routes

        retry = False
        run_id = "run_" + secrets.token_hex(8)
        events = RunEvents()
        run = Run(run_id, user, thread_id, events, AguiMapper(thread_id, run_id, events))
        if self.cluster is not None:  # nothing awaited between this and live.run = run
            try:
                self.cluster.claim(user, thread_id, decide_after if decisions else busy)
            except BaseException:
                if live.base_agent is not None:
                    live.session.set_agent(live.base_agent)
                    live.base_agent = None
                raise
        live.run = run
        self.runs[run_id] = run
        if decisions is not None:
            memory = live.session.agent.options.short_term_memory
            assert memory is not None  # a served thread always has its SQLite memory
            stored = await record_of(memory)  # read only: Session.load would repair it
            try:  # checked again while this run holds the thread: two clicks, one wins
                check_against(stored, decisions)
            except ApprovalError:
                live.run = None
                del self.runs[run_id]
                if self.cluster is not None:
                    self.cluster.release(user, thread_id)
                raise
            run.mapper.resuming(waiting_calls(stored))
            # A decision sent again (answered as done, approve14) starts nothing: not even the
            # "always" approvals, whose budget was the first one's.
            retry = answered_at(stored, decisions) >= 0
        run.task = asyncio.create_task(self._drive(live, run, text, decisions, retry=retry))
        if self.watchers or self.cluster is not None:
            self.changed(user, "running", thread_id, runId=run_id)
        return run

    async def _drive(
        self,
        live: Live,
        run: Run,
        text: str,
        decisions: Mapping[str, ToolDecision] | None = None,
        *,
        retry: bool = False,
    ) -> None:
        # The mapper puts the run's events in run.queue; RUN_STARTED once the run has begun
        # (AguiMapper): it goes out with what the run makes next when that is ready at once (a
        # scripted answer), and alone before a model that takes its time.
        mapper = run.mapper
        durations: dict[str, float] = {}
        spent = 0  # model calls since the person last acted: "always" shares one budget
        told = False  # whether the client was told of the steers the run did not take
        try:
            streams: list[AsyncIterator[AgentEvent]] = []
            # The session's projection of the record (read back after every run; issue 36:
            # the conversation was read a third time per turn): what the run goes on from.
            # Under several workers another one may have run turns of this thread since this
            # session read it: the projection is read again (docs/serve.md).
            if not live.session.loaded or self.cluster is not None:
                await live.session.load()
            stored = live.session.transcript
            run.stored_before, run.message = len(stored), text
            if decisions is not None:
                streams.append(live.session.stream_resume(decisions))
            else:
                # A new message while calls wait for the person: they are denied (the
                # message is the answer), then the message runs.
                left = abandoned(stored)
                if left is not None:
                    run.mapper.resuming(waiting_calls(stored))
                    streams.append(live.session.stream_resume(left))
                streams.append(live.session.stream(text))
            while streams:
                async for event in streams.pop(0):
                    if run.abort_reason and not run.abort_sent:
                        self._abort(live, run, run.abort_reason)
                    if isinstance(event, ToolExecutionEnd):
                        durations[event.result.call.id] = round(event.result.duration, 6)
                    elif isinstance(event, AgentEnd) and not event.path:
                        spent += event.result.iterations
                    mapper.map(event)
                # Calls of tools the person approved "always for this thread" go on at once,
                # within the agent's iteration budget for all of them (review9c).
                auto = auto_decisions(
                    live.session.transcript,
                    spent=spent,
                    budget=live.session.agent.options.max_iterations,
                )
                if auto is not None and not run.abort_reason and not streams and not retry:
                    run.mapper.resuming(waiting_calls(live.session.transcript))
                    streams.append(live.session.stream_resume(auto))
                elif not streams and not run.abort_reason and _goes_on(live.session):
                    # A steer that came after the run's last look at its queue (while it
                    # stored its answer): the run goes on with it, on this stream. Nothing
                    # awaits between this check and the run's end (live.run = None), so a
                    # steer is either taken here or refused with 409.
                    streams.append(live.session.stream_continue())
        except Exception as exc:  # the client gets it as RUN_ERROR; the server goes on
            told = True
            self._not_taken(live, run)
            mapper.error(f"{type(exc).__name__}: {exc}", type(exc).__name__)
        else:
            told = True
            self._not_taken(live, run)
            mapper.finished()
        finally:
            if not told and live.session.steering_queue:
                live.session.clear_queues("steering")  # cancelled: nothing is kept either
            live.run = None
            if self.cluster is not None:
                self.cluster.release(run.user, run.thread_id)
            if self.watchers or self.cluster is not None:
                # Its messages are stored; reads of the index wait for its record.
                self.changed(run.user, "ran", run.thread_id, runId=run.run_id)
            if live.base_agent is not None:
                live.session.set_agent(live.base_agent)
                live.base_agent = None
            for pending in live.client_calls.values():
                pending.cancel()
            live.client_calls.clear()
            self.runs.pop(run.run_id, None)
            # The stream ends before the thread's timestamp and durations are committed (issue
            # 36: every turn's stream waited for that commit); the turn's messages are stored
            # already, and the index's reads for this user wait for the write.
            recorded = self.threads.record_turn(run.user, run.thread_id, durations)
            mapper.begin()  # cancelled before it began: RUN_STARTED still comes first
            run.queue.put_nowait(None)
            try:
                await self._evict()
            finally:
                await self._recorded(run, recorded)

    @staticmethod
    def _not_taken(live: Live, run: Run) -> None:
        """Give the steers ``run`` leaves untaken (cleared from the session's queue) back to
        the client (an event), if there are any."""
        queued = live.session.steering_queue
        if queued:
            run.not_taken += [m.text for m in queued]
            live.session.clear_queues("steering")
        if run.not_taken:
            run.mapper.not_taken(run.not_taken)

    @staticmethod
    async def _recorded(run: Run, recorded: asyncio.Task[None]) -> None:
        """Wait for the record of the run's turn; a failure is logged (the turn's messages are
        stored already); the run is done either way."""
        try:
            await recorded
        except Exception as exc:
            _log.warning(
                "recording the turn of thread %s (its time, its tools' durations) failed: %s",
                run.thread_id,
                exc,
            )
        finally:
            run.done.set()

    async def _evict(self) -> None:
        # Each live thread holds a session and a SQLite connection: keep the most recently
        # used ones; an evicted thread is rebuilt from storage on its next request. Nothing to
        # do while at most max_live are live (issue 36: every run's end listed them all);
        # past it, the least recently used idle ones (live_of keeps them first) are taken out
        # before any is closed, so none is chosen and then used by a run in between.
        over = len(self.live) - self.max_live
        if over <= 0:
            return
        evicted: list[tuple[tuple[str, str], Live]] = []
        for key, live in self.live.items():
            if live.run is None:
                evicted.append((key, live))
                if len(evicted) == over:
                    break
        for key, _ in evicted:
            del self.live[key]
        for _, live in evicted:
            await live.storage.aclose()

    async def event_batches(self, run: Run) -> AsyncIterator[tuple[list[dict[str, Any]], bool]]:
        """The run's AG-UI events for the stream that started it, in batches: each holds every
        event ready at that moment (a streamed
        answer's deltas often arrive many at once), so a stream writes one chunk per batch, not
        one per event (issue 36: each write is a system call and a trip through the server);
        no event is held back for the ones after it: only the first batch gets a few turns of
        the loop (:data:`_FIRST_WRITE_TURNS`) for what the run makes at once after
        ``RUN_STARTED``. Each comes with whether it is the run's last (its end was ready with
        it)."""
        finished = False
        settle = _FIRST_WRITE_TURNS
        events = run.queue
        try:
            while not finished:
                if events.empty():
                    await events.get_ready()
                while settle and not events.ended():
                    # Before the first write (RUN_STARTED), a few turns of the loop for what
                    # the run makes at once (a model answering without waiting runs in a task
                    # of its own: two turns away); never a wait for anything else.
                    settle -= 1
                    await asyncio.sleep(0)
                batch = events.take()
                finished = batch[-1] is None
                if finished:
                    batch.pop()
                if batch:
                    yield batch, finished  # type: ignore[misc]
        finally:
            if not finished:
                self.leave(run, run)

    def park(self, run: Run, waiting: list[str]) -> None:
        """``run`` waits for its client's results of the calls ``waiting``. Each parked run
        holds a live session (and its task) until the results or ``client_tool_timeout``; a
        client opening threads in a loop grew that without end. Past ``max_parked_runs`` of one
        user, the runs of theirs that have waited longest are ended (their calls fail with an
        error result the model reads; results sent for them later get a 409 that says why)."""
        run.waiting_for, run.parked, run.parked_order = waiting, True, next(self._parks)
        theirs = [
            (live, live.run)
            for live in self.live.values()
            if live.run is not None and live.run.parked and live.run.user == run.user
        ]
        theirs.sort(key=lambda pair: pair[1].parked_order)
        for live, oldest in theirs[: max(0, len(theirs) - self.max_parked_runs)]:
            live.dropped_calls = frozenset(oldest.waiting_for)
            oldest.parked, oldest.waiting_for = False, []
            self._abort(live, oldest, PARKED_DROPPED.format(limit=self.max_parked_runs))

    def join(self, run: Run) -> object:
        """A stream that follows ``run`` from elsewhere starts reading it: its mark for
        :meth:`leave` (while it reads, the run goes on when its own stream is gone)."""
        mark = object()
        run.readers.add(mark)
        return mark

    def leave(self, run: Run, reader: object) -> None:
        """``reader`` (``run`` itself for the stream that started it, or a mark of
        :meth:`join`) stops reading ``run`` before its end: the run is stopped when nobody
        reads it any more (a closed tab with no other tab following; docs/serve.md, "Several
        tabs"), unless it waits for an OpenAI client's tool results (the next request
        continues it)."""
        run.readers.discard(reader)
        if not run.readers and not run.done.is_set() and not run.parked:
            self.stop(run)

    def stop(self, run: Run) -> bool:
        live = self.live.get((run.user, run.thread_id))
        if live is None or live.run is not run:
            return False
        self._abort(live, run, "stopped by the client")
        return True

    @staticmethod
    def _abort(live: Live, run: Run, reason: str) -> None:
        # Steering belongs to the run it was sent to: a stopped run's pending steer must not
        # become the next run's first message (the user's new message would go unanswered);
        # the client is told it was not taken (Server._not_taken).
        run.not_taken += [m.text for m in live.session.steering_queue]
        live.session.clear_queues("steering")
        run.abort_reason = run.abort_reason or reason
        if live.session.state.running and not run.abort_sent:
            run.abort_sent = True
            live.session.abort("now", reason=run.abort_reason)


def _goes_on(session: Session) -> bool:
    """Whether a session whose run just ended has steers to go on with (nothing waits for
    decisions: a run that stopped for them cannot take a message)."""
    return bool(session.steering_queue) and not session.pending


def _lone_surrogate(data: Any) -> bool:
    """Whether a string in parsed JSON holds a surrogate that is not part of a pair."""
    try:
        json.dumps(data, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return True
    return False


# OpenAI's own statuses and error types for what /v1 refuses: a non-JSON body is a 400 there,
# a failed run a 500 (server_error), a wrong key a 401 with code invalid_api_key.
_EMPTY = object()  # event_batches: nothing ready
_FIRST_WRITE_TURNS = 3
"""Turns of the event loop a run's stream gives the run before its first write (issue 36)."""

_OPENAI = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", None),
    408: ("invalid_request_error", None),
    409: ("invalid_request_error", "conflict"),
    413: ("invalid_request_error", "request_too_large"),
    415: ("invalid_request_error", None),
    421: ("invalid_request_error", None),
}


def error_body(
    status: int, message: str, *, path: str, code: str | None = None
) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of a refusal: ``{"error": message}``, or under ``/v1`` the
    OpenAI shape ``{"error": {"message", "type", "param", "code"}}`` with OpenAI's status
    (``code``, when given, in place of the status's own)."""
    if not path.startswith("/v1/"):
        return status, {"error": message}
    if status == 415:
        status = 400
    kind, own = _OPENAI.get(status, ("server_error", None))
    code = code or own
    if status >= 500:
        status = 500
    return status, {"error": {"message": message, "type": kind, "param": None, "code": code}}


def static_file(name: str) -> tuple[bytes, str]:
    """A file of the page shipped in the package, with its media type (read once a process:
    the files ship with the package and never change under it)."""
    if name == "index.html":
        media = "text/html; charset=utf-8"
    elif name in _STATIC:
        media = _STATIC[name] + "; charset=utf-8"
    else:
        raise HttpError(404, "no such file")
    return _package_file(name), media


@functools.cache
def _package_file(name: str) -> bytes:
    return resources.files("goagent_py.serve").joinpath("static", name).read_bytes()
