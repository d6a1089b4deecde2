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


async def test_a_message_naming_a_task_still_running_is_refused_not_answered_with_its_result() -> (
    None
):
    import asyncio

    from a2a.client import ClientConfig, create_client
    from a2a.types import ListTasksRequest, Message, Part, Role, SendMessageRequest
    from a2a.utils.errors import UnsupportedOperationError

    from goagent_py import tool
    from goagent_py.testing import tool_call_response

    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        """Work until released."""
        started.set()
        await release.wait()
        return "done"

    provider = ScriptedProvider(tool_call_response(("slow", {})), "Finished.", "Second.")
    agent = Agent(provider=provider, model="m", tools=[slow])
    sock = free_socket()
    async with serving(
        a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}"), sock
    ) as url:
        https = [httpx.AsyncClient(timeout=120) for _ in range(2)]  # closed here, not by close()
        configs = [
            ClientConfig(streaming=s, httpx_client=h)
            for s, h in zip((True, False), https, strict=True)
        ]
        first, second = [await create_client(url, client_config=c) for c in configs]

        def message(text: str, task_id: str = "") -> SendMessageRequest:
            return SendMessageRequest(
                message=Message(
                    role=Role.ROLE_USER,
                    message_id=text,
                    parts=[Part(text=text)],
                    context_id="ctx",
                    task_id=task_id,
                )
            )

        running = asyncio.create_task(_events(first, message("work")))
        await started.wait()
        [task] = (await second.list_tasks(ListTasksRequest(context_id="ctx"))).tasks
        try:
            # Refused at once; before, it waited for the run (a hang here, bounded) and was
            # answered with that run's result.
            with pytest.raises(UnsupportedOperationError, match="running"):
                await asyncio.wait_for(_events(second, message("more", task.id)), 60)
        finally:
            release.set()
            events = await running
            for client in (first, second):
                await client.close()
            for http in https:
                await http.aclose()
    assert events[-1].status_update.status.state == 3  # TASK_STATE_COMPLETED
    assert len(provider.requests) == 2  # "more" never ran


async def _events(client: Any, request: Any) -> list[Any]:
    return [e async for e in client.send_message(request)]
