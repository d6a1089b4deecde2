"""Memory that stays true: records, consolidation on write, history and time-aware recall.

LongTermMemory with a decider on the in-memory store and on a real sqlite-vec file; the
model decider is faked with ScriptedProvider (its vendor HTTP is tested elsewhere).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from goagent_py._recall import recall_message
from goagent_py.errors import ConfigurationError
from goagent_py.memory.consolidation import ConsolidationReport, Decision
from goagent_py.memory.deciders import ModelDecider, RuleDecider
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.records import (
    CREATED_AT_KEY,
    SOURCE_MESSAGE_KEY,
    SOURCE_SESSION_KEY,
    MemoryRecord,
    format_time,
)
from goagent_py.memory.vector.base import SearchOptions, VectorStore
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.memory.write_policies import user_statements
from goagent_py.messages import Message, Role, ScoredMessage, TextBlock, assistant_message
from goagent_py.testing import FakeEmbedder, ScriptedProvider, text_response

ALL = ("current", "superseded", "deleted")


class Clock:
    """A fake clock: each call is one day after the previous one."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(days=1)
        return self.now


def sqlite_store(tmp_path: Path) -> VectorStore:
    pytest.importorskip("sqlite_vec", reason='needs the "vector" extra')
    from goagent_py.memory.vector.sqlite_vec import SqliteVecStore

    return SqliteVecStore(tmp_path / "memory.db", table="memories", dimensions=64)


@pytest.fixture(params=["in_memory", "sqlite_vec"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], VectorStore]:
    if request.param == "in_memory":
        return lambda: InMemoryVectorStore()
    return lambda: sqlite_store(tmp_path)


def memory(store: VectorStore, **kwargs: Any) -> LongTermMemory:
    kwargs.setdefault("clock", Clock())
    return LongTermMemory(FakeEmbedder(64), store, **kwargs)


def said(text: str, *, message: str = "", session: str = "") -> Message:
    metadata = {}
    if message:
        metadata[SOURCE_MESSAGE_KEY] = message
    if session:
        metadata[SOURCE_SESSION_KEY] = session
    return Message(Role.USER, [TextBlock(text)], metadata=metadata)


async def texts(m: LongTermMemory, query: str, **kwargs: Any) -> list[str]:
    found = await m.retrieve([TextBlock(query)], session="alice", top_k=5, **kwargs)
    return [s.message.text for s in found]


# -- records ----------------------------------------------------------------------------------


async def test_every_memory_records_its_time_and_provenance(
    make_store: Callable[[], VectorStore],
) -> None:
    m = memory(make_store())
    await m.store([said("I live in Lisbon.", message="msg-1", session="conv-1")], session="alice")
    (rec,) = await m.records(session="alice")
    assert rec.state == "current"
    assert rec.created_at == datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    assert rec.updated_at == rec.created_at
    assert (rec.source_session, rec.source_message) == ("conv-1", "msg-1")
    assert rec.superseded_by is None
    assert rec.invalid_at is None
    assert [(c.op, c.decider, c.source_message) for c in rec.history] == [("add", "none", "msg-1")]


# -- the Lisbon -> Porto story ----------------------------------------------------------------


async def test_without_a_decider_both_statements_stay_current_as_before(
    make_store: Callable[[], VectorStore],
) -> None:
    m = memory(make_store())
    await m.store([said("I live in Lisbon.")], session="alice")
    await m.store([said("I moved to Porto last month.")], session="alice")
    assert len(await m.records(session="alice")) == 2


