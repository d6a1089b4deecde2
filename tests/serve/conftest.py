"""Fixtures for the serve tests: an app over a real SQLite file with a scripted provider."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from goagent_py import Agent
from goagent_py.serve import ThreadContext
from goagent_py.testing import FunctionProvider

pytest.importorskip("starlette")
pytest.importorskip("sse_starlette")


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


@pytest.fixture
def helpers() -> Any:
    """sse_events, factory_for and client_for, for the tests."""

    class _H:
        pass

    h = _H()
    h.sse_events = sse_events  # type: ignore[attr-defined]
    h.factory_for = factory_for  # type: ignore[attr-defined]
    h.client_for = client_for  # type: ignore[attr-defined]
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
