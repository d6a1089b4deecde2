"""Tool selection by embedding similarity, direct tool answers, context filters, write policies.

Fast tests use the word-hashing ``FakeEmbedder`` (texts sharing words score higher); the slow
one checks the documented threshold against the real local MiniLM embedder.
"""

from __future__ import annotations

import pytest

from goagent_py import Agent, tool
from goagent_py.errors import ConfigurationError
from goagent_py.memory.write_policies import is_statement, user_statements
from goagent_py.messages import Message, Role, TextBlock, ToolCall, assistant_message, user_message
from goagent_py.provider import CompletionRequest, StreamDone, StreamingProvider, TextDelta
from goagent_py.small_models.context_filters import (
    drop_earlier_tool_exchanges,
    drop_failed_tool_exchanges,
)
from goagent_py.small_models.tool_answers import answer_from_tools, direct_answer
from goagent_py.small_models.tool_selection import (
    limit_tool_rounds,
    required_parameters_only,
    select_tools,
    trailing_tool_rounds,
)
from goagent_py.testing import FakeEmbedder, ScriptedProvider, tool_call_response
from goagent_py.tools import ToolDefinition


@tool
def weather(city: str, units: str = "metric") -> str:
    """Weather forecast for a city.

    Args:
        city: the city.
        units: metric or imperial.
    """
    return f"sunny in {city}"


@tool
def stock_price(symbol: str) -> str:
    """Stock price quote for a ticker symbol.

    Args:
        symbol: the ticker.
    """
    return "42"


@tool
def remember_note(text: str) -> str:
    """Save a note.

    Args:
        text: the note.
    """
    return "saved"


TOOLS = [weather.definition, stock_price.definition, remember_note.definition]


def _request(text: str, tools: list[ToolDefinition] = TOOLS) -> CompletionRequest:
    return CompletionRequest(model="m", messages=[user_message(text)], tools=tools)


def _offered(provider: ScriptedProvider) -> list[str]:
    return [t.name for t in provider.requests[-1].tools]


async def test_only_the_relevant_tool_is_offered() -> None:
    inner = ScriptedProvider("a", "b")
    selector = select_tools(inner, FakeEmbedder(64), top_k=1, threshold=0.2)
    await selector.complete(_request("what is the weather forecast for Lisbon"))
    assert _offered(inner) == ["weather"]
    await selector.complete(_request("stock price quote for ACME ticker symbol"))
    assert _offered(inner) == ["stock_price"]
    assert [(s.name, s.offered) for s in selector.last_selection] == [
        ("weather", False),
        ("stock_price", True),
        ("remember_note", False),
    ]


async def test_no_tool_clears_the_threshold_so_none_is_offered() -> None:
    inner = ScriptedProvider("hello")
    selector = select_tools(inner, FakeEmbedder(64), threshold=0.5)
    await selector.complete(_request("hi there how are you"))
    assert _offered(inner) == []


async def test_always_tools_are_offered_whatever_their_score() -> None:
    inner = ScriptedProvider("ok")
    selector = select_tools(inner, FakeEmbedder(64), threshold=0.9, always=["remember_note"])
    await selector.complete(_request("zzz qqq"))
    assert _offered(inner) == ["remember_note"]


async def test_examples_match_messages_the_description_does_not() -> None:
    inner = ScriptedProvider("a", "b")
    plain = select_tools(inner, FakeEmbedder(64), top_k=1, threshold=0.6)
    await plain.complete(_request("is it going to rain tomorrow"))
    assert _offered(inner) == []
    examples = {"weather": ["is it going to rain tomorrow?"]}
    with_examples = select_tools(inner, FakeEmbedder(64), top_k=1, threshold=0.6, examples=examples)
    await with_examples.complete(_request("is it going to rain tomorrow"))
    assert _offered(inner) == ["weather"]


async def test_tool_texts_are_embedded_once_and_queries_cached() -> None:
    embedder = FakeEmbedder(64)
    inner = ScriptedProvider("a", "b", "c")
    selector = select_tools(inner, embedder, threshold=None)
    for _ in range(3):
        await selector.complete(_request("weather in Paris"))
    # One batch per tool (3) plus one for the query, whatever the number of requests.
    assert embedder.batch_calls == 4


async def test_the_wrapper_streams_when_the_provider_does_and_forwards_attributes() -> None:
    inner = ScriptedProvider("streamed answer")
    selector = select_tools(inner, FakeEmbedder(64))
    assert isinstance(selector, StreamingProvider)
    events = [e async for e in selector.stream(_request("weather in Paris"))]
    assert isinstance(events[-1], StreamDone)
    assert selector.remaining == 0  # ScriptedProvider's own attribute, through the wrapper


def test_required_parameters_only_drops_optional_ones() -> None:
    narrowed = required_parameters_only(weather.definition)
    assert list(narrowed.parameters["properties"]) == ["city"]
    assert narrowed.parameters["required"] == ["city"]
    assert required_parameters_only(stock_price.definition) is stock_price.definition


