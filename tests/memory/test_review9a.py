"""Memory that stays true, reviewed again (review9a): cases the earlier reviews had not tried.

Driven as a user drives it: statements cut as the chat's write policy cuts them, stored in a
LongTermMemory with the model-free decider, then listed and recalled.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from goagent_py import Agent, tool
from goagent_py.memory import (
    Compactor,
    ShortTermMemory,
    SlidingWindow,
    SQLiteStorage,
)
from goagent_py.memory.deciders import RuleDecider
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.records import CREATED_AT_KEY, format_time
from goagent_py.memory.tokens import HeuristicEstimator
from goagent_py.memory.vector.base import SearchOptions
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.memory.write_policies import user_statements
from goagent_py.messages import Message, Role, ScoredMessage, TextBlock, assistant_message
from goagent_py.testing import (
    FakeEmbedder,
    ScriptedProvider,
    text_response,
    tool_call_response,
)


class Clock:
    """Each call is one day after the previous one."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(days=1)
        return self.now


def rules_memory(**kwargs: Any) -> LongTermMemory:
    kwargs.setdefault("clock", Clock())
    kwargs.setdefault("decider", RuleDecider())
    return LongTermMemory(FakeEmbedder(64), InMemoryVectorStore(), **kwargs)


def statements(text: str) -> list[Message]:
    """``text`` as the chat's write policy hands it to the memory."""
    kept = user_statements(about_user=True)(
        Message(Role.USER, [TextBlock(text)]), assistant_message("Noted.")
    )
    return kept or []


async def conversation(*turns: str) -> tuple[list[str], list[str]]:
    """The current memories after ``turns`` (one turn each), and the ones no longer current."""
    m = rules_memory()
    for turn in turns:
        await m.store(statements(turn), session="alice")
    current = [r.text for r in await m.records(session="alice")]
    gone = [r.text for r in await m.records(session="alice", states=("superseded", "deleted"))]
    return current, gone


# -- recall order ------------------------------------------------------------------------------


class FixedHits(InMemoryVectorStore):
    """A store whose search returns fixed hits (score, text, stored at)."""

    def __init__(self, hits: list[tuple[float, str, datetime]]) -> None:
        super().__init__()
        self.hits = hits

    async def search(
        self, vector: Any, options: SearchOptions | None = None
    ) -> list[ScoredMessage]:
        return [
            ScoredMessage(
                id=text,
                message=Message(
                    Role.USER, [TextBlock(text)], metadata={CREATED_AT_KEY: format_time(when)}
                ),
                score=score,
            )
            for score, text, when in self.hits
        ]


async def test_a_token_budget_keeps_ties_newest_first() -> None:
    # The older fact scores a hair higher; within the tie tolerance the newer comes first,
    # with or without a token budget (the budget used to re-sort by score alone).
    day = datetime(2026, 3, 1, tzinfo=UTC)
    hits = [(0.900, "I live in Lisbon.", day), (0.895, "I live in Porto.", day + timedelta(1))]
    for budget in (None, 1000):
        m = LongTermMemory(FakeEmbedder(64), FixedHits(hits), token_budget=budget)
        found = await m.retrieve([TextBlock("Where do I live?")], session="alice")
        assert [s.message.text for s in found] == ["I live in Porto.", "I live in Lisbon."]


async def test_a_token_budget_drops_the_lowest_scored_memory() -> None:
    day = datetime(2026, 3, 1, tzinfo=UTC)
    hits = [
        (0.900, "I live in Lisbon.", day),
        (0.895, "I live in Porto.", day + timedelta(1)),
        (0.300, "My name is Priya.", day + timedelta(2)),
    ]
    m = LongTermMemory(FakeEmbedder(64), FixedHits(hits), token_budget=10)
    found = await m.retrieve([TextBlock("Where do I live?")], session="alice")
    assert [s.message.text for s in found] == ["I live in Porto.", "I live in Lisbon."]


# -- retractions of facts the rules cannot read as a slot --------------------------------------


@pytest.mark.parametrize(
    ("before", "retraction"),
    [
        ("I eat meat.", "I no longer eat meat."),
        ("I'm a vegetarian.", "I'm not a vegetarian anymore."),
        ("I am vegetarian.", "I'm not vegetarian any more."),
        ("I'm allergic to peanuts.", "I'm no longer allergic to peanuts."),
        ("I have a cat named Tom.", "I don't have a cat anymore."),
        ("I smoke on weekends.", "I don't smoke on weekends anymore."),
    ],
)
async def test_i_no_longer_retracts_a_fact_the_rules_cannot_read_as_a_slot(
    before: str, retraction: str
) -> None:
    # Before: both "I eat meat." and "I no longer eat meat." stayed current (recalled together).
    current, gone = await conversation(before, retraction)
    assert before not in current
    assert gone == [before]


