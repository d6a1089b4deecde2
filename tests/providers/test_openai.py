"""OpenAIProvider and OpenAIEmbedder against the Chat Completions / Embeddings wire format."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from goagent_py import Agent, tool
from goagent_py.errors import (
    ConfigurationError,
    NoEmbeddableContentError,
    ProviderError,
    UnsupportedContentError,
)
from goagent_py.memory.base import BatchEmbedder, Embedder
from goagent_py.messages import (
    DocumentBlock,
    ImageBlock,
    Message,
    Role,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    Usage,
    user_message,
)
from goagent_py.provider import (
    CompletionRequest,
    CompletionResponse,
    StreamDone,
    StreamEvent,
    StreamingProvider,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
)
from goagent_py.providers._http import INVALID_ARGUMENTS_KEY
from goagent_py.providers.openai import OpenAIEmbedder, OpenAIProvider
from goagent_py.tools import ToolDefinition

FIXTURES = Path(__file__).parent.parent / "fixtures" / "openai"
MODEL = "gpt-4o-2024-08-06"
LOCAL = "http://localhost:8080/v1"


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def sse_bytes(chunks: list[Any], *, done: bool = True) -> bytes:
    lines = [f"data: {json.dumps(c)}\n\n" for c in chunks]
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


def sse(content: bytes) -> httpx.Response:
    return httpx.Response(200, content=content, headers={"content-type": "text/event-stream"})


class Recorder:
    """A MockTransport handler: answers from a queue and keeps every request."""

    def __init__(self, *responses: httpx.Response) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self.responses:
            raise AssertionError(f"unexpected request: {request.method} {request.url}")
        return self.responses.pop(0)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]


@pytest.fixture
async def client() -> AsyncIterator[Callable[[Recorder], httpx.AsyncClient]]:
    clients: list[httpx.AsyncClient] = []

    def make(recorder: Recorder) -> httpx.AsyncClient:
        c = httpx.AsyncClient(transport=httpx.MockTransport(recorder))
        clients.append(c)
        return c

    yield make
    for c in clients:
        await c.aclose()


@pytest.fixture
def mock(
    client: Callable[[Recorder], httpx.AsyncClient],
) -> Callable[..., OpenAIProvider]:
    def make(recorder: Recorder, **kwargs: Any) -> OpenAIProvider:
        kwargs.setdefault("api_key", "sk-test")
        return OpenAIProvider(http_client=client(recorder), **kwargs)

    return make


def completion(message: dict[str, Any], finish: str = "stop", **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = fixture("chat_response_tool_calls.json")
    data["choices"][0]["message"] = {"role": "assistant", "content": None} | message
    data["choices"][0]["finish_reason"] = finish
    return data | extra


TEXT_REPLY = completion({"content": "Hello!"})
REQUEST_FIXTURE = fixture("chat_request_tools_image.json")
WEATHER, STOCK = (
    ToolDefinition(t["function"]["name"], t["function"]["description"], t["function"]["parameters"])
    for t in REQUEST_FIXTURE["tools"]
)
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAC0lEQVR4nGP4DwQACfsD/fteaysAAAAASUVORK5CYII="
)
QUESTION = REQUEST_FIXTURE["messages"][1]["content"][0]["text"]


def request(*messages: Message, **kwargs: Any) -> CompletionRequest:
    return CompletionRequest(model=kwargs.pop("model", MODEL), messages=list(messages), **kwargs)


def as_we_send(body: dict[str, Any]) -> dict[str, Any]:
    """The fixture as we send it: no strict mode, tool_choice "auto" spelt out whenever tools
    are offered, and "" instead of null as the content of an assistant's tool calls."""
    body = json.loads(json.dumps(body))
    for t in body.get("tools", []):
        t["function"].pop("strict", None)
    if body.get("tools"):
        body.setdefault("tool_choice", "auto")
    for m in body["messages"]:
        if m["role"] == "assistant" and m.get("content") is None:
            m["content"] = ""
    return body


# --- construction -----------------------------------------------------------------------------


def test_key_required_for_openai_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match=r"set OPENAI_API_KEY or pass api_key=\.\.\."):
        OpenAIProvider()
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIEmbedder("text-embedding-3-small")
    assert isinstance(OpenAIProvider(base_url=LOCAL), StreamingProvider)


