"""OllamaProvider and OllamaEmbedder against Ollama's native wire format.

Fixtures in tests/fixtures/ollama (provenance in its README.md); HTTP through httpx.MockTransport.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from goagent_py.errors import (
    ConfigurationError,
    NoEmbeddableContentError,
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
    ThinkingBlock,
    ToolCall,
    user_message,
)
from goagent_py.provider import (
    CompletionRequest,
    StreamDone,
    StreamEvent,
    StreamingProvider,
    TextDelta,
    ThinkingConfig,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
)
from goagent_py.providers._http import INVALID_ARGUMENTS_KEY
from goagent_py.providers.ollama import (
    OllamaEmbedder,
    OllamaProvider,
    build_chat_request,
    ollama_reachable,
    parse_chat_response,
)
from goagent_py.tools import ToolDefinition

FIXTURES = Path(__file__).parent.parent / "fixtures" / "ollama"

TEMPERATURE_TOOL = ToolDefinition(
    "get_temperature",
    "Get the current temperature for a city",
    {
        "type": "object",
        "required": ["city"],
        "properties": {"city": {"type": "string", "description": "The name of the city"}},
    },
)


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def ndjson(name: str) -> httpx.Response:
    return httpx.Response(
        200,
        content=(FIXTURES / name).read_bytes(),
        headers={"content-type": "application/x-ndjson"},
    )


class Recorder:
    """A MockTransport handler: answers from a queue and keeps every request."""

    def __init__(self, *responses: httpx.Response | Callable[[httpx.Request], httpx.Response]):
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.responses.pop(0)
        return answer(request) if callable(answer) else answer

    @property
    def body(self) -> Any:
        return json.loads(self.requests[-1].content)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


def provider(recorder: Recorder, **kwargs: Any) -> OllamaProvider:
    return OllamaProvider(http_client=recorder.client(), **kwargs)


# -- request bodies ----------------------------------------------------------------------------


def test_plain_text_and_system_prompt() -> None:
    body = build_chat_request(
        CompletionRequest(model="qwen3", system_prompt="Be brief.", messages=[user_message("hi")])
    )
    assert body == {
        "model": "qwen3",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
        ],
        "stream": False,
    }


def test_tools_images_and_think_match_the_fixture() -> None:
    expected = fixture("chat_request_tools_images_think.json")
    png = base64.b64decode(expected["messages"][0]["images"][0])
    request = CompletionRequest(
        model="qwen3",
        messages=[
            Message(
                Role.USER,
                [TextBlock("What is the temperature in New York?"), ImageBlock(png, "image/png")],
            )
        ],
        tools=[TEMPERATURE_TOOL],
        thinking=ThinkingConfig(),
    )
    body = build_chat_request(request)
    assert body["model"] == expected["model"]
    assert body["messages"] == expected["messages"]
    assert body["tools"] == expected["tools"]
    assert body["think"] is True
    assert body["stream"] is False
    assert body == expected


def test_think_takes_the_effort_level() -> None:
    request = CompletionRequest(
        model="gpt-oss", messages=[user_message("q")], thinking=ThinkingConfig(), effort="high"
    )
    assert build_chat_request(request)["think"] == "high"
    no_thinking = CompletionRequest(model="m", messages=[user_message("q")], effort="high")
    assert "think" not in build_chat_request(no_thinking)


def test_tool_results_carry_tool_name_and_id_like_the_fixture() -> None:
    expected = fixture("chat_request_tool_results.json")
    request = CompletionRequest(
        model="qwen3",
        messages=[
            user_message("What is the temperature in New York?"),
            Message(
                Role.ASSISTANT,
                [],
                tool_calls=[ToolCall("call_1", "get_temperature", {"city": "New York"})],
            ),
            Message(Role.TOOL, [TextBlock("22°C")], tool_call_id="call_1"),
        ],
    )
    body = build_chat_request(request)
    user, assistant, result = body["messages"]
    assert user == expected["messages"][0]
    # The documented fields, plus the id the docs omit (types.go: ToolCall.ID, Message.ToolCallID)
    assert assistant["role"] == "assistant"
    assert assistant["content"] == ""
    (call,) = assistant["tool_calls"]
    assert call["function"] == expected["messages"][1]["tool_calls"][0]["function"]
    assert call["type"] == "function"
    assert call["id"] == "call_1"
    assert result == {**expected["messages"][2], "tool_call_id": "call_1"}


def test_three_parallel_calls_and_an_error_result() -> None:
    calls = [ToolCall(f"c{i}", name, {"x": i}) for i, name in enumerate(["a", "b", "a"])]
    results = [
        Message(Role.TOOL, [TextBlock(f"r{i}")], tool_call_id=f"c{i}", is_error=i == 1)
        for i in range(3)
    ]
    request = CompletionRequest(
        model="m",
        messages=[user_message("go"), Message(Role.ASSISTANT, [], tool_calls=calls), *results],
    )
    messages = build_chat_request(request)["messages"]
    assert [c["function"]["index"] for c in messages[1]["tool_calls"]] == [0, 1, 2]
    assert [(m["role"], m["tool_name"], m["tool_call_id"], m["content"]) for m in messages[2:]] == [
        ("tool", "a", "c0", "r0"),
        ("tool", "b", "c1", "r1"),
        ("tool", "a", "c2", "r2"),
    ]


def test_thinking_goes_back_with_the_assistant_turn() -> None:
    request = CompletionRequest(
        model="m",
        messages=[
            user_message("q"),
            Message(Role.ASSISTANT, [ThinkingBlock("hmm"), TextBlock("answer")]),
        ],
    )
    assert build_chat_request(request)["messages"][1] == {
        "role": "assistant",
        "content": "answer",
        "thinking": "hmm",
    }


def test_options_keep_alive_and_max_tokens() -> None:
    request = CompletionRequest(model="", messages=[user_message("q")], max_tokens=64)
    body = build_chat_request(
        request, model="llama3.2", stream=True, keep_alive="10m", options={"temperature": 0}
    )
    assert body["model"] == "llama3.2"
    assert body["stream"] is True
    assert body["options"] == {"temperature": 0, "num_predict": 64}
    assert body["keep_alive"] == "10m"


def test_documents_are_refused_and_model_is_required() -> None:
    doc = Message(Role.USER, [DocumentBlock(b"%PDF-1.4", "application/pdf")])
    with pytest.raises(UnsupportedContentError) as info:
        build_chat_request(CompletionRequest(model="m", messages=[doc]))
    assert (info.value.content_type, info.value.provider) == ("document", "ollama")
    with pytest.raises(ConfigurationError, match="model not set"):
        build_chat_request(CompletionRequest(model="", messages=[user_message("q")]))


# -- sampling settings and extra_body ----------------------------------------------------------


def _reply() -> httpx.Response:
    return httpx.Response(200, json=fixture("chat_response_tool_calls_thinking.json"))


async def test_sampling_goes_into_options() -> None:
    recorder = Recorder(_reply(), _reply())
    p = provider(
        recorder,
        model="qwen3",
        options={"num_ctx": 8192},
        temperature=0.2,
        top_p=0.9,
        stop=["<|im_end|>", "\n\n"],
    )
    await p.complete(CompletionRequest(model="", messages=[user_message("hi")], max_tokens=64))
    assert recorder.body == {
        "model": "qwen3",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": False,
        "options": {
            "num_ctx": 8192,
            "temperature": 0.2,
            "top_p": 0.9,
            "stop": ["<|im_end|>", "\n\n"],
            "num_predict": 64,
        },
    }
    await provider(recorder, model="qwen3").complete(
        CompletionRequest(model="", messages=[user_message("hi")])
    )
    assert "options" not in recorder.body  # nothing set, nothing sent


def test_a_setting_given_twice_is_refused() -> None:
    with pytest.raises(ConfigurationError) as info:
        OllamaProvider(temperature=0.2, options={"temperature": 0.5})
    assert str(info.value) == (
        "ollama: temperature is given twice, as temperature=0.2 and as "
        "options['temperature']=0.5; keep one of them"
    )
    with pytest.raises(ConfigurationError, match=r"stop is given twice, as stop=\['x'\]"):
        OllamaProvider(stop=["x"], options={"stop": ["y"]})
    OllamaProvider(stop=[], options={"stop": ["y"]})  # an empty stop sets nothing


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"temperature": -1},
            "ollama: temperature must be >= 0, got -1; leave it None for the model's default",
        ),
        (
            {"top_p": 0.0},
            "ollama: top_p must be greater than 0 and at most 1, got 0.0; leave it None for the "
            "model's default",
        ),
        ({"stop": [""]}, "ollama: stop[0] must be a non-empty string, got ''"),
        (
            {"extra_body": {"options": {}}},
            "ollama: extra_body may not set 'options': pass options={...} (or temperature=, "
            "top_p=, stop=) to OllamaProvider",
        ),
        (
            {"extra_body": {"model": "x"}},
            "ollama: extra_body may not set 'model': pass model=... to OllamaProvider or use "
            "with_model(...)",
        ),
        (
            {"extra_body": {"messages": []}},
            "ollama: extra_body may not set 'messages': the provider builds them from the "
            "conversation",
        ),
        (
            {"extra_body": {"keep_alive": "1m"}},
            "ollama: extra_body may not set 'keep_alive': pass keep_alive=... to OllamaProvider",
        ),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        OllamaProvider(**kwargs)
    assert str(info.value) == message


async def test_extra_body_is_merged_last() -> None:
    recorder = Recorder(_reply(), ndjson("chat_stream_tool_call.ndjson"))
    p = provider(recorder, model="qwen3", temperature=5.0, extra_body={"format": "json"})
    await p.complete(CompletionRequest(model="", messages=[user_message("hi")]))
    assert recorder.body["format"] == "json"
    assert recorder.body["options"] == {"temperature": 5.0}  # Ollama sets no upper bound
    thinking = provider(recorder, model="qwen3", extra_body={"think": "high"})
    await collect(
        thinking,
        CompletionRequest(model="", messages=[user_message("hi")], thinking=ThinkingConfig()),
    )
    assert recorder.body["think"] == "high"  # replaces the True the request would send
    assert recorder.body["stream"] is True


# -- responses ---------------------------------------------------------------------------------


def test_response_with_tool_calls_and_thinking() -> None:
    response = parse_chat_response(fixture("chat_response_tool_calls_thinking.json"))
    assert response.stop_reason == StopReason.TOOL_USE
    thinking, *rest = response.message.content
    assert isinstance(thinking, ThinkingBlock)
    assert thinking.thinking.startswith("The user wants the current temperature")
    assert rest == []
    assert response.message.tool_calls == [
        ToolCall("call_k2x9q7ma", "get_temperature", {"city": "New York"})
    ]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (169, 18)
    assert response.model == "qwen3"


@pytest.mark.parametrize(
    ("done_reason", "expected"),
    [("stop", StopReason.END_TURN), ("length", StopReason.MAX_TOKENS), ("", StopReason.END_TURN)],
)
def test_stop_reasons(done_reason: str, expected: StopReason) -> None:
    data = {
        "model": "m",
        "message": {"role": "assistant", "content": "Hi."},
        "done": True,
        "done_reason": done_reason,
    }
    response = parse_chat_response(data)
    assert response.stop_reason == expected
    assert response.message.text == "Hi."


def test_ids_are_synthesized_only_when_missing_and_bad_arguments_survive() -> None:
    data = fixture("chat_response_tool_calls_thinking.json")
    calls = data["message"]["tool_calls"]
    calls.append({"function": {"index": 1, "name": "b", "arguments": '{"x": '}})
    calls.append({"function": {"index": 2, "name": "c", "arguments": '{"y": 1}'}})
    response = parse_chat_response(data)
    assert [c.id for c in response.message.tool_calls] == [
        "call_k2x9q7ma",
        "ollama-tool-1",
        "ollama-tool-2",
    ]
    assert response.message.tool_calls[1].arguments == {INVALID_ARGUMENTS_KEY: '{"x": '}
    assert response.message.tool_calls[2].arguments == {"y": 1}


async def test_complete_sends_the_body_and_parses_the_answer() -> None:
    recorder = Recorder(httpx.Response(200, json=fixture("chat_response_tool_calls_thinking.json")))
    async with provider(recorder, model="qwen3", options={"temperature": 0}) as p:
        response = await p.complete(
            CompletionRequest(model="", messages=[user_message("hi")], tools=[TEMPERATURE_TOOL])
        )
    request = recorder.requests[0]
    assert request.method == "POST"
    assert str(request.url) == "http://localhost:11434/api/chat"
    assert recorder.body["model"] == "qwen3"
    assert recorder.body["stream"] is False
    assert recorder.body["options"] == {"temperature": 0}
    assert response.message.tool_calls[0].name == "get_temperature"


# -- streaming ---------------------------------------------------------------------------------


async def collect(p: OllamaProvider, request: CompletionRequest) -> list[StreamEvent]:
    return [event async for event in p.stream(request)]


async def test_stream_with_thinking_and_a_tool_call() -> None:
    recorder = Recorder(ndjson("chat_stream_tool_call.ndjson"))
    p = provider(recorder)
    assert isinstance(p, StreamingProvider)
    events = await collect(
        p, CompletionRequest(model="qwen3", messages=[user_message("hi")], tools=[TEMPERATURE_TOOL])
    )
    assert recorder.body["stream"] is True
    assert events[:4] == [
        ThinkingDelta("The user wants"),
        ThinkingDelta(" the temperature in New York."),
        ToolCallStart(0, "call_k2x9q7ma", "get_temperature"),
        ToolCallDelta(0, '{"city": "New York"}'),
    ]
    done = events[4]
    assert isinstance(done, StreamDone)
    assert len(events) == 5
    response = done.response
    assert response.stop_reason == StopReason.TOOL_USE
    assert response.message.content == [
        ThinkingBlock("The user wants the temperature in New York.")
    ]
    assert response.message.tool_calls == [
        ToolCall("call_k2x9q7ma", "get_temperature", {"city": "New York"})
    ]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (169, 15)


def _line(message: dict[str, Any], **extra: Any) -> bytes:
    return json.dumps({"model": "m", "message": message, "done": False, **extra}).encode() + b"\n"


async def test_stream_keeps_every_tool_call_in_order_wherever_it_arrives() -> None:
    def call(name: str, call_id: str = "") -> dict[str, Any]:
        wire: dict[str, Any] = {"function": {"name": name, "arguments": {"n": name}}}
        if call_id:
            wire["id"] = call_id
        return wire

    body = (
        _line({"role": "assistant", "content": "Let me check. "})
        + _line({"role": "assistant", "content": "", "tool_calls": [call("first", "call_a")]})
        + _line({"role": "assistant", "content": "", "tool_calls": [call("second")]})
        + json.dumps(
            {
                "model": "m",
                "message": {"role": "assistant", "content": "", "tool_calls": [call("third")]},
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": 5,
                "eval_count": 3,
            }
        ).encode()
        + b"\n"
    )
    recorder = Recorder(httpx.Response(200, content=body))
    events = await collect(
        provider(recorder), CompletionRequest(model="m", messages=[user_message("q")])
    )
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert starts == [
        ToolCallStart(0, "call_a", "first"),
        ToolCallStart(1, "ollama-tool-1", "second"),
        ToolCallStart(2, "ollama-tool-2", "third"),
    ]
    assert events[0] == TextDelta("Let me check. ")
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert [c.name for c in done.response.message.tool_calls] == ["first", "second", "third"]
    assert done.response.message.text == "Let me check. "
    assert done.response.stop_reason == StopReason.TOOL_USE


async def test_stream_request_keeps_ids_and_images() -> None:
    done = json.dumps(
        {"model": "m", "message": {"role": "assistant", "content": "ok"}, "done": True}
    )
    recorder = Recorder(httpx.Response(200, content=done.encode() + b"\n"))
    png = b"\x89PNG\r\n\x1a\n"
    request = CompletionRequest(
        model="m",
        messages=[
            Message(Role.USER, [TextBlock("look"), ImageBlock(png, "image/png")]),
            Message(Role.ASSISTANT, [], tool_calls=[ToolCall("call_9", "see", {})]),
            Message(Role.TOOL, [TextBlock("seen")], tool_call_id="call_9"),
        ],
    )
    events = await collect(provider(recorder), request)
    sent = recorder.body["messages"]
    assert sent[0]["images"] == [base64.b64encode(png).decode()]
    assert sent[1]["tool_calls"][0]["id"] == "call_9"
    assert sent[2]["tool_call_id"] == "call_9"
    assert sent[2]["tool_name"] == "see"
    assert events == [TextDelta("ok"), events[-1]]
    assert isinstance(events[-1], StreamDone)


async def test_error_line_mid_stream_is_a_provider_error() -> None:
    # The fixture is /api/generate chunks; /api/chat sends the same {"error": ...} line.
    recorder = Recorder(ndjson("stream_error.ndjson"))
    with pytest.raises(
        ProviderError, match="an error was encountered while running the model"
    ) as e:
        await collect(
            provider(recorder), CompletionRequest(model="m", messages=[user_message("q")])
        )
    assert e.value.status == 200
    assert e.value.provider == "ollama"


async def test_stream_without_done_chunk_is_a_provider_error() -> None:
    lines = (FIXTURES / "chat_stream_tool_call.ndjson").read_bytes().splitlines(keepends=True)
    recorder = Recorder(httpx.Response(200, content=b"".join(lines[:-1])))
    with pytest.raises(ProviderError, match="ended before the final"):
        await collect(
            provider(recorder), CompletionRequest(model="m", messages=[user_message("q")])
        )


async def test_stream_with_a_line_that_is_not_json() -> None:
    recorder = Recorder(httpx.Response(200, content=b'{"model":"m","message":{"con\n'))
    with pytest.raises(ProviderError, match="not JSON"):
        await collect(
            provider(recorder), CompletionRequest(model="m", messages=[user_message("q")])
        )


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 404, 429, 500, 502])
async def test_http_errors_are_mapped(status: int) -> None:
    headers = {"retry-after": "7"} if status == 429 else {}
    recorder = Recorder(httpx.Response(status, json=fixture("error.json"), headers=headers))
    with pytest.raises(ProviderError) as info:
        await provider(recorder).complete(
            CompletionRequest(model="m", messages=[user_message("q")])
        )
    error = info.value
    assert error.status == status
    assert "the model failed to generate a response" in str(error)
    assert json.loads(error.body) == fixture("error.json")
    assert error.retry_after == (7.0 if status == 429 else None)


async def test_http_error_while_streaming() -> None:
    recorder = Recorder(httpx.Response(404, json={"error": "model 'nope' not found"}))
    with pytest.raises(ProviderError, match="model 'nope' not found") as info:
        await collect(
            provider(recorder), CompletionRequest(model="nope", messages=[user_message("q")])
        )
    assert info.value.status == 404


async def test_200_with_an_error_object_and_malformed_bodies() -> None:
    recorder = Recorder(
        httpx.Response(200, json={"error": "boom"}),
        httpx.Response(200, content=b"<html>bad gateway</html>"),
        httpx.Response(200, json={"model": "m", "done": True}),
    )
    p = provider(recorder)
    request = CompletionRequest(model="m", messages=[user_message("q")])
    with pytest.raises(ProviderError, match="boom"):
        await p.complete(request)
    with pytest.raises(ProviderError, match="not JSON") as info:
        await p.complete(request)
    assert "bad gateway" in str(info.value)
    with pytest.raises(ProviderError, match="no message"):
        await p.complete(request)


async def test_connection_refused_is_a_provider_error_without_status() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    recorder = Recorder(refuse)
    with pytest.raises(ProviderError) as info:
        await provider(recorder).complete(
            CompletionRequest(model="m", messages=[user_message("q")])
        )
    assert info.value.status is None
    assert isinstance(info.value.__cause__, httpx.ConnectError)


# -- reachability ------------------------------------------------------------------------------


async def test_ollama_reachable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    up = Recorder(httpx.Response(200, json={"models": []}))
    assert await ollama_reachable("http://h:1", http_client=up.client()) is True
    assert str(up.requests[0].url) == "http://h:1/api/tags"
    assert up.requests[0].method == "GET"
    assert await ollama_reachable(http_client=Recorder(refuse).client()) is False
    other = Recorder(httpx.Response(200, content=b"<html>not ollama</html>"))
    assert await ollama_reachable(http_client=other.client()) is False
    assert await ollama_reachable(http_client=Recorder(httpx.Response(500)).client()) is False


# -- embeddings --------------------------------------------------------------------------------


async def test_embed_batch_matches_the_fixture() -> None:
    recorder = Recorder(httpx.Response(200, json=fixture("embed_response.json")))
    embedder = OllamaEmbedder("all-minilm", http_client=recorder.client())
    texts = fixture("embed_request.json")["input"]
    matrix = await embedder.embed_batch([[TextBlock(t)] for t in texts])
    assert str(recorder.requests[0].url) == "http://localhost:11434/api/embed"
    assert recorder.body == fixture("embed_request.json")
    assert matrix.shape == (2, 10)
    assert matrix.dtype == np.float32
    np.testing.assert_allclose(
        matrix[1], fixture("embed_response.json")["embeddings"][1], rtol=1e-6
    )
    assert embedder.dimensions == 10


async def test_embed_single_with_dimensions_and_batching() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        n = len(json.loads(request.content)["input"])
        return httpx.Response(200, json={"embeddings": [[0.5, 0.5, 0.5]] * n})

    recorder = Recorder(answer, answer, answer)
    embedder = OllamaEmbedder(
        "m", http_client=recorder.client(), dimensions=3, batch_size=2, keep_alive="1m"
    )
    vector = await embedder.embed([TextBlock("a"), ImageBlock(b"\x89PNG", "image/png")])
    assert vector.shape == (3,)
    assert recorder.body == {"model": "m", "input": ["a"], "dimensions": 3, "keep_alive": "1m"}
    matrix = await embedder.embed_batch([[TextBlock(str(i))] for i in range(3)])
    assert matrix.shape == (3, 3)
    assert [len(json.loads(r.content)["input"]) for r in recorder.requests[1:]] == [2, 1]


async def test_embed_checks() -> None:
    recorder = Recorder(
        httpx.Response(200, json={"embeddings": [[1.0, 2.0]]}),
        httpx.Response(200, json={"embeddings": [[1.0, 2.0]]}),
        httpx.Response(200, json={"embeddings": []}),
        httpx.Response(400, json={"error": "input too long"}),
    )
    embedder = OllamaEmbedder("m", http_client=recorder.client(), dimensions=3)
    with pytest.raises(
        ProviderError,
        match=re.escape(
            "embedding size mismatch: model 'm' returned a vector of size 2 for input 0, "
            "expected 3 (dimensions=3)"
        ),
    ):
        await embedder.embed([TextBlock("a")])
    with pytest.raises(ProviderError, match=r"embeddings: asked model 'm' for 2, got 1$"):
        await embedder.embed_batch([[TextBlock("a")], [TextBlock("b")]])
    with pytest.raises(ProviderError, match=r"embeddings: asked model 'm' for 1, got 0$"):
        await embedder.embed([TextBlock("a")])
    with pytest.raises(ProviderError, match="input too long") as info:
        await embedder.embed([TextBlock("a")])
    assert info.value.status == 400
    with pytest.raises(NoEmbeddableContentError, match="input 1"):
        await embedder.embed_batch([[TextBlock("a")], [ImageBlock(b"\x89PNG", "image/png")]])
    assert (await embedder.embed_batch([])).shape == (0, 3)
    with pytest.raises(ConfigurationError):
        OllamaEmbedder("")
    with pytest.raises(ConfigurationError):
        OllamaEmbedder("m", dimensions=0)
