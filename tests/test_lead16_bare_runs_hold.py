"""A run of an agent with stored short-term memory holds its conversation without a Session too
(docs/sessions.md, "One run per stored conversation, whoever opens it"): record16 made Sessions
take the hold; two bare ``agent.run`` calls on one record still interleaved their turns."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from goagent_py import Agent, Session, SessionBusyError, tool, validate_transcript
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage import InMemoryStorage, SQLiteStorage
from goagent_py.messages import Message, Role
from goagent_py.testing import ScriptedProvider, tool_call_response


def _shape(messages: list[Message]) -> list[str]:
    return [f"{m.role.value}:{m.text}" if m.role is not Role.TOOL else "tool" for m in messages]


def _slow_agent(storage: Any) -> tuple[Agent[Any, Any], asyncio.Event, asyncio.Event]:
    running, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        """Wait."""
        running.set()
        await release.wait()
        return "slow done"

    agent = Agent(
        provider=ScriptedProvider(tool_call_response(("slow", {})), "one"),
        tools=[slow],
        short_term_memory=ShortTermMemory(storage),
    )
    return agent, running, release


@pytest.mark.parametrize("how", ["run", "stream", "session"])
@pytest.mark.parametrize("kind", ["sqlite", "memory"])
async def test_a_bare_run_holds_its_conversation(tmp_path: Path, kind: str, how: str) -> None:
    if kind == "sqlite":
        first_storage: Any = SQLiteStorage(tmp_path / "chat.db", session_id="t")
        second_storage: Any = SQLiteStorage(tmp_path / "chat.db", session_id="t")
    else:
        first_storage = second_storage = InMemoryStorage()
    first, running, release = _slow_agent(first_storage)
    second = Agent(
        provider=ScriptedProvider("two"), short_term_memory=ShortTermMemory(second_storage)
    )
    task = asyncio.create_task(first.run("first"))
    await running.wait()
    with pytest.raises(SessionBusyError, match="is busy"):
        if how == "run":
            await second.run("second")  # was: answered, its turn inside the first run's
        elif how == "stream":
            async for _ in second.stream("second"):
                pass
        else:
            await Session(second).prompt("second")
    release.set()
    assert (await task).text == "one"
    stored = await first_storage.load()
    assert _shape(stored) == ["user:first", "assistant:", "tool", "assistant:one"]
    # Once the run is over, the other goes on after it.
    assert (await second.run("second")).text == "two"
    stored = await first_storage.load()
    assert _shape(stored)[-2:] == ["user:second", "assistant:two"]
    assert validate_transcript(stored) == []


async def test_a_session_run_holds_against_a_bare_run(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="t")
    first, running, release = _slow_agent(storage)
    session = Session(first)
    task = asyncio.create_task(session.prompt("first"))
    await running.wait()
    other = Agent(
        provider=ScriptedProvider("two"),
        short_term_memory=ShortTermMemory(SQLiteStorage(tmp_path / "chat.db", session_id="t")),
    )
    with pytest.raises(SessionBusyError):
        await other.run("second")
    release.set()
    assert (await task).text == "one"


async def test_runs_of_one_agent_one_after_another_are_not_refused(tmp_path: Path) -> None:
    agent = Agent(
        provider=ScriptedProvider("a", "b", "c"),
        short_term_memory=ShortTermMemory(SQLiteStorage(tmp_path / "chat.db", session_id="t")),
    )
    assert [(await agent.run(p)).text for p in ("1", "2", "3")] == ["a", "b", "c"]