async def test_local_server_without_key_sends_no_auth(
    monkeypatch: pytest.MonkeyPatch, mock: Callable[..., OpenAIProvider]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rec = Recorder(httpx.Response(200, json=TEXT_REPLY))
    await mock(rec, api_key=None, base_url=LOCAL, max_tokens=64).complete(
        request(user_message("Hi"), model="qwen3")
    )
    sent = rec.requests[0]
    assert str(sent.url) == "http://localhost:8080/v1/chat/completions"
    assert "authorization" not in sent.headers
    assert rec.bodies[0] == {
        "model": "qwen3",
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 64,
    }


# --- request mapping --------------------------------------------------------------------------


async def test_plain_text_and_headers(mock: Callable[..., OpenAIProvider]) -> None:
    rec = Recorder(httpx.Response(200, json=TEXT_REPLY))
    await mock(rec).complete(request(user_message("Hi"), max_tokens=100))
    sent = rec.requests[0]
    assert str(sent.url) == "https://api.openai.com/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert rec.bodies[0] == {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Hi"}],
        "max_completion_tokens": 100,
    }


async def test_system_tools_and_image_match_fixture(mock: Callable[..., OpenAIProvider]) -> None:
    rec = Recorder(httpx.Response(200, json=TEXT_REPLY))
    message = Message(Role.USER, [TextBlock(QUESTION), ImageBlock(PNG, "image/png")])
    await mock(rec).complete(
        request(message, system_prompt="You are a helpful assistant.", tools=[WEATHER, STOCK])
    )
    body = rec.bodies[0]
    assert body["messages"][0] == {"role": "system", "content": "You are a helpful assistant."}
    assert body["messages"][1]["content"][1]["image_url"]["url"].startswith(
        "data:image/png;base64,iVBOR"
    )
    assert body == as_we_send(REQUEST_FIXTURE)


async def test_tool_results_one_message_each(mock: Callable[..., OpenAIProvider]) -> None:
    expected = fixture("chat_request_tool_results.json")
    response = completion(expected["messages"][2], "tool_calls")
    rec = Recorder(httpx.Response(200, json=response), httpx.Response(200, json=TEXT_REPLY))
    provider = mock(rec)
    question = Message(Role.USER, [TextBlock(QUESTION), ImageBlock(PNG, "image/png")])
    req = request(question, system_prompt="You are a helpful assistant.", tools=[WEATHER, STOCK])
    first = await provider.complete(req)
    calls = first.message.tool_calls
    req.messages += [
        first.message,
        Message(
            Role.TOOL,
            [TextBlock(expected["messages"][3]["content"])],
            tool_call_id=calls[0].id,
        ),
        Message(
            Role.TOOL,
            [TextBlock("Error: upstream quote service unavailable")],
            tool_call_id=calls[1].id,
            is_error=True,
        ),
    ]
    await provider.complete(req)
    body = rec.bodies[1]
    assert body == as_we_send(expected)
    # arguments go back as JSON strings that decode to what the model sent
    for sent, original in zip(
        body["messages"][2]["tool_calls"], expected["messages"][2]["tool_calls"], strict=True
    ):
        assert json.loads(sent["function"]["arguments"]) == json.loads(
            original["function"]["arguments"]
        )


async def test_three_parallel_results_and_error_flag(mock: Callable[..., OpenAIProvider]) -> None:
    calls = [ToolCall(f"call_{i}", "get_stock_price", {"ticker": f"T{i}"}) for i in range(3)]
    rec = Recorder(httpx.Response(200, json=TEXT_REPLY))
    await mock(rec).complete(
        request(
            user_message("q"),
            Message(Role.ASSISTANT, [TextBlock("checking")], tool_calls=calls),
            Message(Role.TOOL, [TextBlock("1.0")], tool_call_id="call_0"),
            Message(
                Role.TOOL, [TextBlock("quote service down")], tool_call_id="call_1", is_error=True
            ),
            Message(Role.TOOL, [], tool_call_id="call_2"),
        )
    )
    messages = rec.bodies[0]["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": "checking",
        "tool_calls": [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {
                    "name": "get_stock_price",
                    "arguments": json.dumps({"ticker": f"T{i}"}),
                },
            }
            for i in range(3)
        ],
    }
    assert messages[2:] == [
        {"role": "tool", "tool_call_id": "call_0", "content": "1.0"},
        {"role": "tool", "tool_call_id": "call_1", "content": "Error: quote service down"},
        {"role": "tool", "tool_call_id": "call_2", "content": ""},
    ]


