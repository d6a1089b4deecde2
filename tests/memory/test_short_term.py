"""ShortTermMemory on its own, and inside a real Agent run with a scripted model."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from goagent_py import Agent
from goagent_py.errors import MemoryStoreError
from goagent_py.memory.base import ShortTermMemoryProtocol
from goagent_py.memory.policies import FixedWindow, TokenWindow
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage import InMemoryStorage, SQLiteStorage
from goagent_py.messages import (
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    assistant_message,
    user_message,
)
from goagent_py.testing import ScriptedProvider, tool_call_response
from goagent_py.tools import tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first addend.
        b: the second addend.
    """
    return a + b


async def test_fresh_memory_is_empty_and_round_trips() -> None:
    memory = ShortTermMemory()
    assert isinstance(memory, ShortTermMemoryProtocol)
    assert await memory.messages() == []
    await memory.append(user_message("first"), assistant_message("second"))
    await memory.append()  # no-op
    await memory.append(user_message("third"))
    msgs = await memory.messages()
    assert [(m.role, m.text) for m in msgs] == [
        (Role.USER, "first"),
        (Role.ASSISTANT, "second"),
        (Role.USER, "third"),
    ]


async def test_policy_applies_at_read_time_only() -> None:
    storage = InMemoryStorage()
    memory = ShortTermMemory(storage=storage, policy=FixedWindow(1))
    await memory.append(user_message("first"), assistant_message("second"))
    assert [m.text for m in await memory.messages()] == ["second"]
    assert len(await storage.load()) == 2  # everything is kept
    await memory.clear()
    assert await storage.load() == []


class Broken:
    async def load(self) -> list[Message]:
        raise RuntimeError("disk on fire")

    async def append(self, messages: Sequence[Message]) -> None:
        raise RuntimeError("disk on fire")

    async def clear(self) -> None:
        pass


async def test_foreign_storage_errors_become_memory_store_errors() -> None:
    memory = ShortTermMemory(storage=Broken())
    with pytest.raises(MemoryStoreError, match="disk on fire"):
        await memory.messages()
    with pytest.raises(MemoryStoreError, match="disk on fire"):
        await memory.append(user_message("x"))


def _history(request_messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role.value, m.text) for m in request_messages]


async def test_agent_prepends_history_in_order_across_runs() -> None:
    memory = ShortTermMemory()
    provider = ScriptedProvider("Hello Ann.", "Your name is Ann.")
    agent = Agent(provider=provider, short_term_memory=memory)
    assert await agent.run("I am Ann.") == "Hello Ann."
    assert await agent.run("What is my name?") == "Your name is Ann."
    assert _history(provider.requests[1].messages) == [
        ("user", "I am Ann."),
        ("assistant", "Hello Ann."),
        ("user", "What is my name?"),
    ]
    assert len(await memory.messages()) == 4


async def test_agent_stores_the_full_tool_trace_without_thinking(tmp_path: Path) -> None:
    thinking_call = tool_call_response(("add", {"a": 2, "b": 3}))
    thinking_call.message.content.insert(0, ThinkingBlock("let me add", signature="s"))
    provider = ScriptedProvider(thinking_call, "2 + 3 = 5", "Still 5.")
    async with SQLiteStorage(tmp_path / "chat.db", session_id="calc") as storage:
        memory = ShortTermMemory(storage=storage)
        agent = Agent(provider=provider, tools=[add], short_term_memory=memory)
        assert await agent.run("What is 2 + 3?") == "2 + 3 = 5"
        stored = await storage.load()
        assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
        call = stored[1]
        assert call.tool_calls[0].name == "add"
        assert call.tool_calls[0].arguments == {"a": 2, "b": 3}
        assert not any(isinstance(b, ThinkingBlock) for b in call.content)
        assert stored[2].tool_call_id == call.tool_calls[0].id
        assert stored[2].text == "5"

        # The next run sends the whole trace back, tool call and result linked.
        await agent.run("And again?")
        sent = provider.requests[2].messages
        assert [m.role for m in sent] == [
            Role.USER,
            Role.ASSISTANT,
            Role.TOOL,
            Role.ASSISTANT,
            Role.USER,
        ]
        assert sent[2].tool_call_id == sent[1].tool_calls[0].id


async def test_restart_on_the_same_file_keeps_the_conversation(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    async with SQLiteStorage(path, session_id="ann") as storage:
        agent = Agent(
            provider=ScriptedProvider("Hello Ann."), short_term_memory=ShortTermMemory(storage)
        )
        await agent.run("I am Ann.")
    # A new storage object on the same file, as after a restart; another session is separate.
    provider = ScriptedProvider("You are Ann.")
    async with SQLiteStorage(path, session_id="ann") as storage:
        agent = Agent(provider=provider, short_term_memory=ShortTermMemory(storage))
        await agent.run("Who am I?")
    assert _history(provider.requests[0].messages) == [
        ("user", "I am Ann."),
        ("assistant", "Hello Ann."),
        ("user", "Who am I?"),
    ]
    other = ScriptedProvider("I don't know.")
    async with SQLiteStorage(path, session_id="bob") as storage:
        agent = Agent(provider=other, short_term_memory=ShortTermMemory(storage))
        await agent.run("Who am I?")
    assert _history(other.requests[0].messages) == [("user", "Who am I?")]


async def test_token_window_limits_what_the_agent_sends() -> None:
    memory = ShortTermMemory(policy=TokenWindow(12))
    provider = ScriptedProvider("a" * 16, "b" * 16, "done")
    agent = Agent(provider=provider, short_term_memory=memory)
    await agent.run("x" * 16)
    await agent.run("y" * 16)
    await agent.run("z")
    # 16 chars = 8 tokens a message: only the newest stored message fits in 12.
    assert _history(provider.requests[2].messages) == [("assistant", "b" * 16), ("user", "z")]


CHATBOT = textwrap.dedent(
    """
    import asyncio, sys
    from goagent_py import Agent
    from goagent_py.memory.short_term import ShortTermMemory
    from goagent_py.memory.storage import SQLiteStorage
    from goagent_py.testing import FunctionProvider

    def answer(request):
        return " | ".join(m.text for m in request.messages)

    async def main() -> None:
        async with SQLiteStorage(sys.argv[1], session_id="chat") as storage:
            memory = ShortTermMemory(storage)
            agent = Agent(provider=FunctionProvider(answer), short_term_memory=memory)
            print(await agent.run(sys.argv[2]))

    asyncio.run(main())
    """
)


def test_chatbot_remembers_across_two_processes(tmp_path: Path) -> None:
    path = str(tmp_path / "chat.db")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}

    def chat(prompt: str) -> str:
        out = subprocess.run(
            [sys.executable, "-c", CHATBOT, path, prompt],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        return out.stdout.strip()

    assert chat("I am Ann.") == "I am Ann."
    assert chat("Who am I?") == "I am Ann. | I am Ann. | Who am I?"


async def test_messages_returns_copies() -> None:
    memory = ShortTermMemory()
    await memory.append(user_message("x"))
    first = await memory.messages()
    first[0].content.append(TextBlock("changed"))
    first.clear()
    assert [m.text for m in await memory.messages()] == ["x"]
