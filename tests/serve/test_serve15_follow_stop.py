"""A run goes on while any stream reads it (docs/serve.md, "Several tabs"): the tab that started
it may close while another tab follows it; the run stops when its last reader leaves, or on an
explicit stop."""

from __future__ import annotations

import asyncio
from typing import Any

from goagent_py.serve import create_app
from tests.serve.test_serve14_follow import _Slow, _Stream, _text


async def test_the_run_goes_on_when_the_tab_that_started_it_closes_while_another_follows(
    db: str, helpers: Any
) -> None:
    model = _Slow()
    app = create_app(helpers.factory_for(model), storage_path=db)
    try:
        async with helpers.client_for(app) as client:
            tid = (await client.post("/api/threads", json={})).json()["id"]
        owner = _Stream(app, "POST", f"/api/threads/{tid}/runs", b'{"message": "hi"}')
        await asyncio.wait_for(model.waiting.wait(), 60)
        follower = _Stream(app, "GET", f"/api/threads/{tid}/follow")
        await follower.until("TEXT_MESSAGE_CONTENT")
        owner.leave()  # the tab that started the run is closed
        await asyncio.wait_for(owner.task, 60)
        async with helpers.client_for(app) as client:
            shown = (await client.get(f"/api/threads/{tid}")).json()
        assert shown["running"] is True
        model.go.set()
        await asyncio.wait_for(follower.ended.wait(), 60)
        assert follower.all[-1]["type"] == "RUN_FINISHED"
        assert follower.all[-1]["result"]["stopReason"] == "end_turn"
        assert _text(follower.all) == "Hello!"
        async with helpers.client_for(app) as client:
            stored = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
        assert [m["text"] for m in stored] == ["hi", "Hello!"]
    finally:
        await app.aclose()


async def test_the_run_stops_when_its_last_reader_leaves(db: str, helpers: Any) -> None:
    model = _Slow()
    app = create_app(helpers.factory_for(model), storage_path=db)
    try:
        async with helpers.client_for(app) as client:
            tid = (await client.post("/api/threads", json={})).json()["id"]
        owner = _Stream(app, "POST", f"/api/threads/{tid}/runs", b'{"message": "hi"}')
        await asyncio.wait_for(model.waiting.wait(), 60)
        followers = [_Stream(app, "GET", f"/api/threads/{tid}/follow") for _ in range(2)]
        for follower in followers:
            await follower.until("TEXT_MESSAGE_CONTENT")
        (run,) = app.server.runs.values()
        owner.leave()
        await asyncio.wait_for(owner.task, 60)
        followers[0].leave()
        await asyncio.wait_for(followers[0].task, 60)
        assert not followers[1].ended.is_set()  # one still reads it: it goes on
        followers[1].leave()  # the last one
        await asyncio.wait_for(followers[1].task, 60)
        await asyncio.wait_for(run.done.wait(), 60)  # stopped: go was never set
        assert run.abort_reason == "stopped by the client"
        async with helpers.client_for(app) as client:
            stored = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
        # Stopped mid-answer: the model's "lo!" never came (go was never set).
        assert "Hello!" not in [m["text"] for m in stored]
        assert stored[0]["text"] == "hi"
    finally:
        await app.aclose()


async def test_an_explicit_stop_ends_a_run_that_others_follow(db: str, helpers: Any) -> None:
    model = _Slow()
    app = create_app(helpers.factory_for(model), storage_path=db)
    try:
        async with helpers.client_for(app) as client:
            tid = (await client.post("/api/threads", json={})).json()["id"]
            owner = _Stream(app, "POST", f"/api/threads/{tid}/runs", b'{"message": "hi"}')
            await asyncio.wait_for(model.waiting.wait(), 60)
            follower = _Stream(app, "GET", f"/api/threads/{tid}/follow")
            await follower.until("TEXT_MESSAGE_CONTENT")
            stopped = await client.post(f"/api/threads/{tid}/stop", json={})
            assert stopped.json() == {"stopped": True}
            await asyncio.wait_for(follower.ended.wait(), 60)
            await asyncio.wait_for(owner.ended.wait(), 60)
        assert "Hello!" not in _text(follower.all)
        assert follower.all[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
    finally:
        await app.aclose()
