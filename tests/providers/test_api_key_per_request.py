"""A key resolved for each request (short-lived tokens), for Anthropic and OpenAI."""

from __future__ import annotations

import itertools
import json

import httpx
import pytest

from goagent_py import ConfigurationError, ProviderError, user_message
from goagent_py.provider import CompletionRequest
from goagent_py.providers.anthropic import AnthropicProvider
from goagent_py.providers.openai import OpenAIProvider

ANTHROPIC_OK = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-6",
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 1},
}
OPENAI_OK = {
    "id": "c1",
    "object": "chat.completion",
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


def request(model: str) -> CompletionRequest:
    return CompletionRequest(model=model, messages=[user_message("hello")])


async def test_anthropic_asks_an_async_key_function_before_each_request() -> None:
    seen: list[str] = []
    tokens = (f"tok-{i:02d}-short-lived-secret" for i in itertools.count())

    async def key() -> str:
        return next(tokens)

    def server(r: httpx.Request) -> httpx.Response:
        seen.append(r.headers["x-api-key"])
        return httpx.Response(200, json=ANTHROPIC_OK)

    client = httpx.AsyncClient(transport=httpx.MockTransport(server))
    provider = AnthropicProvider(api_key=key, http_client=client)
    await provider.complete(request("claude-sonnet-4-6"))
    await provider.complete(request("claude-sonnet-4-6"))
    assert seen == ["tok-00-short-lived-secret", "tok-01-short-lived-secret"]


async def test_openai_key_function_and_an_echoed_token_is_redacted() -> None:
    def server(r: httpx.Request) -> httpx.Response:
        token = r.headers["authorization"].removeprefix("Bearer ")
        if json.loads(r.content)["messages"][-1]["content"] == "echo":
            return httpx.Response(401, json={"error": {"message": f"bad token {token}"}})
        return httpx.Response(200, json=OPENAI_OK)

    client = httpx.AsyncClient(transport=httpx.MockTransport(server))
    provider = OpenAIProvider(api_key=lambda: "rotating-token-0123456789", http_client=client)
    assert (await provider.complete(request("gpt-4o"))).message.text == "hi"
    bad = CompletionRequest(model="gpt-4o", messages=[user_message("echo")])
    with pytest.raises(ProviderError) as info:
        await provider.complete(bad)
    assert "rotating-token-0123456789" not in str(info.value)
    assert "rotating-token-0123456789" not in info.value.body


async def test_a_key_function_that_returns_nothing_is_a_clear_error() -> None:
    client = httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    provider = AnthropicProvider(api_key=lambda: "", http_client=client)
    with pytest.raises(ConfigurationError, match="api_key function returned ''"):
        await provider.complete(request("claude-sonnet-4-6"))
