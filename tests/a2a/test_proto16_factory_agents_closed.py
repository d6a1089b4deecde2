"""A factory's agent is closed when the server drops the last context holding it (docs/a2a.md,
"One conversation per client"), as the MCP server does at a session's end: a context dropped
past ``max_contexts`` asks the factory again on its next message, so an agent left open there
kept its connections (an MCP server's process) for the server's life."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a_helpers import free_socket, serving
from a2a_helpers import send_message as _message

from goagent_py import Agent
from goagent_py.a2a import a2a_app
from goagent_py.testing import FunctionProvider

pytestmark = pytest.mark.slow


def _connected(name: str, closed: list[str]) -> Any:
    """A connector whose connection records its close in ``closed``."""

    async def connect() -> Any:
        async def close() -> None:
            closed.append(name)

        return [], close

    return connect


async def _say(http: httpx.AsyncClient, url: str, context_id: str) -> None:
    body = _message("hi", f"{context_id}-m", context_id)
    answer = (await http.post(url + "/", json=body, headers={"A2A-Version": "1.0"})).json()
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", answer


async def test_a_dropped_contexts_factory_agent_is_closed() -> None:
    closed: list[str] = []

    def make(context_id: str) -> Agent:
        return Agent(
            provider=FunctionProvider(lambda r: "ok"),
            model="m",
            mcp_connectors=[_connected(context_id, closed)],
        )

    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with (
        serving(a2a_app(make, name="f", url=url, max_contexts=1), sock),
        httpx.AsyncClient(timeout=60) as http,
    ):
        await _say(http, url, "ctx-a")
        assert closed == []
        await _say(http, url, "ctx-b")  # past max_contexts: ctx-a is dropped
        assert closed == ["ctx-a"]
    assert closed == ["ctx-a", "ctx-b"]  # the app's shutdown closes the rest


async def test_an_agent_a_factory_gives_several_contexts_is_closed_with_the_last() -> None:
    closed: list[str] = []
    shared = Agent(
        provider=FunctionProvider(lambda r: "ok"),
        model="m",
        mcp_connectors=[_connected("shared", closed)],
    )
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with (
        serving(a2a_app(lambda context_id: shared, name="f", url=url, max_contexts=2), sock),
        httpx.AsyncClient(timeout=60) as http,
    ):
        for context in ("ctx-a", "ctx-b", "ctx-c"):  # ctx-a dropped for ctx-c: b holds it
            await _say(http, url, context)
        assert closed == []
    assert closed == ["shared"]  # once, when the last context holding it went