async def test_what_llama_cpp_python_server_needs(mock: Callable[..., OpenAIProvider]) -> None:
    # llama-cpp-python's server answers HTTP 500 to a null content next to tool calls (and to a
    # missing one), and takes a missing tool_choice as "none": it leaves the tools out.
    rec = Recorder(httpx.Response(200, json=TEXT_REPLY), httpx.Response(200, json=TEXT_REPLY))
    provider = mock(rec, base_url=LOCAL)
    turn = [
        user_message("What is 2 + 3?"),
        Message(Role.ASSISTANT, [], tool_calls=[ToolCall("c1", "add", {"a": 2, "b": 3})]),
        Message(Role.TOOL, [TextBlock("5")], tool_call_id="c1"),
    ]
    await provider.complete(request(*turn, model="local", tools=[WEATHER]))
    await provider.complete(request(*turn, model="local"))
    with_tools, without_tools = rec.bodies
    assert with_tools["messages"][1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
            }
        ],
    }
    assert with_tools["tool_choice"] == "auto"
    assert "tool_choice" not in without_tools
    assert "tools" not in without_tools


async def test_image_in_tool_result_follows_as_user_message(
    mock: Callable[..., OpenAIProvider],
) -> None:
    calls = [ToolCall("call_a", "screenshot", {}), ToolCall("call_b", "noop", {})]
    rec = Recorder(httpx.Response(200, json=TEXT_REPLY))
    await mock(rec).complete(
        request(
            user_message("q"),
            Message(Role.ASSISTANT, tool_calls=calls),
            Message(
                Role.TOOL, [TextBlock("shot"), ImageBlock(PNG, "image/png")], tool_call_id="call_a"
            ),
            Message(Role.TOOL, [TextBlock("ok")], tool_call_id="call_b"),
        )
    )
    messages = rec.bodies[0]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user"]
    assert messages[1]["content"] == ""
    assert messages[2]["content"].startswith("shot\n[1 image(s)")
    assert messages[4]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert "call_a" in messages[4]["content"][0]["text"]


async def test_documents(mock: Callable[..., OpenAIProvider]) -> None:
    rec = Recorder(httpx.Response(200, json=TEXT_REPLY))
    provider = mock(rec)
    await provider.complete(
        request(
            Message(Role.USER, [DocumentBlock(b"notes", "text/plain", title="N"), TextBlock("?")])
        )
    )
    assert rec.bodies[0]["messages"] == [{"role": "user", "content": "N\n\nnotes\n?"}]
    with pytest.raises(UnsupportedContentError, match="application/pdf"):
        await provider.complete(
            request(Message(Role.USER, [DocumentBlock(b"%PDF-1.4", "application/pdf")]))
        )
    assert len(rec.requests) == 1


async def test_thinking_not_sent_back_and_effort(mock: Callable[..., OpenAIProvider]) -> None:
    rec = Recorder(httpx.Response(200, json=TEXT_REPLY))
    await mock(rec).complete(
        request(
            user_message("q"),
            Message(Role.ASSISTANT, [ThinkingBlock("hmm", "sig"), TextBlock("a")]),
            user_message("b"),
            effort="low",
        )
    )
    body = rec.bodies[0]
    assert body["messages"][1] == {"role": "assistant", "content": "a"}
    assert body["reasoning_effort"] == "low"


async def test_missing_model(mock: Callable[..., OpenAIProvider]) -> None:
    rec = Recorder()
    provider = mock(rec)
    with pytest.raises(ConfigurationError, match="no model"):
        await provider.complete(request(user_message("x"), model=""))
    assert rec.requests == []


# --- response mapping -------------------------------------------------------------------------


async def test_tool_calls_response(mock: Callable[..., OpenAIProvider]) -> None:
    rec = Recorder(httpx.Response(200, json=fixture("chat_response_tool_calls.json")))
    response = await mock(rec).complete(request(user_message("q")))
    assert response.message.content == []
    assert response.message.tool_calls == [
        ToolCall(
            "call_fdNz3vOBKYgOIpMdWotB9MjY",
            "GetWeatherArgs",
            {"city": "Edinburgh", "country": "GB", "units": "c"},
        ),
        ToolCall(
            "call_h1DWI1POMJLb0KwIyQHWXD4p",
            "get_stock_price",
            {"ticker": "AAPL", "exchange": "NASDAQ"},
        ),
    ]
    assert response.stop_reason is StopReason.TOOL_USE
    assert response.usage == Usage(input_tokens=149, output_tokens=60)
    assert response.model == MODEL


async def test_cached_tokens_split_from_input(mock: Callable[..., OpenAIProvider]) -> None:
    data = fixture("chat_response_tool_calls.json")
    data["usage"]["prompt_tokens_details"]["cached_tokens"] = 100
    rec = Recorder(httpx.Response(200, json=data))
    response = await mock(rec).complete(request(user_message("q")))
    assert response.usage == Usage(input_tokens=49, output_tokens=60, cache_read_input_tokens=100)


