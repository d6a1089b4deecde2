"""GET /api/threads/{id}/follow: a run started elsewhere (another tab, another client), from its
first event and then live, for a tab that did not start it (docs/serve.md, "Several tabs");
and a run's deltas ready together go out as one event (issue 36)."""

from __future__ import annotations

import asyncio
from typing import Any

from goagent_py.messages import Role
from goagent_py.serve import create_app
from tests.serve.conftest import check_agui
from tests.serve.following import Slow, Stream, followed_run, text_of


async def test_a_run_started_elsewhere_is_followed_from_its_start_and_live(
    db: str, helpers: Any
) -> None:
    model = Slow()
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
        first = Stream(app, "POST", f"/api/threads/{tid}/runs", b'{"message": "one"}')
        await asyncio.wait_for(first.ended.wait(), 60)
        model.go.clear()
        model.waiting.clear()

        owner = Stream(app, "POST", f"/api/threads/{tid}/runs", b'{"message": "two"}')
        await asyncio.wait_for(model.waiting.wait(), 60)
        await owner.until("TEXT_MESSAGE_CONTENT")  # "Hel" went out before the follower came
        follower = Stream(app, "GET", f"/api/threads/{tid}/follow")
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
        assert text_of(follower.all) == text_of(owner.all) == "Hello!"
        check_agui([e for e in follower.all if e.get("name") != "goagent.following"])
        check_agui(owner.all)
    finally:
        await app.aclose()


async def test_a_follower_that_leaves_does_not_stop_the_run(db: str, helpers: Any) -> None:
    async with followed_run(db, helpers) as run:
        (follower,) = run.followers
        follower.leave()
        await asyncio.wait_for(follower.task, 60)
        run.model.go.set()
        await asyncio.wait_for(run.owner.ended.wait(), 60)
        assert run.owner.all[-1]["type"] == "RUN_FINISHED"
        assert run.owner.all[-1]["result"]["stopReason"] == "end_turn"
        async with helpers.client_for(run.app) as client:
            shown = (await client.get(f"/api/threads/{run.tid}/messages")).json()["messages"]
        assert [m["text"] for m in shown] == ["hi", "Hello!"]


async def test_steers_a_run_took_reach_its_followers(db: str, helpers: Any) -> None:
    async with followed_run(db, helpers) as run:
        model, (follower,) = run.model, run.followers
        async with helpers.client_for(run.app) as client:
            r = await client.post(f"/api/threads/{run.tid}/steer", json={"message": "shorter"})
            assert r.status_code == 200, r.text
            model.go.set()
            await asyncio.wait_for(follower.ended.wait(), 60)
            await asyncio.wait_for(run.owner.ended.wait(), 60)
        steered = [e for e in follower.all if e.get("name") == "goagent.steered"]
        assert steered == [
            {"type": "CUSTOM", "name": "goagent.steered", "value": {"messages": ["shorter"]}}
        ]
        # The model read the steer (the run took it), and the follower saw the answer to it.
        users = [m.text for m in model.requests[-1].messages if m.role is Role.USER]
        assert users[-1] == "shorter"
        assert follower.all[-1]["type"] == "RUN_FINISHED"


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

    model = Slow()
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
