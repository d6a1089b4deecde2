"""``Session.continue_`` takes what ``prompt`` takes for the run it starts: the run's ``deps``
and ``output_type`` (docs/sessions.md). Without them, a session whose tools read their deps
could not go on after an abort: every tool call of the continued run failed."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from goagent_py import (
    Agent,
    AgentEnd,
    OutputValidationError,
    Session,
    ToolCall,
    tool,
    validate_transcript,
)
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.output import FINAL_RESULT_TOOL
from goagent_py.provider import CompletionRequest
from goagent_py.testing import FunctionProvider, ScriptedProvider, tool_call_response
from goagent_py.tool_context import current_tool_context


@dataclass
class User:
    name: str


class City(BaseModel):
    name: str
    population: int


@tool
def whoami() -> str:
    """The signed-in user."""
    ctx = current_tool_context()
    assert ctx is not None
    return ctx.deps_as(User).name


async def _aborted_session(provider: ScriptedProvider) -> Session:
    """A session whose first run was aborted while its tool hung."""
    started = asyncio.Event()

    @tool
    async def hang() -> str:
        """Never ends."""
        started.set()
        await asyncio.Event().wait()
        return ""

    session = Session(Agent(provider=provider, tools=[hang, whoami]))

    async def abort() -> None:
        await started.wait()
        session.abort()

    stopping = asyncio.create_task(abort())
    result = await session.prompt("go", deps=User("ana"))
    await stopping
    assert result.stop_reason == "aborted"
    return session


async def test_continue_gives_the_run_its_deps() -> None:
    provider = ScriptedProvider(
        tool_call_response(("hang", {})), tool_call_response(("whoami", {})), "Hello ana."
    )
    session = await _aborted_session(provider)
    result = await session.continue_(deps=User("ana"))
    tool_result = result.messages[-2]
    assert tool_result.text == "ana"
    assert not tool_result.is_error
    assert result.text == "Hello ana."


async def test_continue_can_ask_for_a_typed_output() -> None:
    provider = ScriptedProvider(
        tool_call_response(("hang", {})),
        tool_call_response((FINAL_RESULT_TOOL, {"name": "Paris", "population": 2})),
    )
    session = await _aborted_session(provider)
    result = await session.continue_(output_type=City)
    assert result.output == City(name="Paris", population=2)
    assert any(t.name == FINAL_RESULT_TOOL for t in provider.requests[-1].tools)


async def test_stream_continue_takes_them_too() -> None:
    provider = ScriptedProvider(
        tool_call_response(("hang", {})),
        tool_call_response(("whoami", {})),
        tool_call_response((FINAL_RESULT_TOOL, {"name": "ana's city", "population": 1})),
    )
    session = await _aborted_session(provider)
    events = [e async for e in session.stream_continue(deps=User("ana"), output_type=City)]
    end = events[-1]
    assert isinstance(end, AgentEnd)
    assert end.result.output == City(name="ana's city", population=1)
    assert "ana" in [m.text for m in end.result.messages]


async def test_a_typed_retry_turn_is_stored_before_the_next_model_call(tmp_path: Path) -> None:
    """A session stores each turn as it ends (a crash loses at most the turn in flight); the
    turn of a typed answer sent back for a retry was not stored until the run ended."""
    asked = asyncio.Event()
    release = asyncio.Event()

    async def model(request: CompletionRequest) -> Any:
        if len(request.messages) == 1:
            return tool_call_response(ToolCall("c1", FINAL_RESULT_TOOL, {"name": "Paris"}))
        asked.set()
        await release.wait()
        return tool_call_response((FINAL_RESULT_TOOL, {"name": "Paris", "population": 2}))

    memory = ShortTermMemory(storage=SQLiteStorage(tmp_path / "r.db", session_id="r"))
    session = Session(
        Agent(provider=FunctionProvider(model), output_type=City, short_term_memory=memory)
    )
    running = asyncio.create_task(session.prompt("Largest city?"))
    await asyncio.wait_for(asked.wait(), 60)
    async with SQLiteStorage(tmp_path / "r.db", session_id="r") as storage:
        stored = await storage.load()
    assert [(m.role.value, m.tool_call_id) for m in stored] == [
        ("user", ""),
        ("assistant", ""),
        ("tool", "c1"),
    ]
    assert stored[2].is_error
    release.set()
    assert (await running).output == City(name="Paris", population=2)
    assert validate_transcript(await memory.transcript(), allow_pending=False) == []


async def test_a_typed_run_takes_its_follow_ups_before_it_ends() -> None:
    """A plain run takes queued follow-ups (and steering) when it would stop; a typed run
    ended at its first valid answer and left them queued, to be injected after the next
    prompt instead. The run goes on, and its output is the answer to the last of them."""
    provider = ScriptedProvider(
        tool_call_response((FINAL_RESULT_TOOL, {"name": "Paris", "population": 2})),
        tool_call_response((FINAL_RESULT_TOOL, {"name": "Lyon", "population": 1})),
    )
    session = Session(Agent(provider=provider, output_type=City))
    session.follow_up("And the second largest?")
    result = await session.prompt("Largest city?")
    assert result.output == City(name="Lyon", population=1)
    assert session.follow_up_queue == []
    assert provider.requests[1].messages[-1].text == "And the second largest?"
    assert validate_transcript(session.transcript, allow_pending=False) == []


async def test_the_last_invalid_answer_is_answered_with_what_was_wrong(tmp_path: Path) -> None:
    """When the retries are spent, the last ``final_result`` call gets the same feedback a
    retry gets; it was closed as "did not finish: the run was aborted", so the model, on
    ``continue_``, read that its run had been aborted instead of why its answer was refused."""
    memory = ShortTermMemory(storage=SQLiteStorage(tmp_path / "v.db", session_id="v"))
    provider = ScriptedProvider(
        tool_call_response(ToolCall("c1", FINAL_RESULT_TOOL, {"name": "Paris"})),
        tool_call_response(ToolCall("c2", FINAL_RESULT_TOOL, {"name": "Paris"})),
        tool_call_response(ToolCall("c3", FINAL_RESULT_TOOL, {"name": "P", "population": 2})),
    )
    session = Session(
        Agent(provider=provider, output_type=City, short_term_memory=memory, output_retries=1)
    )
    with pytest.raises(OutputValidationError) as info:
        await session.prompt("Largest city?")
    last = session.transcript[-1]
    assert last.tool_call_id == "c2"
    assert last.is_error
    assert "population: Field required" in last.text
    assert "aborted" not in last.text
    assert "goagent.synthetic" not in last.metadata
    assert info.value.run_result is not None
    assert info.value.run_result.messages[-1].text == last.text
    assert session.transcript == await memory.transcript()
    assert validate_transcript(session.transcript, allow_pending=False) == []
    # The conversation goes on from there: the model reads what was wrong.
    result = await session.continue_(output_type=City)
    assert result.output == City(name="P", population=2)
    assert "population: Field required" in provider.requests[-1].messages[-1].text


def test_a_plain_run_that_spends_its_retries_records_the_last_feedback() -> None:
    provider = ScriptedProvider(*[tool_call_response((FINAL_RESULT_TOOL, {"x": 1}))] * 2)
    agent = Agent(provider=provider, output_type=City, output_retries=1)
    with pytest.raises(OutputValidationError) as info:
        agent.run_sync("?")
    assert info.value.run_result is not None
    last = info.value.run_result.messages[-1]
    assert "Field required" in last.text
    assert "aborted" not in last.text
