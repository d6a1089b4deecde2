"""The OpenAI-compatible streams' writes (issue 36): the frames of the events that are ready at
once go out as one chunk, never holding one back for the next, and the last ones end the
response; the bytes are the same event stream."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from goagent_py.provider import StreamDone, TextDelta
from goagent_py.serve import create_app
from goagent_py.testing import ScriptedProvider, text_response

_PATHS = ["/v1/chat/completions", "/v1/responses"]
_WORD = re.compile(rb'": " ?(w\d+)"')  # a text delta's frame (chat's content, responses' delta)


def _ask(path: str) -> bytes:
    if path.endswith("completions"):
        return json.dumps(
            {"model": "goagent", "stream": True, "messages": [{"role": "user", "content": "go"}]}
        ).encode()
    return json.dumps({"model": "goagent", "stream": True, "input": "go"}).encode()


async def _bodies(app: Any, path: str, helpers: Any, saw: Any = None) -> list[tuple[bytes, bool]]:
    """The body messages of one streamed request, as the app sends them."""
    body = _ask(path)
    bodies: list[tuple[bytes, bool]] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            bodies.append((message["body"], message["more_body"]))
            if saw is not None:
                saw(message["body"])

    await app(helpers.post_scope(path, body), helpers.body_then_wait(body), send)
    return bodies


def _frames(bodies: list[tuple[bytes, bool]]) -> list[bytes]:
    wire = b"".join(b for b, _ in bodies)
    frames = wire.split(b"\r\n\r\n")
    assert frames[-1] == b""
    return frames[:-1]


def _text(frames: list[bytes], path: str) -> str:
    text = ""
    for frame in frames:
        data = frame.split(b"data: ", 1)[1]
        if data == b"[DONE]":
            continue
        event = json.loads(data)
        if path.endswith("completions"):
            for choice in event.get("choices", []):
                text += choice["delta"].get("content") or ""
        elif event["type"] == "response.output_text.delta":
            text += event["delta"]
    return text


@pytest.mark.parametrize("path", _PATHS)
async def test_the_events_ready_at_once_go_out_in_one_write(
    db: str, helpers: Any, path: str
) -> None:
    # The scripted model streams its six deltas without waiting: they were six writes (one
    # chunk per event); now one, and the stream's last frames end the response. Ready
    # together, the six deltas are one event (one chunk of the answer's text).
    words = " ".join(f"w{i}" for i in range(6))
    app = create_app(helpers.factory_for(ScriptedProvider(words)), storage_path=db)
    try:
        bodies = await _bodies(app, path, helpers)
    finally:
        await app.aclose()
    frames = _frames(bodies)
    assert _text(frames, path) == words
    assert all(b.endswith(b"\r\n\r\n") for b, _ in bodies)  # whole frames in every write
    assert [more for _, more in bodies] == [True] * (len(bodies) - 1) + [False]
    with_text = [b for b, _ in bodies if _text(_frames([(b, True)]), path)]
    assert len(with_text) == 1
    assert _text(_frames([(with_text[0], True)]), path) == words
    end = b"data: [DONE]" if path.endswith("completions") else b"event: response.completed"
    assert frames[-1].startswith(end)
    assert bodies[-1][0].endswith(frames[-1] + b"\r\n\r\n")


class _Paced:
    """A streaming model that makes each text delta only once the one before it reached the
    client: a stream that held a ready frame back for later ones would never get the next
    delta (the wait fails after 60 s)."""

    def __init__(self, words: list[str]) -> None:
        self.words = words
        self.delivered = 0
        self.progress = asyncio.Event()
        self.produced: list[tuple[int, int]] = []  # (delta index, deltas delivered before it)

    async def complete(self, request: Any) -> Any:
        raise AssertionError("the served run streams")

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        for i, word in enumerate(self.words):
            async with asyncio.timeout(60):
                while self.delivered < i:
                    self.progress.clear()
                    await self.progress.wait()
            self.produced.append((i, self.delivered))
            yield TextDelta(word if i == 0 else " " + word)
        yield StreamDone(text_response(" ".join(self.words)))

    def saw(self, body: bytes) -> None:
        self.delivered += len(_WORD.findall(body))
        self.progress.set()


@pytest.mark.parametrize("path", _PATHS)
async def test_a_paced_model_s_deltas_each_reach_the_client_before_the_next_is_made(
    db: str, helpers: Any, path: str
) -> None:
    words = [f"w{i}" for i in range(5)]
    model = _Paced(words)
    app = create_app(helpers.factory_for(model), storage_path=db)
    try:
        bodies = await _bodies(app, path, helpers, model.saw)
    finally:
        await app.aclose()
    assert model.produced == [(i, i) for i in range(len(words))]
    assert _text(_frames(bodies), path) == " ".join(words)
    assert all(b.endswith(b"\r\n\r\n") for b, _ in bodies)
    assert [more for _, more in bodies] == [True] * (len(bodies) - 1) + [False]
