"""The server on a real uvicorn port: the OpenAI SDK streaming, and a closed stream aborting
the run on the server."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from goagent_py.serve import create_app
from goagent_py.testing import FunctionProvider, ScriptedProvider, tool_call_response

pytestmark = pytest.mark.slow


async def _serve(app: Any) -> AsyncIterator[str]:
    uvicorn = pytest.importorskip("uvicorn")
    # Our own listening socket: connections queue in the kernel from now on, so there is
    # nothing to wait for before the first request.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


async def test_openai_sdk_streams_from_chat_completions(db: str, helpers: Any) -> None:
    openai = pytest.importorskip("openai")
    from goagent_py.messages import Role

    provider = ScriptedProvider("nice to meet you", "second answer")
    app = create_app(helpers.factory_for(provider), storage_path=db)
    async for base in _serve(app):
        client = openai.AsyncOpenAI(base_url=base + "/v1", api_key="unused-locally")
        models = await client.models.list()
        assert [m.id for m in models.data] == ["goagent"]
        stream = await client.chat.completions.create(
            model="goagent",
            messages=[{"role": "user", "content": "hello"}],
            stream=True,
            user="sdk",
        )
        pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        # Streamed as content deltas; the model's deltas, ready together, are one chunk
        # (test_serve_openai_stream checks a paced model's deltas each go out as made).
        assert [p for p in pieces if p]
        assert "".join(pieces) == "nice to meet you"
        # The server owns history: the second request sends only the new message.
        done = await client.chat.completions.create(
            model="goagent", messages=[{"role": "user", "content": "again"}], user="sdk"
        )
        assert done.choices[0].message.content == "second answer"
        seen = [(m.role, m.text) for m in provider.requests[1].messages]
        assert seen == [
            (Role.USER, "hello"),
            (Role.ASSISTANT, "nice to meet you"),
            (Role.USER, "again"),
        ]
        async with httpx.AsyncClient(base_url=base) as raw:
            threads = (await raw.get("/api/threads")).json()["threads"]
            assert [t["id"] for t in threads] == ["openai-sdk"]
        await client.close()
    await app.aclose()


async def test_openai_sdk_sees_openai_shaped_errors(db: str, helpers: Any) -> None:
    # Issue 33: err.body was the bare string of {"error": "text"}.
    openai = pytest.importorskip("openai")
    from goagent_py.errors import ProviderError

    provider = ScriptedProvider(ProviderError("vendor down"))
    app = create_app(helpers.factory_for(provider), storage_path=db)
    async for base in _serve(app):
        client = openai.AsyncOpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.BadRequestError) as bad:
            await client.chat.completions.create(model="goagent", messages=[])
        assert isinstance(bad.value.body, dict)
        assert bad.value.body["type"] == "invalid_request_error"
        assert bad.value.code is None
        assert bad.value.param is None
        with pytest.raises(openai.NotFoundError) as missing:
            await client.embeddings.create(model="goagent", input="x")
        assert "Invalid URL" in missing.value.body["message"]  # type: ignore[index]
        with pytest.raises(openai.InternalServerError) as failed:
            await client.chat.completions.create(
                model="goagent", messages=[{"role": "user", "content": "hi"}]
            )
        assert failed.value.status_code == 500
        assert failed.value.type == "server_error"
        assert "vendor down" in failed.value.message
        await client.close()
    await app.aclose()


async def test_closing_the_stream_aborts_the_run_on_the_server(db: str, helpers: Any) -> None:
    from goagent_py.tools import tool

    entered, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        """Slow."""
        entered.set()
        await release.wait()
        return "never"

    provider = ScriptedProvider(tool_call_response(("slow", {})), "next answer")
    app = create_app(helpers.factory_for(provider, [slow]), storage_path=db)
    server = app.server
    async for base in _serve(app):
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            tid = (await client.post("/api/threads", json={})).json()["id"]
            async with client.stream(
                "POST", f"/api/threads/{tid}/runs", json={"message": "go"}
            ) as response:
                # Held until the stream is closed on purpose: a line iterator dropped at the
                # `break` is finalised by the loop, which closes the connection at once, and the
                # server could abort the run before the tool starts (the test then waited for
                # `entered` forever, depending on timing).
                lines = response.aiter_lines()
                async for line in lines:
                    if line.startswith("data:") and json.loads(line[5:])["type"] == "RUN_STARTED":
                        break
                await entered.wait()
                run = server.live[("local", tid)].run
                assert run is not None
            # The tab is closed: the server aborts the run; the tool never finishes.
            await run.done.wait()
            assert not release.is_set()
            msgs = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
            assert msgs[2]["role"] == "tool"
            assert msgs[2]["is_error"] is True
            r = await client.post(f"/api/threads/{tid}/runs", json={"message": "more"})
            assert json.loads(r.text.split("data:")[-1])["type"] == "RUN_FINISHED"
            assert "next answer" in r.text.replace('", "', "")
    await app.aclose()


async def test_a_client_gone_before_the_first_frame_aborts_the_run(db: str, helpers: Any) -> None:
    from goagent_py import Agent
    from goagent_py.messages import StopReason
    from goagent_py.serve import ThreadContext
    from goagent_py.tools import tool

    building, proceed, released = asyncio.Event(), asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        """Slow."""
        await released.wait()  # never set: only an abort ends this tool
        return "never"

    def answer(request: Any) -> Any:
        last = request.messages[-1]
        return tool_call_response(("slow", {})) if last.text == "go" else "next answer"

    provider = FunctionProvider(answer)

    async def factory(ctx: ThreadContext) -> Agent:
        # Hold the request before its run exists, so the client is gone before any frame.
        building.set()
        await proceed.wait()
        return helpers.factory_for(provider, [slow])(ctx)

    app = create_app(factory, storage_path=db)
    server = app.server
    runs: asyncio.Queue[Any] = asyncio.Queue()
    start_run = server.start_run

    async def spy(*args: Any) -> Any:
        run = await start_run(*args)
        runs.put_nowait(run)
        return run

    server.start_run = spy  # type: ignore[method-assign]
    async for base in _serve(app):
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            tid = (await client.post("/api/threads", json={})).json()["id"]
            host, port = base.removeprefix("http://").split(":")
            _, writer = await asyncio.open_connection(host, int(port))
            body = b'{"message": "go"}'
            writer.write(
                f"POST /api/threads/{tid}/runs HTTP/1.1\r\nHost: {host}:{port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()
            await building.wait()
            writer.close()  # the tab is closed before the server sent anything
            await writer.wait_closed()
            proceed.set()
            # The tool waits forever: the run can only end by the abort.
            run = await runs.get()
            await asyncio.wait_for(run.done.wait(), 30)
            live = server.live[("local", tid)]
            result = live.session.state.last_result
            assert result is not None
            assert result.stop_reason is StopReason.ABORTED
            msgs = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
            assert msgs[0] == {**msgs[0], "role": "user", "text": "go"}
            # The transcript stays valid: a tool call cut short has an error result.
            calls = [c["id"] for m in msgs for c in m.get("tool_calls") or []]
            results = {m["tool_call_id"]: m for m in msgs if m["role"] == "tool"}
            assert sorted(calls) == sorted(results)
            assert all(r["is_error"] for r in results.values())
            assert not released.is_set()
            r = await client.post(f"/api/threads/{tid}/runs", json={"message": "more"})
            assert helpers.sse_events(r.text)[-1]["type"] == "RUN_FINISHED"
    await app.aclose()


async def test_openai_sdk_responses_and_client_tools_on_a_real_port(db: str, helpers: Any) -> None:
    openai = pytest.importorskip("openai")
    provider = ScriptedProvider(
        tool_call_response(("lookup", {"word": "ubuntu"})), "It means humanity."
    )
    app = create_app(helpers.factory_for(provider), storage_path=db)
    lookup = {
        "type": "function",
        "name": "lookup",
        "description": "Look a word up.",
        "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
    }
    async for base in _serve(app):
        client = openai.AsyncOpenAI(base_url=base + "/v1", api_key="unused-locally")
        stream = await client.responses.create(
            model="goagent", input="what is ubuntu?", tools=[lookup], stream=True
        )
        events = [e async for e in stream]
        assert events[-1].type == "response.completed"
        (call,) = [i for i in events[-1].response.output if i.type == "function_call"]
        stream = await client.responses.create(
            model="goagent",
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "humanity"}],
            tools=[lookup],
            stream=True,
        )
        events = [e async for e in stream]
        deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
        assert deltas  # streamed (deltas ready together are one event)
        assert "".join(deltas) == "It means humanity."
        await client.close()
    await app.aclose()
