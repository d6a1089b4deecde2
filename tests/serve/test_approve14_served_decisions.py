"""Served decisions checked against the whole record, where they are made (approve14;
docs/approvals.md "Which wait a decision is for", "Sending a decision again"): a bare id a call
outside the thread's window had is a 409 at the route (it was a RUN_ERROR inside the resumed
run's stream), and the page's decision sent again after it went through is answered as done.
"""

from __future__ import annotations

from typing import Any

import pytest
from wiping import RAN, wipe, wipes  # tests/wiping.py

from goagent_py import Agent, ToolCall
from goagent_py.memory import FixedWindow, ShortTermMemory
from goagent_py.serve import create_app
from goagent_py.serve._server import ThreadContext
from goagent_py.testing import FunctionProvider, tool_call_response

pytestmark = pytest.mark.needs_extra("serve")

answer = wipes("llama-tool-0")


def make_app(db: str, *, window: int | None = None) -> Any:
    RAN.clear()

    def factory(ctx: ThreadContext) -> Agent:
        memory = ctx.short_term_memory
        if window is not None:  # the model sees the last few messages; all are stored
            memory = ShortTermMemory(storage=memory.storage, policy=FixedWindow(window))
        return Agent(
            provider=FunctionProvider(answer),
            model="scripted",
            tools=[wipe],
            short_term_memory=memory,
        )

    return create_app(factory, storage_path=db)


async def _asked(client: Any, helpers: Any, tid: str, text: str) -> dict[str, Any]:
    r = await client.post(f"/api/threads/{tid}/runs", json={"message": text})
    assert r.status_code == 200, r.text
    events = helpers.sse_events(r.text)
    assert "outcome" in events[-1], events
    (interrupt,) = events[-1]["outcome"]["interrupts"]
    return dict(interrupt)


async def test_a_bare_reused_id_outside_the_window_is_refused_at_the_route(
    db: str, helpers: Any
) -> None:
    app = make_app(db, window=2)
    async with helpers.client_for(app) as client:
        tid = str((await client.post("/api/threads", json={})).json()["id"])
        url = f"/api/threads/{tid}/decisions"
        first = await _asked(client, helpers, tid, "disk")
        token = first["metadata"]["token"]
        body = {"decisions": {first["id"]: {"decision": "approve", "token": token}}}
        assert (await client.post(url, json=body)).status_code == 200
        second = await _asked(client, helpers, tid, "backup")
        assert second["id"] == first["id"]  # the earlier call is out of the model's window
        bare = await client.post(url, json={"decisions": {second["id"]: {"decision": "approve"}}})
        listed = (await client.get(f"/api/threads/{tid}/messages")).json()
    await app.aclose()
    assert bare.status_code == 409, bare.text
    assert "token" in bare.json()["error"]
    assert RAN == ["disk"]
    assert [p["token"] for p in listed["pending"]] == [second["metadata"]["token"]]


async def test_a_decision_the_page_sends_again_is_answered_as_done(db: str, helpers: Any) -> None:
    app = make_app(db)
    async with helpers.client_for(app) as client:
        tid = str((await client.post("/api/threads", json={})).json()["id"])
        url = f"/api/threads/{tid}/decisions"
        asked = await _asked(client, helpers, tid, "disk")
        decided = {"decision": "approve", "token": asked["metadata"]["token"]}
        done = await client.post(url, json={"decisions": {asked["id"]: decided}})
        again = await client.post(url, json={"decisions": {asked["id"]: decided}})
        other = {"decision": "deny", "token": asked["metadata"]["token"]}
        denied = await client.post(url, json={"decisions": {asked["id"]: other}})
    await app.aclose()
    assert done.status_code == again.status_code == 200
    first, retried = helpers.sse_events(done.text), helpers.sse_events(again.text)
    assert first[-1]["result"]["text"] == retried[-1]["result"]["text"] == "after: wiped disk"
    assert not [e for e in retried if e["type"] == "RUN_ERROR"]
    assert denied.status_code == 409
    assert "already decided" in denied.json()["error"]
    assert RAN == ["disk"]


async def test_an_always_decision_sent_again_does_not_approve_more_calls(
    db: str, helpers: Any
) -> None:
    # "Always" approves a thread's later calls within the budget of the turn; the decision
    # sent again (answered as done) must not start a fresh budget for them.
    def again_and_again(request: Any) -> Any:
        return tool_call_response(ToolCall("llama-tool-0", "wipe", {"target": "tmp"}))

    def factory(ctx: ThreadContext) -> Agent:
        return Agent(
            provider=FunctionProvider(again_and_again),
            model="scripted",
            tools=[wipe],
            short_term_memory=ctx.short_term_memory,
            max_iterations=2,
        )

    RAN.clear()
    app = create_app(factory, storage_path=db)
    async with helpers.client_for(app) as client:
        tid = str((await client.post("/api/threads", json={})).json()["id"])
        url = f"/api/threads/{tid}/decisions"
        asked = await _asked(client, helpers, tid, "go")
        decided = {"decision": "approve", "always": True, "token": asked["metadata"]["token"]}
        done = await client.post(url, json={"decisions": {asked["id"]: decided}})
        ran = list(RAN)
        again = await client.post(url, json={"decisions": {asked["id"]: decided}})
        listed = (await client.get(f"/api/threads/{tid}/messages")).json()
    await app.aclose()
    assert done.status_code == again.status_code == 200
    assert ran == ["tmp", "tmp"]
    assert ran == RAN  # the retry approved nothing more
    assert helpers.sse_events(again.text)[-1]["outcome"]["type"] == "interrupt"
    assert [p["name"] for p in listed["pending"]] == ["wipe"]
