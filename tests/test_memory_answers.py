"""answer_from_memory: a question about the user answered from their own recalled statement."""

from __future__ import annotations

from typing import Any

from goagent_py.messages import user_message
from goagent_py.provider import CompletionRequest
from goagent_py.small_models.context_filters import inline_memories
from goagent_py.small_models.tool_answers import answer_from_memory, answer_from_tools
from goagent_py.testing import FunctionProvider
from goagent_py.tools import ToolDefinition


def _asked(question: str, *memories: str) -> list[Any]:
    return inline_memories([user_message(question)], list(memories))


def test_a_question_about_the_user_is_answered_from_the_statement_said_back() -> None:
    assert answer_from_memory(_asked("Where was I born?", "I was born in Goa, in India.")) == (
        "You were born in Goa, in India."
    )
    assert answer_from_memory(_asked("What is my name?", "My name is Priya.")) == (
        "Your name is Priya."
    )
    assert answer_from_memory(_asked("What's my sister called?", "My sister is called Meera.")) == (
        "Your sister is called Meera."
    )


def test_the_model_answers_when_the_statement_does_not_cover_the_question() -> None:
    # "colour" is not in the statement: it is about something else.
    assert (
        answer_from_memory(_asked("What is my favourite colour?", "My favourite food is sushi."))
        is None
    )
    # Not a question about the user, or not a question at all.
    assert answer_from_memory(_asked("What is the capital of Goa?", "I was born in Goa.")) is None
    assert answer_from_memory(_asked("Tell me where I was born", "I was born in Goa.")) is None
    # Nothing was recalled (no inlined memories on the message).
    assert answer_from_memory([user_message("Where was I born?")]) is None


async def test_the_wrapper_answers_without_the_model_only_when_asked_to() -> None:
    calls: list[CompletionRequest] = []

    def model(request: CompletionRequest) -> str:
        calls.append(request)
        return "You were born in India."

    clock = ToolDefinition("current_time", "The time.", {"type": "object", "properties": {}})
    messages = _asked("Where was I born?", "I was born in Goa, in India.")
    request = CompletionRequest(model="tiny", messages=messages, tools=[clock])
    provider = answer_from_tools(FunctionProvider(model), {}, memory_answers=True)
    assert (await provider.complete(request)).message.text == "You were born in Goa, in India."
    assert calls == []
    other = CompletionRequest(model="tiny", messages=_asked("What time is it?", "I was born."))
    assert (await provider.complete(other)).message.text == "You were born in India."
    plain = answer_from_tools(FunctionProvider(model), {})  # off by default
    assert (await plain.complete(request)).message.text == "You were born in India."
    assert len(calls) == 2


def test_a_replaced_fact_is_said_as_the_past_and_answers_a_question_about_it() -> None:
    from goagent_py.small_models.context_filters import used_to

    assert used_to("I live in Lisbon.") == "Before, I used to live in Lisbon."
    assert used_to("My name is Priya.") == "Before, my name used to be Priya."
    assert used_to("I'm 34.") == "Before, I used to be 34."
    assert used_to("The sky was blue.") == "Before: The sky was blue."
    asked = _asked("Where did I live before?", used_to("I live in Lisbon."))
    assert answer_from_memory(asked) == "Before, you used to live in Lisbon."


def test_the_chat_says_back_the_replaced_fact_only_for_a_question_about_the_past() -> None:
    from goagent_py.cli._setup import small_model_context
    from goagent_py.memory.records import STATE_KEY
    from goagent_py.messages import Message, Role, ScoredMessage, TextBlock

    def fact(text: str, state: str) -> ScoredMessage:
        return ScoredMessage(
            Message(Role.USER, [TextBlock(text)], metadata={STATE_KEY: state}), 0.5
        )

    recalled = [fact("I live in Porto.", "current"), fact("I live in Lisbon.", "superseded")]
    transform = small_model_context(lambda: recalled)
    now = transform([user_message("Where do I live?")])
    assert now[-1].text == "You live in Porto.\nWhere do I live?"
    before = transform([user_message("Where did I live before?")])
    assert before[-1].text == "Before, you used to live in Lisbon.\nWhere did I live before?"