@pytest.mark.parametrize(
    "raw",
    ['{"city": "Edin', "not json at all", "[1, 2]", '"just a string"'],
)
async def test_malformed_tool_arguments_become_an_error_for_the_model(
    mock: Callable[..., OpenAIProvider], raw: str
) -> None:
    message = {
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_stock_price", "arguments": raw},
            }
        ]
    }
    rec = Recorder(httpx.Response(200, json=completion(message, "tool_calls")))
    response = await mock(rec).complete(request(user_message("q")))
    assert response.message.tool_calls == [
        ToolCall("call_1", "get_stock_price", {INVALID_ARGUMENTS_KEY: raw})
    ]


async def test_malformed_arguments_reach_the_model_as_an_error_result(
    mock: Callable[..., OpenAIProvider],
) -> None:
    bad = completion(
        {
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "add", "arguments": "{a: 1"},
                }
            ]
        },
        "tool_calls",
    )
    rec = Recorder(httpx.Response(200, json=bad), httpx.Response(200, json=TEXT_REPLY))
    agent = Agent(provider=mock(rec), model=MODEL, tools=[add])
    assert (await agent.run("add")).text == "Hello!"
    tool_message = rec.bodies[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["tool_call_id"] == "call_1"
    assert tool_message["content"].lower().startswith("error")
    assert "add" in tool_message["content"]


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ("stop", StopReason.END_TURN),
        ("length", StopReason.MAX_TOKENS),
        ("tool_calls", StopReason.TOOL_USE),
        ("content_filter", StopReason.REFUSAL),
        (None, StopReason.END_TURN),
    ],
)
async def test_finish_reasons(
    mock: Callable[..., OpenAIProvider], finish: str | None, expected: StopReason
) -> None:
    data = completion({"content": "x"})
    data["choices"][0]["finish_reason"] = finish
    rec = Recorder(httpx.Response(200, json=data))
    assert (await mock(rec).complete(request(user_message("q")))).stop_reason is expected


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_becomes_thinking(mock: Callable[..., OpenAIProvider], field: str) -> None:
    rec = Recorder(httpx.Response(200, json=completion({"content": "42", field: "think..."})))
    response = await mock(rec).complete(request(user_message("q")))
    assert response.message.content == [ThinkingBlock("think..."), TextBlock("42")]


async def test_refusal(mock: Callable[..., OpenAIProvider]) -> None:
    rec = Recorder(httpx.Response(200, json=completion({"refusal": "I can't help with that."})))
    response = await mock(rec).complete(request(user_message("q")))
    assert response.message.text == "I can't help with that."
    assert response.stop_reason is StopReason.REFUSAL


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "status", "error_type", "headers", "retry_after"),
    [
        ("error_400_invalid_request_error.json", 400, "invalid_request_error", {}, None),
        ("error_401.json", 401, "", {}, None),
        ("error_429_slow_down.json", 429, "rate_limit_error", {"retry-after": "20"}, 20.0),
        ("error_500.json", 500, "", {}, None),
        (
            "error_503_server_is_overloaded.json",
            503,
            "service_unavailable_error",
            {"retry-after-ms": "1500"},
            1.5,
        ),
    ],
)
async def test_error_fixtures(
    mock: Callable[..., OpenAIProvider],
    name: str,
    status: int,
    error_type: str,
    headers: dict[str, str],
    retry_after: float | None,
) -> None:
    body = (FIXTURES / name).read_text()
    rec = Recorder(httpx.Response(status, text=body, headers=headers))
    with pytest.raises(ProviderError) as info:
        await mock(rec).complete(request(user_message("q")))
    err = info.value
    assert (err.provider, err.status, err.error_type) == ("openai", status, error_type)
    assert err.retry_after == retry_after
    assert err.body == body
    assert json.loads(body)["error"]["message"] in str(err)
    assert "sk-test" not in str(err)


async def test_bad_bodies(mock: Callable[..., OpenAIProvider]) -> None:
    rec = Recorder(
        httpx.Response(200, text="<html>oops</html>"),
        httpx.Response(200, json={"error": {"message": "upstream failed", "type": "api_error"}}),
        httpx.Response(200, json={"choices": []}),
        httpx.Response(200, json={"choices": "nope"}),
    )
    provider = mock(rec)
    with pytest.raises(ProviderError, match="not JSON"):
        await provider.complete(request(user_message("q")))
    with pytest.raises(ProviderError, match="upstream failed") as info:
        await provider.complete(request(user_message("q")))
    assert info.value.error_type == "api_error"
    with pytest.raises(ProviderError, match="without a message"):
        await provider.complete(request(user_message("q")))
    with pytest.raises(ProviderError, match="malformed completion"):
        await provider.complete(request(user_message("q")))


