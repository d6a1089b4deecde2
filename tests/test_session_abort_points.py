"""An abort, a cancel or a closed stream at every point of a session's turn, with compaction on
(review7a): the turn is run once to count its events, then once per event with the stop landing
there. After each stop, and after the ``continue_()`` that follows it, storage equals the
session's view and both pass the transcript validator.

The events are where the run's task hands over (a model call, a tool, the summariser, a
checkpoint): every await point of the loop that a consumer can see.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from goagent_py import (
    Agent,
    AgentEnd,
    ConfigurationError,
    Session,
    tool,
    validate_transcript,
)
from goagent_py.memory.compaction import Summarize
from goagent_py.memory.compactor import Compactor
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.provider import CompletionRequest
from goagent_py.testing import FunctionProvider, text_response, tool_call_response

LONG = "word " * 400  # ~2,000 characters: three such turns overflow the window below


@tool
async def look(q: str) -> str:
    """Look something up."""
    await asyncio.sleep(0)
    return f"found {q}"


def _model(request: CompletionRequest) -> Any:
    """Answers with a call of ``look`` (twice, in parallel) until a result is in the request's
    last message, then with text."""
    last = request.messages[-1]
    if last.role.value == "tool" or "summary" in request.system_prompt.lower():
        return text_response("the answer " + LONG[:200])
    return tool_call_response(("look", {"q": "a"}), ("look", {"q": "b"}))


async def _session(path: Path) -> tuple[Session, ShortTermMemory]:
    memory = ShortTermMemory(storage=SQLiteStorage(path, session_id="s"))
    summariser = FunctionProvider(lambda r: text_response("summary of the talk so far"))
    compactor = Compactor(
        Summarize(summariser, keep_last_groups=1), context_window=1500, memory=memory
    )
    agent = Agent(
        provider=FunctionProvider(_model),
        tools=[look],
        short_term_memory=memory,
        transform_context=compactor,
    )
    session = Session(agent)
    for i in range(3):  # history the next turn compacts
        await memory.append(*_turn(i))
    await session.load()
    return session, memory


def _turn(i: int) -> list[Any]:
    from goagent_py.messages import Message, Role, TextBlock

    return [
        Message(Role.USER, [TextBlock(f"question {i}")]),
        Message(Role.ASSISTANT, [TextBlock(LONG)]),
    ]


async def _check(session: Session, memory: ShortTermMemory) -> None:
    stored = await memory.transcript()
    assert validate_transcript(stored, allow_pending=False) == []
    assert session.transcript == stored
    assert not session.state.running


async def _stopped_at(session: Session, k: int, how: str) -> None:
    """Run one turn, stopping it at its ``k``-th event by ``how``."""
    seen = 0

    async def read() -> None:
        nonlocal seen
        async with contextlib.aclosing(session.stream("go on")) as events:
            async for event in events:
                seen += 1
                if seen == k:
                    if how == "abort":
                        session.abort("now")
                    elif how == "close":
                        return
                    else:
                        asyncio.current_task().cancel()  # type: ignore[union-attr]
                if isinstance(event, AgentEnd) and not event.path:
                    return

    task = asyncio.create_task(read())
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _count(tmp_path: Path) -> int:
    session, _ = await _session(tmp_path / "count.db")
    n = 0
    async for event in session.stream("go on"):
        n += 1
        del event
    return n


@pytest.mark.parametrize("how", ["abort", "cancel", "close"])
async def test_a_stop_at_every_event_of_a_compacted_turn_leaves_one_valid_record(
    tmp_path: Path, how: str
) -> None:
    events = await _count(tmp_path)
    assert events > 20  # the turn compacts, runs a parallel batch and answers
    for k in range(1, events + 1):
        session, memory = await _session(tmp_path / f"{how}-{k}.db")
        await _stopped_at(session, k, how)
        await _check(session, memory)
        with contextlib.suppress(ConfigurationError):  # a complete answer: nothing to go on
            await session.continue_()
        await _check(session, memory)
