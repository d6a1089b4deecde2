"""Each person a user names is a person of their own (docs/memory.md, "Facts about other
people"): two sisters, two sons, two friends keep their facts apart; a relation said with no
name stays one person, and "my other sister" is a second one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from goagent_py.memory.deciders import RuleDecider
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.memory.write_policies import user_statements
from goagent_py.messages import assistant_message, user_message
from goagent_py.testing import FakeEmbedder


def memory() -> LongTermMemory:
    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    ticks = iter(range(1, 10_000))
    return LongTermMemory(
        FakeEmbedder(64),
        InMemoryVectorStore(),
        decider=RuleDecider(),
        clock=lambda: start + timedelta(minutes=next(ticks)),
    )


async def say(m: LongTermMemory, *turns: str) -> None:
    """Each turn as the chat's write policy keeps it."""
    policy = user_statements(about_user=True)
    for turn in turns:
        await m.store(policy(user_message(turn), assistant_message("ok")) or [], session="alice")


async def current(m: LongTermMemory) -> list[str]:
    return sorted(r.text for r in await m.records(session="alice"))


@pytest.mark.parametrize(
    ("turns", "kept"),
    [
        # A name given with a relation one can have several of is who the person is.
        (("My sister is Ana.", "My sister is Eva."), ["My sister is Ana.", "My sister is Eva."]),
        (("My son is Leo.", "My son is Max."), ["My son is Leo.", "My son is Max."]),
        (("My friend is Ana.", "My friend is Eva."), ["My friend is Ana.", "My friend is Eva."]),
        (
            ("My sister's name is Ana.", "My other sister's name is Eva."),
            ["My other sister's name is Eva.", "My sister's name is Ana."],
        ),
        # "my other sister", "my younger sister": a second person, not a move of the first.
        (
            ("My sister lives in Paris.", "My other sister lives in Rome."),
            ["My other sister lives in Rome.", "My sister lives in Paris."],
        ),
        (
            ("My older brother works at Acme.", "My younger brother works at Globex."),
            ["My older brother works at Acme.", "My younger brother works at Globex."],
        ),
        (
            (
                "My sister is Ana.",
                "My sister lives in Lisbon.",
                "My other sister is Eva.",
                "My other sister lives in Rome.",
            ),
            [
                "My other sister is Eva.",
                "My other sister lives in Rome.",
                "My sister is Ana.",
                "My sister lives in Lisbon.",
            ],
        ),
        (
            ("My sister Ana lives in Lisbon.", "My other sister Eva lives in Rome."),
            ["My other sister Eva lives in Rome.", "My sister Ana lives in Lisbon."],
        ),
    ],
)
async def test_two_people_of_one_relation_keep_their_facts(
    turns: tuple[str, ...], kept: list[str]
) -> None:
    m = memory()
    await say(m, *turns)
    assert await current(m) == kept


@pytest.mark.parametrize(
    ("turns", "kept"),
    [
        # One person, said again: still one slot.
        (
            ("My sister lives in Lisbon.", "My sister moved to Paris."),
            ["My sister lives in Paris."],
        ),
        (
            ("My other sister lives in Rome.", "My other sister moved to Oslo."),
            ["My other sister lives in Oslo."],
        ),
        (
            ("My sister Ana lives in Lisbon.", "My older sister Ana moved to Porto."),
            ["My older sister Ana lives in Porto."],
        ),
        (("My sister Eva lives in Rome.", "Eva moved to Oslo."), ["Eva lives in Oslo."]),
        # One of these relations at a time: a new name replaces the old one.
        (("My wife is Ana.", "My wife is Bea."), ["My wife is Bea."]),
        (("My boss is Tom.", "My boss is Sam."), ["My boss is Sam."]),
        (("My dog is called Rex.", "My dog is called Luna now."), ["My dog is called Luna now."]),
        # A name taken back is that person's.
        (
            ("My sister is Ana.", "My sister is Eva.", "Forget that my sister is Ana."),
            ["My sister is Eva."],
        ),
    ],
)
async def test_one_person_said_again_is_still_one(turns: tuple[str, ...], kept: list[str]) -> None:
    m = memory()
    await say(m, *turns)
    assert await current(m) == kept
