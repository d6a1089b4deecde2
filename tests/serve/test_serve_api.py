"""The serve API over ASGI: threads, runs as AG-UI events, history rebuilt from storage."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from goagent_py.serve import create_app
from goagent_py.testing import ScriptedProvider, tool_call_response


async def _thread(client: Any, title: str = "") -> str:
    r = await client.post("/api/threads", json={"title": title} if title else {})
    assert r.status_code == 201
    return str(r.json()["id"])


async def test_a_run_streams_agui_events_and_history_is_rebuilt(
    echo_app: Any, helpers: Any
) -> None:
    async with helpers.client_for(echo_app) as client:
        tid = await _thread(client)
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "hello there"})
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = helpers.sse_events(r.text)
        types = [e["type"] for e in events]
        assert types[0] == "RUN_STARTED"
        assert types[-1] == "RUN_FINISHED"
        assert "TEXT_MESSAGE_START" in types
        assert "TEXT_MESSAGE_END" in types
        text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
        assert text == "echo: hello there"
        threads = (await client.get("/api/threads")).json()["threads"]
        assert threads[0]["title"] == "hello there"
        msgs = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
        assert [(m["role"], m["text"]) for m in msgs] == [
            ("user", "hello there"),
            ("assistant", "echo: hello there"),
        ]


async def test_a_new_app_on_the_same_file_restores_threads(db: str, helpers: Any) -> None:
    provider = ScriptedProvider("first answer")
    app = create_app(helpers.factory_for(provider), storage_path=db)
    async with helpers.client_for(app) as client:
        tid = await _thread(client, "kept")
        await client.post(f"/api/threads/{tid}/runs", json={"message": "q"})
    await app.aclose()
    again = create_app(helpers.factory_for(ScriptedProvider()), storage_path=db)
    async with helpers.client_for(again) as client:
        assert [t["id"] for t in (await client.get("/api/threads")).json()["threads"]] == [tid]
        msgs = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
        assert [m["text"] for m in msgs] == ["q", "first answer"]
    await again.aclose()


async def test_tool_calls_stream_as_cards_and_are_in_history(db: str, helpers: Any) -> None:
    from goagent_py.tools import tool

    @tool
    def add(a: int, b: int) -> str:
        """Add two numbers."""
        return str(a + b)

    provider = ScriptedProvider(tool_call_response(("add", {"a": 2, "b": 3})), "it is 5")
    app = create_app(helpers.factory_for(provider, [add]), storage_path=db)
    async with helpers.client_for(app) as client:
        tid = await _thread(client)
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "2+3?"})
        events = helpers.sse_events(r.text)
        start = next(e for e in events if e["type"] == "TOOL_CALL_START")
        assert start["toolCallName"] == "add"
        args = "".join(e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS")
        assert args.replace(" ", "") == '{"a":2,"b":3}'
        assert any(e["type"] == "TOOL_CALL_END" for e in events)
        result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
        assert result["content"] == "5"
        assert result["metadata"]["isError"] is False
        assert result["toolCallId"] == start["toolCallId"]
        assert result["metadata"]["duration"] >= 0
        msgs = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
        assert msgs[1]["tool_calls"] == [
            {"id": start["toolCallId"], "name": "add", "arguments": {"a": 2, "b": 3}}
        ]
        assert msgs[2]["role"] == "tool"
        assert msgs[2]["text"] == "5"
        # The call's duration is kept for the card after a reload: the one the stream showed.
        assert msgs[2]["duration"] == result["metadata"]["duration"]
        assert "duration" not in msgs[3]
        assert msgs[3]["text"] == "it is 5"
        snap = (await client.get(f"/api/threads/{tid}/messages?format=agui")).json()
        assert snap["type"] == "MESSAGES_SNAPSHOT"
        call = snap["messages"][1]["toolCalls"][0]
        assert call["function"]["name"] == "add"
        assert snap["messages"][2] == {
            "id": "m2",
            "role": "tool",
            "content": "5",
            "toolCallId": call["id"],
        }
    await app.aclose()


async def test_rename_and_delete(echo_app: Any, helpers: Any) -> None:
    async with helpers.client_for(echo_app) as client:
        tid = await _thread(client)
        await client.post(f"/api/threads/{tid}/runs", json={"message": "x"})
        r = await client.patch(f"/api/threads/{tid}", json={"title": "Renamed"})
        assert r.status_code == 200
        assert r.json()["title"] == "Renamed"
        assert (await client.delete(f"/api/threads/{tid}")).status_code == 200
        assert (await client.get(f"/api/threads/{tid}/messages")).status_code == 404
        assert (await client.get("/api/threads")).json()["threads"] == []


class _Gate:
    """A tool that blocks until the test releases it (or the run is aborted)."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()


