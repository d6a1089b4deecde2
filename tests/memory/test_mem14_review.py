"""Found reviewing the rule decider with the agent's default write policy (``store_always``:
a user's message is stored whole): a message that states a known fact and more, or a change
said with more, lost the rest (docs/memory.md, "The model-free decider")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from goagent_py.memory.deciders import RuleDecider
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.messages import user_message
from goagent_py.testing import FakeEmbedder

ALL = ("current", "superseded", "deleted")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(minutes=1)
        return self.now


def memory() -> LongTermMemory:
    return LongTermMemory(FakeEmbedder(64), InMemoryVectorStore(), decider=RuleDecider(),
                          clock=Clock())  # fmt: skip


async def store_whole(m: LongTermMemory, *turns: str, session: str = "alice") -> None:
    for turn in turns:
        await m.store([user_message(turn)], session=session)


async def current(m: LongTermMemory, session: str = "alice") -> list[str]:
    return sorted(r.text for r in await m.records(session=session))


@pytest.mark.parametrize(
    "message",
    [
        "I live in Porto and my sister is Meera.",
        "I live in Porto. My sister is Meera.",
        "I like tea, and my sister is Meera.",
    ],
)
async def test_a_known_fact_said_with_more_keeps_the_rest(message: str) -> None:
    m = memory()
    await store_whole(m, "I live in Porto.", "I like tea.", message)
    assert any("Meera" in text for text in await current(m))


async def test_a_change_said_with_more_keeps_the_rest_and_retires_the_old_value() -> None:
    m = memory()
    await store_whole(
        m, "I live in Paris.", "I moved to Porto, my sister is Meera and my dog is Rex."
    )
    assert await current(m) == ["I moved to Porto, my sister is Meera and my dog is Rex."]


async def test_a_change_said_alone_is_still_stored_as_the_fact_it_implies() -> None:
    m = memory()
    await store_whole(m, "I live in Paris.", "I moved to Porto last month.")
    assert await current(m) == ["I live in Porto."]


async def test_one_users_words_never_change_anothers_memories() -> None:
    m = memory()
    await store_whole(m, "I live in Lisbon.", "Anna works at Globex.", session="alice")
    await store_whole(m, "Sorry, I meant Madrid.", "That's no longer true.",
                      "Anna doesn't work at Globex anymore.", session="bob")  # fmt: skip
    assert await current(m, "alice") == ["Anna works at Globex.", "I live in Lisbon."]


@pytest.mark.parametrize(
    "remark",
    ["I'm seeing Dr. Patel on Monday.", "I'm with Vodafone now.", "I'm seeing Sam tomorrow."],
)
async def test_an_appointment_or_a_provider_is_no_new_partner(remark: str) -> None:
    m = memory()
    await store_whole(m, "My wife is Ana.", remark)
    assert "My wife is Ana." in await current(m)


async def test_a_new_partner_named_alone_still_replaces_the_old_one() -> None:
    m = memory()
    await store_whole(m, "I'm dating Leo.", "I'm seeing Sam.")
    assert await current(m) == ["My partner is Sam."]
