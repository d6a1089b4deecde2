"""Memory that stays true, a third round (docs/memory.md, "The model-free decider"): each
person has slots of their own (a wife and a husband, people named without "my"), and a
correction or a retraction applies to what was just said, never to an old fact."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from goagent_py.memory.deciders import ModelDecider, RuleDecider
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.records import SOURCE_SESSION_KEY
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.memory.write_policies import user_statements
from goagent_py.messages import Message, assistant_message, user_message
from goagent_py.testing import FakeEmbedder, ScriptedProvider, text_response

ALL = ("current", "superseded", "deleted")


class Clock:
    """A minute passes at each reading; ``jump`` moves it on."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(minutes=1)
        return self.now

    def jump(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def memory(clock: Clock | None = None, **kwargs: Any) -> LongTermMemory:
    return LongTermMemory(FakeEmbedder(64), InMemoryVectorStore(), decider=RuleDecider(),
                          clock=clock or Clock(), **kwargs)  # fmt: skip


def statements(text: str, conversation: str = "") -> list[Message]:
    """What the chat's write policy keeps of ``text`` (one turn), tagged with the
    conversation as the chat tags it."""
    kept = user_statements(about_user=True)(user_message(text), assistant_message("ok")) or []
    if conversation:
        for message in kept:
            message.metadata = {**message.metadata, SOURCE_SESSION_KEY: conversation}
    return kept


async def say(m: LongTermMemory, *turns: str, conversation: str = "") -> None:
    for turn in turns:
        await m.store(statements(turn, conversation), session="alice")


async def current(m: LongTermMemory) -> list[str]:
    return sorted(r.text for r in await m.records(session="alice"))


async def states(m: LongTermMemory) -> dict[str, str]:
    return {r.text: r.state for r in await m.records(session="alice", states=ALL)}


# -- each relation its own slots -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("My wife works at Google.", "My husband works at Apple."),
        ("My wife is Ana.", "My husband is Bob."),
        ("My partner is Sam.", "My wife is Ana."),
        ("My girlfriend lives in Paris.", "My partner lives in Rome."),
        ("My wife's phone number is 555-0101.", "My husband's phone number is 555-0199."),
    ],
)
async def test_one_relations_fact_never_replaces_anothers(first: str, second: str) -> None:
    m = memory()
    await say(m, first, second)
    assert await current(m) == sorted([first, second])


async def test_a_girlfriends_new_employer_replaces_her_old_one() -> None:
    m = memory()
    await say(m, "I work at Acme.", "My girlfriend works at Google.",
              "My girlfriend now works at Apple.")  # fmt: skip
    assert await current(m) == ["I work at Acme.", "My girlfriend now works at Apple."]


@pytest.mark.parametrize("who", ["My boyfriend is Leo.", "My husband is Leo.", "I'm dating Leo."])
async def test_a_break_up_retracts_the_partner_whatever_the_relation_was_called(who: str) -> None:
    m = memory()
    await say(m, "My sister is Meera.", who, "I broke up with Leo.")
    assert await current(m) == ["My sister is Meera."]


# -- people named without "my" -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mine", "theirs", "stored"),
    [
        ("I work at Acme.", "Anna works at Globex.", "Anna works at Globex."),
        ("I live in Lisbon.", "Tom moved to Oslo.", "Tom lives in Oslo."),
        ("My phone number is 555-0101.", "Anna's phone number is 555-0199.",
         "Anna's phone number is 555-0199."),
        ("I'm 34.", "Tom is 40.", "Tom is 40."),
    ],
)  # fmt: skip
async def test_a_named_persons_fact_is_kept_beside_the_users(
    mine: str, theirs: str, stored: str
) -> None:
    m = memory()
    await say(m, mine, theirs)
    assert await current(m) == sorted([mine, stored])


