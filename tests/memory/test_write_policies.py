"""user_statements: each first-person clause of a statement is stored as its own memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from goagent_py import Agent
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.memory.vector.sqlite_vec import SqliteVecStore
from goagent_py.memory.write_policies import statement_clauses, user_statements
from goagent_py.messages import (
    ImageBlock,
    Message,
    Role,
    TextBlock,
    assistant_message,
    user_message,
)
from goagent_py.testing import FakeEmbedder, ScriptedProvider

ANSWER = assistant_message("Nice to meet you, Meera!")  # an invented reply: never stored
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def stored(text: str, **kwargs: bool) -> list[str] | None:
    chosen = user_statements(**kwargs)(user_message(text), ANSWER)
    return None if chosen is None else [m.text for m in chosen]


@pytest.mark.parametrize(
    ("text", "clauses"),
    [
        (
            "Hello! My name is Priya and I live in Lisbon.",
            ["Hello!", "My name is Priya.", "I live in Lisbon."],
        ),
        (
            "I live in Lisbon and I'm a nurse, and my dog is called Biscuit.",
            ["I live in Lisbon.", "I'm a nurse.", "My dog is called Biscuit."],
        ),
        ("I was tired, but we won the match!", ["I was tired!", "We won the match!"]),
        ("I live in Lisbon. Where do you live?", ["I live in Lisbon.", "Where do you live?"]),
        ("I moved here and I like it, right?", ["I moved here.", "I like it, right?"]),
        # "and" before anything but a first-person subject does not cut.
        ("I like salt and pepper.", ["I like salt and pepper."]),
        ("I was born in Goa, in India.", ["I was born in Goa, in India."]),
        # A compound subject ("My brother and I") is not a clause.
        ("My brother and I play chess.", ["My brother and I play chess."]),
        # No sentence end after a title or an abbreviation, nor inside a number.
        ("I work with Dr. Rao at St. Mary's.", ["I work with Dr. Rao at St. Mary's."]),
        # A sentence without a final stop gives clauses without one.
        ("My height is 1.62 m and my weight 55 kg", ["My height is 1.62 m", "My weight 55 kg"]),
        ("  ", []),
    ],
)
def test_statement_clauses(text: str, clauses: list[str]) -> None:
    assert statement_clauses(text) == clauses


def test_each_first_person_clause_is_stored_and_the_greeting_dropped() -> None:
    told = "Hello! My name is Priya and I live in Lisbon."
    assert stored(told, about_user=True) == ["My name is Priya.", "I live in Lisbon."]
    assert stored(told) == ["My name is Priya.", "I live in Lisbon."]  # "Hello!": 1 word
    assert stored(told, split=False) == [told]
    assert stored("Good morning, nice to meet you.", about_user=True) is None


def test_the_statements_of_a_message_that_asks_are_kept() -> None:
    mixed = "I live in Lisbon. Where do you live?"
    assert stored(mixed) == ["I live in Lisbon."]
    assert stored(mixed, questions=True) == ["I live in Lisbon.", "Where do you live?"]
    assert stored(mixed, split=False) is None  # the whole message ends in "?"
    assert stored("Where do I live? And where do you live?") is None
    assert stored("I moved to Porto and I like it, right?") == ["I moved to Porto."]


def test_clauses_are_user_messages_with_the_original_metadata() -> None:
    told = Message(Role.USER, [TextBlock("My name is Priya and I live in Lisbon.")])
    told.metadata["channel"] = "sms"
    chosen = user_statements()(told, ANSWER)
    assert chosen is not None
    assert [(m.role, m.metadata) for m in chosen] == [(Role.USER, {"channel": "sms"})] * 2
    chosen[0].metadata["x"] = 1
    assert told.metadata == {"channel": "sms"}  # each clause has its own copy


def test_one_clause_or_non_text_content_is_stored_whole() -> None:
    policy = user_statements()
    one = user_message("My dog is called Biscuit.")
    assert policy(one, ANSWER) == [one]
    assert policy(one, ANSWER)[0] is one  # type: ignore[index]
    with_image = Message(
        Role.USER, [TextBlock("My cat is Tom and I love him."), ImageBlock(PNG, "image/png")]
    )
    assert policy(with_image, ANSWER) == [with_image]


@pytest.mark.needs_extra("vector")
async def test_an_agent_stores_the_clauses_and_recalls_the_one_asked_about(
    tmp_path: Path,
) -> None:
    async with SqliteVecStore(tmp_path / "memory.db", dimensions=64) as store:
        memory = LongTermMemory(FakeEmbedder(64), store, top_k=1)
        provider = ScriptedProvider("Nice to meet you!")
        agent = Agent(
            provider=provider, model="m", long_term_memory=memory, write_policy=user_statements()
        )
        await agent.run("Hello! My name is Priya and I live in Lisbon.")
        assert await store.count() == 2
        best = await memory.retrieve([TextBlock("where do I live")])
        assert [s.message.text for s in best] == ["I live in Lisbon."]


async def test_without_split_the_message_is_one_memory() -> None:
    store = InMemoryVectorStore()
    memory = LongTermMemory(FakeEmbedder(64), store)
    agent = Agent(
        provider=ScriptedProvider("Hi!"),
        model="m",
        long_term_memory=memory,
        write_policy=user_statements(split=False),
    )
    await agent.run("Hello! My name is Priya and I live in Lisbon.")
    recalled = await memory.retrieve([TextBlock("Priya")], top_k=5)
    assert [s.message.text for s in recalled] == ["Hello! My name is Priya and I live in Lisbon."]


def test_about_user_keeps_retractions_for_the_decider() -> None:
    policy = user_statements(about_user=True)
    answer = assistant_message("ok")
    for text in ["That's no longer true.", "Scratch that."]:
        kept = policy(user_message(text), answer)
        assert kept is not None
        assert [m.text for m in kept] == [text]
    assert policy(user_message("The weather is nice."), answer) is None
