"""A relation said with and without a name is one person where that is what the user means
(docs/memory.md, "Facts about other people"): the same value said of both, a change said of
the only one of that relation the user has; two named siblings stay two people. Real sqlite-vec
memory, the rule decider, the chat's write policy."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from goagent_py.memory.deciders import RuleDecider
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.write_policies import user_statements
from goagent_py.messages import assistant_message, user_message
from goagent_py.testing import FakeEmbedder

pytestmark = pytest.mark.needs_extra("vector")


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[LongTermMemory]:
    from goagent_py.memory.vector.sqlite_vec import SqliteVecStore

    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    ticks = iter(range(1, 10_000))
    async with SqliteVecStore(tmp_path / "memory.db", table="memories", dimensions=64) as store:
        yield LongTermMemory(
            FakeEmbedder(64),
            store,
            decider=RuleDecider(),
            clock=lambda: start + timedelta(hours=next(ticks)),
        )


async def say(m: LongTermMemory, *turns: str) -> list[str]:
    """Each turn as the chat's write policy keeps it; the current memories after them."""
    policy = user_statements(about_user=True)
    for turn in turns:
        await m.store(policy(user_message(turn), assistant_message("ok")) or [], session="alice")
    return sorted(r.text for r in await m.records(session="alice"))


@pytest.mark.parametrize(
    ("turns", "kept"),
    [
        # A change said of the one sister the user has, named now: her fact changes.
        (("My sister lives in Lisbon.", "My sister Ana moved to Porto."),
         ["My sister Ana lives in Porto."]),
        (("My sister Ana lives in Lisbon.", "My sister moved to Porto."),
         ["My sister Ana lives in Porto."]),
        (("My sister Ana works at Acme.", "My sister now works at Globex."),
         ["My sister Ana now works at Globex."]),
        (("My sister lives in Lisbon.", "My sister is Ana.", "My sister Ana moved to Porto."),
         ["My sister Ana lives in Porto.", "My sister is Ana."]),
        # The same value said with and without the name: one fact, the name kept.
        (("My sister lives in Lisbon.", "My sister Ana lives in Lisbon."),
         ["My sister Ana lives in Lisbon."]),
        (("My sister Ana lives in Lisbon.", "My sister lives in Lisbon."),
         ["My sister Ana lives in Lisbon."]),
        # Taken back without the name: hers.
        (("My sister Ana lives in Lisbon.", "My sister no longer lives in Lisbon."), []),
        (("My brother Tom works at Acme.", "My brother doesn't work at Acme anymore."), []),
    ],
)  # fmt: skip
async def test_a_relation_named_and_unnamed_is_one_person(
    memory: LongTermMemory, turns: tuple[str, ...], kept: list[str]
) -> None:
    assert await say(memory, *turns) == kept


@pytest.mark.parametrize(
    ("turns", "kept"),
    [
        # Two named sisters: "my sister" alone says neither.
        (("My sister Ana lives in Lisbon.", "My sister Eva lives in Rome.",
          "My sister moved to Porto."),
         ["My sister Ana lives in Lisbon.", "My sister Eva lives in Rome.",
          "My sister lives in Porto."]),
        # A sister and another one: a named one could be either.
        (("My sister lives in Lisbon.", "My other sister lives in Rome.",
          "My sister Ana moved to Porto."),
         ["My other sister lives in Rome.", "My sister Ana lives in Porto.",
          "My sister lives in Lisbon."]),
        # A name and another value, no change said: maybe a second sister, nothing replaced.
        (("My sister lives in Lisbon.", "My sister Eva lives in Rome."),
         ["My sister Eva lives in Rome.", "My sister lives in Lisbon."]),
        # The value says which: Ana's home is taken back, Eva's stays.
        (("My sister Ana lives in Lisbon.", "My sister Eva lives in Rome.",
          "My sister no longer lives in Lisbon."),
         ["My sister Eva lives in Rome."]),
        # Another relation is another person.
        (("My brother Tom lives in Oslo.", "My sister moved to Porto."),
         ["My brother Tom lives in Oslo.", "My sister lives in Porto."]),
        # A relation one has one of at a time keeps its own rules (a new name replaces).
        (("My boss is Tom.", "My boss is Sam."), ["My boss is Sam."]),
    ],
)  # fmt: skip
async def test_named_siblings_stay_apart(
    memory: LongTermMemory, turns: tuple[str, ...], kept: list[str]
) -> None:
    assert await say(memory, *turns) == kept
