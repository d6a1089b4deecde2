"""OpenAIProvider against compatible servers: the base URL, errors naming it, tools unstreamed."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from goagent_py.errors import ProviderError
from goagent_py.messages import user_message
from goagent_py.provider import (
    CompletionRequest,
    StreamDone,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)
from goagent_py.providers.openai import OpenAIEmbedder, OpenAIProvider, resolve_base_url
from goagent_py.tools import ToolDefinition

LOCAL = "http://127.0.0.1:8080/v1"
ADD = ToolDefinition(
    "add",
    "Add two integers.",
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
)


def _request(*, tools: bool) -> CompletionRequest:
    return CompletionRequest(
        model="m", messages=[user_message("What is 2 + 3?")], tools=[ADD] if tools else []
    )


def _completion(**message: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "choices": [{"message": {"role": "assistant", **message}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2},
    }


def _client(handler: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def test_base_url_comes_from_the_argument_then_openai_base_url_then_openai(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", LOCAL)
    assert OpenAIProvider().base_url == LOCAL
    assert OpenAIProvider(base_url="http://other:1/v1").base_url == "http://other:1/v1"
    assert OpenAIEmbedder("e").base_url == LOCAL
    monkeypatch.setenv("OPENAI_BASE_URL", "")  # set but empty: unset, not ""
    assert resolve_base_url(None) == "https://api.openai.com/v1"
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert OpenAIProvider().base_url == "https://api.openai.com/v1"


def test_a_local_base_url_from_the_environment_needs_no_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", LOCAL)
    assert OpenAIProvider().base_url == LOCAL


@pytest.mark.parametrize("stream", [False, True])
async def test_a_connection_error_names_the_url_tried(stream: bool) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno -2] Name or service not known", request=request)

    async with (
        _client(refuse) as client,
        OpenAIProvider(base_url="http://nowhere.invalid:9/v1", http_client=client) as provider,
    ):

        async def call() -> None:
            if stream:
                [e async for e in provider.stream(_request(tools=False))]
            else:
                await provider.complete(_request(tools=False))

        with pytest.raises(ProviderError) as info:
            await call()
    assert "http://nowhere.invalid:9/v1/chat/completions" in str(info.value)
    assert "Name or service not known" in str(info.value)
    assert info.value.status is None


async def test_stream_tools_false_asks_for_a_whole_answer_when_tools_are_offered() -> None:
    bodies: list[dict[str, Any]] = []
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2}'}}

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        if body.get("stream"):
            chunk = {"model": "m", "choices": [{"delta": {"content": "hi"}, "finish_reason": None}]}
            done = {"model": "m", "choices": [{"delta": {}, "finish_reason": "stop"}]}
            data = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(done)}\n\ndata: [DONE]\n\n"
            return httpx.Response(
                200, content=data.encode(), headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(200, json=_completion(content="", tool_calls=[call]))

    async with (
        _client(answer) as client,
        OpenAIProvider(base_url=LOCAL, http_client=client, stream_tools=False) as provider,
    ):
        with_tools = [e async for e in provider.stream(_request(tools=True))]
        without = [e async for e in provider.stream(_request(tools=False))]
    assert [b.get("stream", False) for b in bodies] == [False, True]
    assert [type(e) for e in with_tools] == [ToolCallStart, ToolCallDelta, StreamDone]
    assert with_tools[0] == ToolCallStart(0, "c1", "add")
    assert isinstance(with_tools[1], ToolCallDelta)
    assert json.loads(with_tools[1].arguments_delta) == {"a": 2}
    assert isinstance(without[0], TextDelta)
    assert without[0].text == "hi"


async def test_a_tool_stream_closed_before_anything_says_to_use_stream_tools_false() -> None:
    def close(request: httpx.Request) -> httpx.Response:
        # What llama-cpp-python's server does: headers, then the connection ends, no event.
        return httpx.Response(200, content=b"", headers={"content-type": "text/event-stream"})

    async with (
        _client(close) as client,
        OpenAIProvider(base_url=LOCAL, http_client=client) as provider,
    ):
        with pytest.raises(ProviderError) as info:
            [e async for e in provider.stream(_request(tools=True))]
        notes = "\n".join(getattr(info.value, "__notes__", []))
        assert "stream_tools=False" in notes
        assert "Automatic streaming tool choice is not supported" in notes
        with pytest.raises(ProviderError) as plain:
            [e async for e in provider.stream(_request(tools=False))]
        assert not getattr(plain.value, "__notes__", [])