async def test_a_changed_fact_supersedes_the_old_one_which_is_kept(
    make_store: Callable[[], VectorStore],
) -> None:
    m = memory(make_store(), decider=RuleDecider())
    await m.store([said("I live in Lisbon.", message="m1")], session="alice")
    await m.store([said("I moved to Porto last month.", message="m2")], session="alice")
    assert await texts(m, "Where do I live?") == ["I live in Porto."]
    (current,) = await m.records(session="alice")
    everything = await m.records(session="alice", states=ALL)
    old = next(r for r in everything if r.state == "superseded")
    assert old.text == "I live in Lisbon."
    assert old.superseded_by == current.id
    assert old.invalid_at == current.created_at
    assert [(c.op, c.decider, c.source_message) for c in current.history] == [
        ("add", "rules", "m1"),
        ("update", "rules", "m2"),
    ]
    assert current.history[-1].previous == "I live in Lisbon."
    assert old.history[-1].op == "superseded"


async def test_the_past_is_recalled_marked_formerly_when_asked_about(
    make_store: Callable[[], VectorStore],
) -> None:
    m = memory(make_store(), decider=RuleDecider())
    await m.store([said("I live in Lisbon.")], session="alice")
    await m.store([said("I moved to Porto.")], session="alice")
    found = await m.retrieve([TextBlock("Where did I live before?")], session="alice", top_k=5)
    assert sorted(s.message.text for s in found) == ["I live in Lisbon.", "I live in Porto."]
    block = recall_message(found).text
    lisbon = next(line for line in block.splitlines() if "Lisbon" in line)
    porto = next(line for line in block.splitlines() if "Porto" in line)
    assert "formerly (no longer true since 2026-03-03)" in lisbon
    assert "said 2026-03-02" in lisbon
    assert "formerly" not in porto
    assert "said 2026-03-03" in porto
    never = memory(m.vector_store, recall_superseded="never")
    assert await texts(never, "Where did I live before?") == ["I live in Porto."]


async def test_compatible_facts_are_all_kept(make_store: Callable[[], VectorStore]) -> None:
    m = memory(make_store(), decider=RuleDecider())
    for text in [
        "I like tea.",
        "I also like coffee.",
        "My sister is Meera.",
        "My brother is Ravi.",
    ]:
        await m.store([said(text)], session="alice")
    assert len(await m.records(session="alice")) == 4


async def test_forget_marks_the_memory_deleted_and_it_is_not_recalled(
    make_store: Callable[[], VectorStore],
) -> None:
    m = memory(make_store(), decider=RuleDecider())
    await m.store([said("My phone number is 555-0101.")], session="alice")
    await m.store([said("Please forget my phone number.")], session="alice")
    assert await m.records(session="alice") == []
    (gone,) = await m.records(session="alice", states=("deleted",))
    assert gone.text == "My phone number is 555-0101."
    assert gone.history[-1].op == "delete"
    assert await texts(m, "What is my phone number?") == []


async def test_users_do_not_touch_each_others_memories() -> None:
    m = memory(InMemoryVectorStore(), decider=RuleDecider())
    await m.store([said("I live in Lisbon.")], session="alice")
    await m.store([said("I moved to Porto.")], session="bob")
    assert [r.text for r in await m.records(session="alice")] == ["I live in Lisbon."]
    assert [r.text for r in await m.records(session="bob")] == ["I live in Porto."]


async def test_assistant_messages_are_stored_without_consolidation() -> None:
    m = memory(InMemoryVectorStore(), decider=RuleDecider())
    await m.store([said("I live in Lisbon."), assistant_message("You live in Paris.")])
    await m.store([said("I live in Porto.")])
    roles = sorted(str(r.message.role) for r in await m.records())
    assert roles == ["assistant", "user"]


# -- time-aware recall ------------------------------------------------------------------------


async def test_ties_break_toward_the_newer_fact() -> None:
    # FakeEmbedder vectors depend on the words: the same words in another order tie. Stored in
    # both orders, the newer comes first each time (not the id order).
    one, two = "blue is my favourite colour", "my favourite colour is blue"
    for older, newer in ((one, two), (two, one)):
        m = memory(InMemoryVectorStore(), tie_tolerance=0.05)
        await m.store([said(older)], session="alice")
        await m.store([said(newer)], session="alice")
        assert await texts(m, "favourite colour blue") == [newer, older]


