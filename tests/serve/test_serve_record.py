"""One conversation, one record, for served runs (issue 28): a seeded random sequence of what a
user does in the page (send, send with tools, a tool that fails, steer, Stop, reload, a server
restart) and what an OpenAI client does (a completion with the agent's tools, one with its own
tool: the call, then its result) against one thread; after every step the stored transcript
validates, the page's rebuild (``/messages``) is the stored record, the live session is the
stored record, and what the run's AG-UI stream showed is what was stored."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import pytest

from goagent_py.messages import Message, Role
from goagent_py.serve import create_app
from goagent_py.testing import FunctionProvider, text_response, tool_call_response
from goagent_py.tools import tool
from goagent_py.transcript import validate_transcript
from tests.serve.conftest import check_agui

pytest.importorskip("ag_ui")

STEPS = 30
SEEDS = range(4)


class _Gate:
    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()


class _World:
    """The app under test, the scripted model's rules and the tool gate."""

    def __init__(self, db: str, helpers: Any) -> None:
        self.db = db
        self.helpers = helpers
        self.gate = _Gate()
        gate = self

        @tool
        def add(a: int, b: int) -> str:
            """Add two numbers."""
            return str(a + b)

        @tool
        def broken() -> str:
            """Always fails."""
            raise RuntimeError("the tool broke")

        @tool
        async def wait_here() -> str:
            """Wait until released."""
            gate.gate.entered.set()
            await gate.gate.release.wait()
            return "released"

        def answer(request: Any) -> Any:
            last = request.messages[-1]
            if last.role is Role.TOOL:
                return text_response("after the tools")
            text = last.text
            if text.startswith("tools"):
                return tool_call_response(("add", {"a": 1, "b": 2}), ("broken", {}), text="On it.")
            if text.startswith("fail"):
                return tool_call_response(("broken", {}))
            if text.startswith("wait"):
                return tool_call_response(("wait_here", {}))
            if text.startswith("client"):
                return tool_call_response(("lookup", {"word": "ubuntu"}), ("add", {"a": 2, "b": 2}))
            return text_response(f"echo: {text}")

        self.factory = helpers.factory_for(FunctionProvider(answer), [add, broken, wait_here])
        self.app = create_app(self.factory, storage_path=db)

    async def restart(self) -> None:
        await self.app.aclose()
        self.app = create_app(self.factory, storage_path=self.db)


def _stream_view(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What the page showed of one run: texts, calls, results."""
    texts: dict[str, str] = {}
    calls: dict[str, list[str]] = {}
    out: list[tuple[Any, ...]] = []
    for e in events:
        kind = e["type"]
        if kind == "TEXT_MESSAGE_CONTENT":
            texts[e["messageId"]] = texts.get(e["messageId"], "") + e["delta"]
        elif kind == "TEXT_MESSAGE_END":
            out.append(("text", texts[e["messageId"]]))
        elif kind == "TOOL_CALL_START":
            calls[e["toolCallId"]] = [e["toolCallName"], ""]
        elif kind == "TOOL_CALL_ARGS":
            calls[e["toolCallId"]][1] += e["delta"]
        elif kind == "TOOL_CALL_END":
            name, args = calls[e["toolCallId"]]
            out.append(("call", e["toolCallId"], name, json.loads(args or "{}")))
        elif kind == "TOOL_CALL_RESULT":
            out.append(("result", e["toolCallId"], e["content"], e["metadata"]["isError"]))
    return sorted(out, key=repr)


def _stored_view(messages: list[Message]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for m in messages:
        if m.role is Role.ASSISTANT:
            if m.text:
                out.append(("text", m.text))
            out += [("call", c.id, c.name, c.arguments) for c in m.tool_calls]
        elif m.role is Role.TOOL:
            out.append(("result", m.tool_call_id, m.text, m.is_error))
    return sorted(out, key=repr)


def _page_view(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role.value, "text": m.text}
    if m.role is Role.ASSISTANT and m.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls
        ]
    if m.role is Role.TOOL:
        out["tool_call_id"] = m.tool_call_id
        out["is_error"] = m.is_error
    return out


async def _check(world: _World, tid: str, client: Any) -> list[Message]:
    server = world.app.server
    live = await server.live_of("local", tid)
    stored = list(await live.session.agent.options.short_term_memory.transcript())
    assert not stored or validate_transcript(stored) == [], stored
    ids = [c.id for m in stored for c in m.tool_calls]
    assert len(ids) == len(set(ids)), "a tool call stored twice"
    page = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
    shown = [{k: v for k, v in p.items() if k not in ("duration", "thinking")} for p in page]
    assert shown == [_page_view(m) for m in stored]
    if live.session.transcript:  # loaded: the session's view is the record itself
        assert live.session.transcript == stored
    return stored


async def _run(client: Any, tid: str, text: str) -> list[dict[str, Any]]:
    r = await client.post(f"/api/threads/{tid}/runs", json={"message": text})
    assert r.status_code == 200, r.text
    events: list[dict[str, Any]] = client.helpers.sse_events(r.text)
    return events


_LOOKUP = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
}


async def _v1(client: Any, text: str, *, with_client_tool: bool) -> None:
    """A turn through /v1/chat/completions (streamed), on the same thread (the header names
    it): with the client's own tool, two requests (the call, then its result)."""
    url, headers = "/v1/chat/completions", {"x-goagent-thread": "record"}
    chat: list[dict[str, Any]] = [{"role": "user", "content": text}]
    body: dict[str, Any] = {"model": "goagent", "messages": chat, "stream": True}
    if with_client_tool:
        body["tools"] = [_LOOKUP]
    chunks = client.helpers.sse_events((await client.post(url, json=body, headers=headers)).text)
    if not with_client_tool:
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
        return
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    (call,) = [t for c in chunks for t in c["choices"][0]["delta"].get("tool_calls", [])]
    chat += [
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "a Zulu word"},
    ]
    chunks = client.helpers.sse_events((await client.post(url, json=body, headers=headers)).text)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


