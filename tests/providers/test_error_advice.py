"""Errors a new user meets first say what to do: a refused API key, a server that is not there.

Anthropic's 401 says only "invalid x-api-key"; a connection error said only "All connection
attempts failed (POST url)".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from goagent_py.errors import ProviderError
from goagent_py.messages import user_message
from goagent_py.provider import CompletionRequest
from goagent_py.providers.anthropic import AnthropicProvider
from goagent_py.providers.ollama import OllamaProvider
from goagent_py.providers.openai import OpenAIProvider

FIXTURES = Path(__file__).parent.parent / "fixtures"
REQUEST = CompletionRequest(model="m", messages=[user_message("hi")])

Make = Callable[[httpx.AsyncClient], AnthropicProvider | OpenAIProvider]


@pytest.mark.parametrize(
    ("make", "fixture", "variable"),
    [
        (
            lambda c: AnthropicProvider(api_key="sk-ant-wrong", http_client=c),
            "anthropic/error_401_authentication_error.json",
            "ANTHROPIC_API_KEY",
        ),
        (
            lambda c: OpenAIProvider(api_key="sk-wrong", http_client=c),
            "openai/error_401.json",
            "OPENAI_API_KEY",
        ),
    ],
    ids=["anthropic", "openai"],
)
async def test_a_refused_api_key_names_the_variable_to_check(
    make: Make, fixture: str, variable: str
) -> None:
    body = (FIXTURES / fixture).read_text()
    transport = httpx.MockTransport(lambda request: httpx.Response(401, text=body))
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(ProviderError) as info:
            await make(client).complete(REQUEST)
    assert info.value.status == 401
    # Whole: the redaction once blanked advice written as "api_key=..." as if it were a key.
    advice = f"(the server refused the API key: check {variable}, or the api_key you passed)"
    assert advice in str(info.value)
    assert "wrong" not in str(info.value)


async def drain(provider: OllamaProvider) -> None:
    async for _ in provider.stream(REQUEST):
        pass


@pytest.mark.parametrize("streaming", [False, True], ids=["complete", "stream"])
async def test_a_server_that_is_not_there_says_to_start_it_or_fix_the_url(
    streaming: bool,
) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("All connection attempts failed", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as client:
        provider = OllamaProvider("qwen3", http_client=client)
        with pytest.raises(ProviderError) as info:
            await (drain(provider) if streaming else provider.complete(REQUEST))
    assert info.value.status is None
    message = str(info.value)
    assert "localhost:11434/api/chat" in message
    assert "start the server or fix the base URL" in message
