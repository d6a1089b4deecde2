"""Memory that stays true, a second adversarial round (docs/memory.md, "The model-free
decider"): short facts, bare corrections, facts about other people, questions in any script,
reported speech, hypotheticals and the past tense, through the chat's write policy and the
rule decider as the agent uses them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from goagent_py.memory.deciders import RuleDecider
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.memory.write_policies import is_question, user_statements
from goagent_py.messages import Message, assistant_message, user_message
from goagent_py.testing import FakeEmbedder

ALL = ("current", "superseded", "deleted")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(minutes=1)
        return self.now


def memory(**kwargs: Any) -> LongTermMemory:
    return LongTermMemory(FakeEmbedder(64), InMemoryVectorStore(), decider=RuleDecider(),
                          clock=Clock(), **kwargs)  # fmt: skip


def statements(text: str) -> list[Message]:
    """What the chat's write policy keeps of ``text`` (one turn)."""
    kept = user_statements(about_user=True)(user_message(text), assistant_message("ok"))
    return kept or []


async def say(m: LongTermMemory, *turns: str) -> None:
    for turn in turns:
        await m.store(statements(turn), session="alice")


async def store_as_is(m: LongTermMemory, *turns: str) -> None:
    """Each turn stored whole, as ``store_always`` (the agent's default policy) does."""
    for turn in turns:
        await m.store([user_message(turn)], session="alice")


async def current(m: LongTermMemory) -> list[str]:
    return sorted(r.text for r in await m.records(session="alice"))


async def states(m: LongTermMemory) -> dict[str, str]:
    return {r.text: r.state for r in await m.records(session="alice", states=ALL)}


# -- short facts ----------------------------------------------------------------------------------


@pytest.mark.parametrize("fact", ["I'm vegetarian.", "I'm allergic.", "I'm 34.", "We're vegan."])
async def test_a_two_word_first_person_fact_is_kept(fact: str) -> None:
    # "I'm vegetarian" is three words said in two: the write policy counted "I'm" as one.
    m = memory()
    await say(m, fact)
    assert await current(m) == [fact]


async def test_short_remarks_are_still_not_facts() -> None:
    m = memory()
    await say(m, "Thanks!", "Ok cool.", "I see.", "Me too.")
    assert await current(m) == []


async def test_a_short_age_replaces_the_old_one() -> None:
    m = memory()
    await say(m, "I'm 34.", "I'm 35.")
    assert await current(m) == ["I'm 35."]


# -- bare corrections -----------------------------------------------------------------------------


@pytest.mark.parametrize("fix", ["No wait, Madrid.", "Wait, Madrid.", "Hang on, Madrid!",
                                 "Actually, Madrid.", "No, no, Madrid."])  # fmt: skip
async def test_a_bare_value_after_no_wait_corrects_the_statement_before(fix: str) -> None:
    m = memory()
    await say(m, "I live in Lisbon.", fix)
    assert await current(m) == ["I live in Madrid."]
    assert (await states(m))["I live in Lisbon."] == "deleted"  # a slip, never true


async def test_a_bare_correction_in_the_same_turn() -> None:
    m = memory()
    await say(m, "I live in Lisbon. No wait, Madrid.")
    assert await current(m) == ["I live in Madrid."]


@pytest.mark.parametrize("answer", ["Ok, Madrid.", "No, Rome.", "Actually, it is fine."])
async def test_a_bare_answer_is_no_correction(answer: str) -> None:
    # "Ok, Madrid." or "No, Rome." answers a question as often as it corrects: the name
    # stays the name.
    m = memory()
    await say(m, "My name is Priya.", answer)
    assert await current(m) == ["My name is Priya."]


# -- facts about other people ---------------------------------------------------------------------


async def test_a_new_value_of_someone_elses_fact_replaces_the_old_one() -> None:
    m = memory()
    await say(m, "I work at Acme.", "My wife works at Google.", "My wife now works at Apple.")
    assert await current(m) == ["I work at Acme.", "My wife now works at Apple."]
    assert (await states(m))["My wife works at Google."] == "superseded"


async def test_someone_elses_move_and_retraction_stay_theirs() -> None:
    m = memory()
    await say(
        m,
        "I live in Paris.",
        "My brother lives in Berlin.",
        "My brother moved to Munich.",
        "My sister lives in Rome.",
    )
    assert await current(m) == [
        "I live in Paris.",
        "My brother lives in Munich.",
        "My sister lives in Rome.",
    ]
    await say(m, "My brother no longer lives in Munich.")
    assert await current(m) == ["I live in Paris.", "My sister lives in Rome."]