async def _gated(world: _World, client: Any, tid: str, then: str) -> list[dict[str, Any]]:
    world.gate = _Gate()
    stream = asyncio.create_task(_run(client, tid, "wait for it"))
    await world.gate.entered.wait()
    if then == "steer":
        steer = await client.post(f"/api/threads/{tid}/steer", json={"message": "hurry up"})
        assert steer.status_code == 200
        world.gate.release.set()
    else:
        assert (await client.post(f"/api/threads/{tid}/stop", json={})).json()["stopped"]
    return await stream


@pytest.mark.parametrize("seed", SEEDS)
async def test_served_actions_keep_one_valid_record(seed: int, db: str, helpers: Any) -> None:
    rng = random.Random(seed)
    world = _World(db, helpers)
    actions = ["send", "tools", "fail", "steer", "stop", "reload", "restart", "v1", "v1_client"]
    done: list[str] = []
    client = helpers.client_for(world.app)
    client.helpers = helpers
    # The page and OpenAI clients on one thread: the one /v1 names "record".
    tid = "openai-record"
    await _v1(client, "hello first", with_client_tool=False)
    before = await _check(world, tid, client)
    for step in range(STEPS):
        action = rng.choice(actions)
        done.append(action)
        events: list[dict[str, Any]] = []
        if action == "send":
            events = await _run(client, tid, f"hello {step}")
        elif action == "tools":
            events = await _run(client, tid, "tools please")
        elif action == "fail":
            events = await _run(client, tid, "fail now")
        elif action in ("steer", "stop"):
            events = await _gated(world, client, tid, action)
        elif action == "v1":
            await _v1(client, "tools via the API", with_client_tool=False)
        elif action == "v1_client":
            await _v1(client, "client tools", with_client_tool=True)
        elif action == "reload":
            pass  # the page asks /messages again: _check does
        else:
            await client.aclose()
            await world.restart()
            client = helpers.client_for(world.app)
            client.helpers = helpers
        after = await _check(world, tid, client)
        assert after[: len(before)] == before, f"history rewritten after {done}"
        if events:
            check_agui(events)
            assert _stream_view(events) == _stored_view(after[len(before) :]), done
            if action == "stop":
                assert events[-1]["result"]["stopReason"] == "aborted"
        before = after
    await client.aclose()
    await world.app.aclose()
    assert len(before) > STEPS  # the thread grew: the steps ran
    assert set(done) == set(actions)  # these seeds try every action