@pytest.fixture
def gated(db: str, helpers: Any) -> Any:
    from goagent_py.tools import tool

    gate = _Gate()

    @tool
    async def wait_here() -> str:
        """Wait."""
        gate.entered.set()
        await gate.release.wait()
        return "released"

    provider = ScriptedProvider(
        tool_call_response(("wait_here", {})), "after", "second run", "third run"
    )
    app = create_app(helpers.factory_for(provider, [wait_here]), storage_path=db)
    app.provider = provider  # type: ignore[attr-defined]  # what the model was sent
    return app, gate


async def test_a_steer_pending_when_stop_lands_is_not_replayed_into_the_next_run(
    gated: Any, helpers: Any
) -> None:
    app, gate = gated
    async with helpers.client_for(app) as client:
        tid = await _thread(client)
        stream = asyncio.create_task(
            client.post(f"/api/threads/{tid}/runs", json={"message": "go"})
        )
        await gate.entered.wait()
        await client.post(f"/api/threads/{tid}/steer", json={"message": "hurry"})
        await client.post(f"/api/threads/{tid}/stop", json={})
        await stream
        nxt = await client.post(f"/api/threads/{tid}/runs", json={"message": "next"})
        assert helpers.sse_events(nxt.text)[-1]["type"] == "RUN_FINISHED"
        sent = [m.text for m in app.provider.requests[-1].messages]  # type: ignore[attr-defined]
        assert sent[-1] == "next"
        assert "hurry" not in sent  # the stopped run's steer is not the new run's
    await app.aclose()


async def test_one_run_at_a_time_steer_and_stop(gated: Any, helpers: Any) -> None:
    app, gate = gated
    async with helpers.client_for(app) as client:
        tid = await _thread(client)
        stream = asyncio.create_task(
            client.post(f"/api/threads/{tid}/runs", json={"message": "go"})
        )
        await gate.entered.wait()
        busy = await client.post(f"/api/threads/{tid}/runs", json={"message": "again"})
        assert busy.status_code == 409
        assert (await client.get(f"/api/threads/{tid}")).json()["running"] is True
        steer = await client.post(f"/api/threads/{tid}/steer", json={"message": "hurry"})
        assert steer.status_code == 200
        stop = await client.post(f"/api/threads/{tid}/stop", json={})
        assert stop.json() == {"stopped": True}
        events = helpers.sse_events((await stream).text)
        finished = events[-1]
        assert finished["type"] == "RUN_FINISHED"
        assert finished["result"]["stopReason"] is None or "abort" in str(finished["result"])
        # The transcript stays valid: the call has an (error) result; the next run works.
        msgs = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
        assert msgs[1]["tool_calls"][0]["name"] == "wait_here"
        assert msgs[2]["role"] == "tool"
        assert msgs[2]["is_error"] is True
        nxt = await client.post(f"/api/threads/{tid}/runs", json={"message": "next"})
        assert helpers.sse_events(nxt.text)[-1]["type"] == "RUN_FINISHED"
        assert (
            await client.post(f"/api/threads/{tid}/steer", json={"message": "x"})
        ).status_code == 409
    await app.aclose()


async def test_a_provider_failure_is_a_run_error_and_the_server_goes_on(
    db: str, helpers: Any
) -> None:
    from goagent_py.errors import ProviderError

    provider = ScriptedProvider(ProviderError("vendor down"), "fine now")
    app = create_app(helpers.factory_for(provider), storage_path=db)
    async with helpers.client_for(app) as client:
        tid = await _thread(client)
        events = helpers.sse_events(
            (await client.post(f"/api/threads/{tid}/runs", json={"message": "a"})).text
        )
        assert events[-1]["type"] == "RUN_ERROR"
        assert "vendor down" in events[-1]["message"]
        events = helpers.sse_events(
            (await client.post(f"/api/threads/{tid}/runs", json={"message": "b"})).text
        )
        assert events[-1]["type"] == "RUN_FINISHED"
    await app.aclose()


