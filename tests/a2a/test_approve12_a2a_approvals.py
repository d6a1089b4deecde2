"""An A2A-served agent whose tool needs a person's approval (approve12): the task ends
``input-required`` with a note naming the waiting call and how to answer (not ``completed``
with an empty answer), and the context's next message is the answer: "approved" runs the call,
"denied: <reason>" (or any other message, as in the served page) denies it. Before, the
context's conversation kept waiting and every later message failed with
ApprovalPendingError. Official a2a-sdk client over real localhost HTTP. docs/approvals.md."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from a2a_helpers import free_socket, serving
from wiping import RAN, wipe  # tests/wiping.py

from goagent_py import Agent
from goagent_py.a2a import a2a_app
from goagent_py.testing import ScriptedProvider, tool_call_response


async def send(url: str, text: str, *, context_id: str = "") -> Any:
    client = await create_client(url, client_config=ClientConfig(streaming=False))
    try:
        message = Message(
            role=Role.ROLE_USER,
            message_id=str(uuid.uuid4()),
            context_id=context_id,
            parts=[Part(text=text)],
        )
        [event] = [e async for e in client.send_message(SendMessageRequest(message=message))]
        return event.task
    finally:
        await client.close()


def _note(task: Any) -> str:
    return " ".join(p.text for p in task.status.message.parts)


@pytest.mark.slow
async def test_a_call_that_waits_asks_for_input_and_the_next_message_decides() -> None:
    RAN.clear()
    provider = ScriptedProvider(
        tool_call_response(("wipe", {"target": "disk"})),
        "Wiped the disk.",
        tool_call_response(("wipe", {"target": "backup"})),
        "Kept the backup.",
        "Hello.",
    )
    agent = Agent(provider=provider, model="scripted", name="ops", tools=[wipe])
    sock = free_socket()
    app = a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}")
    async with serving(app, sock) as url:
        asked = await send(url, "wipe the disk")
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        said = _note(asked)
        assert "wipe" in said
        assert "disk" in said
        assert '"approved"' in said
        assert RAN == []
        context = asked.context_id

        done = await send(url, "approved", context_id=context)
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert [p.text for p in done.artifacts[-1].parts] == ["Wiped the disk."]
        assert RAN == ["disk"]

        again = await send(url, "wipe the backup", context_id=context)
        assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        kept = await send(url, "denied: keep it", context_id=context)
        assert kept.status.state == TaskState.TASK_STATE_COMPLETED
        assert RAN == ["disk"]
        assert "keep it" in provider.requests[3].messages[-1].text

        hello = await send(url, "hello", context_id=context)
        assert hello.status.state == TaskState.TASK_STATE_COMPLETED
    assert RAN == ["disk"]
