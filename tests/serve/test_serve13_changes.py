"""GET /api/events: the changes to a user's threads as they happen, for the page's other tabs
and any other client (docs/serve.md, "Several tabs")."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from goagent_py.serve import TokenAuth, create_app
from goagent_py.testing import ScriptedProvider


class _Stream:
    """GET ``path`` on the app, read as its frames arrive (httpx's ASGI transport waits for
    the whole body)."""

    def __init__(self, app: Any, path: str, headers: list[tuple[bytes, bytes]]) -> None:
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.status = 0
        self.gone = asyncio.Event()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", b"127.0.0.1"), *headers],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
        }
        self.ended = asyncio.Event()
        self.task = asyncio.create_task(app(scope, self._receive, self._send))

    async def _receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            return
        for line in message.get("body", b"").decode().splitlines():
            if line.startswith("data:"):
                self.events.put_nowait(json.loads(line[5:]))
        if not message.get("more_body", False):
            self.ended.set()

    async def next(self) -> dict[str, Any]:
        return await asyncio.wait_for(self.events.get(), 30)


async def test_another_clients_turn_and_thread_changes_reach_an_open_stream(
    db: str, helpers: Any
) -> None:
    app = create_app(helpers.factory_for(ScriptedProvider("an answer")), storage_path=db)
    watching = _Stream(app, "/api/events", [])
    assert (await watching.next()) == {"type": "hello"}
    assert watching.status == 200
    async with helpers.client_for(app) as client:
        tid = (await client.post("/api/threads", json={})).json()["id"]
        assert await watching.next() == {"type": "created", "threadId": tid}
        run = await client.post(f"/api/threads/{tid}/runs", json={"message": "hello"})
        run_id = helpers.sse_events(run.text)[0]["runId"]
        assert await watching.next() == {"type": "renamed", "threadId": tid, "title": "hello"}
        assert await watching.next() == {"type": "running", "threadId": tid, "runId": run_id}
        assert await watching.next() == {"type": "ran", "threadId": tid, "runId": run_id}
        # what "ran" says is there to read is there
        msgs = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
        assert [m["text"] for m in msgs] == ["hello", "an answer"]
        await client.patch(f"/api/threads/{tid}", json={"title": "kept"})
        assert await watching.next() == {"type": "renamed", "threadId": tid, "title": "kept"}
        await client.delete(f"/api/threads/{tid}")
        assert await watching.next() == {"type": "deleted", "threadId": tid}
    await app.aclose()  # a closing server ends the stream
    await asyncio.wait_for(watching.ended.wait(), 30)
    await watching.task


async def test_a_users_stream_never_carries_another_users_changes(db: str, helpers: Any) -> None:
    auth = TokenAuth({"token-of-alice-0001": "alice", "token-of-bob-000001": "bob"})
    app = create_app(helpers.factory_for(ScriptedProvider("x")), storage_path=db, auth=auth)
    alice = _Stream(app, "/api/events", [(b"authorization", b"Bearer token-of-alice-0001")])
    assert (await alice.next()) == {"type": "hello"}
    refused = _Stream(app, "/api/events", [])
    await asyncio.wait_for(refused.task, 30)
    assert refused.status == 401
    async with helpers.client_for(app) as client:
        bob = {"authorization": "Bearer token-of-bob-000001"}
        await client.post("/api/threads", json={}, headers=bob)
        tid = (
            await client.post(
                "/api/threads", json={}, headers={"authorization": "Bearer token-of-alice-0001"}
            )
        ).json()["id"]
    assert await alice.next() == {"type": "created", "threadId": tid}  # bob's never came
    alice.gone.set()  # the tab closed: the server forgets the stream
    await asyncio.wait_for(alice.task, 30)
    assert app.server.watchers == {}
    await app.aclose()


async def test_the_thread_list_says_which_threads_run_now(db: str, helpers: Any) -> None:
    from goagent_py.testing import FunctionProvider

    entered, gate = asyncio.Event(), asyncio.Event()

    async def answer(request: Any) -> str:
        entered.set()
        await gate.wait()
        return "done"

    app = create_app(helpers.factory_for(FunctionProvider(answer)), storage_path=db)
    async with helpers.client_for(app) as client:
        tid = (await client.post("/api/threads", json={})).json()["id"]
        other = (await client.post("/api/threads", json={})).json()["id"]
        run = asyncio.create_task(client.post(f"/api/threads/{tid}/runs", json={"message": "q"}))
        await entered.wait()
        listed = {
            t["id"]: t["running"] for t in (await client.get("/api/threads")).json()["threads"]
        }
        assert listed == {tid: True, other: False}
        gate.set()
        await run
        listed = {
            t["id"]: t["running"] for t in (await client.get("/api/threads")).json()["threads"]
        }
        assert listed == {tid: False, other: False}
    await app.aclose()
