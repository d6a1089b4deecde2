"""When a run's RUN_STARTED is made (issue 36): once the run has begun (its user message stored,
or the model called), so it shares its write with what is ready at once after it, and never
waits for a model that takes its time."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from goagent_py.provider import StreamDone, TextDelta
from goagent_py.serve import create_app
from goagent_py.testing import ScriptedProvider, text_response


async def _thread(app: Any, helpers: Any) -> str:
    async with helpers.client_for(app) as client:
        r = await client.post("/api/threads", json={})
        assert r.status_code == 201
        return str(r.json()["id"])


async def _run(app: Any, helpers: Any, saw: Any = None) -> list[tuple[bytes, bool]]:
    """The body messages of one AG-UI run's stream, as the app sends them."""
    tid = await _thread(app, helpers)
    body = b'{"message": "go"}'
    bodies: list[tuple[bytes, bool]] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            bodies.append((message["body"], message["more_body"]))
            if saw is not None:
                saw(message["body"])

    scope = helpers.post_scope(f"/api/threads/{tid}/runs", body)
    await app(scope, helpers.body_then_wait(body), send)
    return bodies


def _types(body: bytes) -> list[str]:
    return [json.loads(f.removeprefix(b"data: "))["type"] for f in body.split(b"\r\n\r\n")[:-1]]


async def test_run_started_goes_out_with_an_answer_ready_at_once(db: str, helpers: Any) -> None:
    # The scripted model streams its answer without waiting: RUN_STARTED, the answer and
    # RUN_FINISHED were three writes (RUN_STARTED was made before the user's message was
    # stored, alone in its write); now RUN_STARTED goes with the answer.
    app = create_app(helpers.factory_for(ScriptedProvider("one two three")), storage_path=db)
    try:
        bodies = await _run(app, helpers)
        stored = await app.server.live[("local", next(iter(app.server.live))[1])].session.load()
    finally:
        await app.aclose()
    # The three deltas were ready together: one TEXT_MESSAGE_CONTENT holds them.
    assert [_types(b) for b, _ in bodies] == [
        ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"],
        ["RUN_FINISHED"],
    ]
    assert b'"delta": "one two three"' in bodies[0][0]
    assert [more for _, more in bodies] == [True, False]
    assert [m.text for m in stored] == ["go", "one two three"]


class _Waiting:
    """A streaming model that makes its first delta only once the client has RUN_STARTED: a
    stream that held RUN_STARTED for the model's first event would never get it (the wait
    fails after 60 s)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.seen: list[list[str]] = []

    async def complete(self, request: Any) -> Any:
        raise AssertionError("the served run streams")

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        async with asyncio.timeout(60):
            await self.started.wait()
        yield TextDelta("late")
        yield StreamDone(text_response("late"))

    def saw(self, body: bytes) -> None:
        self.seen.append(_types(body))
        if b'"type": "RUN_STARTED"' in body:
            self.started.set()


async def test_run_started_never_waits_for_the_model(db: str, helpers: Any) -> None:
    model = _Waiting()
    app = create_app(helpers.factory_for(model), storage_path=db)
    try:
        await _run(app, helpers, model.saw)
    finally:
        await app.aclose()
    assert model.seen[0] == ["RUN_STARTED"]
    assert [t for ts in model.seen for t in ts] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]


async def test_run_started_comes_first_when_the_run_fails_at_once(db: str, helpers: Any) -> None:
    # A model that fails before anything: RUN_STARTED, then RUN_ERROR (the run's end makes a
    # held RUN_STARTED too).
    class _Failing:
        async def complete(self, request: Any) -> Any:
            raise RuntimeError("down")

        async def stream(self, request: Any) -> AsyncIterator[Any]:
            raise RuntimeError("down")
            yield  # pragma: no cover

    app = create_app(helpers.factory_for(_Failing()), storage_path=db)
    try:
        bodies = await _run(app, helpers)
    finally:
        await app.aclose()
    types = [t for b, _ in bodies for t in _types(b)]
    assert types[0] == "RUN_STARTED"
    assert types[-1] == "RUN_ERROR"
