"""The SSE response of a run (serve/_sse.py): its headers, keep-alive comments, and the ways a
stream ends early (the client disconnects, the server shuts down), each aborting the run."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from goagent_py.messages import StopReason
from goagent_py.provider import StreamDone, TextDelta
from goagent_py.serve import create_app
from goagent_py.serve._sse import sse_frame
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response
from goagent_py.tools import tool


class _Gate:
    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    def tool(self) -> Any:
        @tool
        async def wait_here() -> str:
            """Wait."""
            self.entered.set()
            await self.release.wait()
            return "released"

        return wait_here


async def _thread(app: Any, helpers: Any) -> str:
    async with helpers.client_for(app) as client:
        r = await client.post("/api/threads", json={})
        return str(r.json()["id"])


async def _messages(app: Any, helpers: Any, tid: str) -> list[dict[str, Any]]:
    async with helpers.client_for(app) as client:
        found = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
    return list(found)


async def test_a_run_stream_sends_the_event_stream_headers(echo_app: Any, helpers: Any) -> None:
    tid = await _thread(echo_app, helpers)
    async with helpers.client_for(echo_app) as client:
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "hi"})
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert r.headers["cache-control"] == "no-store"
    assert r.headers["x-accel-buffering"] == "no"
    assert r.headers["connection"] == "keep-alive"
    # The keep-alive interval: the page counts a stream silent for much longer as lost.
    assert r.headers["x-goagent-ping-seconds"] == "15"
    # The security headers of every response.
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["content-security-policy"].startswith("default-src 'none'")
    # Every frame is a whole "data: <json>" event.
    assert r.text.endswith("\r\n\r\n")
    assert all(f.startswith("data: {") for f in r.text.split("\r\n\r\n") if f)


async def test_a_quiet_stream_sends_keep_alive_comments(db: str, helpers: Any) -> None:
    gate = _Gate()
    provider = ScriptedProvider(tool_call_response(("wait_here", {})), "done")
    app = create_app(helpers.factory_for(provider, [gate.tool()]), storage_path=db)
    app.server.sse_ping = 0.01
    tid = await _thread(app, helpers)
    body = b'{"message": "go"}'
    receive = helpers.body_then_wait(body)
    chunks: list[bytes] = []
    more: list[bool] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            chunks.append(message["body"])
            more.append(message["more_body"])
            # The tool waits until a keep-alive comment went out while it was quiet.
            if message["body"].startswith(b": ping - "):
                gate.release.set()

    await app(helpers.post_scope(f"/api/threads/{tid}/runs", body), receive, send)
    text = b"".join(chunks).decode()
    pings = [c for c in chunks if c.startswith(b":")]
    assert pings
    assert all(c.endswith(b"\r\n\r\n") and c.count(b"\n") == 2 for c in pings)
    events = [json.loads(f[6:]) for f in text.split("\r\n\r\n") if f.startswith("data: ")]
    assert events[-1]["type"] == "RUN_FINISHED"
    # The end of the response (with the last events), after which nothing is sent.
    assert more == [True] * (len(more) - 1) + [False]
    await app.aclose()


@pytest.mark.parametrize("gone", ["disconnect message", "receive fails"])
async def test_a_disconnect_message_ends_the_stream_and_aborts_the_run(
    db: str, helpers: Any, gone: str
) -> None:
    # The client goes away while the run is in its tool: the server's receive() says so (or
    # fails), the response ends normally (no error for the ASGI server to log) and the run is
    # aborted.
    gate = _Gate()
    provider = ScriptedProvider(tool_call_response(("wait_here", {})), "never")
    app = create_app(helpers.factory_for(provider, [gate.tool()]), storage_path=db)
    tid = await _thread(app, helpers)
    body = b'{"message": "go"}'
    received = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if received:
            return received.pop()
        await gate.entered.wait()
        if gone == "receive fails":
            raise OSError("connection reset")
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(helpers.post_scope(f"/api/threads/{tid}/runs", body), receive, send)
    live = app.server.live[("local", tid)]
    if live.run is not None:
        await live.run.done.wait()
    result = live.session.state.last_result
    assert result is not None
    assert result.stop_reason is StopReason.ABORTED
    assert not gate.release.is_set()
    assert sent[0]["type"] == "http.response.start"
    assert all(m.get("more_body", True) for m in sent[1:])  # cut off, not finished
    assert [m["role"] for m in await _messages(app, helpers, tid)] == ["user", "assistant", "tool"]
    await app.aclose()


@pytest.mark.slow
async def test_a_server_shutting_down_ends_open_streams_and_aborts_their_runs(
    db: str, helpers: Any
) -> None:
    # uvicorn waits for open responses before it exits: a stream must end on its exit flag,
    # or a run waiting in a tool would keep the server from stopping.
    uvicorn = pytest.importorskip("uvicorn")
    gate = _Gate()
    provider = ScriptedProvider(tool_call_response(("wait_here", {})), "never")
    app = create_app(helpers.factory_for(provider, [gate.tool()]), storage_path=db)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            tid = (await client.post("/api/threads", json={})).json()["id"]
            async with client.stream(
                "POST", f"/api/threads/{tid}/runs", json={"message": "go"}
            ) as response:
                lines = response.aiter_lines()
                await gate.entered.wait()
                live = app.server.live[("local", tid)]
                server.should_exit = True
                types = [json.loads(x[5:])["type"] async for x in lines if x.startswith("data:")]
        await serving  # returns only once the stream has ended
    finally:
        server.should_exit = True
        sock.close()
    assert types[0] == "RUN_STARTED"
    assert "RUN_FINISHED" not in types
    if live.run is not None:
        await live.run.done.wait()
    result = live.session.state.last_result
    assert result is not None
    assert result.stop_reason is StopReason.ABORTED
    assert not gate.release.is_set()
    await app.aclose()


# -- the routes of a turn, called without Starlette's router (serve/app.py) ------------------


async def test_the_turn_routes_keep_every_check_and_the_security_headers(
    echo_app: Any, helpers: Any
) -> None:
    tid = await _thread(echo_app, helpers)
    runs = f"/api/threads/{tid}/runs"
    async with helpers.client_for(echo_app) as client:
        # Host and Origin are checked before any route.
        r = await client.post(runs, json={"message": "hi"}, headers={"host": "evil.example"})
        assert r.status_code == 421
        r = await client.post(runs, json={"message": "hi"}, headers={"origin": "http://x.example"})
        assert r.status_code == 403
        r = await client.post("/v1/chat/completions", json={}, headers={"origin": "http://x.y"})
        assert r.status_code == 403
        # The endpoints' own errors, with the security headers of every response.
        for path, body, status in [
            ("/api/threads/nope/runs", {"message": "hi"}, 404),
            (runs, {"message": ""}, 400),
            ("/v1/chat/completions", {"messages": "no"}, 400),
            ("/v1/responses", {}, 400),
        ]:
            r = await client.post(path, json=body)
            assert r.status_code == status, (path, r.text)
            assert r.headers["x-frame-options"] == "DENY"
            assert r.headers["content-type"] == "application/json"
        r = await client.post(runs, content=b"message=hi", headers={"content-type": "text/plain"})
        assert r.status_code == 415
        # Not a POST, or a longer path: Starlette's router answers, as before.
        assert (await client.get(runs)).status_code == 405
        r = await client.post(f"/api/threads/{tid}/x/runs", json={"message": "hi"})
        assert r.status_code == 404
        assert r.headers["x-frame-options"] == "DENY"
        # A JSON answer of /v1, and its stream.
        ask = {"model": "goagent", "messages": [{"role": "user", "content": "hey"}]}
        r = await client.post("/v1/chat/completions", json=ask)
        assert r.json()["choices"][0]["message"]["content"] == "echo: hey"
        assert r.headers["referrer-policy"] == "no-referrer"
        r = await client.post("/v1/chat/completions", json={**ask, "stream": True})
        assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert r.headers["referrer-policy"] == "no-referrer"
        assert r.text.endswith("data: [DONE]\r\n\r\n")


async def test_an_unexpected_error_in_a_turn_route_is_a_plain_500_and_reaches_the_server(
    db: str, helpers: Any
) -> None:
    from goagent_py.errors import ConfigurationError

    app = create_app(lambda ctx: None, storage_path=db)  # not an Agent: a bug in the app
    tid = await _thread(app, helpers)
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        with pytest.raises(ConfigurationError, match="must return an Agent"):
            await client.post(f"/api/threads/{tid}/runs", json={"message": "hi"})
    quiet = httpx.ASGITransport(app=app, client=("127.0.0.1", 1), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=quiet, base_url="http://127.0.0.1") as client:
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "hi"})
    assert r.status_code == 500
    assert r.text == "Internal Server Error"
    assert r.headers["x-content-type-options"] == "nosniff"
    await app.aclose()


class _Paced:
    """A streaming model that produces each text delta only once the one before it reached the
    client (the test's ``send`` counts them): a stream that held a ready event back to send it
    with later ones would never get the next delta (the wait fails after 60 s)."""

    def __init__(self, words: list[str]) -> None:
        self.words = words
        self.delivered = 0  # text deltas the client has received
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
        self.delivered += body.count(b'"type": "TEXT_MESSAGE_CONTENT"')
        self.progress.set()


async def test_a_slow_stream_sends_each_event_before_the_next_is_made_and_ends_in_one_write(
    db: str, helpers: Any
) -> None:
    # Issue 36: the stream writes the events that are ready together, never holding one back
    # for the next; the last events go out with the end of the response (one write, not two),
    # and the bytes are the same event stream, whole frames of the events' JSON.
    words = [f"w{i}" for i in range(6)]
    model = _Paced(words)
    app = create_app(helpers.factory_for(model), storage_path=db)
    tid = await _thread(app, helpers)
    body = b'{"message": "go"}'
    receive = helpers.body_then_wait(body)
    bodies: list[tuple[bytes, bool]] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            bodies.append((message["body"], message["more_body"]))
            model.saw(message["body"])

    await app(helpers.post_scope(f"/api/threads/{tid}/runs", body), receive, send)
    await app.aclose()
    assert model.produced == [(i, i) for i in range(len(words))]
    wire = b"".join(b for b, _ in bodies)
    frames = wire.split(b"\r\n\r\n")
    assert frames[-1] == b""
    events = [json.loads(f.removeprefix(b"data: ")) for f in frames[:-1]]
    assert all(f.startswith(b"data: ") for f in frames[:-1])
    assert wire == b"".join(sse_frame(json.dumps(e)) for e in events)
    assert "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == " ".join(
        words
    )
    # Every write is whole frames; only the last ends the response, and it holds RUN_FINISHED.
    assert all(b.endswith(b"\r\n\r\n") for b, _ in bodies)
    assert [more for _, more in bodies] == [True] * (len(bodies) - 1) + [False]
    assert events[-1]["type"] == "RUN_FINISHED"
    assert b'"type": "RUN_FINISHED"' in bodies[-1][0]