# -- questions in any script ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "question",
    ["Do I live in Paris\uff1f", "Do I live in Paris\u061f", "Do I live in Paris?!",
     "\u00bfDo I live in Paris?", "Do I live in Paris?)"],
)  # fmt: skip
async def test_a_question_is_no_fact_in_any_script(question: str) -> None:
    # Stored whole (the agent's default policy keeps questions): the decider must not read
    # "Do I live in Paris" with a full-width question mark as a fact.
    m = memory()
    await store_as_is(m, "I live in Lisbon.", question)
    assert "I live in Lisbon." in await current(m)
    assert (await states(m))["I live in Lisbon."] == "current"


def test_a_greek_question_ends_on_a_semicolon() -> None:
    assert is_question("Πού μένω;")
    assert is_question("Πού μένω\u037e")
    assert not is_question("I live in Lisbon; I work at Acme;")


async def test_full_width_punctuation_is_not_part_of_the_value() -> None:
    m = memory()
    await store_as_is(m, "I live in Paris\uff01", "I live in Paris.")
    assert len(await current(m)) == 1


# -- reported speech, hypotheticals, the past -----------------------------------------------------


@pytest.mark.parametrize(
    "remark",
    ["My boss said I'm an idiot.", "My mother thinks I'm a failure.",
     "She told me I work at Google now."],
)  # fmt: skip
async def test_what_someone_else_says_of_the_user_does_not_replace_their_fact(
    remark: str,
) -> None:
    m = memory()
    await say(m, "I'm a teacher.", "I work at Acme.", remark)
    assert {"I'm a teacher.", "I work at Acme."} <= set(await current(m))


@pytest.mark.parametrize(
    "remark",
    ["If I moved to Rome I would be happier.", "Even if I lived in Rome, I would miss Paris.",
     "Suppose I moved to Rome.", "What if I moved to Rome."],
)  # fmt: skip
async def test_a_hypothetical_move_does_not_replace_the_home(remark: str) -> None:
    m = memory()
    await say(m, "I live in Paris.", remark)
    assert "I live in Paris." in await current(m)
    assert "I live in Rome." not in await current(m)


async def test_an_if_about_someone_else_does_not_hide_the_users_fact() -> None:
    m = memory()
    await say(m, "I live in Paris.", "If you must know, I live in Rome.")
    assert await current(m) == ["If you must know, I live in Rome."]


async def test_i_used_to_retires_the_current_fact_and_keeps_the_past() -> None:
    m = memory()
    await say(m, "I live in Paris.", "I used to live in Paris.")
    assert await current(m) == ["I used to live in Paris."]
    assert (await states(m))["I live in Paris."] != "current"


async def test_i_used_to_of_nothing_known_is_kept_and_does_not_replace_the_present() -> None:
    m = memory()
    await say(m, "I live in Porto.", "I used to live in Lisbon.")
    assert await current(m) == ["I live in Porto.", "I used to live in Lisbon."]


# -- other languages ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fact", ["Vivo en Madrid.", "Soy vegetariano.", "Moro em Lisboa.", "Abito a Roma.",
             "Trabajo en Google.", "Mieszkam w Krakowie."],
)  # fmt: skip
async def test_a_first_person_fact_without_a_pronoun_is_kept(fact: str) -> None:
    # Spanish, Portuguese, Italian and Polish drop the pronoun: the verb is the first person.
    m = memory()
    await say(m, fact)
    assert await current(m) == [fact]


# -- a phone's apostrophe -------------------------------------------------------------------------


async def test_a_typographic_apostrophe_reads_as_a_plain_one() -> None:
    # Phones type "\u2019": "I don\u2019t live in Lisbon anymore" retracts as the ASCII one does.
    m = memory()
    await say(m, "I live in Lisbon.", "I\u2019m 34.", "I don\u2019t live in Lisbon anymore.")
    assert await current(m) == ["I\u2019m 34."]
    await say(m, "I\u2019m 35.")
    assert await current(m) == ["I\u2019m 35."]


# -- more ways of saying a change -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "change", "after"),
    [
        ("I live in Paris.", "I moved from Paris to Rome.", "I live in Rome."),
        ("I work at Acme.", "I love my job at Google.", "I work at Google."),
    ],
)
async def test_a_change_said_with_what_it_replaces(before: str, change: str, after: str) -> None:
    m = memory()
    await say(m, before, change)
    assert await current(m) == [after]


async def test_a_move_that_did_not_happen_is_taken_back() -> None:
    m = memory()
    await say(m, "I moved to Rome.", "I didn't move to Rome after all.")
    assert "I live in Rome." not in await current(m)


async def test_quitting_the_job_one_loved_is_no_new_job() -> None:
    m = memory()
    await say(m, "I work at Google.", "I quit my job at Google.")
    assert await current(m) == []  # the job is retracted, not set again
