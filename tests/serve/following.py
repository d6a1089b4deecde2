"""A run another tab follows, for the serve tests of following and stopping runs (docs/serve.md,
"Several tabs"): a slow streaming model, a request read frame by frame, and a run on a new
thread with its followers already reading it."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from goagent_py.provider import StreamDone, TextDelta
from goagent_py.serve import create_app
from goagent_py.testing import text_response


class Slow:
    """A model that streams "Hel", then waits for ``go`` before "lo!" (a slow model)."""

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.waiting = asyncio.Event()
        self.requests: list[Any] = []

    async def complete(self, request: Any) -> Any:
        raise AssertionError("the served run streams")

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        self.requests.append(request)
        yield TextDelta("Hel")
        self.waiting.set()
        async with asyncio.timeout(60):
            await self.go.wait()
        yield TextDelta("lo")
        yield TextDelta("!")
        yield StreamDone(text_response("Hello!"))


class Stream:
    """A request to the app read as its frames arrive (httpx's ASGI transport waits for the
    whole body); ``leave()`` disconnects."""

    def __init__(self, app: Any, method: str, path: str, body: bytes = b"") -> None:
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.all: list[dict[str, Any]] = []
        self.status = 0
        self.gone = asyncio.Event()
        self.ended = asyncio.Event()
        self._body = body
        headers = [(b"host", b"127.0.0.1")]
        if method == "POST":
            headers += [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ]
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
        }
        self.task = asyncio.create_task(app(scope, self._receive, self._send))

    async def _receive(self) -> dict[str, Any]:
        if self._body:
            body, self._body = self._body, b""
            return {"type": "http.request", "body": body, "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            return
        for line in message.get("body", b"").decode().splitlines():
            if line.startswith("data:"):
                event = json.loads(line[5:])
                self.all.append(event)
                self.events.put_nowait(event)
        if not message.get("more_body", False):
            self.ended.set()

    async def until(self, kind: str) -> list[dict[str, Any]]:
        seen = []
        while True:
            event = await asyncio.wait_for(self.events.get(), 60)
            seen.append(event)
            if event["type"] == kind:
                return seen

    def leave(self) -> None:
        self.gone.set()


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


@dataclass
class Followed:
    """A run on a new thread: its model waits for ``model.go`` after "Hel"."""

    model: Slow
    app: Any
    tid: str
    owner: Stream
    followers: list[Stream]


@contextlib.asynccontextmanager
async def followed_run(db: str, helpers: Any, *, followers: int = 1) -> AsyncIterator[Followed]:
    """An app on ``db`` whose thread's run (the owner's "hi") is at its first delta, read by
    ``followers`` streams of ``/follow`` that have read it too; the app is closed after."""
    model = Slow()
    app = create_app(helpers.factory_for(model), storage_path=db)
    try:
        async with helpers.client_for(app) as client:
            tid = (await client.post("/api/threads", json={})).json()["id"]
        owner = Stream(app, "POST", f"/api/threads/{tid}/runs", b'{"message": "hi"}')
        await asyncio.wait_for(model.waiting.wait(), 60)
        readers = [Stream(app, "GET", f"/api/threads/{tid}/follow") for _ in range(followers)]
        for reader in readers:
            await reader.until("TEXT_MESSAGE_CONTENT")
        yield Followed(model, app, tid, owner, readers)
    finally:
        await app.aclose()
