"""Served decisions on a reused call id (approve12): local models number calls per turn
(``llama-tool-0``), so two waits of a thread list a call with the same id. An OpenAI client's
tool message carries only the id it was given, so that id carries the wait's token: a late
answer to the earlier wait is a 409, a bare reused id too (it cannot be told from one), and the
server's own decisions (a new message instead of a decision, "always for this thread") name
their wait. docs/approvals.md ("Which wait a decision is for")."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from wiping import RAN, wipe, wipes  # tests/wiping.py

from goagent_py import Role, ToolCall, tool
from goagent_py._metadata_keys import DECISIONS_KEY
from goagent_py.serve import create_app
from goagent_py.testing import FunctionProvider, text_response, tool_call_response

openai = pytest.importorskip("openai")

answer = wipes("llama-tool-0")


def make_app(db: str, helpers: Any) -> Any:
    RAN.clear()
    return create_app(helpers.factory_for(FunctionProvider(answer), [wipe]), storage_path=db)


def _sdk(app: Any) -> Any:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1234))
    http = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")
    return openai.AsyncOpenAI(base_url="http://127.0.0.1/v1", api_key="unused", http_client=http)


async def test_an_openai_clients_late_answer_on_a_reused_id_is_refused(
    db: str, helpers: Any
) -> None:
    app = make_app(db, helpers)
    async with _sdk(app) as client:

        async def ask(text: str) -> Any:
            chat = [{"role": "user", "content": text}]
            response = await client.chat.completions.create(model="goagent", messages=chat)
            assert response.choices[0].finish_reason == "tool_calls"
            (call,) = response.choices[0].message.tool_calls
            return call

        def tell(call_id: str, content: str) -> Any:
            chat = [{"role": "tool", "tool_call_id": call_id, "content": content}]
            return client.chat.completions.create(model="goagent", messages=chat)

        first = await ask("disk")
        assert first.id.startswith("llama-tool-0")
        done = await tell(first.id, "approved")
        assert done.choices[0].message.content.endswith("after: wiped disk")
        second = await ask("backup")
        assert second.id.startswith("llama-tool-0")
        assert second.id != first.id  # it names its own wait

        with pytest.raises(openai.ConflictError) as late:  # another answer to the first wait
            await tell(first.id, "denied")
        with pytest.raises(openai.ConflictError) as bare:  # the call's id alone
            await tell("llama-tool-0", "approved")
        # The first answer sent again (a retry, approve14) is answered as done: the call that
        # waits now does not take it.
        retried = await tell(first.id, "approved")
        assert retried.choices[0].finish_reason == "tool_calls"
        assert RAN == ["disk"]
        assert "already decided" in late.value.body["message"]
        assert "token" in bare.value.body["message"]

        done = await tell(second.id, "denied: keep the backup")
        assert done.choices[0].message.content.endswith("keep the backup")
        live = await app.server.live_of("local", "openai-default")
        stored = list(await live.session.agent.options.short_term_memory.transcript())
    await app.aclose()
    assert RAN == ["disk"]
    assert stored[-1].text.endswith("keep the backup")


async def test_a_bare_id_that_is_not_reused_still_answers(db: str, helpers: Any) -> None:
    app = make_app(db, helpers)
    async with _sdk(app) as client:
        await client.chat.completions.create(
            model="goagent", messages=[{"role": "user", "content": "disk"}]
        )
        done = await client.chat.completions.create(
            model="goagent",
            messages=[{"role": "tool", "tool_call_id": "llama-tool-0", "content": "approved"}],
        )
    await app.aclose()
    assert done.choices[0].message.content.endswith("after: wiped disk")
    assert RAN == ["disk"]


async def test_the_servers_own_decisions_on_a_reused_id_name_their_wait(
    db: str, helpers: Any
) -> None:
    # "Always for this thread" approves the second call, and a new message instead of a
    # decision denies the third: both by the server, both for a call whose id is reused.
    app = make_app(db, helpers)
    async with helpers.client_for(app) as client:
        tid = str((await client.post("/api/threads", json={})).json()["id"])

        async def say(text: str) -> list[dict[str, Any]]:
            r = await client.post(f"/api/threads/{tid}/runs", json={"message": text})
            assert r.status_code == 200, r.text
            return list(helpers.sse_events(r.text))

        (asked,) = (await say("disk"))[-1]["outcome"]["interrupts"]
        body = {"decisions": {asked["id"]: {"decision": "approve", "always": True}}}
        r = await client.post(f"/api/threads/{tid}/decisions", json=body)
        assert r.status_code == 200, r.text
        events = await say("backup")  # approved by the server: always for this thread
        assert not [e for e in events if e["type"] == "RUN_ERROR"]
        assert RAN == ["disk", "backup"]

        app.server.live.clear()  # another server process: "always" is read from the record
        listed = (await client.get(f"/api/threads/{tid}/messages")).json()
        assert listed["pending"] == []
    await app.aclose()

    # Without "always": the next wait on the id is left for a new message.
    @tool(requires_approval=True)
    def erase(target: str) -> str:
        """Erase something.

        Args:
            target: what.
        """
        RAN.append(f"erase {target}")
        return f"erased {target}"

    def erasing(request: Any) -> Any:
        last = request.messages[-1]
        if last.role is Role.TOOL:
            return text_response(f"after: {last.text}")
        return tool_call_response(ToolCall("llama-tool-0", "erase", {"target": last.text}))

    again = create_app(helpers.factory_for(FunctionProvider(erasing), [erase]), storage_path=db)
    async with helpers.client_for(again) as client:
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "logs"})
        (waiting,) = helpers.sse_events(r.text)[-1]["outcome"]["interrupts"]
        assert waiting["id"] == "llama-tool-0"
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "never mind"})
        assert r.status_code == 200, r.text
        events = helpers.sse_events(r.text)
        assert not [e for e in events if e["type"] == "RUN_ERROR"], events
        live = await again.server.live_of("local", tid)
        stored = list(await live.session.agent.options.short_term_memory.transcript())
    await again.aclose()
    assert RAN == ["disk", "backup"]
    denied = [m for m in stored if m.metadata.get(DECISIONS_KEY)][-1]
    assert denied.metadata[DECISIONS_KEY]["llama-tool-0"]["decision"] == "deny"
    assert stored[-1].role is Role.ASSISTANT
