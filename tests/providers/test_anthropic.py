"""AnthropicProvider against the Messages API wire format (fixtures in tests/fixtures/anthropic)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from goagent_py import Agent, tool
from goagent_py.errors import ConfigurationError, ProviderError
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
    ThinkingConfig,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
)
from goagent_py.providers.anthropic import AnthropicProvider
from goagent_py.tools import ToolDefinition

FIXTURES = Path(__file__).parent.parent / "fixtures" / "anthropic"
MODEL = "claude-sonnet-4-5"


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def sse(name: str) -> httpx.Response:
    return httpx.Response(
        200,
        content=(FIXTURES / name).read_bytes(),
        headers={"content-type": "text/event-stream; charset=utf-8"},
    )


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
async def mock() -> AsyncIterator[Callable[..., AnthropicProvider]]:
    clients: list[httpx.AsyncClient] = []

    def make(recorder: Recorder, **kwargs: Any) -> AnthropicProvider:
        client = httpx.AsyncClient(transport=httpx.MockTransport(recorder))
        clients.append(client)
        return AnthropicProvider("sk-ant-test", http_client=client, **kwargs)

    yield make
    for client in clients:
        await client.aclose()


WEATHER = ToolDefinition(
    "get_weather",
    "Get the current weather in a given location",
    {
        "type": "object",
        "properties": {
            "location": {
                "type": "string",
                "description": "The city and state, e.g. San Francisco, CA",
            }
        },
        "required": ["location"],
    },
)
TIME = ToolDefinition(
    "get_time",
    "Get the current time in a given timezone",
    {
        "type": "object",
        "properties": {
            "timezone": {"type": "string", "description": "The timezone, e.g. America/New_York"}
        },
        "required": ("timezone",),  # a tuple: must still go out as a JSON list
    },
)
SYSTEM = fixture("messages_request_system_tools.json")["system"]
QUESTION = "What's the weather in SF and NYC, and what time is it there?"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAC0lEQVR4nGP4DwQACfsD/fteaysAAAAASUVORK5CYII="
)
PDF = base64.b64decode(
    fixture("messages_request_image_pdf.json")["messages"][0]["content"][1]["source"]["data"]
)


def request(*messages: Message, **kwargs: Any) -> CompletionRequest:
    return CompletionRequest(model=kwargs.pop("model", MODEL), messages=list(messages), **kwargs)


# --- construction -----------------------------------------------------------------------------


def test_missing_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match=r"set ANTHROPIC_API_KEY or pass api_key=\.\.\."):
        AnthropicProvider()


def test_api_key_from_env_and_never_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    provider = AnthropicProvider()
    assert "sk-ant-secret" not in repr(provider)
    assert isinstance(provider, StreamingProvider)


async def test_owned_client_closed_by_context_manager() -> None:
    async with AnthropicProvider("k") as provider:
        client = provider.client
    assert client.is_closed


# --- request mapping --------------------------------------------------------------------------


async def test_headers_url_and_plain_text(mock: Callable[..., AnthropicProvider]) -> None:
    rec = Recorder(httpx.Response(200, json=fixture("messages_response_text.json")))
    await mock(rec).complete(request(user_message("Hi")))
    sent = rec.requests[0]
    assert str(sent.url) == "https://api.anthropic.com/v1/messages"
    assert sent.headers["x-api-key"] == "sk-ant-test"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["content-type"] == "application/json"
    assert rec.bodies[0] == {
        "model": MODEL,
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "Hi"}],
    }


async def test_system_and_tools_match_fixture(mock: Callable[..., AnthropicProvider]) -> None:
    rec = Recorder(httpx.Response(200, json=fixture("messages_response_parallel_tool_use.json")))
    await mock(rec).complete(
        request(
            user_message(QUESTION), system_prompt=SYSTEM, tools=[WEATHER, TIME], max_tokens=1024
        )
    )
    body = rec.bodies[0]
    expected = fixture("messages_request_system_tools.json")
    assert body["system"] == expected["system"]
    assert body["tools"] == expected["tools"]
    assert body["tools"][1]["input_schema"]["required"] == ["timezone"]
    assert body == expected


async def test_required_from_json_schema_is_kept(mock: Callable[..., AnthropicProvider]) -> None:
    # An MCP tool's schema decoded from JSON: required is a list of Any; keep every other key too.
    schema = json.loads(
        '{"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer"}},'
        '"required":["q"],"additionalProperties":false,"$defs":{"x":{"type":"string"}}}'
    )
    rec = Recorder(httpx.Response(200, json=fixture("messages_response_text.json")))
    await mock(rec).complete(
        request(user_message("x"), tools=[ToolDefinition("search", "Search.", schema)])
    )
    assert rec.bodies[0]["tools"] == [
        {"name": "search", "description": "Search.", "input_schema": schema}
    ]


def parallel_turn() -> list[Message]:
    calls = [
        ToolCall("toolu_01", "get_weather", {"location": "San Francisco, CA"}),
        ToolCall("toolu_02", "get_weather", {"location": "New York, NY"}),
    ]
    return [
        user_message(QUESTION),
        Message(
            Role.ASSISTANT,
            [
                TextBlock(
                    "I'll check the weather and time for both San Francisco and New York City."
                )
            ],
            tool_calls=calls,
        ),
        Message(
            Role.TOOL, [TextBlock("San Francisco: 68°F, partly cloudy")], tool_call_id="toolu_01"
        ),
        Message(
            Role.TOOL,
            [TextBlock("ConnectionError: the weather service API is not available (HTTP 500)")],
            tool_call_id="toolu_02",
            is_error=True,
        ),
    ]


async def test_tool_results_folded_with_is_error(mock: Callable[..., AnthropicProvider]) -> None:
    rec = Recorder(httpx.Response(200, json=fixture("messages_response_text.json")))
    await mock(rec).complete(
        request(*parallel_turn(), system_prompt=SYSTEM, tools=[WEATHER, TIME], max_tokens=1024)
    )
    assert rec.bodies[0] == fixture("messages_request_tool_results.json")


async def test_three_results_in_one_user_message(mock: Callable[..., AnthropicProvider]) -> None:
    calls = [ToolCall(f"toolu_0{i}", "get_time", {"timezone": f"tz{i}"}) for i in (1, 2, 3)]
    results = [
        # "Error:" text without the flag is NOT an error; the flag decides.
        Message(Role.TOOL, [TextBlock("Error: not really")], tool_call_id="toolu_01"),
        Message(Role.TOOL, [TextBlock("boom")], tool_call_id="toolu_02", is_error=True),
        Message(Role.TOOL, [], tool_call_id="toolu_03"),
    ]
    rec = Recorder(httpx.Response(200, json=fixture("messages_response_text.json")))
    await mock(rec).complete(
        request(user_message("q"), Message(Role.ASSISTANT, tool_calls=calls), *results)
    )
    messages = rec.bodies[0]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [b["type"] for b in messages[1]["content"]] == ["tool_use"] * 3
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_01", "content": "Error: not really"},
        {"type": "tool_result", "tool_use_id": "toolu_02", "content": "boom", "is_error": True},
        {"type": "tool_result", "tool_use_id": "toolu_03"},
    ]


async def test_image_and_pdf_in_user_message(mock: Callable[..., AnthropicProvider]) -> None:
    rec = Recorder(httpx.Response(200, json=fixture("messages_response_text.json")))
    message = Message(
        Role.USER,
        [
            ImageBlock(PNG, "image/png"),
            DocumentBlock(PDF, "application/pdf"),
            TextBlock("Describe this image. What are the key findings in this document?"),
        ],
    )
    await mock(rec).complete(request(message, max_tokens=1024))
    assert rec.bodies[0] == fixture("messages_request_image_pdf.json")


async def test_image_pdf_and_text_document_in_tool_result(
    mock: Callable[..., AnthropicProvider],
) -> None:
    expected = fixture("messages_request_image_pdf.json")["messages"][0]["content"]
    result = Message(
        Role.TOOL,
        [
            TextBlock("chart and report"),
            ImageBlock(PNG, "image/png"),
            DocumentBlock(PDF, "application/pdf"),
            DocumentBlock(b"plain notes", "text/plain", title="Notes"),
        ],
        tool_call_id="toolu_01",
    )
    rec = Recorder(httpx.Response(200, json=fixture("messages_response_text.json")))
    await mock(rec).complete(
        request(
            user_message("q"),
            Message(Role.ASSISTANT, tool_calls=[ToolCall("toolu_01", "report", {})]),
            result,
        )
    )
    (tool_result,) = rec.bodies[0]["messages"][2]["content"]
    assert tool_result == {
        "type": "tool_result",
        "tool_use_id": "toolu_01",
        "content": [
            {"type": "text", "text": "chart and report"},
            expected[0],
            expected[1],
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "plain notes"},
                "title": "Notes",
            },
        ],
    }


async def test_thinking_budget_matches_fixture(mock: Callable[..., AnthropicProvider]) -> None:
    expected = fixture("messages_request_thinking.json")
    rec = Recorder(httpx.Response(200, json=fixture("messages_response_thinking_redacted.json")))
    await mock(rec).complete(
        request(
            user_message(expected["messages"][0]["content"]),
            model=expected["model"],
            max_tokens=16000,
            thinking=ThinkingConfig(budget_tokens=10000),
        )
    )
    assert rec.bodies[0] == expected


async def test_adaptive_thinking_and_effort(mock: Callable[..., AnthropicProvider]) -> None:
    rec = Recorder(
        httpx.Response(200, json=fixture("messages_response_text.json")),
        httpx.Response(200, json=fixture("messages_response_text.json")),
    )
    provider = mock(rec)
    await provider.complete(
        request(user_message("x"), thinking=ThinkingConfig(), effort="high", max_tokens=99)
    )
    await provider.complete(request(user_message("x")))
    adaptive, plain = rec.bodies
    assert adaptive["thinking"] == {"type": "adaptive"}
    assert adaptive["output_config"] == {"effort": "high"}
    assert adaptive["max_tokens"] == 99
    assert "thinking" not in plain
    assert "output_config" not in plain


async def test_thinking_and_redacted_thinking_echoed(
    mock: Callable[..., AnthropicProvider],
) -> None:
    response_fixture = fixture("messages_response_thinking_redacted.json")
    rec = Recorder(
        httpx.Response(200, json=response_fixture),
        httpx.Response(200, json=fixture("messages_response_text.json")),
    )
    provider = mock(rec)
    first = await provider.complete(request(user_message("think")))
    await provider.complete(request(user_message("think"), first.message, user_message("more")))
    echoed = rec.bodies[1]["messages"][1]
    assert echoed == {"role": "assistant", "content": response_fixture["content"]}


async def test_consecutive_same_role_messages_merged(
    mock: Callable[..., AnthropicProvider],
) -> None:
    rec = Recorder(httpx.Response(200, json=fixture("messages_response_text.json")))
    await mock(rec).complete(
        request(
            user_message("recalled context"),
            user_message("question"),
            Message(Role.ASSISTANT, [TextBlock("")]),  # empty: dropped, not sent empty
            user_message("again"),
        )
    )
    assert rec.bodies[0]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "recalled context"},
                {"type": "text", "text": "question"},
                {"type": "text", "text": "again"},
            ],
        }
    ]


@pytest.mark.parametrize("role", ["system", "document"])
def test_system_and_document_roles_do_not_exist(role: str) -> None:
    # the system prompt travels on the request; passages are search results, not messages
    with pytest.raises(ConfigurationError, match="system prompt is the agent's system_prompt"):
        Message(role, [TextBlock("x")])  # type: ignore[arg-type]


async def test_empty_model_rejected_without_network(
    mock: Callable[..., AnthropicProvider],
) -> None:
    rec = Recorder()
    with pytest.raises(ConfigurationError, match="no model"):
        await mock(rec).complete(request(user_message("x"), model=""))
    assert rec.requests == []


# --- sampling settings and extra_body ---------------------------------------------------------


def text_reply() -> httpx.Response:
    return httpx.Response(200, json=fixture("messages_response_text.json"))


async def test_unset_sampling_sends_nothing(mock: Callable[..., AnthropicProvider]) -> None:
    rec = Recorder(text_reply())
    await mock(rec, temperature=None, top_p=None, stop=None, extra_body=None).complete(
        request(user_message("Hi"))
    )
    assert rec.bodies[0] == {
        "model": MODEL,
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "Hi"}],
    }


async def test_sampling_goes_into_every_body(mock: Callable[..., AnthropicProvider]) -> None:
    rec = Recorder(text_reply(), sse("stream_text.sse"), text_reply())
    provider = mock(rec, temperature=0, stop=["END", "\n\nHuman:"])
    await provider.complete(request(user_message("Hi")))
    async for _ in provider.stream(request(user_message("Hi"))):
        pass
    plain, streamed = rec.bodies
    assert plain["temperature"] == 0
    assert plain["stop_sequences"] == ["END", "\n\nHuman:"]
    assert "top_p" not in plain
    assert streamed["temperature"] == 0
    assert streamed["stop_sequences"] == ["END", "\n\nHuman:"]
    assert streamed["stream"] is True
    await mock(rec, top_p=0.9).complete(request(user_message("Hi")))
    assert rec.bodies[2]["top_p"] == 0.9
    assert "temperature" not in rec.bodies[2]
    assert "stop_sequences" not in rec.bodies[2]


async def test_extra_body_is_merged_last(mock: Callable[..., AnthropicProvider]) -> None:
    rec = Recorder(text_reply())
    extra = {
        "top_k": 40,
        "metadata": {"user_id": "u-1"},
        "tool_choice": {"type": "tool", "name": "get_weather"},  # replaces what we'd send
    }
    await mock(rec, extra_body=extra, temperature=0.5).complete(
        request(user_message("Hi"), tools=[WEATHER])
    )
    body = rec.bodies[0]
    assert body["top_k"] == 40
    assert body["metadata"] == {"user_id": "u-1"}
    assert body["tool_choice"] == {"type": "tool", "name": "get_weather"}
    assert body["temperature"] == 0.5
    assert body["messages"] == [{"role": "user", "content": "Hi"}]
    assert body["model"] == MODEL


@pytest.mark.parametrize(
    ("key", "advice"),
    [
        ("model", "the model comes from the request (with_model(...))"),
        ("messages", "the provider builds them from the conversation"),
        ("stream", "complete() and stream() set it"),
        ("max_tokens", "pass max_tokens=... to AnthropicProvider (or with_max_tokens(...))"),
        ("temperature", "pass temperature=... to AnthropicProvider"),
        ("top_p", "pass top_p=... to AnthropicProvider"),
        ("stop_sequences", "pass stop=[...] to AnthropicProvider"),
    ],
)
def test_extra_body_cannot_take_over_the_request(key: str, advice: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        AnthropicProvider("k", extra_body={key: "x"})
    assert str(info.value) == f"anthropic: extra_body may not set {key!r}: {advice}"


async def test_thinking_with_another_temperature_fails_before_sending(
    mock: Callable[..., AnthropicProvider],
) -> None:
    rec = Recorder()
    provider = mock(rec, temperature=0.2)
    thinking = request(user_message("Hi"), thinking=ThinkingConfig(budget_tokens=2048))
    with pytest.raises(ConfigurationError) as info:
        await provider.complete(thinking)
    assert str(info.value) == (
        "anthropic: temperature=0.2 cannot be used with extended thinking: the API takes only "
        "temperature 1 while thinking is on; leave temperature unset (or 1) on "
        "AnthropicProvider, or drop with_thinking/with_adaptive_thinking"
    )
    with pytest.raises(ConfigurationError, match=r"temperature=0\.2 cannot be used"):
        async for _ in provider.stream(thinking):
            pass
    narrow = mock(rec, top_p=0.9)
    with pytest.raises(ConfigurationError) as info:
        await narrow.complete(request(user_message("Hi"), thinking=ThinkingConfig()))
    assert str(info.value) == (
        "anthropic: top_p=0.9 cannot be used with extended thinking: the API takes only top_p "
        "from 0.95 to 1 while thinking is on; raise or unset top_p on AnthropicProvider, or "
        "drop with_thinking/with_adaptive_thinking"
    )
    assert rec.requests == []


async def test_thinking_with_allowed_settings_is_sent(
    mock: Callable[..., AnthropicProvider],
) -> None:
    rec = Recorder(text_reply(), text_reply(), text_reply())
    await mock(rec, temperature=1).complete(
        request(user_message("Hi"), thinking=ThinkingConfig(budget_tokens=2048))
    )
    await mock(rec, top_p=0.95).complete(request(user_message("Hi"), thinking=ThinkingConfig()))
    await mock(rec, temperature=0.2).complete(request(user_message("Hi")))  # no thinking
    with_temperature, with_top_p, plain = rec.bodies
    assert with_temperature["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert with_temperature["temperature"] == 1
    assert with_top_p["thinking"] == {"type": "adaptive"}
    assert with_top_p["top_p"] == 0.95
    assert plain["temperature"] == 0.2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"temperature": 1.5},
            "anthropic: temperature must be between 0 and 1 (the Anthropic API's range), got "
            "1.5; leave it None for the model's default",
        ),
        (
            {"temperature": -0.1},
            "anthropic: temperature must be between 0 and 1 (the Anthropic API's range), got "
            "-0.1; leave it None for the model's default",
        ),
        (
            {"top_p": 0},
            "anthropic: top_p must be greater than 0 and at most 1, got 0; leave it None for "
            "the model's default",
        ),
        (
            {"temperature": 0.5, "top_p": 0.9},
            "anthropic: set temperature or top_p, not both: Claude models from the 4.5 "
            "generation on refuse requests with both (the API reference advises changing one)",
        ),
        (
            {"stop": ["END", " \n"]},
            "anthropic: stop[1] is only whitespace (' \\n'), which the Anthropic API refuses; "
            "use a sequence with a visible character",
        ),
    ],
)
def test_sampling_outside_anthropics_limits(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        AnthropicProvider("k", **kwargs)
    assert str(info.value) == message


# --- response mapping -------------------------------------------------------------------------


async def test_text_response(mock: Callable[..., AnthropicProvider]) -> None:
    rec = Recorder(httpx.Response(200, json=fixture("messages_response_text.json")))
    response = await mock(rec).complete(request(user_message("x")))
    assert response.message.role is Role.ASSISTANT
    expected = fixture("messages_response_text.json")["content"][0]["text"]
    assert response.message.content == [TextBlock(expected)]
    assert expected.startswith("The weather in San Francisco, CA is currently **Sunny**")
    assert response.stop_reason is StopReason.END_TURN
    assert response.usage == Usage(input_tokens=770, output_tokens=25)
    assert response.model == "claude-haiku-4-5-20251001"


async def test_parallel_tool_use_response(mock: Callable[..., AnthropicProvider]) -> None:
    rec = Recorder(httpx.Response(200, json=fixture("messages_response_parallel_tool_use.json")))
    response = await mock(rec).complete(request(user_message("x")))
    assert response.stop_reason is StopReason.TOOL_USE
    assert response.message.tool_calls == [
        ToolCall("toolu_01", "get_weather", {"location": "San Francisco, CA"}),
        ToolCall("toolu_02", "get_weather", {"location": "New York, NY"}),
    ]
    assert response.message.text.startswith("I'll check the weather")
    assert response.usage == Usage(input_tokens=612, output_tokens=118)


async def test_thinking_response(mock: Callable[..., AnthropicProvider]) -> None:
    data = fixture("messages_response_thinking_redacted.json")
    rec = Recorder(httpx.Response(200, json=data))
    response = await mock(rec).complete(request(user_message("x")))
    assert response.message.content == [
        ThinkingBlock("Let me analyze this step by step...", data["content"][0]["signature"]),
        ThinkingBlock("[redacted]", data["content"][1]["data"]),
        TextBlock("Based on my analysis..."),
    ]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("usage_cache_write.json", Usage(21, 393, cache_creation_input_tokens=188086)),
        ("usage_cache_read.json", Usage(21, 393, cache_read_input_tokens=188086)),
    ],
)
async def test_usage_with_cache(
    mock: Callable[..., AnthropicProvider], name: str, expected: Usage
) -> None:
    data = fixture("messages_response_text.json") | {"usage": fixture(name)}
    rec = Recorder(httpx.Response(200, json=data))
    response = await mock(rec).complete(request(user_message("x")))
    assert response.usage == expected


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("end_turn", StopReason.END_TURN),
        ("max_tokens", StopReason.MAX_TOKENS),
        ("tool_use", StopReason.TOOL_USE),
        ("stop_sequence", StopReason.STOP_SEQUENCE),
        ("refusal", StopReason.REFUSAL),
        ("pause_turn", StopReason.PAUSE_TURN),
        ("something_new", StopReason.END_TURN),
    ],
)
async def test_stop_reasons(
    mock: Callable[..., AnthropicProvider], wire: str, expected: StopReason
) -> None:
    data = fixture("messages_response_text.json") | {"stop_reason": wire}
    rec = Recorder(httpx.Response(200, json=data))
    assert (await mock(rec).complete(request(user_message("x")))).stop_reason is expected


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "status", "error_type", "headers", "retry_after"),
    [
        ("error_400_invalid_request_error.json", 400, "invalid_request_error", {}, None),
        ("error_401_authentication_error.json", 401, "authentication_error", {}, None),
        ("error_429_rate_limit_error.json", 429, "rate_limit_error", {"retry-after": "30"}, 30.0),
        ("error_429_spend_limit.json", 429, "rate_limit_error", {}, None),
        ("error_500_api_error.json", 500, "api_error", {}, None),
        ("error_529_overloaded_error.json", 529, "overloaded_error", {}, None),
    ],
)
async def test_error_fixtures(
    mock: Callable[..., AnthropicProvider],
    name: str,
    status: int,
    error_type: str,
    headers: dict[str, str],
    retry_after: float | None,
) -> None:
    body = (FIXTURES / name).read_text()
    rec = Recorder(httpx.Response(status, text=body, headers=headers))
    with pytest.raises(ProviderError) as info:
        await mock(rec).complete(request(user_message("x")))
    err = info.value
    assert (err.provider, err.status, err.error_type) == ("anthropic", status, error_type)
    assert err.retry_after == retry_after
    assert err.body == body
    assert json.loads(body)["error"]["message"][:40] in str(err)
    assert "sk-ant-test" not in str(err)


async def test_malformed_and_html_bodies(mock: Callable[..., AnthropicProvider]) -> None:
    rec = Recorder(
        httpx.Response(200, text='{"type": "message", "content": [{"type": "te'),
        httpx.Response(502, text="<html><h1>502 Bad Gateway</h1></html>"),
        httpx.Response(200, json={"type": "message", "content": [{"type": "text"}]}),
    )
    provider = mock(rec)
    with pytest.raises(ProviderError, match="not JSON") as info:
        await provider.complete(request(user_message("x")))
    assert info.value.status == 200
    with pytest.raises(ProviderError, match="502 Bad Gateway") as info:
        await provider.complete(request(user_message("x")))
    assert info.value.status == 502
    with pytest.raises(ProviderError, match="malformed message"):
        await provider.complete(request(user_message("x")))


async def test_error_object_with_http_200(mock: Callable[..., AnthropicProvider]) -> None:
    rec = Recorder(httpx.Response(200, json=fixture("error_529_overloaded_error.json")))
    with pytest.raises(ProviderError) as info:
        await mock(rec).complete(request(user_message("x")))
    assert (info.value.status, info.value.error_type) == (200, "overloaded_error")


# --- streaming --------------------------------------------------------------------------------


async def collect(
    provider: AnthropicProvider, req: CompletionRequest
) -> tuple[list[StreamEvent], CompletionResponse]:
    events = [e async for e in provider.stream(req)]
    assert isinstance(events[-1], StreamDone)
    assert sum(isinstance(e, StreamDone) for e in events) == 1
    return events[:-1], events[-1].response


async def test_stream_text(mock: Callable[..., AnthropicProvider]) -> None:
    rec = Recorder(sse("stream_text.sse"))
    events, response = await collect(mock(rec), request(user_message("x")))
    assert rec.bodies[0]["stream"] is True
    assert rec.requests[0].headers["accept"] == "text/event-stream"
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == response.message.text
    assert text.startswith("The weather in San Francisco, CA is")
    assert len(events) == 9
    assert response.stop_reason is StopReason.END_TURN
    assert response.usage.input_tokens == 770
    assert response.usage.output_tokens > 8  # message_delta's cumulative count wins
    assert response.model == "claude-haiku-4-5-20251001"


async def test_stream_tool_use(mock: Callable[..., AnthropicProvider]) -> None:
    rec = Recorder(sse("stream_tool_use.sse"))
    events, response = await collect(mock(rec), request(user_message("x")))
    assert events[0] == ToolCallStart(0, "toolu_018acGYLtfR52q9yDbWaEdQZ", "get_weather")
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert all(d.index == 0 for d in deltas)
    (call,) = response.message.tool_calls
    assert json.loads("".join(d.arguments_delta for d in deltas)) == call.arguments
    assert call.id == "toolu_018acGYLtfR52q9yDbWaEdQZ"
    assert response.stop_reason is StopReason.TOOL_USE


async def test_stream_text_then_tool_use(mock: Callable[..., AnthropicProvider]) -> None:
    rec = Recorder(sse("stream_text_then_tool_use.sse"))
    events, response = await collect(mock(rec), request(user_message("x")))
    assert response.message.content == [
        TextBlock("I'll check the current weather in Paris for you.")
    ]
    assert response.message.tool_calls == [
        ToolCall("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather", {"location": "Paris"})
    ]
    assert ToolCallStart(0, "toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather") in events
    assert response.usage == Usage(input_tokens=377, output_tokens=65)


async def test_stream_thinking_with_signature(mock: Callable[..., AnthropicProvider]) -> None:
    rec = Recorder(sse("stream_thinking.sse"))
    events, response = await collect(mock(rec), request(user_message("x")))
    thinking = "".join(e.thinking for e in events if isinstance(e, ThinkingDelta))
    assert thinking.startswith("I need to find the GCD")
    assert response.message.content == [
        ThinkingBlock(thinking, "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds..."),
        TextBlock("The greatest common divisor of 1071 and 462 is **21**."),
    ]


async def test_stream_error_event_on_http_200(mock: Callable[..., AnthropicProvider]) -> None:
    rec = Recorder(sse("stream_error_overloaded.sse"))
    seen: list[StreamEvent] = []

    async def consume() -> None:
        async for event in mock(rec).stream(request(user_message("x"))):
            seen.append(event)

    with pytest.raises(ProviderError) as info:
        await consume()
    assert seen == [TextDelta("Hello")]
    assert (info.value.status, info.value.error_type) == (200, "overloaded_error")
    assert "Overloaded" in str(info.value)


async def test_stream_truncated(mock: Callable[..., AnthropicProvider]) -> None:
    raw = (FIXTURES / "stream_text.sse").read_bytes()
    cut = raw[: raw.index(b"event: message_delta")]
    rec = Recorder(httpx.Response(200, content=cut, headers={"content-type": "text/event-stream"}))
    with pytest.raises(ProviderError, match="before message_stop"):
        await collect(mock(rec), request(user_message("x")))


async def test_stream_dropped_connection(mock: Callable[..., AnthropicProvider]) -> None:
    raw = (FIXTURES / "stream_text.sse").read_bytes()

    async def body() -> AsyncIterator[bytes]:
        yield raw[:400]
        raise httpx.RemoteProtocolError("peer closed connection")

    rec = Recorder(
        httpx.Response(200, content=body(), headers={"content-type": "text/event-stream"})
    )
    with pytest.raises(ProviderError) as info:
        await collect(mock(rec), request(user_message("x")))
    assert info.value.status is None
    assert isinstance(info.value.__cause__, httpx.RemoteProtocolError)


async def test_stream_http_error(mock: Callable[..., AnthropicProvider]) -> None:
    body = (FIXTURES / "error_429_rate_limit_error.json").read_text()
    rec = Recorder(httpx.Response(429, text=body, headers={"retry-after": "3"}))
    with pytest.raises(ProviderError) as info:
        await collect(mock(rec), request(user_message("x")))
    assert (info.value.status, info.value.error_type, info.value.retry_after) == (
        429,
        "rate_limit_error",
        3.0,
    )


# --- end to end -------------------------------------------------------------------------------


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


async def test_agent_tool_round_trip(mock: Callable[..., AnthropicProvider]) -> None:
    tool_use = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [
            {"type": "tool_use", "id": "toolu_add", "name": "add", "input": {"a": 2, "b": 3}}
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    answer = fixture("messages_response_text.json")
    answer["content"] = [{"type": "text", "text": "2 + 3 = 5"}]
    rec = Recorder(httpx.Response(200, json=tool_use), httpx.Response(200, json=answer))
    agent = Agent(provider=mock(rec), model=MODEL, tools=[add])
    assert (await agent.run("What is 2 + 3?")).text == "2 + 3 = 5"
    first, second = rec.bodies
    assert first["tools"][0]["name"] == "add"
    assert first["tools"][0]["input_schema"]["required"] == ["a", "b"]
    assert second["messages"][1] == {"role": "assistant", "content": tool_use["content"]}
    assert second["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_add", "content": "5"}],
    }


def _sse_events(*events: dict[str, Any]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


async def test_agent_streaming_tool_round_trip(mock: Callable[..., AnthropicProvider]) -> None:
    tool_stream = _sse_events(
        {
            "type": "message_start",
            "message": {"model": MODEL, "content": [], "usage": {"input_tokens": 9}},
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_add", "name": "add", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"a": 2, '},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '"b": 3}'},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 7},
        },
        {"type": "message_stop"},
    )
    rec = Recorder(
        httpx.Response(200, content=tool_stream, headers={"content-type": "text/event-stream"}),
        sse("stream_text.sse"),
    )
    agent = Agent(provider=mock(rec), model=MODEL, tools=[add])
    events = [event async for event in agent.stream("What is 2 + 3?")]
    assert events
    first, second = rec.bodies
    assert first["stream"] is True
    assert second["messages"][1]["content"] == [
        {"type": "tool_use", "id": "toolu_add", "name": "add", "input": {"a": 2, "b": 3}}
    ]
    assert second["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_add", "content": "5"}
    ]
