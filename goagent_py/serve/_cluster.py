"""One worker of ``goagent-py serve --workers N``: the thread leases, the forwarding of requests
to the worker that owns a thread, and the relay of thread changes between workers.

The rule (docs/serve.md, "Several worker processes"): a thread whose run is going on (streaming,
parked for an OpenAI client's tools) belongs to the worker that runs it; every request about
that thread is forwarded whole to that worker, which answers it as a single-process server
would. Ownership is a POSIX byte-range lock (``fcntl.lockf``) on one lock file of the server,
at an offset from a hash of (user, thread): taking it costs one system call and no message to
anyone; ``F_GETLK`` names the holder's process; the kernel lets it go when the worker dies.

Each worker also listens on a private Unix socket (``<pid>.sock``) and one for thread changes
(``<pid>.ev``) in the server's 0700 folder. A forwarded request carries the server's secret
(the socket answers nothing else) and the peer address the first worker saw; the user is
checked by both workers (the first decides whether there is a thread to forward, the second
serves it).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import hmac
import json
import logging
import os
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any

from starlette.responses import Response

from goagent_py._http_guard import replay_body, send_json
from goagent_py._run_hold import ByteLocks
from goagent_py.errors import GoAgentError
from goagent_py.serve._server import HttpError, Server, error_body
from goagent_py.serve._supervise import WorkerContext, leave

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "FORWARD_HEADER",
    "Cluster",
    "ClusterApp",
    "Moved",
    "OwnedElsewhere",
]

_log = logging.getLogger("goagent_py.serve")

FORWARD_HEADER = "x-goagent-forward"
_PEER_HEADER = "x-goagent-peer"
_SLOTS = 1 << 62  # lock offsets: a 62-bit hash (off_t is 63 bits)
# Requests that may be about a thread: their bodies are kept until the route knows whether
# the thread is another worker's (then the request goes there whole).
_THREADED = ("/api/threads/", "/api/runs/", "/v1/chat/completions", "/v1/responses")
# Not sent on: the connection's own headers, and Expect (the body is whole already; a "100
# Continue" from the other worker is not an answer).
_HOP = frozenset({b"connection", b"keep-alive", b"transfer-encoding", b"content-length", b"expect"})
_HOP |= {FORWARD_HEADER.encode(), _PEER_HEADER.encode()}
_BACKLOG = 100_000  # changes waiting for one other worker, at most

_forwarded: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "goagent_serve_forwarded", default=False
)


class OwnedElsewhere(GoAgentError):
    """The thread a request is about has a run in another worker (process ``pid``): the
    request goes there (never out of the server: :class:`ClusterApp` answers with what that
    worker answers)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        super().__init__(f"the thread's run is in worker process {pid}")

    def __reduce__(self) -> Any:
        return self._reduce_with(self.pid)


