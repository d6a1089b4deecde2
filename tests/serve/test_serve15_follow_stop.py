"""A run goes on while any stream reads it (docs/serve.md, "Several tabs"): the tab that started
it may close while another tab follows it; the run stops when its last reader leaves, or on an
explicit stop."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.serve.following import followed_run, text_of


async def test_the_run_goes_on_when_the_tab_that_started_it_closes_while_another_follows(
    db: str, helpers: Any
) -> None:
    async with followed_run(db, helpers) as run:
        (follower,) = run.followers
        run.owner.leave()  # the tab that started the run is closed
        await asyncio.wait_for(run.owner.task, 60)
        async with helpers.client_for(run.app) as client:
            shown = (await client.get(f"/api/threads/{run.tid}")).json()
        assert shown["running"] is True
        run.model.go.set()
        await asyncio.wait_for(follower.ended.wait(), 60)
        assert follower.all[-1]["type"] == "RUN_FINISHED"
        assert follower.all[-1]["result"]["stopReason"] == "end_turn"
        assert text_of(follower.all) == "Hello!"
        async with helpers.client_for(run.app) as client:
            stored = (await client.get(f"/api/threads/{run.tid}/messages")).json()["messages"]
        assert [m["text"] for m in stored] == ["hi", "Hello!"]


async def test_the_run_stops_when_its_last_reader_leaves(db: str, helpers: Any) -> None:
    async with followed_run(db, helpers, followers=2) as followed:
        app, tid, owner, followers = followed.app, followed.tid, followed.owner, followed.followers
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


async def test_an_explicit_stop_ends_a_run_that_others_follow(db: str, helpers: Any) -> None:
    async with followed_run(db, helpers) as run:
        (follower,) = run.followers
        async with helpers.client_for(run.app) as client:
            stopped = await client.post(f"/api/threads/{run.tid}/stop", json={})
            assert stopped.json() == {"stopped": True}
            await asyncio.wait_for(follower.ended.wait(), 60)
            await asyncio.wait_for(run.owner.ended.wait(), 60)
        assert "Hello!" not in text_of(follower.all)
        assert follower.all[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