# --- streaming --------------------------------------------------------------------------------


async def collect(
    provider: OpenAIProvider, req: CompletionRequest
) -> tuple[list[StreamEvent], CompletionResponse]:
    events = [e async for e in provider.stream(req)]
    assert isinstance(events[-1], StreamDone)
    assert sum(isinstance(e, StreamDone) for e in events) == 1
    return events[:-1], events[-1].response


async def test_stream_request_matches_fixture(mock: Callable[..., OpenAIProvider]) -> None:
    rec = Recorder(sse((FIXTURES / "chat_stream_tool_calls.sse").read_bytes()))
    await collect(
        mock(rec),
        request(
            user_message("What's the weather like in Edinburgh?"),
            user_message("What's the price of AAPL?"),
            tools=[WEATHER, STOCK],
        ),
    )
    assert rec.bodies[0] == as_we_send(fixture("chat_request_stream.json"))
    assert rec.requests[0].headers["accept"] == "text/event-stream"


async def test_stream_text(mock: Callable[..., OpenAIProvider]) -> None:
    rec = Recorder(sse((FIXTURES / "chat_stream_text.sse").read_bytes()))
    events, response = await collect(mock(rec), request(user_message("q")))
    assert all(isinstance(e, TextDelta) for e in events)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text.startswith("I'm")
    assert response.message.content == [TextBlock(text)]
    assert response.stop_reason is StopReason.END_TURN
    assert response.usage == Usage(input_tokens=14, output_tokens=30)


async def test_stream_tool_calls_assembled_by_index(mock: Callable[..., OpenAIProvider]) -> None:
    rec = Recorder(sse((FIXTURES / "chat_stream_tool_calls.sse").read_bytes()))
    events, response = await collect(mock(rec), request(user_message("q")))
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [(s.index, s.name) for s in starts] == [(0, "GetWeatherArgs"), (1, "get_stock_price")]
    assert starts[0].id == "call_JMW1whyEaYG438VE1OIflxA2"
    for start, call in zip(starts, response.message.tool_calls, strict=True):
        pieces = "".join(
            e.arguments_delta
            for e in events
            if isinstance(e, ToolCallDelta) and e.index == start.index
        )
        assert json.loads(pieces) == call.arguments
        assert (call.id, call.name) == (start.id, start.name)
    assert response.message.tool_calls[0].arguments == {
        "city": "Edinburgh",
        "country": "GB",
        "units": "c",
    }
    assert response.message.tool_calls[1].arguments["ticker"] == "AAPL"
    assert response.stop_reason is StopReason.TOOL_USE
    assert response.usage == Usage(input_tokens=149, output_tokens=60)


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"model": "qwen3", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


async def test_a_streamed_refusal_is_the_same_as_a_plain_one(
    mock: Callable[..., OpenAIProvider],
) -> None:
    """OpenAI streams a refusal in ``delta.refusal`` (as the SDK's ChoiceDelta has it), not in
    ``content``: it was dropped, leaving an empty answer that ended as END_TURN (review6b)."""
    said = ["I'm", " sorry,", " I can't", " help with that."]
    chunks = [chunk({"role": "assistant", "content": None, "refusal": ""})]
    chunks += [chunk({"refusal": piece}) for piece in said]
    chunks.append(chunk({}, "stop"))
    events, response = await collect(
        mock(Recorder(sse(sse_bytes(chunks)))), request(user_message("q"))
    )
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "".join(said)
    assert response.message.content == [TextBlock("".join(said))]
    assert response.stop_reason is StopReason.REFUSAL
    plain = await mock(
        Recorder(httpx.Response(200, json=completion({"refusal": "".join(said)})))
    ).complete(request(user_message("q")))
    assert (plain.message.content, plain.stop_reason) == (
        response.message.content,
        response.stop_reason,
    )