class Cluster:
    """This worker's part of the server: its leases, its sockets, its peers."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self.pid = os.getpid()
        self.dir = ctx.run_dir
        self._secret = ctx.secret.encode()
        self.socket_path = os.path.join(self.dir, f"{self.pid}.sock")
        # One descriptor for the process's life: closing any descriptor of the file would let
        # go of every lock this process holds on it (POSIX record locks).
        self._locks = ByteLocks(os.path.join(self.dir, "threads.lock"))
        self._held: dict[int, int] = {}  # offset -> runs of this process holding it
        self._events_path = os.path.join(self.dir, f"{self.pid}.ev")
        self._events: asyncio.AbstractServer | None = None
        # A connection to each other worker that changes are sent on, in order: what it has
        # not read yet waits in the socket and here, never dropped (a datagram queue holds 10,
        # net.unix.max_dgram_qlen, and lost the rest while the other worker was busy).
        self._links: dict[int, asyncio.Queue[bytes]] = {}
        self._readers: dict[asyncio.StreamWriter, asyncio.Task[Any] | None] = {}
        self.server: Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- leases ----------------------------------------------------------------------------

    @staticmethod
    def _offset(user: str, thread_id: str) -> int:
        digest = hashlib.blake2b(f"{len(user)}:{user}:{thread_id}".encode(), digest_size=8)
        return int.from_bytes(digest.digest(), "big") % _SLOTS

    def take(self, user: str, thread_id: str) -> int | None:
        """Take the thread's lease for a run of this worker: None when taken, else the pid of
        the worker that holds it."""
        at = self._offset(user, thread_id)
        if at in self._held:
            self._held[at] += 1
            return None
        pid = self._locks.take(at)
        if pid is not None:
            return pid
        self._held[at] = 1
        return None

    def release(self, user: str, thread_id: str) -> None:
        at = self._offset(user, thread_id)
        left = self._held.get(at, 0) - 1
        if left > 0:
            self._held[at] = left
            return
        self._held.pop(at, None)
        self._locks.release(at)

    def holder(self, user: str, thread_id: str) -> int | None:
        """The pid of the other worker whose run holds the thread, or None."""
        at = self._offset(user, thread_id)
        return None if at in self._held else self._locks.holder(at)

    def check(self, user: str, thread_id: str) -> None:
        """Raise :class:`OwnedElsewhere` when another worker runs the thread (a request
        forwarded here is served here: it is never sent on)."""
        if _forwarded.get():
            return
        pid = self.holder(user, thread_id)
        if pid is not None:
            raise OwnedElsewhere(pid)

    def claim(self, user: str, thread_id: str, busy: str) -> None:
        """Take the lease for a run; another worker's run: :class:`OwnedElsewhere`, or a 409
        with ``busy`` for a request already forwarded."""
        pid = self.take(user, thread_id)
        if pid is None:
            return
        if _forwarded.get() or pid < 0:
            raise HttpError(409, busy)
        raise OwnedElsewhere(pid)

    # -- change events -----------------------------------------------------------------------

    def relay(self, user: str, event: dict[str, Any]) -> None:
        """Send ``user``'s change ``event`` to the other workers' change streams; "ran" once
        the turn's record is written (their pages read the thread list then)."""
        if event.get("type") == "ran" and self.server is not None:
            task = asyncio.get_running_loop().create_task(self._after_record(user, event))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        self._send(user, event)

    async def _after_record(self, user: str, event: dict[str, Any]) -> None:
        assert self.server is not None
        with contextlib.suppress(Exception):  # its failure is logged where it is awaited
            await self.server.threads._settled(user)
        self._send(user, event)

    def _send(self, user: str, event: dict[str, Any]) -> None:
        line = json.dumps({"user": user, "event": event}).encode() + b"\n"
        for pid in self._peers("ev"):
            queue = self._links.get(pid)
            if queue is None:
                queue = self._links[pid] = asyncio.Queue()
                self._track(self._link(pid, queue))
            if queue.qsize() < _BACKLOG:  # past it the worker is stuck; its streams reopen
                queue.put_nowait(line)

    def _track(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _link(self, pid: int, queue: asyncio.Queue[bytes]) -> None:
        """Send ``queue``'s changes to worker ``pid`` until it is gone."""
        writer: asyncio.StreamWriter | None = None
        try:
            _, writer = await asyncio.open_unix_connection(os.path.join(self.dir, f"{pid}.ev"))
            writer.write(self._secret + b"\n")
            while True:
                writer.write(await queue.get())
                while not queue.empty():  # what is ready goes in one write
                    writer.write(queue.get_nowait())
                await writer.drain()
        except (OSError, ConnectionError):
            pass  # the worker is gone: its streams went with it
        finally:
            if self._links.get(pid) is queue:
                del self._links[pid]
            if writer is not None:
                writer.close()

    async def _peer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """The changes another worker sends (after the server's secret), delivered here."""
        self._readers[writer] = asyncio.current_task()
        try:
            given = (await reader.readline()).rstrip(b"\n")
            if not hmac.compare_digest(given, self._secret):
                return
            while line := await reader.readline():
                try:
                    data = json.loads(line)
                    user, event = str(data["user"]), dict(data["event"])
                except (ValueError, KeyError, TypeError):
                    continue
                if self.server is not None:
                    self.server.deliver(user, event)
        except (OSError, ConnectionError, ValueError):
            pass
        finally:
            self._readers.pop(writer, None)
            writer.close()

    async def attach(self, server: Server) -> None:
        """Serve ``server``'s leases and changes from this worker (on the running loop)."""
        self.server = server
        server.cluster = self
        self._events = await asyncio.start_unix_server(self._peer, path=self._events_path)

    async def aclose(self) -> None:
        for path in (self.socket_path, self._events_path):
            with contextlib.suppress(OSError):
                os.unlink(path)
        if self._events is not None:
            self._events.close()
        # The other workers' connections end here (their readers see the end and return:
        # Python 3.11's stream server logs a handler cancelled at the loop's close).
        handlers = [task for task in self._readers.values() if task is not None]
        for writer in list(self._readers):
            writer.close()
        await asyncio.gather(*handlers, return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._locks.close()
        leave(self.ctx)  # the parent is gone (killed): the last worker removes the folder

    def others(self) -> list[int]:
        """The other workers to ask about a run this one does not know (none for a request
        forwarded here)."""
        return [] if _forwarded.get() else self.peers()

    def peers(self) -> list[int]:
        """The pids of the other workers (their private sockets)."""
        return self._peers("sock")

    def _peers(self, kind: str) -> list[int]:
        found = []
        for name in os.listdir(self.dir):
            stem, _, ext = name.partition(".")
            if ext == kind and stem.isdigit() and int(stem) != self.pid:
                found.append(int(stem))
        return found

    # -- forwarding --------------------------------------------------------------------------

    async def forward(
        self, scope: Scope, body: bytes, receive: Receive, send: Send, pids: list[int]
    ) -> bool:
        """Send the request (``scope``, its whole ``body``) to the first of ``pids`` that does
        not answer 404 (every one, when there is one), and stream its answer back; False when
        none could be reached."""
        import h11

        head = self._head(scope, body)
        for n, pid in enumerate(pids):
            try:
                reader, writer = await asyncio.open_unix_connection(
                    os.path.join(self.dir, f"{pid}.sock")
                )
            except OSError:
                continue
            try:
                conn = h11.Connection(h11.CLIENT)
                writer.write(
                    conn.send(head) + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage())
                )
                response = await _next_event(conn, reader)
                if not isinstance(response, h11.Response):
                    continue
                if response.status_code == 404 and n < len(pids) - 1:
                    continue
                await self._relay_response(conn, reader, writer, response, receive, send)
                return True
            except (OSError, h11.ProtocolError, asyncio.IncompleteReadError):
                continue
            finally:
                writer.close()
        return False

    def _head(self, scope: Scope, body: bytes) -> Any:
        import h11

        target = scope.get("raw_path") or scope["path"].encode()
        if scope.get("query_string"):
            target += b"?" + scope["query_string"]
        client = scope.get("client") or ("", 0)
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP]
        headers += [
            (b"content-length", str(len(body)).encode()),
            (FORWARD_HEADER.encode(), self._secret),
            (_PEER_HEADER.encode(), f"{client[0]} {client[1]}".encode()),
            (b"connection", b"close"),
        ]
        return h11.Request(method=scope["method"], target=target, headers=headers)

    async def _relay_response(
        self,
        conn: Any,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        response: Any,
        receive: Receive,
        send: Send,
    ) -> None:
        import h11

        keep = [(k, v) for k, v in response.headers if k not in _HOP or k == b"content-length"]
        await send({"type": "http.response.start", "status": response.status_code, "headers": keep})
        gone = asyncio.get_running_loop().create_future()

        async def watch() -> None:
            # The client leaving ends the forwarded request: its worker sees the disconnect (a
            # run whose stream is closed is stopped, as in one process).
            while (await receive())["type"] != "http.disconnect":
                pass
            if not gone.done():
                gone.set_result(None)
            writer.close()

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            while True:
                event = await _next_event(conn, reader)
                if isinstance(event, h11.Data):
                    await send(
                        {"type": "http.response.body", "body": bytes(event.data), "more_body": True}
                    )
                elif isinstance(event, h11.EndOfMessage):
                    break
        finally:
            watcher.cancel()
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    def private_scope(self, scope: Scope) -> bool:
        """Whether ``scope`` came in on this worker's private socket."""
        server = scope.get("server")
        return server is not None and server[0] == self.socket_path

    def admit(self, scope: Scope) -> MutableMapping[str, Any] | None:
        """A request from the private socket as the worker that forwarded it saw it (its
        peer's address), or None when it lacks the server's secret."""
        given = b""
        peer = b""
        for key, value in scope["headers"]:
            if key == FORWARD_HEADER.encode():
                given = value
            elif key == _PEER_HEADER.encode():
                peer = value
        if not hmac.compare_digest(given, self._secret):
            return None
        host, _, port = peer.decode("latin-1").partition(" ")
        headers = [
            (k, v)
            for k, v in scope["headers"]
            if k not in (FORWARD_HEADER.encode(), _PEER_HEADER.encode())
        ]
        return {
            **scope,
            "headers": headers,
            "client": (host, int(port)) if port.isdigit() and host else None,
        }