@pytest.mark.parametrize(
    "kwargs",
    [{"top_k": -1}, {"threshold": 2.0}],
)
def test_bad_settings_are_configuration_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        select_tools(ScriptedProvider(), FakeEmbedder(), **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        select_tools(object(), FakeEmbedder())  # type: ignore[arg-type]


async def test_in_an_agent_chit_chat_gets_no_tools_and_a_request_its_tool() -> None:
    inner = ScriptedProvider(
        "Hello!", tool_call_response(("weather", {"city": "Lisbon"})), "Sunny."
    )
    selector = select_tools(inner, FakeEmbedder(64), top_k=1, threshold=0.3)
    agent = Agent(provider=selector, model="m", tools=[weather, stock_price, remember_note])
    assert (await agent.run("good morning")).text == "Hello!"
    assert inner.requests[0].tools == []
    assert (await agent.run("weather forecast for Lisbon")).text == "Sunny."
    assert [t.name for t in inner.requests[1].tools] == ["weather"]


# -- limit_tool_rounds ------------------------------------------------------------------------


def _round(result: str, *, error: bool = False, call_id: str = "c1") -> list[Message]:
    call = ToolCall(call_id, "calculator", {"expression": "2+3"})
    return [
        Message(Role.ASSISTANT, [], tool_calls=[call]),
        Message(Role.TOOL, [TextBlock(result)], tool_call_id=call_id, is_error=error),
    ]


async def test_limit_tool_rounds_offers_no_tools_after_the_limit() -> None:
    inner = ScriptedProvider("a", "b")
    limited = limit_tool_rounds(inner, 1)
    await limited.complete(_request("weather"))
    assert len(inner.requests[0].tools) == 3
    request = CompletionRequest(model="m", messages=[user_message("x"), *_round("5")], tools=TOOLS)
    assert trailing_tool_rounds(request.messages) == 1
    await limited.complete(request)
    assert inner.requests[1].tools == []
    with pytest.raises(ConfigurationError):
        limit_tool_rounds(inner, 0)


# -- answer_from_tools ------------------------------------------------------------------------


async def test_a_templated_round_is_answered_without_the_model() -> None:
    inner = ScriptedProvider("the model's answer")
    provider = answer_from_tools(inner, {"calculator": "{expression} = {result}"})
    messages = [user_message("2+3?"), *_round("5")]
    response = await provider.complete(CompletionRequest(model="m", messages=messages))
    assert response.message.text == "2+3 = 5"
    assert inner.requests == []
    events = [e async for e in provider.stream(CompletionRequest(model="m", messages=messages))]  # type: ignore[attr-defined]
    assert [type(e) for e in events] == [TextDelta, StreamDone]
    # Not a tool round: the model answers.
    plain = await provider.complete(CompletionRequest(model="m", messages=[user_message("hi")]))
    assert plain.message.text == "the model's answer"


def test_errors_and_untemplated_tools() -> None:
    templates = {"calculator": "{expression} = {result}"}
    failed = [user_message("?"), *_round("Error: bad expression", error=True)]
    assert direct_answer(failed, templates) == "Sorry, calculator failed: bad expression"
    assert direct_answer(failed, templates, error_template=None) is None
    assert direct_answer([user_message("?"), *_round("5")], {}) is None
    assert direct_answer([user_message("?")], templates) is None


async def test_in_an_agent_the_tool_result_is_the_answer() -> None:
    @tool
    def calculator(expression: str) -> str:
        """Evaluate arithmetic.

        Args:
            expression: the expression.
        """
        return "395"

    inner = ScriptedProvider(tool_call_response(("calculator", {"expression": "17 * 23 + 4"})))
    agent = Agent(
        provider=answer_from_tools(inner, {"calculator": "{expression} = {result}"}),
        model="m",
        tools=[calculator],
    )
    assert (await agent.run("What is 17 * 23 + 4?")).text == "17 * 23 + 4 = 395"
    assert len(inner.requests) == 1


# -- drop_failed_tool_exchanges ---------------------------------------------------------------


def test_failed_exchanges_of_earlier_turns_are_dropped_with_their_answer() -> None:
    messages = [
        user_message("first"),
        *_round("Error: boom", error=True, call_id="a"),
        assistant_message("a confused essay about the error"),
        user_message("second"),
        *_round("5", call_id="b"),
        assistant_message("5"),
        user_message("third"),
        *_round("Error: again", error=True, call_id="c"),
    ]
    kept = drop_failed_tool_exchanges(messages)
    texts = [(m.role, m.text) for m in kept]
    assert (Role.ASSISTANT, "a confused essay about the error") not in texts
    assert [m.tool_call_id for m in kept if m.role == Role.TOOL] == ["b", "c"]
    assert [m.text for m in kept if m.role == Role.USER] == ["first", "second", "third"]
    assert kept[-1].is_error  # the current turn is kept whole
    assert drop_failed_tool_exchanges(messages[4:7]) == messages[4:7]


# -- user_statements --------------------------------------------------------------------------


def test_user_statements_store_the_user_never_the_reply() -> None:
    policy = user_statements()
    answer = assistant_message("You live in Paris.")
    told = user_message("Hello! My name is Priya and I live in Lisbon.")
    assert [m.text for m in policy(told, answer) or []] == [
        "My name is Priya.",
        "I live in Lisbon.",
    ]
    assert user_statements(split=False)(told, answer) == [told]
    assert policy(user_message("Where do I live?"), answer) is None
    assert policy(user_message("thanks!"), answer) is None
    asked = user_message("Where do I live?")
    assert user_statements(questions=True)(asked, answer) == [asked]
    assert is_statement("My cat is called Archimedes.")
    with pytest.raises(ConfigurationError):
        user_statements(min_words=-1)


# -- the real embedder (slow) -----------------------------------------------------------------


@pytest.mark.slow
async def test_the_default_threshold_separates_requests_from_chit_chat_on_minilm() -> None:
    pytest.importorskip("sentence_transformers")
    from goagent_py.cli._setup import SELECTION_THRESHOLD, TOOL_EXAMPLES
    from goagent_py.cli._tools import calculator, current_time
    from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder

    selector = select_tools(
        ScriptedProvider(),
        SentenceTransformerEmbedder(),
        top_k=1,
        threshold=SELECTION_THRESHOLD,
        examples=TOOL_EXAMPLES,
    )
    tools = [calculator.definition, current_time.definition]
    expected = {
        "What is 17 * 23 + 4?": ["calculator"],
        "What time is it now?": ["current_time"],
        "Hello! My name is Priya and I live in Lisbon.": [],
        "Where do I live?": [],
    }
    for text, names in expected.items():
        chosen = await selector.select(_request(text, tools))
        assert [t.name for t in chosen] == names, (text, selector.last_selection)


def test_earlier_tool_exchanges_are_all_dropped_but_their_answers_stay() -> None:
    messages = [
        user_message("what time is it"),
        *_round("12:00", call_id="a"),
        assistant_message("It is 12:00."),
        user_message("oops"),
        *_round("Error: boom", error=True, call_id="b"),
        assistant_message("an essay"),
        user_message("hello"),
    ]
    kept = drop_earlier_tool_exchanges(messages)
    assert [(m.role, m.text) for m in kept] == [
        (Role.USER, "what time is it"),
        (Role.ASSISTANT, "It is 12:00."),
        (Role.USER, "oops"),
        (Role.USER, "hello"),
    ]


# -- avoid_repeats ----------------------------------------------------------------------------


async def test_a_verbatim_copy_is_asked_again_without_earlier_turns() -> None:
    from goagent_py.small_models.repeat_guard import avoid_repeats, is_repeat

    recalled = Message(
        Role.USER, [TextBlock("<recalled_memories>...")], metadata={"goagent.recall": True}
    )
    history = [
        recalled,
        user_message("what time is it"),
        assistant_message("It is 12:04."),
        user_message("thanks!"),
    ]
    inner = ScriptedProvider("It is  12:04.", "You're welcome!")
    guard = avoid_repeats(inner)
    response = await guard.complete(CompletionRequest(model="m", messages=history))
    assert response.message.text == "You're welcome!"
    assert guard.repeats == 1
    assert [m.text for m in inner.requests[1].messages] == ["<recalled_memories>...", "thanks!"]
    assert is_repeat("it is 12:04.", history)
    assert not is_repeat("It is 12:05.", history)


async def test_a_second_copy_keeps_the_first_answer_and_new_answers_pass() -> None:
    from goagent_py.small_models.repeat_guard import avoid_repeats

    history = [user_message("a"), assistant_message("same"), user_message("b")]
    inner = ScriptedProvider("same", "same", "new")
    guard = avoid_repeats(inner)
    assert (
        await guard.complete(CompletionRequest(model="m", messages=history))
    ).message.text == "same"
    assert (
        await guard.complete(CompletionRequest(model="m", messages=history))
    ).message.text == "new"
    assert len(inner.requests) == 3


def test_recalled_memories_are_quoted_before_the_question() -> None:
    from goagent_py.small_models.context_filters import inline_memories

    block = Message(
        Role.USER, [TextBlock("<recalled_memories>")], metadata={"goagent.recall": True}
    )
    messages = [
        block,
        user_message("hi"),
        assistant_message("hello"),
        user_message("Where do I live?"),
    ]
    sent = inline_memories(messages, ["I live in Lisbon."], style="quoted")
    assert [m.text for m in sent] == [
        "hi",
        "hello",
        'Earlier I told you: "I live in Lisbon."\nWhere do I live?',
    ]
    assert messages[-1].text == "Where do I live?"  # the input is left untouched
    assert [m.text for m in inline_memories(messages, [])] == ["hi", "hello", "Where do I live?"]
    assert Role.USER == "user"


def test_about_user_keeps_first_person_statements_only() -> None:
    policy = user_statements(about_user=True)
    answer = assistant_message("ok")
    assert policy(user_message("Calculate 250 - 37"), answer) is None
    told = user_message("My dog is called Biscuit.")
    assert policy(told, answer) == [told]
    assert is_statement("I was born in Goa.", about_user=True)
    assert not is_statement("The sky is blue today.", about_user=True)