async def test_recalled_memories_stream_with_scores(db: str, helpers: Any) -> None:
    import httpx

    from goagent_py import Agent
    from goagent_py.memory.long_term import LongTermMemory
    from goagent_py.memory.vector.in_memory import InMemoryVectorStore
    from goagent_py.messages import Message, Role, TextBlock
    from goagent_py.serve import ThreadContext
    from goagent_py.testing import FakeEmbedder

    ltm = LongTermMemory(FakeEmbedder(), InMemoryVectorStore(), top_k=2)
    fact = Message(Role.USER, [TextBlock("my cat is called Miso")])
    await ltm.store([fact], session="user-local")
    await ltm.store([Message(Role.USER, [TextBlock("my cat is Bob's")])], session="user-bob")

    def factory(ctx: ThreadContext) -> Agent:
        # The agent's name scopes long-term memory: one scope per user.
        return Agent(
            provider=ScriptedProvider("Miso!"),
            model="scripted",
            name=ctx.memory_scope,
            short_term_memory=ctx.short_term_memory,
            long_term_memory=ltm,
        )

    app = create_app(factory, storage_path=db, long_term_memory=ltm)
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        tid = await _thread(client)
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "what is my cat called"})
        recall = next(e for e in helpers.sse_events(r.text) if e["type"] == "CUSTOM")
        assert recall["name"] == "goagent.memory_recall"
        memories = recall["value"]["memories"]
        assert memories[0]["text"] == "my cat is called Miso"
        assert 0 < memories[0]["score"] <= 1
        # Listable and forgettable by their user.
        listed = (await client.get("/api/memories", params={"q": "cat"})).json()["memories"]
        # The fact and the turn just stored; never another user's memory.
        texts = [m["text"] for m in listed]
        assert "my cat is called Miso" in texts
        assert "my cat is Bob's" not in texts
        fact_id = memories[0]["id"]
        assert fact_id in [m["id"] for m in listed]
        assert (await client.get("/api/memories")).status_code == 400
        other = "user-bob:" + fact_id.split(":", 1)[1]
        assert (await client.delete(f"/api/memories/{other}")).status_code == 404
        assert (await client.delete(f"/api/memories/{fact_id}")).status_code == 200
        left = (await client.get("/api/memories", params={"q": "cat"})).json()["memories"]
        assert fact_id not in [m["id"] for m in left]
        assert len(left) == len(listed) - 1
    await app.aclose()


async def test_busy_interrupt_aborts_the_running_run_for_the_new_message(
    db: str, helpers: Any
) -> None:
    from goagent_py.errors import ConfigurationError
    from goagent_py.tools import tool

    gate = _Gate()

    @tool
    async def wait_here() -> str:
        """Wait."""
        gate.entered.set()
        await gate.release.wait()
        return "released"

    provider = ScriptedProvider(tool_call_response(("wait_here", {})), "new answer")
    app = create_app(helpers.factory_for(provider, [wait_here]), storage_path=db, busy="interrupt")
    async with helpers.client_for(app) as client:
        tid = await _thread(client)
        first = asyncio.create_task(client.post(f"/api/threads/{tid}/runs", json={"message": "a"}))
        await gate.entered.wait()
        second = await client.post(f"/api/threads/{tid}/runs", json={"message": "b"})
        assert helpers.sse_events(second.text)[-1]["result"]["text"] == "new answer"
        assert helpers.sse_events((await first).text)[-1]["type"] == "RUN_FINISHED"
        assert not gate.release.is_set()
        msgs = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
        assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "user", "assistant"]
    await app.aclose()
    with pytest.raises(ConfigurationError):
        create_app(helpers.factory_for(provider), storage_path=db, busy="queue")  # type: ignore[arg-type]


async def test_idle_threads_are_evicted_and_rebuilt_from_storage(
    echo_app: Any, helpers: Any
) -> None:
    echo_app.server.max_live = 1
    async with helpers.client_for(echo_app) as client:
        first, second = await _thread(client), await _thread(client)
        await client.post(f"/api/threads/{first}/runs", json={"message": "one"})
        await client.post(f"/api/threads/{second}/runs", json={"message": "two"})
        assert list(echo_app.server.live) == [("local", second)]
        await client.post(f"/api/threads/{first}/runs", json={"message": "three"})
        msgs = (await client.get(f"/api/threads/{first}/messages")).json()["messages"]
        assert [m["text"] for m in msgs] == ["one", "echo: one", "three", "echo: three"]


def test_the_page_script_parses() -> None:
    import shutil
    import subprocess
    from importlib import resources

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = resources.files("goagent_py.serve").joinpath("static", "app.js")
    subprocess.run([node, "--check", str(script)], check=True, timeout=60)