async def test_stream_interleaved_calls_reasoning_and_bad_arguments(
    mock: Callable[..., OpenAIProvider],
) -> None:
    def call(index: int, **function: str) -> dict[str, Any]:
        return {"tool_calls": [{"index": index, "function": function}]}

    chunks = [
        chunk({"role": "assistant", "reasoning_content": "Let me "}),
        chunk({"reasoning_content": "think."}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c0",
                        "type": "function",
                        "function": {"name": "a", "arguments": ""},
                    }
                ]
            }
        ),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "b", "arguments": '{"x"'},
                    }
                ]
            }
        ),
        chunk(call(0, arguments='{"y": ')),
        chunk(call(1, arguments=": 1}")),
        chunk(call(0, arguments="oops")),
        chunk({}, "tool_calls"),
    ]
    rec = Recorder(sse(sse_bytes(chunks)))
    events, response = await collect(mock(rec, base_url=LOCAL), request(user_message("q")))
    assert [e for e in events if isinstance(e, ThinkingDelta)] == [
        ThinkingDelta("Let me "),
        ThinkingDelta("think."),
    ]
    assert response.message.content == [ThinkingBlock("Let me think.")]
    assert response.message.tool_calls == [
        ToolCall("c0", "a", {INVALID_ARGUMENTS_KEY: '{"y": oops'}),
        ToolCall("c1", "b", {"x": 1}),
    ]
    assert response.usage == Usage()


async def test_stream_error_object_mid_stream(mock: Callable[..., OpenAIProvider]) -> None:
    content = sse_bytes(
        [chunk({"content": "Hel"}), {"error": {"message": "overloaded", "type": "server_error"}}],
        done=False,
    )
    rec = Recorder(sse(content))
    seen: list[StreamEvent] = []

    async def consume() -> None:
        async for event in mock(rec).stream(request(user_message("q"))):
            seen.append(event)

    with pytest.raises(ProviderError, match="overloaded") as info:
        await consume()
    assert seen == [TextDelta("Hel")]
    assert (info.value.status, info.value.error_type) == (200, "server_error")


async def test_stream_truncated(mock: Callable[..., OpenAIProvider]) -> None:
    rec = Recorder(sse(sse_bytes([chunk({"content": "Hel"})], done=False)))
    with pytest.raises(ProviderError, match="before a finish reason"):
        await collect(mock(rec), request(user_message("q")))


async def test_stream_http_error(mock: Callable[..., OpenAIProvider]) -> None:
    body = (FIXTURES / "error_429_slow_down.json").read_text()
    rec = Recorder(httpx.Response(429, text=body, headers={"retry-after": "2"}))
    with pytest.raises(ProviderError) as info:
        await collect(mock(rec), request(user_message("q")))
    assert (info.value.status, info.value.retry_after) == (429, 2.0)


# --- sampling settings and extra_body ---------------------------------------------------------


async def test_unset_sampling_sends_nothing(mock: Callable[..., OpenAIProvider]) -> None:
    rec = Recorder(httpx.Response(200, json=TEXT_REPLY))
    await mock(rec, temperature=None, top_p=None, stop=None, extra_body=None).complete(
        request(user_message("Hi"))
    )
    assert rec.bodies[0] == {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]}


async def test_sampling_goes_into_every_body(mock: Callable[..., OpenAIProvider]) -> None:
    rec = Recorder(
        httpx.Response(200, json=TEXT_REPLY),
        sse((FIXTURES / "chat_stream_text.sse").read_bytes()),
    )
    provider = mock(rec, temperature=0, top_p=0.5, stop=["\n\n", "END"])
    await provider.complete(request(user_message("Hi")))
    await collect(provider, request(user_message("Hi")))
    plain, streamed = rec.bodies
    assert plain == {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Hi"}],
        "temperature": 0,
        "top_p": 0.5,
        "stop": ["\n\n", "END"],  # whitespace is a fine stop sequence here
    }
    assert streamed == plain | {"stream": True, "stream_options": {"include_usage": True}}


async def test_stop_limit_is_openais_own(mock: Callable[..., OpenAIProvider]) -> None:
    five = ["a", "b", "c", "d", "e"]
    with pytest.raises(ConfigurationError) as info:
        OpenAIProvider("k", stop=five)
    assert str(info.value) == (
        "openai: the OpenAI API takes at most 4 stop sequences, got 5; keep the 4 that matter most"
    )
    rec = Recorder(httpx.Response(200, json=TEXT_REPLY))
    await mock(rec, base_url=LOCAL, stop=five).complete(request(user_message("Hi")))
    assert rec.bodies[0]["stop"] == five  # a compatible server sets its own limit


