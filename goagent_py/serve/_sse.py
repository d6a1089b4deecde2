"""An SSE response bound to a run (the AG-UI stream and the OpenAI-compatible streams).

A plain ASGI send loop and one task beside it that watches the client: it sends a keep-alive
comment when the stream has been quiet for ``ping`` seconds and ends the stream when the client
disconnects. sse-starlette's response, used before, ran four tasks and anyio cancel scopes per
stream, ~12% of the server's CPU per turn under load (issue 36).
"""

from __future__ import annotations

import asyncio
import signal
import time
import weakref
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from goagent_py._json_fast import fast_encoder
from goagent_py.serve._server import Run, Server

__all__ = ["LastChunk", "RunStream", "frames_of", "sse_frame", "to_json"]

# What sse-starlette sent: browsers and proxies see the same stream (no caching, no buffering
# in nginx, a connection kept open).
_HEADERS = [
    (b"cache-control", b"no-store"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
    (b"content-type", b"text/event-stream; charset=utf-8"),
]
_SHUTDOWN_POLL = 0.5  # seconds between looks at the server's exit flag while streams are open


def sse_frame(data: str, event: str | None = None) -> bytes:
    """One SSE event: ``data`` must be one line (JSON from ``json.dumps`` always is)."""
    if event is None:
        return b"data: %s\r\n\r\n" % data.encode()
    return b"event: %s\r\ndata: %s\r\n\r\n" % (event.encode(), data.encode())


to_json = fast_encoder()
"""An event as its JSON text, as ``json.dumps(event)`` writes it."""


def frames_of(events: list[dict[str, Any]]) -> bytes:
    """``events`` as SSE frames, one ``data:`` line each: what :func:`sse_frame` of each
    event's :func:`to_json` gives, joined, encoded once (the JSON is ASCII)."""
    if not events:
        return b""
    return ("data: " + "\r\n\r\ndata: ".join(map(to_json, events)) + "\r\n\r\n").encode()


class LastChunk(bytes):
    """The last chunk of a stream's frames: :class:`RunStream` sends it with the end of the
    response, one write where a last chunk and the empty end were two (issue 36). The bytes on
    the wire are the same."""

    __slots__ = ()


class RunStream(Response):
    """An SSE response for a run that aborts the run when the stream ends before it does.

    ``frames`` yields whole SSE frames (bytes); a :class:`LastChunk` is the last (the response
    ends with it; the generator is still run to its end). The stream ends early when the client
    disconnects, when the server shuts down (uvicorn's exit flag), or when a send fails; then
    it leaves the run (``Server.leave``: the run is stopped when no other stream reads it and it
    is not parked for an OpenAI client's tools). ``reader``: a follower's mark of
    ``Server.join`` (None: this stream started the run).
    """

    def __init__(
        self,
        server: Server,
        run: Run | None,
        frames: AsyncIterator[bytes],
        *,
        reader: object | None = None,
    ) -> None:
        # A Response for the routes' types: of its state only raw_headers is used.
        self._server = server
        self._run = run
        # Who this stream is among the run's readers (Server.leave): the run itself for the
        # stream that started it, a mark of Server.join for one that follows it.
        self._reader = run if reader is None else reader
        self._frames = frames
        # "disconnect" or "shutdown": this stream cancelled its own task; "done": it has sent
        # its last frame and nothing may cancel it any more.
        self._ended_by = ""
        # The page counts a stream quiet for much longer than this as a lost connection (one
        # that broke without a reset, a server that hangs): it reads the interval from here.
        ping = b"%g" % server.sse_ping
        self.raw_headers = [*_HEADERS, (b"x-goagent-ping-seconds", ping)]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        task = asyncio.current_task()
        assert task is not None
        watch = asyncio.get_running_loop().create_task(self._watch(receive, send, task))
        _Shutdown.of_this_loop().add(self, task)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            ended = False
            async for chunk in self._frames:
                if ended:
                    raise RuntimeError("a stream's frames went on after its LastChunk")
                if chunk.__class__ is LastChunk:
                    ended = self._ending(watch)
                    await send({"type": "http.response.body", "body": chunk, "more_body": False})
                else:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if not ended:
                self._ending(watch)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            # Ours (the client left, the server is going down): the response ends here, as a
            # response; anyone else's cancellation goes on.
            if self._ended_by in ("", "done") or task.uncancel() > 0:
                raise
            if self._ended_by == "shutdown":  # a clean end the client can read
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watch.cancel()
            _Shutdown.of_this_loop().discard(self)
            self._ended_by = self._ended_by or "done"  # nothing cancels this task any more
            # Stopped before the await below: a cancellation that reaches it must not skip it.
            run = self._run  # None: a stream of no run (a thread's changes, GET /api/events)
            if run is not None:
                self._server.leave(run, self._reader)
            aclose = getattr(self._frames, "aclose", None)
            if aclose is not None:
                await aclose()

    def _ending(self, watch: asyncio.Task[None]) -> bool:
        self._ended_by = "done"  # nothing ends it from outside now
        watch.cancel()  # no keep-alive comment after the end
        return True

    def end(self, task: asyncio.Task[Any], why: str) -> None:
        """End the stream from outside its task (first reason wins)."""
        if not self._ended_by:
            self._ended_by = why
            task.cancel()

    async def _watch(self, receive: Receive, send: Send, task: asyncio.Task[Any]) -> None:
        ping = self._server.sse_ping
        while True:
            try:
                async with asyncio.timeout(ping):
                    message = await receive()
            except Exception as exc:
                if not isinstance(exc, TimeoutError):  # a broken connection: as if it closed
                    self.end(task, "disconnect")
                    return
                now = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
                comment = b": ping - %s\r\n\r\n" % now.encode()
                try:
                    await send({"type": "http.response.body", "body": comment, "more_body": True})
                except Exception:
                    self.end(task, "disconnect")  # the send loop will fail on it too
                    return
                continue
            if message["type"] == "http.disconnect":
                self.end(task, "disconnect")
                return


class _Shutdown:
    """The open streams of one event loop, and one task that ends them all when the server is
    shutting down: uvicorn waits for open responses before it exits and tells an app nothing,
    so its exit flag is read (through its signal handler) every half second while any is
    open."""

    _loops: ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Shutdown]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self) -> None:
        self.streams: dict[RunStream, asyncio.Task[Any]] = {}
        self.watcher: asyncio.Task[None] | None = None

    @classmethod
    def of_this_loop(cls) -> _Shutdown:
        loop = asyncio.get_running_loop()
        found = cls._loops.get(loop)
        if found is None:
            found = cls._loops[loop] = cls()
        return found

    def add(self, stream: RunStream, task: asyncio.Task[Any]) -> None:
        self.streams[stream] = task
        if self.watcher is None:
            self.watcher = asyncio.get_running_loop().create_task(self._watch())

    def discard(self, stream: RunStream) -> None:
        self.streams.pop(stream, None)
        if not self.streams and self.watcher is not None:
            self.watcher.cancel()
            self.watcher = None

    async def _watch(self) -> None:
        try:
            while self.streams:
                if _server_exiting():
                    for stream, task in list(self.streams.items()):
                        stream.end(task, "shutdown")
                    return
                await asyncio.sleep(_SHUTDOWN_POLL)
        finally:
            if self.watcher is asyncio.current_task():
                self.watcher = None


def _server_exiting() -> bool:
    """Whether the uvicorn server of this process has been told to exit (its SIGTERM handler
    is its bound ``handle_exit`` while it serves, in the main thread)."""
    handler = signal.getsignal(signal.SIGTERM)
    return bool(getattr(getattr(handler, "__self__", None), "should_exit", False))
