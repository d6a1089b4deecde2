"""A sub-agent (``as_tool``) whose short-term memory keeps its parent's conversation would write
its own turns into the parent's record mid-turn: refused, the parent's record untouched
(docs/multi-agent.md)."""

from __future__ import annotations

from typing import Any

import pytest

from goagent_py import Agent
from goagent_py.errors import ConfigurationError
from goagent_py.memory import InMemoryStorage, ShortTermMemory, SQLiteStorage
from goagent_py.messages import Role
from goagent_py.testing import ScriptedProvider, tool_call_response


def _memories(kind: str, tmp_path: Any) -> tuple[ShortTermMemory, ShortTermMemory]:
    if kind == "same object":
        memory = ShortTermMemory(InMemoryStorage())
        return memory, memory
    if kind == "same storage":
        storage = InMemoryStorage()
        return ShortTermMemory(storage), ShortTermMemory(storage)
    path = str(tmp_path / "m.db")  # two storages on one file and one session id
    return ShortTermMemory(SQLiteStorage(path, session_id="s")), ShortTermMemory(
        SQLiteStorage(path, session_id="s")
    )


@pytest.mark.parametrize("kind", ["same object", "same storage", "same file and session"])
async def test_a_child_keeping_its_parents_conversation_fails_the_run_and_stores_nothing(
    kind: str, tmp_path: Any
) -> None:
    parent_memory, child_memory = _memories(kind, tmp_path)
    child_model = ScriptedProvider("child answer")
    child = Agent(provider=child_model, model="m", name="helper", short_term_memory=child_memory)
    parent = Agent(
        provider=ScriptedProvider(tool_call_response(("helper", {"prompt": "do it"})), "done"),
        model="m",
        tools=[child.as_tool(name="helper", description="Helps.")],
        short_term_memory=parent_memory,
    )
    with pytest.raises(ConfigurationError, match="memory of its own"):
        await parent.run("hello")
    assert child_model.requests == []  # the child never ran
    stored = await parent_memory.storage.load()
    assert "do it" not in [m.text for m in stored if m.role is Role.USER]


async def test_a_grandchild_keeping_the_root_conversation_is_refused_too() -> None:
    root_memory = ShortTermMemory(InMemoryStorage())
    grandchild_model = ScriptedProvider("deep answer")
    grandchild = Agent(
        provider=grandchild_model, model="m", name="deep", short_term_memory=root_memory
    )
    middle = Agent(
        provider=ScriptedProvider(tool_call_response(("deep", {"prompt": "x"})), "mid done"),
        model="m",
        name="middle",
        tools=[grandchild.as_tool(name="deep", description="Deep.")],
    )
    root = Agent(
        provider=ScriptedProvider(tool_call_response(("middle", {"prompt": "y"})), "root done"),
        model="m",
        tools=[middle.as_tool(name="middle", description="Middle.")],
        short_term_memory=root_memory,
    )
    with pytest.raises(ConfigurationError, match="memory of its own"):
        await root.run("hello")
    assert grandchild_model.requests == []


async def test_a_child_with_a_memory_of_its_own_runs_and_keeps_its_own_record() -> None:
    parent_memory = ShortTermMemory(InMemoryStorage())
    child_memory = ShortTermMemory(InMemoryStorage())
    child = Agent(
        provider=ScriptedProvider("child answer"),
        model="m",
        name="helper",
        short_term_memory=child_memory,
    )
    parent = Agent(
        provider=ScriptedProvider(tool_call_response(("helper", {"prompt": "do it"})), "done"),
        model="m",
        tools=[child.as_tool(name="helper", description="Helps.")],
        short_term_memory=parent_memory,
    )
    assert (await parent.run("hello")).text == "done"
    assert [m.text for m in await child_memory.storage.load()] == ["do it", "child answer"]
    parent_users = [m.text for m in await parent_memory.storage.load() if m.role is Role.USER]
    assert parent_users == ["hello"]
