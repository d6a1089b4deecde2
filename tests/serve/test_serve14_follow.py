"""GET /api/threads/{id}/follow: a run started elsewhere (another tab, another client), from its
first event and then live, for a tab that did not start it (docs/serve.md, "Several tabs");
and a run's deltas ready together go out as one event (issue 36)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from goagent_py.messages import Role
from goagent_py.provider import StreamDone, TextDelta
from goagent_py.serve import create_app
from goagent_py.testing import text_response
from tests.serve.conftest import check_agui


class _Slow:
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


class _Stream:
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


def _text(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


async def test_a_run_started_elsewhere_is_followed_from_its_start_and_live(
    db: str, helpers: Any
) -> None:
    model = _Slow()
    app = create_app(helpers.factory_for(model), storage_path=db)
    try:
        async with helpers.client_for(app) as client:
            tid = (await client.post("/api/threads", json={})).json()["id"]
            r = await client.post(f"/api/threads/{tid}/follow")
            assert r.status_code == 405  # GET only
            r = await client.get(f"/api/threads/{tid}/follow")
            assert r.status_code == 409, r.text  # nothing runs: read the messages
            assert "no run in progress" in r.json()["error"]
            assert (await client.get("/api/threads/nope/follow")).status_code == 404
        # One turn stored first: the followed run goes on from two stored messages.
        model.go.set()
        first = _Stream(app, "POST", f"/api/threads/{tid}/runs", b'{"message": "one"}')
        await asyncio.wait_for(first.ended.wait(), 60)
        model.go.clear()
        model.waiting.clear()

        owner = _Stream(app, "POST", f"/api/threads/{tid}/runs", b'{"message": "two"}')
        await asyncio.wait_for(model.waiting.wait(), 60)
        await owner.until("TEXT_MESSAGE_CONTENT")  # "Hel" went out before the follower came
        follower = _Stream(app, "GET", f"/api/threads/{tid}/follow")
        seen = await follower.until("TEXT_MESSAGE_CONTENT")
        assert follower.status == 200
        assert [e["type"] for e in seen] == [
            "RUN_STARTED",
            "CUSTOM",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
        ]
        assert seen[0] == owner.all[0]  # the same run
        assert seen[1] == {
            "type": "CUSTOM",
            "name": "goagent.following",
            "value": {"stored": 2, "message": "two"},
        }
        assert seen[3]["delta"] == "Hel"
        model.go.set()  # the rest comes live, to both
        await asyncio.wait_for(owner.ended.wait(), 60)
        await asyncio.wait_for(follower.ended.wait(), 60)
        assert follower.all[-1]["type"] == "RUN_FINISHED"
        assert _text(follower.all) == _text(owner.all) == "Hello!"
        check_agui([e for e in follower.all if e.get("name") != "goagent.following"])
        check_agui(owner.all)
    finally:
        await app.aclose()


async def test_a_follower_that_leaves_does_not_stop_the_run(db: str, helpers: Any) -> None:
    model = _Slow()
    app = create_app(helpers.factory_for(model), storage_path=db)
    try:
        async with helpers.client_for(app) as client:
            tid = (await client.post("/api/threads", json={})).json()["id"]
        owner = _Stream(app, "POST", f"/api/threads/{tid}/runs", b'{"message": "hi"}')
        await asyncio.wait_for(model.waiting.wait(), 60)
        follower = _Stream(app, "GET", f"/api/threads/{tid}/follow")
        await follower.until("TEXT_MESSAGE_CONTENT")
        follower.leave()
        await asyncio.wait_for(follower.task, 60)
        model.go.set()
        await asyncio.wait_for(owner.ended.wait(), 60)
        assert owner.all[-1]["type"] == "RUN_FINISHED"
        assert owner.all[-1]["result"]["stopReason"] == "end_turn"
        async with helpers.client_for(app) as client:
            shown = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
        assert [m["text"] for m in shown] == ["hi", "Hello!"]
    finally:
        await app.aclose()


async def test_steers_a_run_took_reach_its_followers(db: str, helpers: Any) -> None:
    model = _Slow()
    app = create_app(helpers.factory_for(model), storage_path=db)
    try:
        async with helpers.client_for(app) as client:
            tid = (await client.post("/api/threads", json={})).json()["id"]
            owner = _Stream(app, "POST", f"/api/threads/{tid}/runs", b'{"message": "hi"}')
            await asyncio.wait_for(model.waiting.wait(), 60)
            follower = _Stream(app, "GET", f"/api/threads/{tid}/follow")
            await follower.until("TEXT_MESSAGE_CONTENT")
            r = await client.post(f"/api/threads/{tid}/steer", json={"message": "shorter"})
            assert r.status_code == 200, r.text
            model.go.set()
            await asyncio.wait_for(follower.ended.wait(), 60)
            await asyncio.wait_for(owner.ended.wait(), 60)
        steered = [e for e in follower.all if e.get("name") == "goagent.steered"]
        assert steered == [
            {"type": "CUSTOM", "name": "goagent.steered", "value": {"messages": ["shorter"]}}
        ]
        # The model read the steer (the run took it), and the follower saw the answer to it.
        users = [m.text for m in model.requests[-1].messages if m.role is Role.USER]
        assert users[-1] == "shorter"
        assert follower.all[-1]["type"] == "RUN_FINISHED"
    finally:
        await app.aclose()


async def test_deltas_ready_together_are_one_event_and_read_ones_never_change() -> None:
    from goagent_py.serve._agui import text_content, text_end, tool_call_args
    from goagent_py.serve._server import RunEvents

    events = RunEvents()
    events.put_delta(text_content, "m1", "a")
    events.put_delta(text_content, "m1", "b")
    first = events.get_nowait()
    assert first == text_content("m1", "ab")
    events.put_delta(text_content, "m1", "c")  # after a read: an event of its own
    events.put_delta(text_content, "m2", "x")  # another message: never joined
    events.put_delta(tool_call_args, "c1", '{"a"')
    events.put_delta(tool_call_args, "c1", ": 1}")
    events.put_nowait(text_end("m2"))
    events.put_nowait(None)
    assert first == text_content("m1", "ab")
    assert events.take() == [
        text_content("m1", "c"),
        text_content("m2", "x"),
        tool_call_args("c1", '{"a": 1}'),
        text_end("m2"),
        None,
    ]
    replay = [batch async for batch in events.follow()]
    assert replay == [
        [
            text_content("m1", "ab"),
            text_content("m1", "c"),
            text_content("m2", "x"),
            tool_call_args("c1", '{"a": 1}'),
            text_end("m2"),
        ]
    ]


async def test_another_users_running_thread_cannot_be_followed(db: str, helpers: Any) -> None:
    from goagent_py.serve import TokenAuth

    model = _Slow()
    alice = {"authorization": "Bearer token-of-alice-0001"}
    bob = {"authorization": "Bearer token-of-bob-000001"}
    auth = TokenAuth({"token-of-alice-0001": "alice", "token-of-bob-000001": "bob"})
    app = create_app(helpers.factory_for(model), storage_path=db, auth=auth)
    try:
        async with helpers.client_for(app) as client:
            tid = (await client.post("/api/threads", json={}, headers=alice)).json()["id"]

            async def run() -> Any:
                path = f"/api/threads/{tid}/runs"
                return await client.post(path, json={"message": "hi"}, headers=alice)

            running = asyncio.create_task(run())
            await asyncio.wait_for(model.waiting.wait(), 60)
            theirs = await client.get(f"/api/threads/{tid}/follow", headers=bob)
            unknown = await client.get("/api/threads/nope/follow", headers=bob)
            assert theirs.status_code == unknown.status_code == 404
            assert theirs.content == unknown.content  # byte for byte: nothing told
            assert (await client.get(f"/api/threads/{tid}/follow")).status_code == 401
            model.go.set()
            assert helpers.sse_events((await running).text)[-1]["type"] == "RUN_FINISHED"
    finally:
        await app.aclose()