async def test_a_response_start_that_fails_aborts_the_run(db: str, helpers: Any) -> None:
    # ASGI 2.4 servers raise OSError from send() once the client is gone: the stream then
    # ends before its generator starts, and the run must still be aborted.
    from goagent_py.messages import StopReason
    from goagent_py.tools import tool

    gate = _Gate()

    @tool
    async def wait_here() -> str:
        """Wait."""
        gate.entered.set()
        await gate.release.wait()
        return "released"

    provider = ScriptedProvider(tool_call_response(("wait_here", {})))
    app = create_app(helpers.factory_for(provider, [wait_here]), storage_path=db)
    async with helpers.client_for(app) as client:
        tid = await _thread(client)
    body = b'{"message": "go"}'
    scope = helpers.post_scope(f"/api/threads/{tid}/runs", body)
    received = [{"type": "http.request", "body": body, "more_body": False}]
    gone = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if received:
            return received.pop()
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        await gate.entered.wait()  # the run is in its tool when the client turns out gone
        gone.set()
        raise OSError("client disconnected")

    with pytest.raises(OSError, match="client disconnected"):
        await app(scope, receive, send)
    live = app.server.live[("local", tid)]
    if live.run is not None:
        await asyncio.wait_for(live.run.done.wait(), 30)
    result = live.session.state.last_result
    assert result is not None
    assert result.stop_reason is StopReason.ABORTED
    assert not gate.release.is_set()
    async with helpers.client_for(app) as client:
        msgs = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool"]
    assert msgs[2]["is_error"] is True
    await app.aclose()


async def test_a_streamed_answer_is_written_in_batches_of_whole_frames(
    db: str, helpers: Any
) -> None:
    # Issue 36: one write per event (24 deltas of a streamed answer) was most of the SSE path;
    # the events ready together go out as one chunk, each still a whole "data: ...\r\n\r\n".
    answer = " ".join(f"word{i}" for i in range(24))
    app = create_app(helpers.factory_for(ScriptedProvider(answer)), storage_path=db)
    chunks: list[bytes] = []

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        async def spy(message: Any) -> None:
            body = message.get("body") if message["type"] == "http.response.body" else None
            if body and scope["path"].endswith("/runs"):
                chunks.append(body)
            await send(message)

        await app(scope, receive, spy)

    async with helpers.client_for(recording) as client:
        tid = await _thread(client)
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "go"})
    await app.aclose()
    events = helpers.sse_events(r.text)
    deltas = [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert "".join(deltas) == answer
    assert [e["type"] for e in events][-1] == "RUN_FINISHED"
    assert all(c.startswith(b"data: ") and c.endswith(b"\r\n\r\n") for c in chunks)
    assert b"".join(chunks).count(b"\r\n\r\n") == len(events)
    assert len(chunks) < len(events) / 2


async def test_deleting_a_thread_deletes_every_row_of_its_session(tmp_path: Any) -> None:
    """Its messages and the append keys a durable run on it applied: a thread made again with
    the same id starts with nothing of the one deleted."""
    from goagent_py.memory.storage import SQLiteStorage
    from goagent_py.messages import user_message
    from goagent_py.serve._threads import ThreadStore, session_key

    path = str(tmp_path / "serve.db")
    threads = ThreadStore(path)
    thread = await threads.create("u", "T")
    async with SQLiteStorage(path, session_id=session_key("u", thread["id"])) as storage:
        assert await storage.append_once("run-1:0", [user_message("q")])
        assert await threads.delete("u", thread["id"])
        assert await storage.load() == []
        assert await storage.append_once("run-1:0", [user_message("q again")])
        assert [m.text for m in await storage.load()] == ["q again"]
    threads.close()


async def test_the_thread_lookup_reads_on_the_loop_unless_the_index_is_busy(
    tmp_path: Any, thread_hops: Callable[[Any], list[str]]
) -> None:
    # Issue 36: a turn's lookup of its thread was a worker-thread hop (~60-120 µs of CPU, more
    # than the query); it reads on the loop once the index is open, in a worker when the
    # index's connection is in use, never blocking the loop.
    import threading

    import goagent_py.serve._threads as module
    from goagent_py.serve._threads import ThreadStore

    hops = thread_hops(module)
    threads = ThreadStore(str(tmp_path / "serve.db"))
    thread = await threads.create("u", "T")
    hops.clear()
    found = await threads.get("u", thread["id"])
    assert found is not None
    assert found["title"] == "T"
    assert await threads.get("someone else", thread["id"]) is None
    assert hops == []

    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with threads._file.lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    looking = asyncio.ensure_future(threads.get("u", thread["id"]))
    for _ in range(3):
        await asyncio.sleep(0)
    assert not looking.done()  # waiting in a worker while the loop runs on
    release.set()
    assert (await looking) == found
    assert len(hops) == 1
    holder.join()
    threads.close()


def _watch_turn_records(server: Any, order: list[str], *, fail: bool = False) -> None:
    """Note in ``order`` when a run's stream ends (its queue's end marker) and when the
    thread's record of the turn is written (its time: the index's writes after thread
    creation); with ``fail``, that write raises."""
    start_run, write = server.start_run, server.threads._write

    async def started(*args: Any, **kwargs: Any) -> Any:
        run = await start_run(*args, **kwargs)
        put = run.queue.put_nowait

        def marked(item: Any) -> None:
            if item is None:
                order.append("stream end")
            put(item)

        run.queue.put_nowait = marked
        return run

    async def written(fn: Any) -> Any:
        order.append("record")
        if fail:
            raise RuntimeError("disk gone")
        return await write(fn)

    server.start_run = started
    server.threads._write = written


async def test_a_stream_ends_before_its_turn_is_recorded_and_the_index_shows_the_turn(
    echo_app: Any, helpers: Any
) -> None:
    # Issue 36: every turn's stream waited for the commit of the thread's time.
    async with helpers.client_for(echo_app) as client:
        first = await _thread(client, "first")
        await _thread(client, "second")  # the most recent until first has a turn
        order: list[str] = []
        _watch_turn_records(echo_app.server, order)
        r = await client.post(f"/api/threads/{first}/runs", json={"message": "hi"})
        assert helpers.sse_events(r.text)[-1]["type"] == "RUN_FINISHED"
        listed = (await client.get("/api/threads")).json()["threads"]
        assert order == ["stream end", "record"]
        assert [t["title"] for t in listed] == ["first", "second"]
        assert listed[0]["updated_at"] > listed[0]["created_at"]


async def test_a_turn_whose_record_fails_is_logged_and_keeps_its_messages(
    echo_app: Any, helpers: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async with helpers.client_for(echo_app) as client:
        tid = await _thread(client, "t")
        order: list[str] = []
        _watch_turn_records(echo_app.server, order, fail=True)
        with caplog.at_level("WARNING", logger="goagent_py.serve"):
            r = await client.post(f"/api/threads/{tid}/runs", json={"message": "hi"})
            assert helpers.sse_events(r.text)[-1]["type"] == "RUN_FINISHED"
            msgs = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
        assert [(m["role"], m["text"]) for m in msgs] == [("user", "hi"), ("assistant", "echo: hi")]
        assert order == ["stream end", "record"]
        assert any(
            "recording the turn" in r.getMessage() and "disk gone" in r.getMessage()
            for r in caplog.records
        )
        # The thread goes on: the next turn runs and is stored.
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "again"})
        assert helpers.sse_events(r.text)[-1]["type"] == "RUN_FINISHED"
        msgs = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
        assert len(msgs) == 4