async def _next_event(conn: Any, reader: asyncio.StreamReader) -> Any:
    import h11

    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(65536))
            continue
        if isinstance(event, h11.InformationalResponse):
            continue
        return event


class ClusterApp:
    """The app of one worker: requests about a thread another worker runs go there whole;
    requests from the private socket are admitted with the server's secret only."""

    def __init__(self, app: ASGIApp, cluster: Cluster, server: Server) -> None:
        self.app = app
        self.cluster = cluster
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.cluster.private_scope(scope):
            admitted = self.cluster.admit(scope)
            if admitted is None:
                await _plain(send, 403, b"not from this server's workers")
                return
            token = _forwarded.set(True)
            try:
                await self.app(admitted, receive, send)
            finally:
                _forwarded.reset(token)
            return
        path: str = scope["path"]
        if not path.startswith(_THREADED):
            await self.app(scope, receive, send)
            return
        try:
            # The same bound as Server.body: a client that sends part of a body and then
            # nothing must not hold a connection for ever.
            async with asyncio.timeout(self.server.body_timeout):
                body, whole = await _read_body(receive, self.server.max_body)
        except TimeoutError:
            message = (
                f"the body did not arrive within {self.server.body_timeout:g} s (body_timeout)"
            )
            status, data = error_body(408, message, path=path)
            await send_json(send, status, data)
            return
        if not whole:  # too large or gone: the app refuses it as it would
            await self.app(scope, replay_body(body, receive, more=True), send)
            return
        moved: list[int] = []
        started = False

        async def watch(message: MutableMapping[str, Any]) -> None:
            nonlocal started
            started = True
            await send(message)

        scope = {**scope, "goagent.moved": moved}
        await self.app(scope, replay_body(body, receive), watch)
        if not moved or started:
            return
        if not await self.cluster.forward(scope, body, receive, send, moved):
            await _plain(send, 503, b"the worker that runs this thread did not answer; retry")


class Moved(Response):
    """What a route answers for a thread whose run is in another worker (or, ``pids`` of
    several, for a run it does not know): nothing is sent; the :class:`ClusterApp` around
    the app forwards the request once the route returns."""

    def __init__(self, scope: Scope, pids: list[int]) -> None:
        super().__init__()
        self.raw_headers = []
        self._moved: list[int] | None = scope.get("goagent.moved")
        if self._moved is not None:
            self._moved += pids

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._moved is None:  # not under a ClusterApp: cannot be, in a worker
            await _plain(send, 409, b"a run is in progress in this thread")


async def _read_body(receive: Receive, limit: int) -> tuple[bytes, bool]:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body), False
        body += message.get("body", b"")
        if len(body) > limit:
            return bytes(body), False
        if not message.get("more_body", False):
            return bytes(body), True


async def _plain(send: Send, status: int, text: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(text)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": text})
