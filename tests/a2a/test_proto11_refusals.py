"""A message the A2A server refuses before any work is a JSON-RPC error, as the A2A spec says
(its "Error Handling": servers MUST return errors; a validation error such as an unsupported
content type is ``ContentTypeNotSupportedError`` -32005, missing parts ``-32602``, a server
that is temporarily unavailable ``-32603``), not a task in state REJECTED over a success
answer: a client (or the model reading our A2A tool) tells a refusal from a task the agent
declined by the error, and no task is created or stored for it (docs/a2a.md).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import ListTasksRequest, Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils.errors import ContentTypeNotSupportedError, InternalError
from a2a_helpers import free_socket, serving

from goagent_py import Agent, tool
from goagent_py.a2a import A2AAgent, A2AError, a2a_app
from goagent_py.testing import ScriptedProvider, tool_call_response

pytestmark = pytest.mark.slow


def _message(text: str, *parts: Part) -> Message:
    return Message(
        role=Role.ROLE_USER,
        message_id=str(uuid.uuid4()),
        parts=[Part(text=text), *parts] if text else list(parts),
    )


def _post_0_3(url: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "message/send",
        "params": {
            "message": {"kind": "message", "role": "user", "messageId": "m-7", "parts": parts}
        },
    }


def _busy_agent() -> tuple[Agent, asyncio.Event, asyncio.Event, ScriptedProvider]:
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        """Work until released."""
        started.set()
        await release.wait()
        return "done"

    provider = ScriptedProvider(tool_call_response(("slow", {})), "Finished.")
    return (
        Agent(provider=provider, model="m", name="busy", tools=[slow]),
        started,
        release,
        provider,
    )


async def _drain(client: Any, message: Message) -> list[Any]:
    return [e async for e in client.send_message(SendMessageRequest(message=message))]


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_message_past_max_running_is_a_json_rpc_error_and_leaves_no_task(
    streaming: bool,
) -> None:
    agent, started, release, _ = _busy_agent()
    sock = free_socket()
    app = a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}", max_running=1)
    async with serving(app, sock) as url:
        first = await create_client(url, client_config=ClientConfig(streaming=True))
        second = await create_client(url, client_config=ClientConfig(streaming=streaming))
        try:
            stream = first.send_message(SendMessageRequest(message=_message("work")))
            await anext(stream)
            await started.wait()
            with pytest.raises(InternalError) as refused:  # the SDK client's error for -32603
                await _drain(second, _message("b"))
            listed = await second.list_tasks(ListTasksRequest())
            async with httpx.AsyncClient() as http:
                wire = (
                    await http.post(url + "/", json=_post_0_3(url, [{"kind": "text", "text": "c"}]))
                ).json()
            release.set()
            rest = [e async for e in stream]
        finally:
            await first.close()
            await second.close()
    # was: a task in state REJECTED, as a success answer (HTTP 200 with a "result")
    assert "max_running" in str(refused.value)
    assert "send the message again" in str(refused.value)
    assert len(listed.tasks) == 1  # the running one only: the refused messages left no task
    assert "result" not in wire
    assert wire["error"]["code"] == -32603
    assert "max_running" in wire["error"]["message"]
    assert rest[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_part_the_agent_cannot_read_is_content_type_not_supported() -> None:
    provider = ScriptedProvider()
    agent = Agent(provider=provider, model="m", name="a")
    sock = free_socket()
    app = a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}")
    audio = Part(raw=b"RIFF....", media_type="audio/wav")
    async with serving(app, sock) as url:
        client = await create_client(url, client_config=ClientConfig(streaming=True))
        try:
            with pytest.raises(ContentTypeNotSupportedError) as refused:
                await _drain(client, _message("Listen.", audio))
            listed = await client.list_tasks(ListTasksRequest())
        finally:
            await client.close()
        async with httpx.AsyncClient() as http:
            wire = (
                await http.post(
                    url + "/",
                    json=_post_0_3(
                        url,
                        [{"kind": "file", "file": {"bytes": "UklGRg==", "mimeType": "audio/wav"}}],
                    ),
                )
            ).json()
    # was: a task in state REJECTED whose message said so
    assert "audio/wav" in str(refused.value)
    assert "image/png" in str(refused.value)  # and what to send instead
    assert listed.tasks == []
    assert wire["error"]["code"] == -32005
    assert "audio/wav" in wire["error"]["message"]
    assert provider.requests == []


async def test_our_a2a_tool_reads_the_refusal_as_an_error_that_says_why() -> None:
    agent, started, release, _ = _busy_agent()
    sock = free_socket()
    app = a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}", max_running=1)
    async with serving(app, sock) as url:
        first = await create_client(url, client_config=ClientConfig(streaming=True))
        try:
            stream = first.send_message(SendMessageRequest(message=_message("work")))
            await anext(stream)
            await started.wait()
            with pytest.raises(A2AError) as refused:
                await A2AAgent(url, streaming=False).send("another")
            release.set()
            _ = [e async for e in stream]
        finally:
            await first.close()
    assert "max_running" in str(refused.value)


async def test_a_message_admitted_in_a_race_past_max_running_gets_the_same_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two messages checked at once both pass the handler's check; the runner counts a run
    before its first await, so the second is refused there, with the same error."""
    from goagent_py.a2a import server

    monkeypatch.setattr(server._Runner, "admit", lambda self, message: None)
    agent, started, release, provider = _busy_agent()
    sock = free_socket()
    app = a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}", max_running=1)
    async with serving(app, sock) as url:
        first = await create_client(url, client_config=ClientConfig(streaming=True))
        second = await create_client(url, client_config=ClientConfig(streaming=False))
        try:
            stream = first.send_message(SendMessageRequest(message=_message("work")))
            await anext(stream)
            await started.wait()
            with pytest.raises(InternalError) as refused:
                await _drain(second, _message("b"))
            release.set()
            rest = [e async for e in stream]
        finally:
            await first.close()
            await second.close()
    assert "max_running" in str(refused.value)
    assert len(provider.requests) == 2  # the first run's two turns; the refused one never ran
    assert rest[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
