"""Correcting the memory the model just used (docs/memory.md, "Corrections of the
last answer"): the answer a run gives records which memories it was given, and the facts of the
next turn name them, so "No wait, Madrid." after an answer that used a week-old "I live in
Lisbon." corrects that memory; a real SQLite conversation and a real sqlite-vec memory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from goagent_py import Agent
from goagent_py.memory.deciders import RuleDecider
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.records import RECALLED_KEY
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.memory.write_policies import user_statements
from goagent_py.messages import Message, Role, TextBlock, user_message
from goagent_py.testing import FakeEmbedder, ScriptedProvider, text_response

pytestmark = pytest.mark.needs_extra("vector")
ALL = ("current", "superseded", "deleted")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[tuple[LongTermMemory, Clock]]:
    from goagent_py.memory.vector.sqlite_vec import SqliteVecStore

    clock = Clock()
    async with SqliteVecStore(tmp_path / "memory.db", table="memories", dimensions=64) as store:
        yield LongTermMemory(FakeEmbedder(64), store, decider=RuleDecider(), clock=clock), clock


async def chat(
    tmp_path: Path, memory: LongTermMemory, *turns: tuple[str, str], name: str = "alice"
) -> None:
    """Each (user, answer) turn through an agent with a SQLite conversation, as the chat."""
    storage = SQLiteStorage(tmp_path / f"chat-{name}.db", session_id=name)
    try:
        for said, answer in turns:
            agent = Agent(
                provider=ScriptedProvider(text_response(answer)),
                model="m",
                name=name,
                long_term_memory=memory,
                short_term_memory=ShortTermMemory(storage),
                write_policy=user_statements(about_user=True),
            )
            await agent.run(said)
    finally:
        await storage.aclose()


async def states(memory: LongTermMemory, name: str = "alice") -> dict[str, str]:
    return {r.text: r.state for r in await memory.records(session=name, states=ALL)}


async def seed(memory: LongTermMemory, clock: Clock, *texts: str, name: str = "alice") -> None:
    """Facts said long ago (a week before the conversation)."""
    for text in texts:
        await memory.store([user_message(text)], session=name)
    clock.now += timedelta(days=7)


@pytest.mark.parametrize(
    ("reply", "kept"),
    [
        ("No wait, Madrid.", {"I live in Madrid.": "current"}),
        ("Sorry, it's Madrid.", {"I live in Madrid.": "current"}),
        ("No, that's not true.", {}),
    ],
)
async def test_a_reply_corrects_the_memory_the_answer_used(
    tmp_path: Path, memory: tuple[LongTermMemory, Clock], reply: str, kept: dict[str, str]
) -> None:
    m, clock = memory
    await seed(m, clock, "I live in Lisbon.", "My sister is Meera.")
    await chat(tmp_path, m, ("Where do I live?", "You live in Lisbon."), (reply, "Noted."))
    assert await states(m) == {
        "I live in Lisbon.": "deleted",
        "My sister is Meera.": "current",
        **kept,
    }


async def test_the_stored_answer_names_what_it_was_given(
    tmp_path: Path, memory: tuple[LongTermMemory, Clock]
) -> None:
    m, clock = memory
    await seed(m, clock, "I live in Lisbon.")
    await chat(tmp_path, m, ("Where do I live?", "You live in Lisbon."))
    (lisbon,) = await m.records(session="alice")
    storage = SQLiteStorage(tmp_path / "chat-alice.db", session_id="alice")
    try:
        stored = await storage.load()
    finally:
        await storage.aclose()
    assert [x.role for x in stored] == [Role.USER, Role.ASSISTANT]
    assert stored[1].metadata[RECALLED_KEY] == [lisbon.id]
    # What the memory stores of a turn never keeps that context.
    await chat(tmp_path, m, ("I have a cat named Tom.", "Nice."))
    for record in await m.records(session="alice"):
        assert RECALLED_KEY not in record.message.metadata


async def test_without_a_recalled_answer_an_old_fact_is_left_alone(
    tmp_path: Path, memory: tuple[LongTermMemory, Clock]
) -> None:
    # The answer was given no memory of the home (another user's scope): "No wait, Madrid."
    # is kept as said, as a correction that fits nothing always was.
    m, clock = memory
    await seed(m, clock, "I live in Lisbon.", name="bob")
    await chat(tmp_path, m, ("Where do I live?", "I don't know."), ("No wait, Madrid.", "Ok."))
    assert await states(m, "bob") == {"I live in Lisbon.": "current"}


async def test_ids_of_another_scope_change_nothing(
    tmp_path: Path, memory: tuple[LongTermMemory, Clock]
) -> None:
    # A message naming another user's memory as recalled (hand-made metadata) never reaches it.
    m, clock = memory
    await seed(m, clock, "I live in Lisbon.", name="bob")
    (bobs,) = await m.records(session="bob")
    hostile: dict[str, Any] = {RECALLED_KEY: [bobs.id]}
    await m.store([Message(Role.USER, [TextBlock("No wait, Madrid.")], metadata=hostile)],
                  session="alice")  # fmt: skip
    assert await states(m, "bob") == {"I live in Lisbon.": "current"}


async def test_the_model_decider_is_told_which_memory_the_answer_used(
    tmp_path: Path, memory: tuple[LongTermMemory, Clock]
) -> None:
    from goagent_py.memory.deciders import ModelDecider

    m, clock = memory
    await seed(m, clock, "I live in Lisbon.")
    await chat(tmp_path, m, ("Where do I live?", "You live in Lisbon."))
    decider = ScriptedProvider(text_response('{"decisions": []}'))
    m.decider = ModelDecider(decider, model="m")
    await chat(tmp_path, m, ("No wait, Madrid.", "Noted."))
    prompt = decider.requests[0].messages[0].text
    assert '(used in the last answer): "I live in Lisbon."' in prompt
