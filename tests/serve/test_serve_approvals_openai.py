"""Served approvals on the OpenAI-compatible endpoint (issue 35), with the official ``openai``
SDK: a call that waits for a decision comes back as standard ``tool_calls`` (finish_reason
``"tool_calls"``); the next request's tool message for that call (``"approved"``,
``"denied: <reason>"``) is the decision and resumes the stored run, after a restart too."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from wiping import RAN, wipe  # tests/wiping.py

from goagent_py import Role, tool, validate_transcript
from goagent_py.serve import create_app
from goagent_py.testing import FunctionProvider, text_response, tool_call_response

openai = pytest.importorskip("openai")

SEEN: list[str] = []  # what the model read last, each turn


def answer(request: Any) -> Any:
    last = request.messages[-1]
    SEEN.append(last.text)
    if last.role is Role.TOOL:
        return text_response(f"after: {last.text}")
    return tool_call_response(("wipe", {"target": last.text}))


def make_app(db: str, helpers: Any) -> Any:
    RAN.clear()
    SEEN.clear()
    return create_app(helpers.factory_for(FunctionProvider(answer), [wipe]), storage_path=db)


def _sdk(app: Any) -> Any:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1234))
    http = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")
    return openai.AsyncOpenAI(base_url="http://127.0.0.1/v1", api_key="unused", http_client=http)


async def _stored(app: Any, thread: str = "default") -> list[Any]:
    live = await app.server.live_of("local", "openai-" + thread)
    return list(await live.session.agent.options.short_term_memory.transcript())


async def test_a_waiting_call_is_a_tool_call_and_approved_resumes_after_a_restart(
    db: str, helpers: Any
) -> None:
    chat: list[dict[str, Any]] = [{"role": "user", "content": "disk"}]
    app = make_app(db, helpers)
    async with _sdk(app) as client:
        first = await client.chat.completions.create(model="goagent", messages=chat)
    await app.aclose()
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "wipe"
    assert json.loads(call.function.arguments) == {"target": "disk"}
    assert RAN == []

    again = make_app(db, helpers)  # a new server over the same data between the two requests
    chat += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "approved"},
    ]
    async with _sdk(again) as client:
        second = await client.chat.completions.create(model="goagent", messages=chat)
        stored = await _stored(again)
    await again.aclose()
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content.endswith("after: wiped disk")
    assert RAN == ["disk"]
    assert SEEN == ["wiped disk"]  # the model read the tool's own result, not "approved"
    assert validate_transcript(stored, allow_pending=False) == []
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]


async def test_denied_with_a_reason_streamed(db: str, helpers: Any) -> None:
    app = make_app(db, helpers)
    chat: list[dict[str, Any]] = [{"role": "user", "content": "disk"}]
    async with _sdk(app) as client:
        stream = await client.chat.completions.create(model="goagent", messages=chat, stream=True)
        chunks = [c async for c in stream]
        deltas = [d for c in chunks for d in (c.choices[0].delta.tool_calls or []) if c.choices]
        finish = [c.choices[0].finish_reason for c in chunks if c.choices]
        assert finish[-1] == "tool_calls"
        (delta,) = deltas
        assert delta.function.name == "wipe"
        chat += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": delta.id, "type": "function", "function": delta.function.model_dump()}
                ],
            },
            {"role": "tool", "tool_call_id": delta.id, "content": "denied: not on a Friday"},
        ]
        stream = await client.chat.completions.create(model="goagent", messages=chat, stream=True)
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        stored = await _stored(app)
    await app.aclose()
    assert RAN == []
    assert SEEN[-1] == "Error: tool 'wipe' was not run: not on a Friday"
    assert text.endswith("not on a Friday")
    assert stored[2].role is Role.TOOL
    assert stored[2].is_error
    assert validate_transcript(stored, allow_pending=False) == []


async def test_bad_decisions_are_refused_and_lose_nothing(db: str, helpers: Any) -> None:
    app = make_app(db, helpers)
    chat: list[dict[str, Any]] = [{"role": "user", "content": "disk"}]
    async with _sdk(app) as client:
        first = await client.chat.completions.create(model="goagent", messages=chat)
        (call,) = first.choices[0].message.tool_calls
        asked = [*chat, first.choices[0].message.model_dump(exclude_none=True)]

        async def send(call_id: str, content: str) -> Any:
            tool_message = {"role": "tool", "tool_call_id": call_id, "content": content}
            return await client.chat.completions.create(
                model="goagent", messages=[*asked, tool_message]
            )

        with pytest.raises(openai.BadRequestError) as unclear:
            await send(call.id, "sure, why not")
        with pytest.raises(openai.ConflictError) as stranger:
            await send("call-nobody-made", "approved")
        done = await send(call.id, "approved")
        with pytest.raises(openai.ConflictError) as late:  # another answer once decided
            await send(call.id, "denied")
        again = await send(call.id, "approved")  # the same answer: a retry (approve14)
        stored = await _stored(app)
    await app.aclose()
    assert '"approved"' in unclear.value.body["message"]
    assert "call-nobody-made" in stranger.value.body["message"]
    assert "already decided" in late.value.body["message"]
    assert done.choices[0].message.content.endswith("after: wiped disk")
    assert again.choices[0].message.content == "after: wiped disk"  # the same outcome
    assert RAN == ["disk"]
    assert validate_transcript(stored, allow_pending=False) == []


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


async def test_two_decisions_at_once_the_first_wins(db: str, helpers: Any) -> None:
    # busy="interrupt" lets a new message stop a running run; a decision never does.
    RAN.clear()
    global STARTED, RELEASE  # new ones: an asyncio.Event binds to the loop it first waits on
    STARTED, RELEASE = asyncio.Event(), asyncio.Event()

    def slow(request: Any) -> Any:
        last = request.messages[-1]
        if last.role is Role.TOOL:
            return text_response(f"after: {last.text}")
        return tool_call_response(("slow_wipe", {"target": last.text}))

    factory = helpers.factory_for(FunctionProvider(slow), [slow_wipe])
    app = create_app(factory, storage_path=db, busy="interrupt")
    chat: list[dict[str, Any]] = [{"role": "user", "content": "disk"}]
    async with _sdk(app) as client:
        first = await client.chat.completions.create(model="goagent", messages=chat)
        (call,) = first.choices[0].message.tool_calls
        asked = [*chat, first.choices[0].message.model_dump(exclude_none=True)]

        def decide(content: str) -> Any:
            tool_message = {"role": "tool", "tool_call_id": call.id, "content": content}
            return client.chat.completions.create(model="goagent", messages=[*asked, tool_message])

        approving = asyncio.create_task(decide("approved"))
        await STARTED.wait()  # the approval's run holds the thread, its tool running
        with pytest.raises(openai.ConflictError) as second:
            await decide("denied: no")
        RELEASE.set()
        won = await approving
        stored = await _stored(app)
    await app.aclose()
    assert "in progress" in second.value.body["message"]
    assert won.choices[0].message.content.endswith("after: wiped disk")
    assert RAN == ["disk"]
    assert validate_transcript(stored, allow_pending=False) == []


async def test_responses_api_function_call_and_its_decision(db: str, helpers: Any) -> None:
    app = make_app(db, helpers)
    async with _sdk(app) as client:
        first = await client.responses.create(model="goagent", input="disk")
        (call,) = [i for i in first.output if i.type == "function_call"]
        assert (call.name, json.loads(call.arguments)) == ("wipe", {"target": "disk"})
        second = await client.responses.create(
            model="goagent",
            input=[
                {"role": "user", "content": "disk"},
                {"type": "function_call_output", "call_id": call.call_id, "output": "approved"},
            ],
        )
        stored = await _stored(app)
    await app.aclose()
    assert second.output_text.endswith("after: wiped disk")
    assert RAN == ["disk"]
    assert validate_transcript(stored, allow_pending=False) == []


async def test_approved_always_approves_the_tool_for_the_thread(db: str, helpers: Any) -> None:
    app = make_app(db, helpers)
    async with _sdk(app) as client:
        first = await client.chat.completions.create(
            model="goagent", messages=[{"role": "user", "content": "a"}]
        )
        (call,) = first.choices[0].message.tool_calls
        await client.chat.completions.create(
            model="goagent",
            messages=[
                {"role": "user", "content": "a"},
                first.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": "approved: always"},
            ],
        )
        later = await client.chat.completions.create(
            model="goagent", messages=[{"role": "user", "content": "b"}]
        )
    await app.aclose()
    assert later.choices[0].finish_reason == "stop"  # not asked again in this thread
    assert later.choices[0].message.content.endswith("after: wiped b")
    assert RAN == ["a", "b"]
