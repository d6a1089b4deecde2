"""Hostile or empty input through A2A: refused at the edge with the spec's error, the agent
never run on it (docs/a2a.md, "Serve an agent")."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a_helpers import free_socket, serving

from goagent_py import Agent
from goagent_py.a2a import a2a_app
from goagent_py.testing import ScriptedProvider

pytestmark = pytest.mark.slow


def _post(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "message/send",
        "params": {
            "message": {"kind": "message", "role": "user", "messageId": "m-7", "parts": parts}
        },
    }


@pytest.mark.parametrize(
    "parts",
    [
        [{"kind": "text", "text": ""}],
        [{"kind": "text", "text": "  \n\t"}, {"kind": "text", "text": ""}],
    ],
)
async def test_a_message_with_nothing_to_read_is_refused_and_never_reaches_the_model(
    parts: list[dict[str, Any]],
) -> None:
    provider = ScriptedProvider("never")
    agent = Agent(provider=provider, model="m", name="h")
    sock = free_socket()
    async with (
        serving(a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}"), sock) as url,
        httpx.AsyncClient(timeout=60) as http,
    ):
        answer = (await http.post(url + "/", json=_post(parts))).json()
    assert answer["error"]["code"] == -32602, answer
    assert "empty" in answer["error"]["message"]
    assert provider.requests == []
