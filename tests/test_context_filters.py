"""Recalled facts said back to the user before the question, for small models."""

from __future__ import annotations

import pytest

from goagent_py.context_filters import inline_memories, second_person
from goagent_py.errors import ConfigurationError
from goagent_py.messages import (
    ImageBlock,
    Message,
    Role,
    TextBlock,
    assistant_message,
    user_message,
)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


@pytest.mark.parametrize(
    ("said", "back"),
    [
        (
            "Hello! My name is Priya and I live in Lisbon.",
            "Your name is Priya and you live in Lisbon.",
        ),
        ("I was born in Goa, in India.", "You were born in Goa, in India."),
        ("I am allergic to peanuts.", "You are allergic to peanuts."),
        ("I'm a nurse and my dog likes me.", "You're a nurse and your dog likes you."),
        ("I\u2019ve got two cats.", "You've got two cats."),
        ("Hi there, we moved to Porto last year.", "You moved to Porto last year."),
        ("My favourite food is mango curry.", "Your favourite food is mango curry."),
        ("The train to Ipswich leaves at noon.", "The train to Ipswich leaves at noon."),
        ("Hello!", "Hello!"),  # nothing after the greeting: left as it is
    ],
)
def test_a_statement_is_said_back_in_the_second_person(said: str, back: str) -> None:
    assert second_person(said) == back


def test_facts_are_said_back_before_the_question_and_the_recall_block_goes() -> None:
    block = Message(
        Role.USER, [TextBlock("<recalled_memories>")], metadata={"goagent.recall": True}
    )
    messages = [
        block,
        user_message("hi"),
        assistant_message("hello"),
        user_message("Where do I live?"),
    ]
    sent = inline_memories(messages, ["I live in Lisbon.", "  "])
    assert [m.text for m in sent] == ["hi", "hello", "You live in Lisbon.\nWhere do I live?"]
    assert sent[-1].role == Role.USER
    assert messages[-1].text == "Where do I live?"  # the input is left untouched


def test_nothing_changes_without_memories_or_for_a_question_with_an_image() -> None:
    messages = [user_message("Where do I live?")]
    assert [m.text for m in inline_memories(messages, [])] == ["Where do I live?"]
    image = Message(Role.USER, [TextBlock("Where is this?"), ImageBlock(PNG, "image/png")])
    assert inline_memories([image], ["I live in Lisbon."]) == [image]


def test_an_unknown_style_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="style"):
        inline_memories([user_message("hi")], ["I live in Lisbon."], style="shouted")