async def test_forget_that_retracts_a_fact_about_someone_else() -> None:
    # Before: "Forget that my sister lives in Paris." changed nothing (read as the slot
    # "sister lives in paris", which no memory has), and the fact stayed current.
    current, gone = await conversation(
        "My sister lives in Paris.", "I live in Lisbon.", "Forget that my sister lives in Paris."
    )
    assert current == ["I live in Lisbon."]
    assert gone == ["My sister lives in Paris."]


async def test_forget_my_slot_leaves_another_persons_fact_of_that_slot() -> None:
    current, gone = await conversation(
        "My wife's phone number is 555-0199.", "My phone number is 555-0100.", "Forget my number."
    )
    assert current == ["My wife's phone number is 555-0199."]
    assert gone == ["My phone number is 555-0100."]


async def test_a_retraction_that_finds_nothing_keeps_the_new_fact_said_with_it() -> None:
    # Before: "I no longer like blue, my favourite colour is green." was read whole as a
    # retraction of "favourite colour = green", which no memory held: a NOOP, green was lost.
    current, _ = await conversation(
        "My favourite colour is blue.", "I no longer like blue, my favourite colour is green."
    )
    assert any("green" in text for text in current)


async def test_a_plain_negation_retracts_nothing() -> None:
    # "I don't know" is no retraction of "I know Python" (no "anymore", no "no longer").
    current, gone = await conversation("I know Python well.", "I don't know, to be honest.")
    assert "I know Python well." in current
    assert gone == []


# -- what is said about someone is not who they are --------------------------------------------


@pytest.mark.parametrize(
    ("name", "about"),
    [
        ("My wife is Ana.", "My wife is a doctor."),
        ("My wife is Ana.", "My wife is from Italy."),
        ("My husband's name is Tom.", "My husband is 42."),
        ("My dog is called Rex.", "My dog is old."),
        ("My brother is Ravi.", "My brother is 30."),
        ("My sister is Meera.", "My sister is pregnant."),
    ],
)
async def test_a_fact_about_a_person_does_not_replace_their_name(name: str, about: str) -> None:
    # Before: "My wife is a doctor." superseded "My wife is Ana." (one "partner" value), so
    # "What is my wife's name?" lost its answer.
    current, gone = await conversation(name, about)
    assert name in current
    assert gone == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My wife is Ana.", "My wife is Eva now."),
        ("My dog is called Rex.", "My dog's name is Max."),
        # A brother named anew is a second brother (memrag15); a boss is one at a time.
        ("My boss is Ravi.", "My boss is called Arjun."),
    ],
)
async def test_a_new_name_still_replaces_the_old_one(old: str, new: str) -> None:
    current, gone = await conversation(old, new)
    assert gone == [old]
    assert len(current) == 1


@pytest.mark.parametrize("said", ["My car is red.", "My car is in the garage."])
async def test_a_car_described_is_stored_as_said(said: str) -> None:
    # Before: "My car is red." was rewritten "I drive a red." (the car's make slot).
    current, _ = await conversation(said)
    assert current == [said]


async def test_a_cars_colour_does_not_replace_its_make() -> None:
    current, gone = await conversation("My car is a Tesla.", "My car is blue.")
    assert current == ["I drive a Tesla.", "My car is blue."]
    assert gone == []


async def test_a_car_named_in_lower_case_is_still_the_car() -> None:
    current, gone = await conversation("I drive a red Toyota.", "I drive a bmw now.")
    assert gone == ["I drive a red Toyota."]
    assert current == ["I drive a bmw."] or current == ["I drive a bmw now."]


async def test_a_retraction_and_a_new_value_in_one_sentence_leave_the_new_value_current() -> None:
    # Before: the sentence was one memory, read as a retraction; "blue" stayed current.
    current, gone = await conversation(
        "My favourite colour is blue.", "I no longer like blue, my favourite colour is green."
    )
    assert "My favourite colour is green." in current
    assert gone == ["My favourite colour is blue."]