@pytest.mark.parametrize(
    ("old", "new", "now"),
    [
        ("Anna works at Globex.", "Anna now works at Apple.", "Anna now works at Apple."),
        ("Tom lives in Oslo.", "Tom moved to Bergen.", "Tom lives in Bergen."),
        ("Anna's phone number is 555-0101.", "Anna's new number is 555-0199.",
         "Anna's phone number is 555-0199."),
    ],
)  # fmt: skip
async def test_a_named_persons_new_value_replaces_their_old_one(
    old: str, new: str, now: str
) -> None:
    m = memory()
    await say(m, "I live in Lisbon.", "I work at Acme.", old, new)
    assert await current(m) == sorted(["I live in Lisbon.", "I work at Acme.", now])
    assert (await states(m))[old] == "superseded"


async def test_two_named_people_keep_their_own_facts() -> None:
    m = memory()
    await say(m, "Anna works at Globex.", "Tom works at Apple.", "Anna lives in Rome.",
              "Tom lives in Oslo.")  # fmt: skip
    assert await current(m) == [
        "Anna lives in Rome.", "Anna works at Globex.", "Tom lives in Oslo.", "Tom works at Apple."
    ]  # fmt: skip


async def test_a_named_persons_retraction_takes_back_only_theirs() -> None:
    m = memory()
    await say(m, "I work at Globex.", "Anna works at Globex.",
              "Anna doesn't work at Globex anymore.")  # fmt: skip
    assert await current(m) == ["I work at Globex."]


@pytest.mark.parametrize(
    "text",
    ["Lisbon is my home now.", "Anna and I moved to Lisbon.", "Yesterday I moved to Lisbon."],
)
async def test_the_users_own_facts_with_a_capitalised_word_first_stay_the_users(text: str) -> None:
    m = memory()
    await say(m, "I live in Paris.", text)
    assert (await states(m))["I live in Paris."] == "superseded"


# -- a correction applies to what was just said ----------------------------------------------------


@pytest.mark.parametrize("fix", ["Sorry, I meant Madrid.", "No wait, Madrid.", "*Madrid"])
async def test_a_correction_a_week_later_does_not_change_an_old_fact(fix: str) -> None:
    clock = Clock()
    m = memory(clock)
    await say(m, "I live in Lisbon.")
    clock.jump(days=7)
    await say(m, fix)
    assert (await states(m))["I live in Lisbon."] == "current"
    assert "I live in Madrid." not in await states(m)


async def test_thats_no_longer_true_a_week_later_retracts_nothing() -> None:
    clock = Clock()
    m = memory(clock)
    await say(m, "I live in Lisbon.")
    clock.jump(days=7)
    await say(m, "That's no longer true.")
    assert await current(m) == ["I live in Lisbon."]


async def test_a_correction_in_another_conversation_does_not_apply() -> None:
    m = memory()
    await say(m, "My brother is called Jon.", conversation="work")
    await say(m, "Sorry, I meant John.", conversation="home")
    assert (await states(m))["My brother is called Jon."] == "current"


async def test_a_correction_right_after_the_statement_still_applies() -> None:
    clock = Clock()
    m = memory(clock)
    await say(m, "I live in Paris.")
    clock.jump(days=7)
    await say(m, "I live in Lisbon.", conversation="c1")
    await say(m, "Sorry, I meant Madrid.", conversation="c1")
    assert await current(m) == ["I live in Madrid."]
    assert (await states(m))["I live in Paris."] == "superseded"


async def test_the_model_decider_is_told_which_memory_was_just_said_only_when_it_was() -> None:
    clock = Clock()
    answer = '{"decisions": []}'
    provider = ScriptedProvider(text_response(answer), text_response(answer))
    m = LongTermMemory(FakeEmbedder(64), InMemoryVectorStore(), clock=clock,
                       decider=ModelDecider(provider, model="m"))  # fmt: skip
    await m.store([user_message("I live in Lisbon.")], session="alice")
    clock.jump(days=7)
    await m.store([user_message("Sorry, I meant Madrid.")], session="alice")
    assert "(latest)" not in provider.requests[0].messages[0].text
    await m.store([user_message("No wait, Porto.")], session="alice")
    assert "(latest)" in provider.requests[1].messages[0].text