async def test_extra_body_is_merged_last(mock: Callable[..., OpenAIProvider]) -> None:
    rec = Recorder(httpx.Response(200, json=TEXT_REPLY))
    extra: dict[str, Any] = {"seed": 7, "top_k": 20, "tool_choice": "required"}
    provider = mock(rec, base_url=LOCAL, extra_body=extra, max_tokens=32)
    extra["seed"] = 8  # copied at construction: a later change is not sent
    await provider.complete(request(user_message("Hi"), tools=[WEATHER]))
    body = rec.bodies[0]
    assert body["seed"] == 7
    assert body["top_k"] == 20
    assert body["tool_choice"] == "required"  # replaces the "auto" the provider sends
    assert body["max_tokens"] == 32
    assert body["model"] == MODEL
    assert body["messages"] == [{"role": "user", "content": "Hi"}]


@pytest.mark.parametrize(
    ("key", "advice"),
    [
        ("model", "the model comes from the request (with_model(...))"),
        ("messages", "the provider builds them from the conversation"),
        ("stream", "complete() and stream() set it"),
        ("stream_options", "stream() sets it (the usage of a streamed answer depends on it)"),
        ("max_tokens", "pass max_tokens=... to OpenAIProvider (or with_max_tokens(...))"),
        (
            "max_completion_tokens",
            "pass max_tokens=... to OpenAIProvider (or with_max_tokens(...))",
        ),
        ("temperature", "pass temperature=... to OpenAIProvider"),
        ("top_p", "pass top_p=... to OpenAIProvider"),
        ("stop", "pass stop=[...] to OpenAIProvider"),
    ],
)
def test_extra_body_cannot_take_over_the_request(key: str, advice: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        OpenAIProvider("k", extra_body={key: 1})
    assert str(info.value) == f"openai: extra_body may not set {key!r}: {advice}"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"temperature": 2.5},
            "openai: temperature must be between 0 and 2 (the OpenAI API's range), got 2.5; "
            "leave it None for the model's default",
        ),
        (
            {"top_p": 1.5},
            "openai: top_p must be greater than 0 and at most 1, got 1.5; leave it None for the "
            "model's default",
        ),
        (
            {"stop": "END"},
            "openai: stop must be a list of strings, got str 'END'; for one sequence pass "
            "stop=[...] with it alone",
        ),
        ({"stop": ["END", ""]}, "openai: stop[1] must be a non-empty string, got ''"),
        ({"stop": ["END", 3]}, "openai: stop[1] must be a non-empty string, got 3"),
        (
            {"temperature": "0.5"},
            "openai: temperature must be a finite number, got str '0.5'",
        ),
        ({"temperature": True}, "openai: temperature must be a finite number, got bool True"),
        (
            {"top_p": float("nan")},
            "openai: top_p must be a finite number, got float nan",
        ),
        (
            {"extra_body": {"seed": object}},
            "openai: extra_body is not JSON: Object of type type is not JSON serializable",
        ),
        (
            {"extra_body": ["seed", 7]},
            "openai: extra_body must be a mapping of JSON fields, got list",
        ),
    ],
)
def test_sampling_outside_openais_limits(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        OpenAIProvider("k", **kwargs)
    assert str(info.value) == message


async def test_edges_of_the_ranges_are_allowed(mock: Callable[..., OpenAIProvider]) -> None:
    rec = Recorder(httpx.Response(200, json=TEXT_REPLY))
    await mock(rec, temperature=2, top_p=1, stop=["a", "b", "c", "d"]).complete(
        request(user_message("Hi"))
    )
    assert (rec.bodies[0]["temperature"], rec.bodies[0]["top_p"]) == (2, 1)


# --- end to end -------------------------------------------------------------------------------


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


async def test_agent_tool_round_trip(mock: Callable[..., OpenAIProvider]) -> None:
    call = completion(
        {
            "tool_calls": [
                {
                    "id": "call_add",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                }
            ]
        },
        "tool_calls",
    )
    rec = Recorder(
        httpx.Response(200, json=call), httpx.Response(200, json=completion({"content": "5"}))
    )
    agent = Agent(provider=mock(rec), model=MODEL, tools=[add])
    assert (await agent.run("What is 2 + 3?")).text == "5"
    assert rec.bodies[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_add",
        "content": "5",
    }


# --- embeddings -------------------------------------------------------------------------------


@pytest.fixture
def embedder(
    client: Callable[[Recorder], httpx.AsyncClient],
) -> Callable[..., OpenAIEmbedder]:
    def make(recorder: Recorder, **kwargs: Any) -> OpenAIEmbedder:
        kwargs.setdefault("api_key", "sk-test")
        return OpenAIEmbedder("text-embedding-3-small", http_client=client(recorder), **kwargs)

    return make


def embeddings(*vectors: list[float], reverse: bool = False) -> httpx.Response:
    data = [{"object": "embedding", "embedding": v, "index": i} for i, v in enumerate(vectors)]
    if reverse:
        data.reverse()
    return httpx.Response(200, json={"object": "list", "data": data, "model": "m"})


async def test_embed_batch_matches_fixture(embedder: Callable[..., OpenAIEmbedder]) -> None:
    expected = fixture("embeddings_request.json")
    response = fixture("embeddings_response.json")
    response["data"].reverse()  # order comes from "index", not position
    rec = Recorder(httpx.Response(200, json=response))
    emb = embedder(rec)
    assert isinstance(emb, BatchEmbedder)
    assert isinstance(emb, Embedder)
    vectors = await emb.embed_batch([[TextBlock(t)] for t in expected["input"]])
    assert rec.bodies[0] == expected
    assert str(rec.requests[0].url) == "https://api.openai.com/v1/embeddings"
    assert vectors.dtype == np.float32
    assert vectors.shape == (2, 3)
    np.testing.assert_allclose(vectors[0], [0.0023064255, -0.009327292, -0.0028842222], rtol=1e-6)
    assert emb.dimensions == 3


async def test_embed_single_text_only(embedder: Callable[..., OpenAIEmbedder]) -> None:
    rec = Recorder(embeddings([1.0, 2.0]))
    emb = embedder(rec, dimensions=2)
    vector = await emb.embed([TextBlock("a"), ImageBlock(PNG, "image/png"), TextBlock("b")])
    assert vector.dtype == np.float32
    assert vector.shape == (2,)
    assert rec.bodies[0] == {
        "input": ["a\nb"],
        "model": "text-embedding-3-small",
        "encoding_format": "float",
        "dimensions": 2,
    }


async def test_no_embeddable_content(embedder: Callable[..., OpenAIEmbedder]) -> None:
    rec = Recorder()
    emb = embedder(rec)
    with pytest.raises(NoEmbeddableContentError):
        await emb.embed([ImageBlock(PNG, "image/png")])
    with pytest.raises(NoEmbeddableContentError, match="input 1"):
        await emb.embed_batch([[TextBlock("ok")], [TextBlock("  ")]])
    assert rec.requests == []


async def test_batches_of_batch_size(embedder: Callable[..., OpenAIEmbedder]) -> None:
    rec = Recorder(
        embeddings([1.0, 0.0], [2.0, 0.0], reverse=True),
        embeddings([3.0, 0.0], [4.0, 0.0]),
        embeddings([5.0, 0.0]),
    )
    emb = embedder(rec, batch_size=2)
    vectors = await emb.embed_batch([[TextBlock(str(i))] for i in range(5)])
    assert [b["input"] for b in rec.bodies] == [["0", "1"], ["2", "3"], ["4"]]
    assert vectors[:, 0].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert (await emb.embed_batch([])).shape == (0, 2)


async def test_dimension_mismatch(embedder: Callable[..., OpenAIEmbedder]) -> None:
    rec = Recorder(
        embeddings([1.0, 2.0, 3.0]), embeddings([1.0, 2.0]), embeddings([1.0, 2.0], [1.0])
    )
    configured = embedder(rec, dimensions=3)
    await configured.embed([TextBlock("a")])
    with pytest.raises(ProviderError) as info:
        await configured.embed([TextBlock("b")])
    assert str(info.value) == (
        "provider 'openai': embedding size mismatch: model 'text-embedding-3-small' returned "
        "a vector of size 2 for input 0, expected 3 (dimensions=3)"
    )
    assert info.value.status == 200
    assert json.loads(info.value.body)["data"][0]["embedding"] == [1.0, 2.0]
    learned = embedder(rec)
    assert learned.dimensions is None
    with pytest.raises(
        ProviderError,
        match=re.escape(
            "returned a vector of size 1 for input 1, expected 2 (the size of its first vector)"
        ),
    ):
        await learned.embed_batch([[TextBlock("a")], [TextBlock("b")]])
    assert learned.dimensions == 2  # learned from the first vector


async def test_embed_count_mismatch_and_errors(embedder: Callable[..., OpenAIEmbedder]) -> None:
    rec = Recorder(
        embeddings([1.0]),
        httpx.Response(429, json=fixture("error_429_slow_down.json"), headers={"retry-after": "1"}),
    )
    emb = embedder(rec)
    with pytest.raises(
        ProviderError, match=r"embeddings: asked model 'text-embedding-3-small' for 2, got 1$"
    ):
        await emb.embed_batch([[TextBlock("a")], [TextBlock("b")]])
    with pytest.raises(ProviderError) as info:
        await emb.embed([TextBlock("a")])
    assert (info.value.status, info.value.retry_after) == (429, 1.0)