@pytest.mark.parametrize(
    ("text", "clauses"),
    [
        (
            "I no longer like blue, my favourite colour is green.",
            ["I no longer like blue.", "My favourite colour is green."],
        ),
        ("My name is Ana; I'm 30.", ["My name is Ana.", "I'm 30."]),
        ("When I moved, I sold my car.", ["When I moved, I sold my car."]),
        ("I was born in Goa, in India.", ["I was born in Goa, in India."]),
    ],
)
def test_a_comma_between_two_first_person_clauses_cuts(text: str, clauses: list[str]) -> None:
    from goagent_py.memory.write_policies import statement_clauses

    assert statement_clauses(text) == clauses


# -- a file name that is not UTF-8 -------------------------------------------------------------


def test_a_lone_surrogate_is_counted_not_raised() -> None:
    # os.listdir() gives "\udcff" for a byte of a name that is not UTF-8 (surrogateescape).
    message = Message(Role.TOOL, [TextBlock("report-\udcff.txt")], tool_call_id="c1")
    assert HeuristicEstimator().count(message) > HeuristicEstimator().count_text("")


async def test_a_tool_result_with_a_lone_surrogate_neither_fails_the_run_nor_loses_the_turn(
    tmp_path: Path,
) -> None:
    # Before: the compactor's estimate raised UnicodeEncodeError (the run failed), and with
    # another estimator the run answered but SQLite refused the turn (it was never stored).
    @tool
    def listing() -> str:
        """List the files."""
        return "report-\udcff.txt"

    async with SQLiteStorage(tmp_path / "chat.db", session_id="s") as storage:
        memory = ShortTermMemory(storage)
        provider = ScriptedProvider(tool_call_response(("listing", {})), text_response("done"))
        agent = Agent(
            provider=provider,
            tools=[listing],
            short_term_memory=memory,
            transform_context=Compactor(SlidingWindow(), context_window=1000, memory=memory),
        )
        assert (await agent.run("list the files")).text == "done"
        stored = await memory.transcript()
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2].text.startswith("report-")


# -- one memory, several event loops (run_sync from a thread pool) -----------------------------


class BlockingEmbedder(FakeEmbedder):
    """Embeds after blocking its thread a little, as a local model does."""

    async def embed(self, blocks: list[Any]) -> Any:
        time.sleep(0.01)  # noqa: ASYNC251  (blocking on purpose: a local model does)
        await asyncio.sleep(0)
        return await super().embed(blocks)

    async def embed_batch(self, inputs: list[list[Any]]) -> Any:
        time.sleep(0.01)  # noqa: ASYNC251  (blocking on purpose: a local model does)
        await asyncio.sleep(0)
        return await super().embed_batch(inputs)


def test_one_memory_shared_by_threads_each_with_its_own_loop_never_hangs() -> None:
    # A web server's thread pool calling agent.run_sync: each call runs its own event loop.
    # Before: the per-scope asyncio.Lock was shared across loops; a waiter's future made in
    # one loop was resolved from another thread, and that loop slept forever.
    m = LongTermMemory(BlockingEmbedder(64), InMemoryVectorStore(), decider=RuleDecider())
    failures: list[BaseException] = []

    def user(city: str) -> None:
        try:
            for i in range(6):
                asyncio.run(m.store(statements(f"I live in {city} {i}."), session="alice"))
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [
        threading.Thread(target=user, args=(city,), daemon=True)
        for city in ("Lisbon", "Porto", "Faro")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)  # a hang detector, far above the ~1 s this takes
    assert not any(t.is_alive() for t in threads), "a store never returned"
    assert failures == []

    async def current() -> list[str]:
        return [r.text for r in await m.records(session="alice")]

    assert len(asyncio.run(current())) == 1  # one home, whichever was said last


# -- forgetting leaves no copy -----------------------------------------------------------------


async def test_forget_leaves_no_copy_in_the_history_of_the_fact_that_replaced_it() -> None:
    # Before: after forget("I live in Lisbon."), the current "I live in Porto." still quoted
    # it in its history (its add, and the update's previous text), shown by /memory history.
    m = rules_memory()
    lisbon = Message(Role.USER, [TextBlock("I live in Lisbon.")])
    await m.store([lisbon], session="alice")
    await m.store([Message(Role.USER, [TextBlock("I moved to Porto.")])], session="alice")
    await m.forget([lisbon], session="alice")
    records = await m.records(session="alice", states=("current", "superseded", "deleted"))
    assert [r.text for r in records] == ["I live in Porto."]
    quoted = [text for r in records for c in r.history for text in (c.text, c.previous)]
    assert not any("Lisbon" in text for text in quoted)
    assert [c.op for c in records[0].history] == ["add", "update"]  # what happened stays
    found = await m.retrieve([TextBlock("Where do I live?")], session="alice")
    assert [s.message.text for s in found] == ["I live in Porto."]