async def test_a_server_closed_right_after_a_stream_ends_keeps_the_record_of_that_turn(
    echo_app: Any, helpers: Any, db: str
) -> None:
    # Review5: the stream ends before the turn's record (the thread's time) is committed;
    # closing the server then (its shutdown) must not drop that write.
    import sqlite3

    server = echo_app.server
    write = server.threads._write

    async def slow(fn: Any) -> Any:
        await asyncio.sleep(0.3)  # the write still in flight when the close begins
        return await write(fn)

    async with helpers.client_for(echo_app) as client:
        tid = await _thread(client, "t")
        server.threads._write = slow
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "hi"})
        assert helpers.sse_events(r.text)[-1]["type"] == "RUN_FINISHED"
    await server.close()  # what the app's shutdown does
    conn = sqlite3.connect(db)
    try:
        ((created, updated),) = conn.execute(
            "SELECT created_at, updated_at FROM goagent_serve_threads WHERE thread_id = ?", (tid,)
        ).fetchall()
    finally:
        conn.close()
    assert updated > created


async def test_a_thread_index_whose_file_cannot_be_set_up_leaves_no_connection_open(
    tmp_path: Any,
) -> None:
    """A file that is not a database: each call raises, and none keeps the file open
    (every failed set-up closes its connection; the next call tries a fresh one)."""
    import os
    import sqlite3

    from goagent_py.serve._threads import ThreadStore

    path = tmp_path / "serve.db"
    path.write_bytes(b"not a database, " * 512)

    def open_handles() -> int:
        fds = os.listdir("/proc/self/fd")
        targets = []
        for fd in fds:
            try:
                targets.append(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                continue
        return sum(t.startswith(str(path)) for t in targets)

    threads = ThreadStore(str(path))
    for _ in range(3):
        with pytest.raises(sqlite3.DatabaseError):
            await threads.create("u", "T")
    assert open_handles() == 0
    threads.close()
