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
    ToolCall,
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
    await memory.append(user_message("third"))
    assert [m.text for m in await memory.messages()] == ["third"]
    assert len(await storage.load()) == 3  # everything is kept
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
    assert (await agent.run("I am Ann.")).text == "Hello Ann."
    assert (await agent.run("What is my name?")).text == "Your name is Ann."
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
        assert (await agent.run("What is 2 + 3?")).text == "2 + 3 = 5"
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
    # 16 chars = 8 tokens a message: only the newest stored message fits in 12, an answer
    # whose question was cut off, so the window drops it rather than open on an assistant turn.
    assert _history(provider.requests[1].messages) == [("user", "y" * 16)]
    assert _history(provider.requests[2].messages) == [("user", "z")]


async def test_a_cut_window_opens_on_a_user_message() -> None:
    storage = InMemoryStorage()
    call = ToolCall("c1", "lookup", {})
    history = [
        user_message("q1"),
        assistant_message("a1"),
        user_message("q2"),
        Message(Role.ASSISTANT, [], tool_calls=[call]),
        Message(Role.TOOL, [TextBlock("r")], tool_call_id="c1"),
        assistant_message("a2"),
    ]
    await storage.append(history)
    # FixedWindow(2) keeps the tool group and "a2": both answer "q2", which was cut off.
    assert await ShortTermMemory(storage, FixedWindow(2)).messages() == []
    assert [m.text for m in await ShortTermMemory(storage, FixedWindow(3)).messages()] == [
        "q2",
        "",
        "r",
        "a2",
    ]
    # Five groups: FixedWindow(4) starts on "a1", which is dropped; FixedWindow(5) cuts nothing.
    assert (await ShortTermMemory(storage, FixedWindow(4)).messages())[0].text == "q2"
    assert (await ShortTermMemory(storage, FixedWindow(5)).messages())[0].text == "q1"
    # Nothing cut: a history that opens with an assistant greeting is kept as it is.
    greeting = InMemoryStorage()
    await greeting.append([assistant_message("Hello!"), user_message("hi")])
    assert [m.text for m in await ShortTermMemory(greeting).messages()] == ["Hello!", "hi"]
    assert [m.text for m in await ShortTermMemory(greeting, FixedWindow(5)).messages()] == [
        "Hello!",
        "hi",
    ]


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
