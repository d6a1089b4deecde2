"""What a correction refers to (docs/memory.md, "Corrections of the last answer"): the memories
the answer just before it was given, and the statement only when the correction follows that
statement directly. End to end through the chat's write policy, a real SQLite conversation and
a real sqlite-vec memory with the rule decider."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from goagent_py import Agent
from goagent_py.cli._memory import tag_conversation
from goagent_py.memory.base import store_always
from goagent_py.memory.deciders import RuleDecider
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.policies import TokenWindow
from goagent_py.memory.records import RECALLED_KEY
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.memory.write_policies import user_statements
from goagent_py.messages import Message, user_message
from goagent_py.testing import FakeEmbedder, ScriptedProvider, text_response

pytestmark = pytest.mark.needs_extra("vector")
ALL = ("current", "superseded", "deleted")
SISTER = "My sister lives in Rome."
HOME = "I live in Lisbon."


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
        m = LongTermMemory(FakeEmbedder(64), store, decider=RuleDecider(), clock=clock, top_k=1)
        yield m, clock


def chat_policy() -> Callable[[Message, Message], list[Message] | None]:
    """The write policy ``goagent-py chat`` stores with (``--remember statements``)."""
    return tag_conversation(user_statements(about_user=True), "default")


async def chat(
    tmp_path: Path,
    memory: LongTermMemory,
    *turns: tuple[str, str],
    policy: Callable[[Message, Message], list[Message] | None] | None = None,
) -> list[Message]:
    """Each (user, answer) turn through an agent with a SQLite conversation, as the chat
    runs them; the stored conversation."""
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="default")
    try:
        for said, answer in turns:
            agent = Agent(
                provider=ScriptedProvider(text_response(answer)),
                model="m",
                name="alice",
                long_term_memory=memory,
                short_term_memory=ShortTermMemory(storage, TokenWindow(3000)),
                write_policy=policy or chat_policy(),
            )
            await agent.run(said)
        return await storage.load()
    finally:
        await storage.aclose()


async def states(memory: LongTermMemory) -> dict[str, str]:
    return {r.text: r.state for r in await memory.records(session="alice", states=ALL)}


async def seeded(memory: LongTermMemory, clock: Clock) -> str:
    """The sister's home, said a week before the conversation: its id."""
    await memory.store([user_message(SISTER)], session="alice")
    clock.now += timedelta(days=7)
    (sister,) = await memory.records(session="alice")
    return sister.id


POLICIES: dict[str, Any] = {"chat": None, "store_always": store_always}


@pytest.mark.parametrize("policy", POLICIES, ids=list(POLICIES))
@pytest.mark.parametrize(
    ("reply", "sister_now"),
    [
        ("That's no longer true.", {}),
        ("No wait, Milan.", {"My sister lives in Milan.": "current"}),
    ],
)
async def test_a_correction_after_a_question_is_about_the_answers_memory(
    tmp_path: Path,
    memory: tuple[LongTermMemory, Clock],
    reply: str,
    sister_now: dict[str, str],
    policy: str,
) -> None:
    # A statement, then a question about something else answered from a week-old memory, then
    # the correction: it refers to the answer, not to the statement two turns back.
    m, clock = memory
    sister = await seeded(m, clock)
    stored = await chat(
        tmp_path,
        m,
        (HOME, "Noted."),
        ("Where does my sister live?", "In Rome."),
        (reply, "Ok."),
        policy=POLICIES[policy],
    )
    asked = next(i for i, x in enumerate(stored) if x.text == "Where does my sister live?")
    assert stored[asked + 1].metadata[RECALLED_KEY] == [sister]
    found = {t: s for t, s in (await states(m)).items() if "sister" in t.lower() or "live" in t}
    assert found[HOME] == "current"
    assert found[SISTER] == "deleted"
    assert {t: s for t, s in found.items() if t not in (HOME, SISTER)
            and "?" not in t and t != reply} == sister_now  # fmt: skip


@pytest.mark.parametrize("policy", POLICIES, ids=list(POLICIES))
@pytest.mark.parametrize(
    ("reply", "home_now"),
    [
        ("That's no longer true.", {}),
        ("Sorry, I meant Lyon.", {"I live in Lyon.": "current"}),
    ],
)
async def test_a_correction_right_after_a_statement_is_about_the_statement(
    tmp_path: Path,
    memory: tuple[LongTermMemory, Clock],
    reply: str,
    home_now: dict[str, str],
    policy: str,
) -> None:
    # The answer to the statement was given the sister's memory too: the correction follows
    # the statement directly, so it is about the statement.
    m, clock = memory
    sister = await seeded(m, clock)
    stored = await chat(tmp_path, m, (HOME, "Noted."), (reply, "Ok."), policy=POLICIES[policy])
    assert stored[1].metadata[RECALLED_KEY] == [sister]
    found = await states(m)
    assert found[SISTER] == "current"
    assert found[HOME] == "deleted"
    assert {t: s for t, s in found.items() if t not in (HOME, SISTER)
            and "?" not in t and t != reply and s == "current"
            and "Lyon" in t} == home_now  # fmt: skip


async def test_a_correction_after_an_answer_that_used_nothing_changes_nothing(
    tmp_path: Path, memory: tuple[LongTermMemory, Clock]
) -> None:
    # A statement, then a request answered without any memory (nothing scores over the
    # threshold), then "That's no longer true.": what the user means is the answer's words,
    # not the statement two turns back.
    m, _ = memory
    m.score_threshold = 0.5
    stored = await chat(
        tmp_path,
        m,
        (HOME, "Noted."),
        ("Please write a haiku.", "Autumn moonlight..."),
        ("That's no longer true.", "Ok."),
    )
    assert RECALLED_KEY not in stored[3].metadata
    assert (await states(m))[HOME] == "current"


async def by_hand(memory: LongTermMemory, *turns: tuple[str, str]) -> list[Message]:
    """Each (user, answer) turn through an agent without short-term memory, the caller keeping
    the conversation (``history=``, as orchestration and hand-written apps do)."""
    history: list[Message] = []
    for said, answer in turns:
        agent = Agent(
            provider=ScriptedProvider(text_response(answer)),
            model="m",
            name="alice",
            long_term_memory=memory,
            write_policy=chat_policy(),
        )
        run = await agent.start_run(said, streaming=False, history=list(history))
        history += (await run.outcome()).messages
    return history


async def test_a_conversation_kept_by_the_caller_records_what_the_answer_used(
    memory: tuple[LongTermMemory, Clock],
) -> None:
    m, clock = memory
    await m.store([user_message(HOME)], session="alice")
    clock.now += timedelta(days=7)
    (home,) = await m.records(session="alice")
    kept = await by_hand(
        m, ("Where do I live?", "You live in Lisbon."), ("No wait, Madrid.", "Ok.")
    )
    assert kept[1].metadata[RECALLED_KEY] == [home.id]
    assert await states(m) == {HOME: "deleted", "I live in Madrid.": "current"}


async def test_a_conversation_kept_by_the_caller_knows_a_question_came_between(
    memory: tuple[LongTermMemory, Clock],
) -> None:
    m, clock = memory
    await seeded(m, clock)
    await by_hand(
        m,
        (HOME, "Noted."),
        ("Where does my sister live?", "In Rome."),
        ("That's no longer true.", "Ok."),
    )
    assert await states(m) == {HOME: "current", SISTER: "deleted"}