async def test_near_equal_scores_are_all_ordered_newest_first() -> None:
    # Three scores within the tolerance of the best, the oldest scoring highest: a single
    # pass of neighbour swaps leaves the oldest in the middle. A fourth, further down, stays
    # last however new it is.
    day = datetime(2026, 3, 1, tzinfo=UTC)
    hits = [
        (0.900, "oldest", day),
        (0.895, "middle", day + timedelta(days=1)),
        (0.892, "newest", day + timedelta(days=2)),
        (0.700, "far below", day + timedelta(days=3)),
    ]

    class Fixed(InMemoryVectorStore):
        async def search(
            self, vector: Any, options: SearchOptions | None = None
        ) -> list[ScoredMessage]:
            return [
                ScoredMessage(
                    id=text,
                    message=Message(
                        role=Role.USER,
                        content=[TextBlock(text)],
                        metadata={CREATED_AT_KEY: format_time(when)},
                    ),
                    score=score,
                )
                for score, text, when in hits
            ]

    m = memory(Fixed(), tie_tolerance=0.01)
    assert await texts(m, "anything") == ["newest", "middle", "oldest", "far below"]


# -- bad deciders lose nothing ----------------------------------------------------------------


class Broken:
    name = "broken"

    def __init__(self, answer: Callable[[Sequence[MemoryRecord]], Sequence[Decision]]) -> None:
        self.answer = answer

    async def decide(
        self, facts: Sequence[str], candidates: Sequence[MemoryRecord]
    ) -> Sequence[Decision]:
        return self.answer(candidates)


def _raise(candidates: Sequence[MemoryRecord]) -> Sequence[Decision]:
    raise RuntimeError("decider exploded")


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (_raise, "decider exploded"),
        (lambda c: [Decision(fact=0, op="DELETE", target="alice:not-a-candidate:0")], "candidate"),
        (lambda c: [Decision(fact=7, op="ADD")], "outside"),
    ],
)
async def test_a_failing_decider_adds_the_facts_and_warns(
    answer: Callable[[Sequence[MemoryRecord]], Sequence[Decision]],
    why: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    reports: list[ConsolidationReport] = []
    m = memory(InMemoryVectorStore(), decider=Broken(answer), on_consolidation=reports.append)
    await m.store([said("I live in Lisbon.")], session="alice")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="goagent_py.memory"):
        await m.store([said("I moved to Porto.")], session="alice")
    current = sorted(r.text for r in await m.records(session="alice"))
    assert current == ["I live in Lisbon.", "I moved to Porto."]
    assert why in reports[-1].warning
    assert [d.op for d in reports[-1].decisions] == ["ADD"]
    # The warning also goes to the memory's logger, and the facts' history names no decider.
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert why in caplog.records[0].getMessage()
    porto = next(r for r in await m.records(session="alice") if "Porto" in r.text)
    assert [(c.op, c.decider) for c in porto.history] == [("add", "none")]


async def test_a_model_decider_answering_garbage_twice_loses_nothing() -> None:
    provider = ScriptedProvider(*(text_response("I think you moved!") for _ in range(2)))
    reports: list[ConsolidationReport] = []
    m = memory(
        InMemoryVectorStore(),
        decider=ModelDecider(provider, model="m"),
        on_consolidation=reports.append,
    )
    m.decider = None
    await m.store([said("I live in Lisbon.")], session="alice")
    m.decider = ModelDecider(provider, model="m")
    await m.store([said("I moved to Porto.")], session="alice")
    current = sorted(r.text for r in await m.records(session="alice"))
    assert current == ["I live in Lisbon.", "I moved to Porto."]
    assert "no JSON" in reports[-1].warning
    assert provider.remaining == 0


