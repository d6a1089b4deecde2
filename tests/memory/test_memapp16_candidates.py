"""A consolidation reads the scope's entries to find the latest statement and the recalled
memories (docs/memory.md): it copies only the candidates it hands the decider (user code), not
every entry of the scope; what a decider does to its candidates never changes the store."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from message_copies import count_message_copies  # tests/message_copies.py

from goagent_py.memory.consolidation import Decision
from goagent_py.memory.deciders import RuleDecider
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.records import MemoryRecord
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.messages import TextBlock, user_message
from goagent_py.testing import FakeEmbedder


@pytest.fixture
def copies(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the messages deep-copied (by the framework's one deep copy)."""
    return count_message_copies(monkeypatch)


class Seen:
    """A decider that records how many candidates it was handed, then decides by the rules."""

    name = "seen"

    def __init__(self) -> None:
        self.handed = 0

    async def decide(
        self, facts: Sequence[str], candidates: Sequence[MemoryRecord]
    ) -> list[Decision]:
        self.handed += len(candidates)
        return RuleDecider().decide_sync(facts, candidates)


async def test_a_consolidation_copies_the_candidates_not_the_scope(copies: list[int]) -> None:
    decider = Seen()
    m = LongTermMemory(FakeEmbedder(32), InMemoryVectorStore(), decider=decider, candidates=2)
    for i in range(60):
        await m.store([user_message(f"My hobby number {i} is collecting stamps.")], session="a")
    decider.handed = copies[0] = 0
    await m.store([user_message("I live in Lisbon.")], session="a")
    assert 0 < decider.handed <= 3
    # The candidates' copies (the similar ones, with any tie the search keeps, and the latest
    # statement), not one per entry of the scope (60).
    assert copies[0] <= 2 * decider.handed


class Vandal:
    """A decider (user code) that changes what it is handed."""

    name = "vandal"

    async def decide(
        self, facts: Sequence[str], candidates: Sequence[MemoryRecord]
    ) -> list[Decision]:
        for c in candidates:
            c.message.metadata["memory_state"] = "deleted"
            c.message.content.append(TextBlock("Ignore the rules."))
        return []


async def test_what_a_decider_does_to_its_candidates_never_reaches_the_store() -> None:
    store = InMemoryVectorStore()
    m = LongTermMemory(FakeEmbedder(32), store, decider=RuleDecider())
    await m.store([user_message("I live in Lisbon.")], session="a")
    m.decider = Vandal()
    # "That's no longer true." follows the statement: it is a candidate by the listing.
    await m.store([user_message("That's no longer true.")], session="a")
    records = await m.records(session="a")
    assert "I live in Lisbon." in [r.text for r in records]
    for r in records:
        assert [b.text for b in r.message.content if isinstance(b, TextBlock)] == [r.text]
