"""retry_provider over a real provider and a fake HTTP transport (vendor error bodies)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from goagent_py import ProviderError, RetryPolicy, retry_provider, user_message
from goagent_py.provider import CompletionRequest
from goagent_py.providers.anthropic import AnthropicProvider

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "anthropic"


def _fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _server(replies: list[httpx.Response]) -> tuple[httpx.AsyncClient, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return replies[len(seen) - 1]

    return httpx.AsyncClient(transport=httpx.MockTransport(handle)), seen


def _error(status: int, fixture: str, **headers: str) -> httpx.Response:
    return httpx.Response(
        status, content=_fixture(fixture), headers={"content-type": "application/json", **headers}
    )


def _ok() -> httpx.Response:
    return httpx.Response(
        200,
        content=_fixture("messages_response_text.json"),
        headers={"content-type": "application/json"},
    )


def _recorder() -> tuple[list[float], Callable[[float], object]]:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    return waits, sleep


REQUEST = CompletionRequest(model="claude-sonnet-4-6", messages=[user_message("hi")])


async def test_429_with_retry_after_waits_what_the_server_said() -> None:
    client, seen = _server(
        [_error(429, "error_429_rate_limit_error.json", **{"retry-after": "1"}), _ok()]
    )
    waits, sleep = _recorder()
    async with client:
        provider = retry_provider(
            AnthropicProvider(api_key="k", http_client=client), RetryPolicy(sleep=sleep)
        )  # type: ignore[arg-type]
        response = await provider.complete(REQUEST)
    assert "Sunny" in response.message.text
    assert len(seen) == 2
    assert waits == [1.0]


async def test_400_is_not_retried() -> None:
    client, seen = _server([_error(400, "error_400_invalid_request_error.json"), _ok()])
    waits, sleep = _recorder()
    async with client:
        provider = retry_provider(
            AnthropicProvider(api_key="k", http_client=client), RetryPolicy(sleep=sleep)
        )  # type: ignore[arg-type]
        with pytest.raises(ProviderError) as info:
            await provider.complete(REQUEST)
    assert info.value.status == 400
    assert len(seen) == 1
    assert waits == []


async def test_overloaded_three_times_then_success_returns_the_success() -> None:
    overloaded = [_error(529, "error_529_overloaded_error.json") for _ in range(3)]
    client, seen = _server([*overloaded, _ok()])
    waits, sleep = _recorder()
    async with client:
        provider = retry_provider(
            AnthropicProvider(api_key="k", http_client=client),
            RetryPolicy(max_attempts=4, initial_delay=0.5, jitter=0, sleep=sleep),  # type: ignore[arg-type]
        )
        response = await provider.complete(REQUEST)
    assert "Sunny" in response.message.text
    assert len(seen) == 4
    assert waits == [0.5, 1.0, 2.0]
    assert json.loads(seen[-1].content)["model"] == "claude-sonnet-4-6"


async def test_a_huge_retry_after_is_capped_at_max_delay() -> None:
    client, _ = _server(
        [_error(429, "error_429_rate_limit_error.json", **{"retry-after": "3600"}), _ok()]
    )
    waits, sleep = _recorder()
    async with client:
        provider = retry_provider(
            AnthropicProvider(api_key="k", http_client=client),
            RetryPolicy(max_delay=10, sleep=sleep),
        )  # type: ignore[arg-type]
        await provider.complete(REQUEST)
    assert waits == [10.0]
