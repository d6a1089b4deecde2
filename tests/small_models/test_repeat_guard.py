"""The repeat guard: an answer that copies the user's message, or an earlier answer, is asked
again; in a stream as well as whole (issue 37: the chat echoed "Hello! How are you today?")."""

from __future__ import annotations

from goagent_py.agent import Agent
from goagent_py.events import MessageDelta
from goagent_py.messages import Message, assistant_message, user_message
from goagent_py.provider import CompletionRequest, StreamDone, StreamingProvider, TextDelta
from goagent_py.small_models.context_filters import inline_memories
from goagent_py.small_models.repeat_guard import (
    DEFAULT_EXAMPLES,
    avoid_repeats,
    copies_message,
)
from goagent_py.testing import ScriptedProvider, tool_call_response


def _request(*messages: Message) -> CompletionRequest:
    return CompletionRequest(model="m", messages=list(messages))


def test_an_answer_that_adds_nothing_to_the_message_is_a_copy() -> None:
    message = "Hello! How are you today?"
    assert copies_message("Hello!  How are you today?", message)
    assert copies_message("How are you today?", message)  # a piece of it, word for word
    assert copies_message("hello", message)
    assert not copies_message("Hello! I'm fine, thanks. How can I help?", message)
    assert not copies_message("Hell", message)  # words, not characters
    assert not copies_message("", message)


async def test_an_echo_of_the_users_message_is_asked_again_with_example_exchanges() -> None:
    inner = ScriptedProvider("Hello! How are you today?", "I'm well, thank you! How can I help?")
    guard = avoid_repeats(inner)
    response = await guard.complete(_request(user_message("Hello! How are you today?")))
    assert response.message.text == "I'm well, thank you! How can I help?"
    assert guard.echoes == 1
    retried = [m.text for m in inner.requests[1].messages]
    examples = [text for exchange in DEFAULT_EXAMPLES for text in exchange]
    assert retried == [*examples, "Hello! How are you today?"]


async def test_an_echo_asked_twice_is_replaced_by_the_fallback() -> None:
    inner = ScriptedProvider("Good morning!", "Good morning!")
    guard = avoid_repeats(inner, fallback="Hello! How can I help?")
    response = await guard.complete(_request(user_message("Good morning!")))
    assert response.message.text == "Hello! How can I help?"
    assert len(inner.requests) == 2


async def test_an_answer_that_adds_to_a_greeting_passes_unasked() -> None:
    inner = ScriptedProvider("Hello! Nice to meet you. What can I do for you?")
    guard = avoid_repeats(inner)
    response = await guard.complete(_request(user_message("Hello!")))
    assert response.message.text.startswith("Hello! Nice to meet you.")
    assert len(inner.requests) == 1


async def test_the_question_counts_not_the_memories_quoted_before_it() -> None:
    # A recalled statement said back is what answers the question: not an echo.
    [asked] = inline_memories([user_message("Where do I live?")], ["I live in Lisbon."])
    inner = ScriptedProvider("I live in Lisbon.")
    guard = avoid_repeats(inner)
    assert (await guard.complete(_request(asked))).message.text == "I live in Lisbon."
    assert len(inner.requests) == 1


async def test_a_tool_call_is_never_a_copy() -> None:
    inner = ScriptedProvider(tool_call_response(("calculator", {"expression": "6 * 7"})))
    guard = avoid_repeats(inner)
    response = await guard.complete(_request(user_message("6 * 7")))
    assert response.message.tool_calls
    assert len(inner.requests) == 1


async def _streamed(guard: StreamingProvider, request: CompletionRequest) -> tuple[list[str], str]:
    deltas: list[str] = []
    final = ""
    async for event in guard.stream(request):
        if isinstance(event, TextDelta):
            deltas.append(event.text)
        elif isinstance(event, StreamDone):
            final = event.response.message.text
    return deltas, final


async def test_a_stream_goes_through_the_guard_and_never_shows_the_echo() -> None:
    inner = ScriptedProvider("Hello! How are you today?", "Fine, thanks! And you?")
    guard = avoid_repeats(inner)
    assert isinstance(guard, StreamingProvider)
    deltas, final = await _streamed(guard, _request(user_message("Hello! How are you today?")))
    assert "".join(deltas) == final == "Fine, thanks! And you?"
    assert guard.echoes == 1


async def test_a_stream_that_is_no_copy_still_streams_in_pieces() -> None:
    inner = ScriptedProvider("Hello there, friend! What shall we talk about?")
    guard = avoid_repeats(inner)
    deltas, final = await _streamed(guard, _request(user_message("Hello! How are you today?")))
    assert final == "Hello there, friend! What shall we talk about?"
    assert "".join(deltas) == final
    assert len(deltas) > 2  # held only while it could still be a copy, then passed through


async def test_a_stream_that_repeats_an_earlier_answer_is_asked_again() -> None:
    history = [
        user_message("what time is it"),
        assistant_message("It is 12:04."),
        user_message("thanks!"),
    ]
    inner = ScriptedProvider("It is 12:04.", "You're welcome!")
    guard = avoid_repeats(inner)
    deltas, final = await _streamed(guard, _request(*history))
    assert "".join(deltas) == final == "You're welcome!"
    assert guard.repeats == 1


async def test_a_streaming_agent_gets_the_guarded_answer() -> None:
    # Before issue 37 the guard looked like a streaming provider (its __getattr__ handed out the
    # wrapped provider's stream), so a streaming run went round it.
    inner = ScriptedProvider("How are you?", "I'm doing well, thank you.")
    agent = Agent(provider=avoid_repeats(inner), model="m")
    texts = []
    async for event in agent.stream("How are you?"):
        if isinstance(event, MessageDelta) and event.kind == "text":
            texts.append(event.delta)
    assert "".join(texts) == "I'm doing well, thank you."