@pytest.mark.parametrize(
    ("first", "then", "now"),
    [
        ("My brother Tom lives in Oslo.", "Tom moved to Bergen.", "Tom lives in Bergen."),
        ("Tom lives in Oslo.", "My brother Tom moved to Bergen.",
         "My brother Tom lives in Bergen."),
    ],
)  # fmt: skip
async def test_a_person_named_with_and_without_the_relation_is_one_person(
    first: str, then: str, now: str
) -> None:
    m = memory()
    await say(m, first, then)
    assert await current(m) == [now]


async def test_a_name_two_people_share_changes_neither() -> None:
    # Two Toms: "Tom moved to Bergen" does not say which one.
    m = memory()
    await say(m, "My brother Tom lives in Oslo.", "My colleague Tom lives in Rome.",
              "Tom moved to Bergen.")  # fmt: skip
    assert await current(m) == [
        "My brother Tom lives in Oslo.", "My colleague Tom lives in Rome.", "Tom lives in Bergen."
    ]  # fmt: skip


async def test_a_relation_named_does_not_take_a_fact_of_another_person_of_that_name() -> None:
    m = memory()
    await say(m, "My colleague Tom works at Acme.", "Tom lives in Rome.",
              "My brother Tom moved to Bergen.")  # fmt: skip
    assert "Tom lives in Rome." in await current(m)


@pytest.mark.parametrize(
    ("first", "second"),
    [("My wife is Ana.", "My partner is Sam."), ("My husband is Bob.", "My girlfriend is Iris.")],
)
async def test_a_relation_named_later_does_not_replace_another(first: str, second: str) -> None:
    m = memory()
    await say(m, first, second)
    assert await current(m) == sorted([first, second])


async def test_a_partner_named_without_the_relation_replaces_the_one_before() -> None:
    m = memory()
    await say(m, "My wife is Helen.", "I'm now married to Grace.")
    assert await current(m) == ["My partner is Grace."]


class SearchOnlyStore:
    """A store of one's own that can search but not list (no ``entries``)."""

    def __init__(self) -> None:
        self.inner = InMemoryVectorStore()

    async def upsert(self, id: str, vector: Any, message: Message) -> None:
        await self.inner.upsert(id, vector, message)

    async def search(self, vector: Any, options: Any = None) -> Any:
        return await self.inner.search(vector, options)

    async def delete(self, id: str) -> None:
        await self.inner.delete(id)


async def test_a_store_that_cannot_list_still_gets_corrections_of_what_was_just_said() -> None:
    clock = Clock()
    m = LongTermMemory(FakeEmbedder(64), SearchOnlyStore(), decider=RuleDecider(), clock=clock)
    await say(m, "My brother is called Jon.", "Sorry, I meant John.")
    found = await m.retrieve([user_message("brother").content[0]], session="alice", top_k=3)
    assert [s.message.text for s in found] == ["My brother is called John."]
    await say(m, "I live in Lisbon.")
    clock.jump(days=7)
    await say(m, "Sorry, I meant Madrid.")
    found = await m.retrieve([user_message("I live in").content[0]], session="alice", top_k=5)
    assert "I live in Lisbon." in [s.message.text for s in found]
    assert "I live in Madrid." not in [s.message.text for s in found]


@pytest.mark.parametrize(
    "theirs", ["Tom is married to Grace.", "My brother broke up with Ana.", "Anna is dating Leo."]
)
async def test_someone_elses_partner_never_changes_the_users(theirs: str) -> None:
    m = memory()
    await say(m, "My wife is Ana.", "My boyfriend is Leo.", theirs)
    assert {"My wife is Ana.", "My boyfriend is Leo."} <= set(await current(m))
