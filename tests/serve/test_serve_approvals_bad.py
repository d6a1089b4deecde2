"""Served approvals (issue 35): the AG-UI interrupt and its resume, checked with the
``ag-ui-protocol`` models, and the decisions the server refuses (a call that does not wait, a
second click while the first runs, a decision after the run went on) without losing the
record."""

from __future__ import annotations

import asyncio
from typing import Any

from wiping import RAN, wipe  # tests/wiping.py

from goagent_py import Role, tool, validate_transcript
from goagent_py.serve import create_app
from goagent_py.testing import FunctionProvider, text_response, tool_call_response

STARTED = asyncio.Event()
RELEASE = asyncio.Event()


@tool(requires_approval=True)
async def slow_wipe(target: str) -> str:
    """Wipe something, waiting for the test's go.

    Args:
        target: what.
    """
    STARTED.set()
    await RELEASE.wait()
    RAN.append(target)
    return f"wiped {target}"


def answer_with(name: str) -> Any:
    def answer(request: Any) -> Any:
        last = request.messages[-1]
        if last.role is Role.TOOL:
            return text_response(f"after: {last.text}")
        return tool_call_response((name, {"target": last.text}))

    return answer


def make_app(db: str, helpers: Any, name: str = "wipe", **options: Any) -> Any:
    RAN.clear()
    tools = [wipe, slow_wipe]
    factory = helpers.factory_for(FunctionProvider(answer_with(name)), tools)
    return create_app(factory, storage_path=db, **options)


def _parsed(events: list[dict[str, Any]]) -> list[Any]:
    """Every event parsed by the protocol's models, unchanged by a round trip."""
    from ag_ui.core import Event
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(Event)
    out = []
    for e in events:
        model = adapter.validate_python(e)
        assert not model.model_extra, model.model_extra
        assert model.model_dump(mode="json", by_alias=True, exclude_none=True) == e, e
        out.append(model)
    return out


async def _ask(client: Any, text: str) -> tuple[str, list[dict[str, Any]]]:
    r = await client.post("/api/threads", json={})
    tid = str(r.json()["id"])
    r = await client.post(f"/api/threads/{tid}/runs", json={"message": text})
    return tid, list(client.helpers.sse_events(r.text))


async def test_the_interrupt_and_its_resume_are_protocol_valid(db: str, helpers: Any) -> None:
    from ag_ui.core import ResumeEntry, RunFinishedEvent, RunFinishedInterruptOutcome

    app = make_app(db, helpers)
    async with helpers.client_for(app) as client:
        client.helpers = helpers
        tid, asked = await _ask(client, "disk")
        # Nothing waits in the server for the click: the run ended, its record holds the call.
        assert (await app.server.live_of("local", tid)).run is None
        assert app.server.runs == {}
        entry = ResumeEntry(
            interrupt_id=asked[-1]["outcome"]["interrupts"][0]["id"], status="resolved"
        )
        r = await client.post(
            f"/api/threads/{tid}/decisions",
            json={"resume": [entry.model_dump(mode="json", by_alias=True, exclude_none=True)]},
        )
        resumed = helpers.sse_events(r.text)
    await app.aclose()

    first = _parsed(asked)
    finished = first[-1]
    assert isinstance(finished, RunFinishedEvent)
    assert isinstance(finished.outcome, RunFinishedInterruptOutcome)
    (interrupt,) = finished.outcome.interrupts
    # The interrupt names the call the run's own TOOL_CALL_* events announced, unanswered.
    started = [e for e in asked if e["type"] == "TOOL_CALL_START"]
    assert [(e["toolCallId"], e["toolCallName"]) for e in started] == [
        (interrupt.tool_call_id, "wipe")
    ]
    assert interrupt.id == interrupt.tool_call_id
    assert not [e for e in asked if e["type"] == "TOOL_CALL_RESULT"]

    second = _parsed(resumed)
    assert resumed[0]["type"] == "RUN_STARTED"
    results = [e for e in resumed if e["type"] == "TOOL_CALL_RESULT"]
    assert [e["toolCallId"] for e in results] == [interrupt.tool_call_id]
    assert isinstance(second[-1], RunFinishedEvent)
    assert second[-1].outcome is None or second[-1].outcome.type == "success"
    assert RAN == ["disk"]


async def test_a_call_that_does_not_wait_and_a_finished_run_are_refused(
    db: str, helpers: Any
) -> None:
    app = make_app(db, helpers)
    async with helpers.client_for(app) as client:
        client.helpers = helpers
        tid, asked = await _ask(client, "disk")
        call_id = asked[-1]["outcome"]["interrupts"][0]["id"]
        url = f"/api/threads/{tid}/decisions"
        stranger = await client.post(url, json={"decisions": {"nope": {"decision": "approve"}}})
        unclear = await client.post(url, json={"decisions": {call_id: {"decision": "maybe"}}})
        still = (await client.get(f"/api/threads/{tid}/messages")).json()["pending"]
        done = await client.post(url, json={"decisions": {call_id: {"decision": "approve"}}})
        late = await client.post(
            url, json={"decisions": {call_id: {"decision": "deny", "message": "no"}}}
        )
        after = (await client.get(f"/api/threads/{tid}/messages")).json()
    await app.aclose()

    assert stranger.status_code == 409
    assert "'nope'" in stranger.json()["error"]
    assert call_id in stranger.json()["error"]  # and which calls do wait
    assert unclear.status_code == 400
    assert '"approve"' in unclear.json()["error"]
    assert [p["id"] for p in still] == [call_id]  # nothing lost by the refusals
    assert done.status_code == 200
    assert late.status_code == 409
    assert "waits for a decision" in late.json()["error"]
    assert after["pending"] == []
    assert RAN == ["disk"]


async def test_two_decisions_at_once_the_first_wins(db: str, helpers: Any) -> None:
    # busy="interrupt" lets a new message stop a running run; a decision never does.
    global STARTED, RELEASE  # new ones: an asyncio.Event binds to the loop it first waits on
    STARTED, RELEASE = asyncio.Event(), asyncio.Event()
    app = make_app(db, helpers, name="slow_wipe", busy="interrupt")
    async with helpers.client_for(app) as client:
        client.helpers = helpers
        tid, asked = await _ask(client, "disk")
        call_id = asked[-1]["outcome"]["interrupts"][0]["id"]
        url = f"/api/threads/{tid}/decisions"
        first = asyncio.create_task(
            client.post(url, json={"decisions": {call_id: {"decision": "approve"}}})
        )
        await STARTED.wait()  # the first decision's run holds the thread, its tool running
        second = await client.post(
            url, json={"decisions": {call_id: {"decision": "deny", "message": "no"}}}
        )
        RELEASE.set()
        won = await first
        listed = (await client.get(f"/api/threads/{tid}/messages")).json()
        live = await app.server.live_of("local", tid)
        stored = await live.session.agent.options.short_term_memory.transcript()
    await app.aclose()

    assert second.status_code == 409
    assert "in progress" in second.json()["error"]  # the record refuses it too
    events = helpers.sse_events(won.text)
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["result"]["text"] == "after: wiped disk"
    assert RAN == ["disk"]
    assert listed["pending"] == []
    assert validate_transcript(stored, allow_pending=False) == []
