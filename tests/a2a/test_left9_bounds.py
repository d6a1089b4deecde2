"""The A2A server's in-memory state stays bounded whatever a client sends: finished tasks past
``max_tasks`` are dropped oldest first (docs/a2a.md); runs past ``max_running`` are refused
with an A2A error (tests/a2a/test_proto11_refusals.py)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState
from a2a_helpers import free_socket, serving

from goagent_py import Agent
from goagent_py.a2a import a2a_app
from goagent_py.errors import ConfigurationError
from goagent_py.testing import ScriptedProvider


def _message(text: str) -> Message:
    return Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)])


async def _send(client: Any, text: str) -> Any:
    [event] = [e async for e in client.send_message(SendMessageRequest(message=_message(text)))]
    return event.task


@pytest.mark.slow
async def test_finished_tasks_past_max_tasks_are_dropped_oldest_first() -> None:
    agent = Agent(provider=ScriptedProvider("one", "two", "three"), model="m", name="a")
    sock = free_socket()
    app = a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}", max_tasks=2)
    async with serving(app, sock) as url:
        client = await create_client(url, client_config=ClientConfig(streaming=False))
        try:
            ids = [(await _send(client, text)).id for text in ("a", "b", "c")]
            kept: list[Any] = []
            for task_id in ids:
                try:
                    task = await client.get_task(GetTaskRequest(id=task_id))
                except Exception as exc:  # the SDK client's TaskNotFound
                    kept.append(str(exc).lower())
                else:
                    kept.append(task.status.state)
        finally:
            await client.close()
    # was: every task ever sent stayed in the server's memory
    assert "not found" in kept[0]
    assert kept[1:] == [TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_COMPLETED]


@pytest.mark.parametrize("setting", ["max_running", "max_tasks"])
def test_bounds_below_one_are_configuration_errors(setting: str) -> None:
    agent = Agent(provider=ScriptedProvider(), model="m", name="a")
    with pytest.raises(ConfigurationError, match=setting):
        a2a_app(agent, url="http://h", **{setting: 0})