async def test_a_model_decider_updates_through_its_aliases() -> None:
    answer = '{"decisions": [{"fact": 0, "op": "UPDATE", "id": "m1", "text": "I live in Porto."}]}'
    provider = ScriptedProvider(text_response(answer))
    m = memory(InMemoryVectorStore(), decider=ModelDecider(provider, model="m"))
    await m.store([said("I live in Lisbon.")], session="alice")  # no candidates: no model call
    provider_calls_before = len(provider.requests)
    await m.store([said("I moved to Porto.")], session="alice")
    assert [r.text for r in await m.records(session="alice")] == ["I live in Porto."]
    sent = provider.requests[provider_calls_before].messages[0].text
    assert '"I live in Lisbon."' in sent
    assert "alice:" not in sent


async def test_an_update_that_keeps_the_old_words_adds_the_fact_instead() -> None:
    # What the real 135M model answered (structured output, so valid JSON): UPDATE m1 with
    # the old memory's own text. Applied as is, "I moved to Porto." would be lost.
    answer = '{"decisions": [{"fact": 0, "op": "UPDATE", "id": "m1", "text": "I live in Lisbon."}]}'
    provider = ScriptedProvider(text_response(answer))
    m = memory(InMemoryVectorStore(), decider=ModelDecider(provider, model="m"))
    await m.store([said("I live in Lisbon.")], session="alice")
    await m.store([said("I moved to Porto.")], session="alice")
    everything = await m.records(session="alice", states=("current", "superseded", "deleted"))
    assert sorted((r.text, r.state) for r in everything) == [
        ("I live in Lisbon.", "current"),
        ("I moved to Porto.", "current"),
    ]


# -- concurrency ------------------------------------------------------------------------------


class Gate:
    """A decider that holds each call until released, to overlap two writers."""

    name = "gate"

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.rules = RuleDecider()

    async def decide(
        self, facts: Sequence[str], candidates: Sequence[MemoryRecord]
    ) -> Sequence[Decision]:
        self.entered.set()
        await self.release.wait()
        return self.rules.decide_sync(facts, candidates)


async def test_two_writers_superseding_the_same_memory_lose_no_update() -> None:
    gate = Gate()
    m = memory(InMemoryVectorStore(), decider=gate)
    gate.release.set()
    await m.store([said("I live in Lisbon.")], session="alice")
    gate.release.clear()
    first = asyncio.create_task(m.store([said("I moved to Porto.")], session="alice"))
    await gate.entered.wait()
    second = asyncio.create_task(m.store([said("I moved to Faro.")], session="alice"))
    gate.release.set()
    await asyncio.gather(first, second)
    assert [r.text for r in await m.records(session="alice")] == ["I live in Faro."]
    everything = await m.records(session="alice", states=ALL)
    porto = next(r for r in everything if r.text == "I live in Porto.")
    assert porto.state == "superseded"


# -- bad options ------------------------------------------------------------------------------


def test_bad_consolidation_options_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="decider must have"):
        LongTermMemory(FakeEmbedder(), InMemoryVectorStore(), decider=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="candidates"):
        LongTermMemory(FakeEmbedder(), InMemoryVectorStore(), candidates=0)
    with pytest.raises(ConfigurationError, match="recall_superseded"):
        LongTermMemory(FakeEmbedder(), InMemoryVectorStore(), recall_superseded="x")  # type: ignore[arg-type]


async def test_listing_needs_a_store_that_lists() -> None:
    class Plain:
        async def upsert(self, id: str, vector: Any, message: Message) -> None: ...
        async def search(self, vector: Any, options: Any = None) -> list[Any]:
            return []

        async def delete(self, id: str) -> None: ...

    m = LongTermMemory(FakeEmbedder(), Plain())
    with pytest.raises(ConfigurationError, match="cannot list"):
        await m.records()


