"""Guardrails in served runs (issue 35): an input or output guardrail that trips ends the run
with a clear error the client can read (AG-UI ``RUN_ERROR`` on the page's stream, an OpenAI
error body under /v1, never a 500), and the thread's record stays valid: the next turn works."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from goagent_py import Agent, GuardrailContext, Message, Role
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.serve import ThreadContext, create_app
from goagent_py.serve._threads import session_key
from goagent_py.testing import FunctionProvider, text_response
from goagent_py.transcript import validate_transcript
from tests.serve.conftest import check_agui

openai = pytest.importorskip("openai")


def no_keys(prompt: list[Message], ctx: GuardrailContext) -> str | None:
    return "the prompt holds an API key" if "sk-" in prompt[-1].text else None


def no_secrets(answer: Any, ctx: GuardrailContext) -> str | None:
    return "the answer tells the secret" if "secret" in ctx.text else None


def answer(request: Any) -> Any:
    last = [m for m in request.messages if m.role is Role.USER][-1]
    return text_response(f"echo: {last.text}")


@pytest.fixture
async def app(db: str) -> AsyncIterator[Any]:
    def factory(ctx: ThreadContext) -> Agent:
        return Agent(
            provider=FunctionProvider(answer),
            model="scripted",
            short_term_memory=ctx.short_term_memory,
            input_guardrails=[no_keys],
            output_guardrails=[no_secrets],
        )

    served = create_app(factory, storage_path=db)
    yield served
    await served.aclose()


def _client(app: Any) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1234))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")


def _sdk(app: Any) -> Any:
    return openai.AsyncOpenAI(
        base_url="http://127.0.0.1/v1", api_key="unused", http_client=_client(app)
    )


async def _stored(db: str, thread_id: str) -> list[Message]:
    async with SQLiteStorage(db, session_id=session_key("local", thread_id)) as storage:
        return await ShortTermMemory(storage).transcript()


async def _page_turns(app: Any, helpers: Any, *texts: str) -> tuple[str, list[Any]]:
    async with _client(app) as client:
        tid = (await client.post("/api/threads", json={})).json()["id"]
        out = []
        for text in texts:
            r = await client.post(f"/api/threads/{tid}/runs", json={"message": text})
            assert r.status_code == 200, r.text
            out.append(helpers.sse_events(r.text))
    return str(tid), out


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("my key is sk-123", "the input guardrail 'no_keys' tripped: the prompt holds an API key"),
        ("say secret", "the output guardrail 'no_secrets' tripped: the answer tells the secret"),
    ],
    ids=["input", "output"],
)
async def test_a_trip_on_the_pages_stream_is_a_run_error_and_the_thread_goes_on(
    app: Any, db: str, helpers: Any, text: str, reason: str
) -> None:
    tid, (tripped, after) = await _page_turns(app, helpers, text, "hello")

    check_agui(tripped)
    assert tripped[-1]["type"] == "RUN_ERROR"
    assert tripped[-1]["code"] == "GuardrailTripped"
    assert reason in tripped[-1]["message"]
    check_agui(after)
    assert after[-1]["type"] == "RUN_FINISHED"
    assert after[-1]["result"]["text"] == "echo: hello"
    stored = await _stored(db, tid)
    assert validate_transcript(stored, allow_pending=False) == []
    assert stored[-1].text == "echo: hello"


async def test_no_trip_on_the_pages_stream(app: Any, helpers: Any) -> None:
    _, (events,) = await _page_turns(app, helpers, "hi")
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["result"]["text"] == "echo: hi"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("my key is sk-123", "the input guardrail 'no_keys' tripped"),
        ("say secret", "the output guardrail 'no_secrets' tripped"),
    ],
    ids=["input", "output"],
)
async def test_a_trip_under_v1_is_a_400_content_filter_error_and_the_thread_goes_on(
    app: Any, db: str, text: str, reason: str
) -> None:
    sdk = _sdk(app)
    with pytest.raises(openai.BadRequestError) as caught:
        await sdk.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": text}]
        )
    assert caught.value.status_code == 400
    assert caught.value.code == "content_filter"
    assert reason in caught.value.message

    ok = await sdk.chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "hello"}]
    )
    assert ok.choices[0].message.content == "echo: hello"
    assert ok.choices[0].finish_reason == "stop"
    stored = await _stored(db, "openai-default")
    assert validate_transcript(stored, allow_pending=False) == []


async def test_a_trip_in_a_streamed_v1_completion_ends_with_an_error_chunk(
    app: Any, helpers: Any
) -> None:
    async with _client(app) as client:
        r = await client.post(
            "/v1/chat/completions",
            json={
                "model": "scripted",
                "stream": True,
                "messages": [{"role": "user", "content": "my key is sk-123"}],
            },
        )
        events = helpers.sse_events(r.text)
        assert r.status_code == 200  # the stream had started
        errors = [e["error"] for e in events if "error" in e]
        assert [(e["code"], e["type"]) for e in errors] == [
            ("content_filter", "invalid_request_error")
        ]
        assert "the input guardrail 'no_keys' tripped" in errors[0]["message"]
        assert [c["finish_reason"] for e in events for c in e.get("choices", [])][-1] == (
            "content_filter"
        )


async def test_no_trip_under_v1(app: Any) -> None:
    ok = await _sdk(app).chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "hi"}]
    )
    assert ok.choices[0].message.content == "echo: hi"


async def test_a_trip_under_v1_responses_is_a_400_content_filter_error(app: Any) -> None:
    sdk = _sdk(app)
    with pytest.raises(openai.BadRequestError) as caught:
        await sdk.responses.create(model="scripted", input="my key is sk-123")
    assert caught.value.code == "content_filter"
    assert "the input guardrail 'no_keys' tripped" in caught.value.message

    ok = await sdk.responses.create(model="scripted", input="hello")
    assert ok.output_text == "echo: hello"
