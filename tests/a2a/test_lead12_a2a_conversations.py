"""Each A2A context is its own conversation: no client reads another's through a shared
short-term memory (the cause of proto11's MCP refusal, here for A2A; docs/a2a.md)."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import TaskState
from a2a_helpers import free_socket, serving
from test_a2a_server import send

from goagent_py import Agent
from goagent_py.a2a import a2a_app
from goagent_py.memory import InMemoryStorage, ShortTermMemory, SQLiteStorage
from goagent_py.messages import Role
from goagent_py.testing import ScriptedProvider


@pytest.mark.slow
async def test_an_agent_with_short_term_memory_gives_each_context_its_own_conversation() -> None:
    # Refused before proto14; now each context gets a memory of its own of the served kind
    # (tests/a2a/test_proto14_a2a_client_memory.py has the stored kinds).
    provider = ScriptedProvider("Noted.", "Hello.", "Still noted.")
    agent = Agent(
        provider=provider,
        model="m",
        name="remembers",
        short_term_memory=ShortTermMemory(),
    )
    sock = free_socket()
    async with serving(
        a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}"), sock
    ) as url:
        [first] = await send(url, "my secret is 1234", streaming=False, context_id="c-1")
        await send(url, "hi", streaming=False, context_id="c-2")
        await send(url, "again", streaming=False, context_id="c-1")
    assert first.task.status.state == TaskState.TASK_STATE_COMPLETED
    texts = _user_texts(provider)
    assert texts[1] == ["hi"]
    assert texts[2] == ["my secret is 1234", "again"]
    assert agent.options.short_term_memory is not None
    assert await agent.options.short_term_memory.storage.load() == []  # the served one: unused


def _user_texts(provider: ScriptedProvider) -> list[list[str]]:
    return [[m.text for m in r.messages if m.role == Role.USER] for r in provider.requests]


@pytest.mark.slow
@pytest.mark.parametrize("shared", ["agent", "storage_object", "sqlite_file_and_session"])
async def test_a_factory_sharing_one_conversation_across_contexts_never_leaks_it(
    shared: str, tmp_path: Any
) -> None:
    provider = ScriptedProvider("Noted.", "Hello.", "Hello again.")
    storage = InMemoryStorage()
    one = Agent(provider=provider, model="m", name="h", short_term_memory=ShortTermMemory(storage))

    def make(context_id: str) -> Agent:
        if shared == "agent":
            return one
        if shared == "storage_object":
            memory = ShortTermMemory(storage)
        else:  # a new storage object each time, on the same file and the same conversation
            memory = ShortTermMemory(SQLiteStorage(str(tmp_path / "a.db"), session_id="all"))
        return Agent(provider=provider, model="m", name="h", short_term_memory=memory)

    sock = free_socket()
    app = a2a_app(make, name="helper", url=f"http://127.0.0.1:{sock.getsockname()[1]}")
    async with serving(app, sock) as url:
        [first] = await send(url, "my secret is 1234", streaming=False)
        [second] = await send(url, "hi", streaming=False)
    assert first.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert first.task.context_id != second.task.context_id
    # The second client's conversation never holds the first one's messages.
    for texts in _user_texts(provider)[1:]:
        assert "my secret is 1234" not in texts
    assert second.task.status.state == TaskState.TASK_STATE_FAILED
    note = second.task.status.message.parts[0].text
    assert "another context" in note
    assert "factory" in note