@pytest.mark.parametrize(
    ("question", "present"),
    [
        ("Where did I live before?", "Where do I live?"),
        ("Where did I use to live?", "Where do I live?"),
        ("What was my old phone number?", "What is my phone number?"),
        ("Where do I live?", "Where do I live?"),
    ],
)
def test_a_question_about_the_past_is_searched_in_the_present(question: str, present: str) -> None:
    from goagent_py.memory.records import as_present

    assert as_present(question) == present


async def test_a_fact_added_as_said_is_embedded_once() -> None:
    embedder = FakeEmbedder(64)
    m = LongTermMemory(embedder, InMemoryVectorStore(), decider=RuleDecider(), clock=Clock())
    await m.store([said("I like tea.")], session="alice")
    assert (embedder.embed_calls, embedder.batch_calls) == (0, 1)  # the candidates' search


# -- one turn of several statements (review6b) --------------------------------------------------


def statements(text: str) -> list[Message]:
    """``text`` as the chat's write policy hands it to the memory: one message per clause."""
    policy = user_statements(about_user=True)
    kept = policy(said(text), assistant_message("Noted."))
    assert kept is not None
    return kept


async def test_a_fact_changed_twice_in_one_turn_leaves_the_last_value_current(
    make_store: Callable[[], VectorStore],
) -> None:
    m = memory(make_store(), decider=RuleDecider())
    turn = statements("I live in Lisbon, but I moved to Porto last month.")
    assert [f.text for f in turn] == ["I live in Lisbon.", "I moved to Porto last month."]
    await m.store(turn, session="alice")
    assert [r.text for r in await m.records(session="alice")] == ["I live in Porto."]
    assert await texts(m, "Where do I live?") == ["I live in Porto."]


async def test_a_correction_in_the_same_turn_supersedes_the_known_fact_once(
    make_store: Callable[[], VectorStore],
) -> None:
    m = memory(make_store(), decider=RuleDecider())
    await m.store([said("I live in Lisbon.")], session="alice")
    await m.store(statements("I moved to Madrid. No wait, I moved to Porto."), session="alice")
    assert [r.text for r in await m.records(session="alice")] == ["I live in Porto."]
    (old,) = await m.records(session="alice", states=("superseded", "deleted"))
    assert (old.text, old.state) == ("I live in Lisbon.", "superseded")


async def test_no_longer_true_takes_back_the_fact_said_before_it_in_the_same_turn(
    make_store: Callable[[], VectorStore],
) -> None:
    m = memory(make_store(), decider=RuleDecider())
    await m.store([said("My name is Priya.")], session="alice")
    await m.store(statements("I moved to Porto. That's no longer true."), session="alice")
    # The retraction is about Porto, said just before it: Priya (the latest stored memory)
    # stays, and Porto is not a current fact.
    assert [r.text for r in await m.records(session="alice")] == ["My name is Priya."]


async def test_a_fact_said_again_after_it_was_forgotten_keeps_its_history(
    make_store: Callable[[], VectorStore],
) -> None:
    # One conversation, no message ids (as `goagent-py chat` stores): the fact said again is
    # the same entry as the one forgotten; its first life (added, deleted) stays in its history.
    m = memory(make_store(), decider=RuleDecider())
    for text in ["I live in Lisbon.", "Forget that I live in Lisbon.", "I live in Lisbon."]:
        await m.store([said(text, session="conv-1")], session="alice")
    (again,) = await m.records(session="alice", states=ALL)
    assert again.state == "current"
    assert [c.op for c in again.history] == ["add", "delete", "add"]


async def test_a_fact_added_again_under_its_own_id_keeps_its_record() -> None:
    # A retried turn (a durable store activity run twice) whose decider answers ADD for what
    # is already stored under the same id: the memory stays as it was, history included.
    store = InMemoryVectorStore()
    rules = memory(store, decider=RuleDecider())
    await rules.store([said("I live in Lisbon.", message="m1")], session="alice")
    await rules.store([said("I live in Porto.", message="m2")], session="alice")
    (porto,) = await rules.records(session="alice")
    assert [c.op for c in porto.history] == ["add", "update"]

    always_add = memory(store, decider=Broken(lambda c: [Decision(fact=0, op="ADD")]))
    await always_add.store([said("I live in Porto.", message="m2")], session="alice")
    (again,) = await always_add.records(session="alice")
    assert again.id == porto.id
    assert [c.op for c in again.history] == ["add", "update"]
    assert again.created_at == porto.created_at


