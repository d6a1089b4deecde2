"""Typed output in a session: each prompt may ask for its own type (issue 32)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from goagent_py import Agent, OutputValidationError, Session
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.messages import Role
from goagent_py.output import FINAL_RESULT_TOOL
from goagent_py.testing import ScriptedProvider, tool_call_response
from goagent_py.transcript import validate_transcript


class Todo(BaseModel):
    title: str
    done: bool


async def test_a_prompt_asks_for_its_own_type_and_the_stored_turn_stays_valid(
    tmp_path: Path,
) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="s")
    provider = ScriptedProvider(
        "Sure, what should it say?",
        tool_call_response((FINAL_RESULT_TOOL, {"title": "buy milk", "done": False})),
        "You have one todo.",
    )
    agent = Agent(provider=provider, model="m", short_term_memory=ShortTermMemory(storage))
    session = Session(agent)
    assert (await session.prompt("Add a todo")).output == "Sure, what should it say?"
    typed = await session.prompt("buy milk", output_type=Todo, deps={"user": "u1"})
    assert typed.output == Todo(title="buy milk", done=False)
    # Only that prompt's request carried the output tool.
    assert [t.name for t in provider.requests[1].tools] == [FINAL_RESULT_TOOL]
    plain = await session.prompt("How many todos?")
    assert plain.output == "You have one todo."
    assert provider.requests[2].tools == []
    # The conversation (storage is the record) holds the typed turn closed and valid.
    stored = await storage.load()
    assert stored == session.transcript
    assert validate_transcript(stored) == []
    roles = [m.role for m in stored]
    assert roles[2:5] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    await storage.aclose()


async def test_a_typed_prompt_that_never_validates_leaves_the_session_usable() -> None:
    provider = ScriptedProvider("not json", "still not json", "Fine.")
    session = Session(Agent(provider=provider, model="m", output_retries=1))
    with pytest.raises(OutputValidationError):
        await session.prompt("todo?", output_type=Todo)
    assert not session.state.running
    assert (await session.prompt("ok")).output == "Fine."
    assert validate_transcript(session.transcript) == []


async def test_abort_now_while_an_output_validator_decides_ends_the_run_at_once(
    tmp_path: Path,
) -> None:
    # An async output validator that checks the answer against a service that never answers
    # held abort("now") for good (review7a: awaited in the run's own frame).
    import asyncio

    started = asyncio.Event()

    async def hangs(todo: Todo) -> Todo:
        started.set()
        await asyncio.Event().wait()
        return todo  # pragma: no cover

    memory = ShortTermMemory(storage=SQLiteStorage(tmp_path / "t.db", session_id="s"))
    agent = Agent(
        provider=ScriptedProvider(
            tool_call_response((FINAL_RESULT_TOOL, {"title": "x", "done": False}))
        ),
        output_type=Todo,
        output_validators=[hangs],
        short_term_memory=memory,
    )
    session = Session(agent)
    task = asyncio.create_task(session.prompt("a todo"))
    await started.wait()
    session.abort("now")
    result = await asyncio.wait_for(task, 60)  # a hang guard, not a timing

    assert result.stop_reason == "aborted"
    assert result.output is None  # never validated
    stored = await memory.transcript()
    assert validate_transcript(stored, allow_pending=False) == []
    assert session.transcript == stored
