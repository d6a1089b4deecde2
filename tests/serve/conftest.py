"""Fixtures for the serve tests: an app over a real SQLite file with a scripted provider."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from goagent_py import Agent
from goagent_py.serve import ThreadContext
from goagent_py.testing import FunctionProvider

# Without the serve extra every test module here is collected as a skip naming it
# (tests/conftest.py, FOLDER_EXTRAS); nothing here imports the extra's packages.


def pytest_asyncio_loop_factories(config: Any, item: Any) -> dict[str, Any]:
    """Every async serve test runs on the standard loop and on uvloop, which ``goagent-py
    serve`` runs on when it is installed (``goagent_py.serve.run.event_loop_factory``)."""
    factories: dict[str, Any] = {"asyncio": asyncio.new_event_loop}
    if importlib.util.find_spec("uvloop") is not None:
        import uvloop

        factories["uvloop"] = uvloop.new_event_loop
    return factories


def sse_events(text: str) -> list[dict[str, Any]]:
    """The JSON payloads of an SSE body."""
    return [
        json.loads(line[5:].strip())
        for line in text.splitlines()
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]")
    ]


def factory_for(provider: Any, tools: list[Any] | None = None) -> Any:
    def factory(ctx: ThreadContext) -> Agent:
        return Agent(
            provider=provider,
            model="scripted",
            tools=tools or [],
            short_term_memory=ctx.short_term_memory,
        )

    return factory


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "serve.db")


def client_for(app: Any, *, client: str = "127.0.0.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(client, 1234))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")


def post_scope(path: str, body: bytes) -> dict[str, Any]:
    """The ASGI scope of a JSON POST to ``path`` from 127.0.0.1, for tests that drive the app's
    ``receive`` and ``send`` themselves (a disconnect, a failing send)."""
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }


def body_then_wait(body: bytes) -> Callable[[], Awaitable[dict[str, Any]]]:
    """An ASGI ``receive`` of a client that sends ``body`` whole, then stays connected."""
    received = [{"type": "http.request", "body": body, "more_body": False}]
    never = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if received:
            return received.pop()
        await never.wait()
        return {"type": "http.disconnect"}

    return receive


@pytest.fixture
def helpers() -> Any:
    """sse_events, factory_for, client_for, post_scope and body_then_wait, for the tests."""

    class _H:
        pass

    h = _H()
    h.sse_events = sse_events  # type: ignore[attr-defined]
    h.factory_for = factory_for  # type: ignore[attr-defined]
    h.client_for = client_for  # type: ignore[attr-defined]
    h.post_scope = post_scope  # type: ignore[attr-defined]
    h.body_then_wait = body_then_wait  # type: ignore[attr-defined]
    return h


@pytest.fixture
async def echo_app(db: str) -> AsyncIterator[Any]:
    """Answers every prompt with 'echo: <prompt>' (works for any number of turns)."""
    from goagent_py.messages import Role
    from goagent_py.testing import text_response

    def answer(request: Any) -> Any:
        last = [m for m in request.messages if m.role is Role.USER][-1]
        return text_response(f"echo: {last.text}")

    from goagent_py.serve import create_app

    app = create_app(factory_for(FunctionProvider(answer)), storage_path=db)
    yield app
    await app.aclose()


_TERMINAL = ("RUN_FINISHED", "RUN_ERROR")


def _need(ok: object, where: str) -> None:
    if not ok:
        raise AssertionError(f"AG-UI order broken at {where}")


def check_agui(events: list[dict[str, Any]]) -> list[Any]:
    """Parse every event with the ``ag-ui-protocol`` models and check their order; returns the
    parsed models.

    The order rules: ``RUN_STARTED`` first and exactly one terminal event, last; one text or
    reasoning message open at a time (a reasoning message ends before a text message starts,
    a text message before a tool call starts); content and end only for the open message;
    every tool call started once, its arguments before its end, then exactly one result.
    """
    from ag_ui.core import Event
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(Event)
    parsed = []
    for e in events:
        model = adapter.validate_python(e)
        assert not model.model_extra, f"fields the protocol does not define: {model.model_extra}"
        assert model.model_dump(mode="json", by_alias=True) == e, e
        parsed.append(model)
    types = [e["type"] for e in events]
    assert types[0] == "RUN_STARTED", types
    assert [t for t in types if t in _TERMINAL] == [types[-1]], types
    text = reasoning = span = ""
    seen_messages: set[str] = set()
    calls: dict[str, str] = {}  # id -> "open" | "ended" | "answered"
    for e in events:
        kind = e["type"]
        where = f"{kind} in {types}"
        if kind == "TEXT_MESSAGE_START":
            _need(not text and not span, where)
            _need(e["messageId"] not in seen_messages, where)
            text = e["messageId"]
            seen_messages.add(text)
        elif kind in ("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"):
            _need(text and e["messageId"] == text, where)
            if kind == "TEXT_MESSAGE_END":
                text = ""
        elif kind == "REASONING_START":
            _need(not span and not text, where)
            span = e["messageId"]
        elif kind == "REASONING_MESSAGE_START":
            _need(span and not reasoning and not text, where)
            reasoning = e["messageId"]
        elif kind in ("REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END"):
            _need(reasoning and e["messageId"] == reasoning, where)
            if kind == "REASONING_MESSAGE_END":
                reasoning = ""
        elif kind == "REASONING_END":
            _need(span == e["messageId"] and not reasoning, where)
            span = ""
        elif kind == "TOOL_CALL_START":
            _need(not text and not span, where)
            _need(e["toolCallId"] not in calls, where)
            calls[e["toolCallId"]] = "open"
        elif kind in ("TOOL_CALL_ARGS", "TOOL_CALL_END"):
            _need(calls.get(e["toolCallId"]) == "open", where)
            if kind == "TOOL_CALL_END":
                calls[e["toolCallId"]] = "ended"
        elif kind == "TOOL_CALL_RESULT":
            _need(calls.get(e["toolCallId"]) == "ended", where)
            calls[e["toolCallId"]] = "answered"
        elif kind in _TERMINAL:
            _need(not text and not span and not reasoning, where)
            _need(all(state == "answered" for state in calls.values()), f"{calls} {types}")
    return parsed
