"""Recalled facts said back to the user before the question, for small models."""

from __future__ import annotations

import pytest

from goagent_py.errors import ConfigurationError
from goagent_py.messages import (
    ImageBlock,
    Message,
    Role,
    TextBlock,
    assistant_message,
    user_message,
)
from goagent_py.provider import CompletionRequest
from goagent_py.small_models.context_filters import (
    INLINED_MEMORIES_KEY,
    inline_memories,
    second_person,
)
from goagent_py.small_models.tool_selection import ToolSelectingProvider, select_tools
from goagent_py.testing import FakeEmbedder, ScriptedProvider
from goagent_py.tools import ToolDefinition

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


# -- tool selection defers to a recalled statement ---------------------------------------------


def _tools() -> list[ToolDefinition]:
    from goagent_py.cli._tools import calculator, current_time

    return [calculator.definition, current_time.definition]


async def _offered(selector: ToolSelectingProvider, question: str, memory: str | None) -> list[str]:
    messages = [user_message(question)]
    if memory is not None:
        messages = inline_memories(messages, [memory])
    chosen = await selector.select(CompletionRequest(model="m", messages=messages, tools=_tools()))
    return [t.name for t in chosen]


async def test_a_question_a_recalled_statement_answers_gets_no_tool() -> None:
    selector = select_tools(ScriptedProvider(), FakeEmbedder(64), top_k=1, threshold=0.1)
    birthday = "My birthday is the current date in March."  # shares words with the clock's text
    assert await _offered(selector, "what is the current date", None) == ["current_time"]
    assert await _offered(selector, "what is the current date", birthday) == []
    assert INLINED_MEMORIES_KEY not in user_message("x").metadata
    plain = select_tools(
        ScriptedProvider(), FakeEmbedder(64), top_k=1, threshold=0.1, defer_to_memory=False
    )
    assert await _offered(plain, "what is the current date", birthday) == ["current_time"]


@pytest.mark.slow  # loads the MiniLM embedder
async def test_on_minilm_the_birthday_is_remembered_and_the_time_still_asked() -> None:
    pytest.importorskip("sentence_transformers")
    from goagent_py.cli._setup import SELECTION_THRESHOLD, TOOL_EXAMPLES
    from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder

    selector = select_tools(
        ScriptedProvider(),
        SentenceTransformerEmbedder(),
        top_k=1,
        threshold=SELECTION_THRESHOLD,
        examples=TOOL_EXAMPLES,
    )
    birthday = "My birthday is on the 3rd of March."
    assert await _offered(selector, "When is my birthday?", birthday) == []
    wake = "I wake up at seven every morning."
    assert await _offered(selector, "What time is it now?", wake) == ["current_time"]
    assert await _offered(selector, "What is 17 * 23 + 4?", "I am 17 years old.") == ["calculator"]
