"""One conversation, one record (issue 28): what storage holds is what the session shows, and
both pass the transcript validator, after every way a run can stop."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from goagent_py import (
    Agent,
    Message,
    Role,
    Session,
    current_tool_context,
    tool,
    validate_transcript,
)
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.testing import ScriptedProvider, tool_call_response


def key(m: Message) -> tuple[Any, ...]:
    """What identifies a stored message (a copy compares equal to its original)."""
    calls = tuple(c.id for c in m.tool_calls)
    return (m.role, m.text, calls, m.tool_call_id)


def assert_one_record(stored: list[Message], shown: list[Message] | None = None) -> None:
    """The record rules: valid for every vendor, nothing stored twice, the session shows it."""
    assert validate_transcript(stored) == []
    twice = [
        k for k, n in Counter(key(m) for m in stored if m.role is not Role.USER).items() if n > 1
    ]
    assert twice == [], f"stored twice: {twice}"
    if shown is not None:
        assert [key(m) for m in shown] == [key(m) for m in stored]


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool
def finish(q: str) -> str:
    """Do the last thing and end the run."""
    ctx = current_tool_context()
    assert ctx is not None
    ctx.terminate()
    return f"finished {q}"


STOPS = ["should_stop", "terminate", "stop_on_denied"]


def _stopping_agent(how: str, memory: ShortTermMemory) -> Agent:
    provider = ScriptedProvider(
        tool_call_response(("finish" if how == "terminate" else "lookup", {"q": "x"})),
        "after the stop",
    )
    settings: dict[str, Any] = {}
    if how == "should_stop":
        settings["should_stop"] = lambda state: True
    if how == "stop_on_denied":
        settings["stop_on_denied"] = True
        settings["before_tool_call"] = lambda call: "not allowed"
    return Agent(provider=provider, tools=[lookup, finish], short_term_memory=memory, **settings)


@pytest.mark.parametrize("how", STOPS)
async def test_a_run_stopped_after_a_tool_batch_stores_its_call_once(
    tmp_path: Path, how: str
) -> None:
    async with SQLiteStorage(tmp_path / "chat.db", session_id="s") as storage:
        memory = ShortTermMemory(storage)
        result = await _stopping_agent(how, memory).run("go")
        stored = await storage.load()
        assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL]
        assert_one_record(stored, result.messages)
        # and the next request is one every vendor takes
        again = _stopping_agent(how, memory)
        await again.run("and then?")
        assert_one_record(await storage.load())


@pytest.mark.parametrize("how", STOPS)
async def test_a_session_stopped_after_a_tool_batch_stores_its_call_once(
    tmp_path: Path, how: str
) -> None:
    async with SQLiteStorage(tmp_path / "chat.db", session_id="s") as storage:
        memory = ShortTermMemory(storage)
        session = Session(_stopping_agent(how, memory))
        await session.prompt("go")
        stored = await storage.load()
        assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL]
        assert_one_record(stored, session.transcript)


async def test_a_run_without_tool_traces_stopped_after_a_batch_stores_no_dangling_call(
    tmp_path: Path,
) -> None:
    async with SQLiteStorage(tmp_path / "chat.db", session_id="s") as storage:
        memory = ShortTermMemory(storage)
        agent = _stopping_agent("should_stop", memory).replace(short_term_trace_tools=False)
        await agent.run("go")
        stored = await storage.load()
        assert validate_transcript(stored) == []
        assert all(not m.tool_calls for m in stored)