async def test_two_facts_of_a_turn_changing_one_memory_leave_the_last_current() -> None:
    # A model decider answering for "I moved to Madrid. No wait, to Porto." may change the
    # same memory twice: the later fact is the one that stands (it was added beside the first
    # change, leaving two current homes).
    store = InMemoryVectorStore()
    await memory(store, decider=RuleDecider()).store([said("I live in Lisbon.")], session="alice")

    def twice(candidates: Sequence[MemoryRecord]) -> Sequence[Decision]:
        (lisbon,) = candidates
        return [
            Decision(fact=0, op="UPDATE", target=lisbon.id, text="I live in Madrid."),
            Decision(fact=1, op="UPDATE", target=lisbon.id, text="I live in Porto."),
        ]

    m = memory(store, decider=Broken(twice))
    await m.store([said("I moved to Madrid."), said("No wait, to Porto.")], session="alice")
    assert [r.text for r in await m.records(session="alice")] == ["I live in Porto."]
    (old,) = await m.records(session="alice", states=("superseded", "deleted"))
    assert old.text == "I live in Lisbon."


async def test_one_facts_two_changes_of_a_memory_keep_the_first_and_lose_nothing() -> None:
    # The embedded model answered "UPDATE m1 (same text), DELETE m1" for "I moved to Porto
    # last month.": the fact's own two words on one memory contradict each other; the first
    # stands (taking the later one deleted Lisbon and stored nothing of Porto).
    store = InMemoryVectorStore()
    await memory(store, decider=RuleDecider()).store([said("I live in Lisbon.")], session="alice")

    def contradicts(candidates: Sequence[MemoryRecord]) -> Sequence[Decision]:
        (lisbon,) = candidates
        return [
            Decision(fact=0, op="UPDATE", target=lisbon.id, text="I live in Porto."),
            Decision(fact=0, op="DELETE", target=lisbon.id),
        ]

    m = memory(store, decider=Broken(contradicts))
    await m.store([said("I moved to Porto last month.")], session="alice")
    assert [r.text for r in await m.records(session="alice")] == ["I live in Porto."]


async def test_forget_removes_a_fact_stored_in_other_words(
    make_store: Callable[[], VectorStore],
) -> None:
    # The rule decider stores "I moved to Porto last month." as "I live in Porto." (another
    # entry id): forgetting the message the user sent removes what it stored.
    m = memory(make_store(), decider=RuleDecider())
    said_it = said("I moved to Porto last month.", session="conv-1")
    kept = said("My name is Priya.", session="conv-1")
    await m.store([said_it], session="alice")
    await m.store([kept], session="alice")
    assert sorted(r.text for r in await m.records(session="alice")) == [
        "I live in Porto.",
        "My name is Priya.",
    ]
    await m.forget([said_it], session="alice")
    left = await m.records(session="alice", states=ALL)
    assert [r.text for r in left] == ["My name is Priya."]


async def test_no_longer_true_after_restating_a_known_fact_retracts_it(
    make_store: Callable[[], VectorStore],
) -> None:
    m = memory(make_store(), decider=RuleDecider())
    await m.store([said("My name is Priya.")], session="alice")
    await m.store([said("I live in Lisbon.")], session="alice")
    await m.store(statements("I live in Lisbon. That's no longer true."), session="alice")
    assert [r.text for r in await m.records(session="alice")] == ["My name is Priya."]
    (gone,) = await m.records(session="alice", states=("deleted",))
    assert gone.text == "I live in Lisbon."
