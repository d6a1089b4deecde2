"""A steer that reaches the server after the run took its last look at the queue (while it
stores its final answer) is never silently kept for a later, unrelated turn: the run goes on
with it (a follow-up turn on the same stream), or, when the run cannot go on (stopped, failed,
waiting for approvals), the page is told it was not taken (docs/serve.md, "Steering")."""

from __future__ import annotations

import asyncio
from typing import Any

from goagent_py import Agent
from goagent_py.messages import Message, Role
from goagent_py.serve import ThreadContext, create_app
from goagent_py.testing import FunctionProvider


class _Held:
    """Holds the store of the assistant's answer ``text`` (or of its tool calls, with
    ``calls``) until released."""

    def __init__(self, text: str = "", *, calls: bool = False) -> None:
        self.text = text
        self.calls = calls
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    def wrap(self, ctx: ThreadContext) -> Any:
        memory = ctx.short_term_memory
        real = memory.append

        async def append(*messages: Message) -> None:
            if any(
                m.role is Role.ASSISTANT
                and (bool(m.tool_calls) if self.calls else m.text == self.text)
                for m in messages
            ):
                self.entered.set()
                await self.release.wait()
            await real(*messages)

        memory.append = append  # type: ignore[method-assign]
        return memory


def _answers(fail_on: str = "") -> FunctionProvider:
    def answer(request: Any) -> str:
        last = [m for m in request.messages if m.role is Role.USER][-1].text
        if fail_on and last == fail_on:
            raise RuntimeError("the model is down")
        return {"go": "final answer"}.get(last, f"answer to {last}")

    return FunctionProvider(answer)


async def _thread(client: Any) -> str:
    return str((await client.post("/api/threads", json={})).json()["id"])


async def test_a_steer_sent_while_the_final_answer_is_stored_starts_a_follow_up_turn(
    db: str, helpers: Any
) -> None:
    held = _Held("final answer")
    provider = _answers()

    def factory(ctx: ThreadContext) -> Agent:
        return Agent(provider=provider, model="m", short_term_memory=held.wrap(ctx))

    app = create_app(factory, storage_path=db)
    async with helpers.client_for(app) as client:
        tid = await _thread(client)
        stream = asyncio.create_task(
            client.post(f"/api/threads/{tid}/runs", json={"message": "go"})
        )
        await held.entered.wait()
        steer = await client.post(f"/api/threads/{tid}/steer", json={"message": "and this"})
        assert steer.status_code == 200
        held.release.set()
        events = helpers.sse_events((await stream).text)
        text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
        assert text == "final answeranswer to and this"  # the steer answered in this run
        assert events[-1]["type"] == "RUN_FINISHED"
        assert events[-1]["result"]["text"] == "answer to and this"
        msgs = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
        assert [(m["role"], m["text"]) for m in msgs] == [
            ("user", "go"),
            ("assistant", "final answer"),
            ("user", "and this"),
            ("assistant", "answer to and this"),
        ]
        nxt = await client.post(f"/api/threads/{tid}/runs", json={"message": "next"})
        assert helpers.sse_events(nxt.text)[-1]["type"] == "RUN_FINISHED"
        sent = [m.text for m in provider.requests[-1].messages if m.role is Role.USER]
        assert sent == ["go", "and this", "next"]  # taken once, never again
    await app.aclose()


async def test_a_steer_a_failed_run_never_took_is_reported_and_not_kept(
    db: str, helpers: Any
) -> None:
    gate = asyncio.Event()
    entered = asyncio.Event()
    calls = 0

    async def answer(request: Any) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            entered.set()
            await gate.wait()
            raise RuntimeError("the model is down")
        last = [m for m in request.messages if m.role is Role.USER][-1].text
        return f"answer to {last}"

    provider = FunctionProvider(answer)
    app = create_app(helpers.factory_for(provider), storage_path=db)
    async with helpers.client_for(app) as client:
        tid = await _thread(client)
        stream = asyncio.create_task(
            client.post(f"/api/threads/{tid}/runs", json={"message": "go"})
        )
        await entered.wait()
        await client.post(f"/api/threads/{tid}/steer", json={"message": "and this"})
        gate.set()
        events = helpers.sse_events((await stream).text)
        assert events[-1]["type"] == "RUN_ERROR"
        returned = [
            e["value"] for e in events if e["type"] == "CUSTOM" and e["name"] == "goagent.not_taken"
        ]
        assert returned == [{"messages": ["and this"]}]
        nxt = await client.post(f"/api/threads/{tid}/runs", json={"message": "next"})
        assert helpers.sse_events(nxt.text)[-1]["type"] == "RUN_FINISHED"
        sent = [m.text for m in provider.requests[-1].messages if m.role is Role.USER]
        assert "and this" not in sent  # not kept for the next, unrelated turn
    await app.aclose()


async def test_a_steer_a_stopped_run_never_took_is_reported(db: str, helpers: Any) -> None:
    entered = asyncio.Event()

    async def answer(request: Any) -> str:
        if len(request.messages) == 1:
            entered.set()
            await asyncio.Event().wait()  # until stopped
        return "never"

    app = create_app(helpers.factory_for(FunctionProvider(answer)), storage_path=db)
    async with helpers.client_for(app) as client:
        tid = await _thread(client)
        stream = asyncio.create_task(
            client.post(f"/api/threads/{tid}/runs", json={"message": "go"})
        )
        await entered.wait()
        await client.post(f"/api/threads/{tid}/steer", json={"message": "and this"})
        assert (await client.post(f"/api/threads/{tid}/stop", json={})).json()["stopped"]
        events = helpers.sse_events((await stream).text)
        assert events[-1]["type"] == "RUN_FINISHED"
        returned = [
            e["value"] for e in events if e["type"] == "CUSTOM" and e["name"] == "goagent.not_taken"
        ]
        assert returned == [{"messages": ["and this"]}]
    await app.aclose()


async def test_a_steer_a_run_stopped_for_approvals_never_took_is_reported(
    db: str, helpers: Any
) -> None:
    from goagent_py import tool
    from goagent_py.testing import tool_call_response

    @tool(requires_approval=True)
    def wipe(target: str) -> str:
        """Wipe a target."""
        return f"wiped {target}"

    held = _Held(calls=True)

    def answer(request: Any) -> Any:
        return tool_call_response(("wipe", {"target": "disk"}))

    provider = FunctionProvider(answer)

    def factory(ctx: ThreadContext) -> Agent:
        return Agent(provider=provider, model="m", tools=[wipe], short_term_memory=held.wrap(ctx))

    app = create_app(factory, storage_path=db)
    async with helpers.client_for(app) as client:
        tid = await _thread(client)
        stream = asyncio.create_task(
            client.post(f"/api/threads/{tid}/runs", json={"message": "go"})
        )
        await held.entered.wait()
        await client.post(f"/api/threads/{tid}/steer", json={"message": "and this"})
        held.release.set()
        events = helpers.sse_events((await stream).text)
        assert events[-1]["type"] == "RUN_FINISHED"
        assert events[-1]["outcome"]["type"] == "interrupt"  # waits for the person
        returned = [
            e["value"] for e in events if e["type"] == "CUSTOM" and e["name"] == "goagent.not_taken"
        ]
        assert returned == [{"messages": ["and this"]}]
        msgs = (await client.get(f"/api/threads/{tid}/messages")).json()
        assert [m["text"] for m in msgs["messages"] if m["role"] == "user"] == ["go"]
        assert [p["name"] for p in msgs["pending"]] == ["wipe"]
    await app.aclose()
