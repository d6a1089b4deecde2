"""Provider errors under hostile and failing servers: redaction, retry verdicts, mid-stream errors.

Real providers over httpx.MockTransport, fixtures from tests/fixtures (provenance in their
README.md files).
"""

from __future__ import annotations

import json
import logging
import pickle
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from goagent_py import Agent, ProviderError, RetryPolicy, retry_provider, user_message
from goagent_py.provider import CompletionRequest, StreamDone, StreamEvent
from goagent_py.providers.anthropic import AnthropicProvider
from goagent_py.providers.ollama import OllamaProvider
from goagent_py.providers.openai import OpenAIProvider
from goagent_py.resilience import is_retryable_provider_error

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

# A key of no known shape (like Cohere's): only the configured-key rule can find it.
PLAIN_KEY = "Zq81mXk2Lw9Pq3Rt7Yv5Nb6Hc4Jd0Fs1Ga8Ke2W"
ANTHROPIC_KEY = "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe-AbCdEf"

Reply = httpx.Response | Callable[[httpx.Request], httpx.Response]


def _fixture(path: str) -> bytes:
    return (FIXTURES / path).read_bytes()


def _server(*replies: Reply) -> tuple[httpx.AsyncClient, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        reply = replies[len(seen) - 1]
        return reply(request) if callable(reply) else reply

    return httpx.AsyncClient(transport=httpx.MockTransport(handle)), seen


def _json(status: int, body: Any, **headers: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.Response(
        status, content=content, headers={"content-type": "application/json", **headers}
    )


def _sse(body: bytes) -> httpx.Response:
    return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})


def _ndjson(body: bytes) -> httpx.Response:
    return httpx.Response(200, content=body, headers={"content-type": "application/x-ndjson"})


def _echo_key(request: httpx.Request) -> httpx.Response:
    """A hostile or buggy server: echoes the credential it got, in the message and elsewhere."""
    sent = request.headers.get("x-api-key") or request.headers.get("authorization", "")
    body = {
        "type": "error",
        "error": {"type": "authentication_error", "message": f"invalid x-api-key: {sent}"},
        "debug": {"headers": dict(request.headers)},
    }
    return _json(401, body)


async def _no_sleep(seconds: float) -> None:
    return None


def _anthropic_request() -> CompletionRequest:
    return CompletionRequest(model="claude-sonnet-4-6", messages=[user_message("hi")])


def _openai_request() -> CompletionRequest:
    return CompletionRequest(model="gpt-4o", messages=[user_message("hi")])


async def _drain(events: Any) -> list[StreamEvent]:
    return [event async for event in events]


# --- defect 6: an API key echoed back in an error body ----------------------------------------


@pytest.mark.parametrize("key", [ANTHROPIC_KEY, PLAIN_KEY])
async def test_an_echoed_key_is_in_neither_the_message_nor_the_body(key: str) -> None:
    client, _ = _server(_echo_key)
    async with client, AnthropicProvider(api_key=key, http_client=client) as provider:
        with pytest.raises(ProviderError) as info:
            await provider.complete(_anthropic_request())
    error = info.value
    assert error.status == 401
    assert error.error_type == "authentication_error"
    assert key not in str(error)
    assert key not in error.body
    assert "invalid x-api-key: [REDACTED]" in str(error)
    assert key not in repr(pickle.loads(pickle.dumps(error)).__dict__)


async def test_a_key_echoed_in_a_mid_stream_error_event_is_redacted() -> None:
    event = {"type": "error", "error": {"type": "api_error", "message": f"bad key {PLAIN_KEY}"}}
    client, _ = _server(_sse(f"event: error\ndata: {json.dumps(event)}\n\n".encode()))
    async with client, AnthropicProvider(api_key=PLAIN_KEY, http_client=client) as provider:
        with pytest.raises(ProviderError) as info:
            await _drain(provider.stream(_anthropic_request()))
    assert info.value.error_type == "api_error"
    assert PLAIN_KEY not in str(info.value)
    assert PLAIN_KEY not in info.value.body


async def test_a_key_echoed_by_an_openai_compatible_server_is_redacted() -> None:
    def echo(request: httpx.Request) -> httpx.Response:
        return _json(400, {"error": {"message": request.headers["authorization"], "type": "x"}})

    client, _ = _server(echo)
    async with client, OpenAIProvider(api_key=PLAIN_KEY, http_client=client) as provider:
        with pytest.raises(ProviderError) as info:
            await provider.complete(_openai_request())
    assert PLAIN_KEY not in str(info.value)
    assert PLAIN_KEY not in info.value.body
    assert "HTTP 400 x: [REDACTED]" in str(info.value)


async def test_the_agent_logs_a_provider_error_without_the_echoed_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client, _ = _server(_echo_key)
    async with client, AnthropicProvider(api_key=PLAIN_KEY, http_client=client) as provider:
        agent = Agent(provider=provider, model="claude-sonnet-4-6")
        with caplog.at_level(logging.DEBUG), pytest.raises(ProviderError):
            await agent.run("hi")
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings, "the provider error is logged"
    assert all(PLAIN_KEY not in r.getMessage() for r in caplog.records)


# --- x-should-retry, quota-exhausted 429s -----------------------------------------------------


def _anthropic_ok() -> httpx.Response:
    return _json(200, _fixture("anthropic/messages_response_text.json"))


async def _complete_with_retry(*replies: Reply) -> tuple[list[httpx.Request], Any]:
    client, seen = _server(*replies)
    async with client:
        provider = retry_provider(
            AnthropicProvider(api_key="k", http_client=client),
            RetryPolicy(max_attempts=3, sleep=_no_sleep),
        )
        try:
            return seen, await provider.complete(_anthropic_request())
        except ProviderError as exc:
            return seen, exc


async def test_x_should_retry_false_forbids_retrying_a_503() -> None:
    overloaded = _fixture("anthropic/error_529_overloaded_error.json")
    seen, outcome = await _complete_with_retry(
        _json(503, overloaded, **{"x-should-retry": "false"}), _anthropic_ok()
    )
    assert len(seen) == 1
    assert isinstance(outcome, ProviderError)
    assert outcome.status == 503


async def test_x_should_retry_true_forces_retrying_a_400() -> None:
    bad = _fixture("anthropic/error_400_invalid_request_error.json")
    seen, outcome = await _complete_with_retry(
        _json(400, bad, **{"x-should-retry": "true"}), _anthropic_ok()
    )
    assert len(seen) == 2
    assert not isinstance(outcome, ProviderError)


async def test_without_the_header_the_status_decides() -> None:
    bad = _fixture("anthropic/error_400_invalid_request_error.json")
    seen, _ = await _complete_with_retry(_json(400, bad, **{"x-should-retry": "maybe"}))
    assert len(seen) == 1
    overloaded = _fixture("anthropic/error_529_overloaded_error.json")
    seen, _ = await _complete_with_retry(_json(529, overloaded), _anthropic_ok())
    assert len(seen) == 2


async def test_anthropic_spend_limit_429_is_not_retried() -> None:
    spend = _fixture("anthropic/error_429_spend_limit.json")
    seen, outcome = await _complete_with_retry(_json(429, spend), _anthropic_ok())
    assert len(seen) == 1
    assert isinstance(outcome, ProviderError)
    assert outcome.error_type == "rate_limit_error"


async def test_an_anthropic_rate_limit_429_is_still_retried() -> None:
    limited = _fixture("anthropic/error_429_rate_limit_error.json")
    seen, outcome = await _complete_with_retry(_json(429, limited), _anthropic_ok())
    assert len(seen) == 2
    assert not isinstance(outcome, ProviderError)


INSUFFICIENT_QUOTA = {
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
}


@pytest.mark.parametrize(
    ("body", "retried"),
    [
        (INSUFFICIENT_QUOTA, False),
        ({"error": {"type": "requests", "code": "credit_balance_exhausted"}}, False),
        (json.loads(_fixture("openai/error_429_slow_down.json")), True),
    ],
    ids=["insufficient_quota", "billing_code", "slow_down"],
)
async def test_openai_429_quota_exhausted_is_not_retried(body: Any, retried: bool) -> None:
    ok = _json(200, _fixture("openai/chat_response_tool_calls.json"))
    client, seen = _server(_json(429, body), ok)
    async with client:
        provider = retry_provider(
            OpenAIProvider(api_key="k", http_client=client),
            RetryPolicy(max_attempts=3, sleep=_no_sleep),
        )
        if retried:
            await provider.complete(_openai_request())
        else:
            with pytest.raises(ProviderError):
                await provider.complete(_openai_request())
    assert len(seen) == (2 if retried else 1)


# --- mid-stream errors classified by their bodies ---------------------------------------------


OPENAI_STREAM_ERROR = {
    "error": {
        "message": "The server had an error while processing your request. Sorry about that!",
        "type": "server_error",
        "param": None,
        "code": None,
    }
}


async def test_openai_mid_stream_server_error_is_typed_and_retried() -> None:
    failing = _sse(f"data: {json.dumps(OPENAI_STREAM_ERROR)}\n\n".encode())
    client, _ = _server(failing, _sse(_fixture("openai/chat_stream_text.sse")))
    async with client:
        provider = OpenAIProvider(api_key="k", http_client=client)
        with pytest.raises(ProviderError) as info:
            await _drain(provider.stream(_openai_request()))
        assert (info.value.status, info.value.error_type) == (200, "server_error")
        assert is_retryable_provider_error(info.value)

        client2, seen2 = _server(failing, _sse(_fixture("openai/chat_stream_text.sse")))
        async with client2:
            retrying = retry_provider(
                OpenAIProvider(api_key="k", http_client=client2),
                RetryPolicy(max_attempts=2, sleep=_no_sleep),
            )
            events = await _drain(retrying.stream(_openai_request()))  # type: ignore[attr-defined]
    assert isinstance(events[-1], StreamDone)
    assert len(seen2) == 2


async def test_openai_compatible_mid_stream_error_with_an_http_code_is_classified_by_it() -> None:
    vllm = {"error": {"message": "m", "type": "BadRequestError", "param": None, "code": 400}}
    busy = {"error": {"message": "m", "type": "InternalServerError", "param": None, "code": 503}}
    verdicts = []
    for body in (vllm, busy):
        client, _ = _server(_sse(f"data: {json.dumps(body)}\n\n".encode()))
        async with client, OpenAIProvider(api_key="k", http_client=client) as provider:
            with pytest.raises(ProviderError) as info:
                await _drain(provider.stream(_openai_request()))
        verdicts.append(is_retryable_provider_error(info.value))
    assert verdicts == [False, True]


async def test_openai_mid_stream_insufficient_quota_is_not_retried() -> None:
    client, _ = _server(_sse(f"data: {json.dumps(INSUFFICIENT_QUOTA)}\n\n".encode()))
    async with client, OpenAIProvider(api_key="k", http_client=client) as provider:
        with pytest.raises(ProviderError) as info:
            await _drain(provider.stream(_openai_request()))
    assert not is_retryable_provider_error(info.value)


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        (b'{"error":"an error was encountered while running the model"}\n', "server_error"),
        (
            b'{"error":"server busy, please try again.  maximum pending requests exceeded"}\n',
            "overloaded_error",
        ),
        (b'{"error":"429 Too Many Requests: rate limit exceeded"}\n', "rate_limit_error"),
    ],
)
async def test_ollama_mid_stream_error_is_typed_and_retried(line: bytes, kind: str) -> None:
    request = CompletionRequest(model="qwen3", messages=[user_message("hi")])
    good = _ndjson(_fixture("ollama/chat_stream_tool_call.ndjson"))
    client, _ = _server(_ndjson(line))
    async with client, OllamaProvider(http_client=client) as provider:
        with pytest.raises(ProviderError) as info:
            await _drain(provider.stream(request))
    assert (info.value.status, info.value.error_type) == (200, kind)
    assert is_retryable_provider_error(info.value)

    client, seen = _server(_ndjson(line), good)
    async with client:
        retrying = retry_provider(
            OllamaProvider(http_client=client), RetryPolicy(max_attempts=2, sleep=_no_sleep)
        )
        events = await _drain(retrying.stream(request))  # type: ignore[attr-defined]
    assert isinstance(events[-1], StreamDone)
    assert len(seen) == 2


async def test_the_fixture_mid_stream_ollama_error_after_text_is_typed() -> None:
    # docs/api/errors.mdx's example: some chunks, then the error line (status stays 200).
    client, _ = _server(_ndjson(_fixture("ollama/stream_error.ndjson")))
    request = CompletionRequest(model="gemma4", messages=[user_message("hi")])
    async with client, OllamaProvider(http_client=client) as provider:
        with pytest.raises(ProviderError) as info:
            await _drain(provider.stream(request))
    assert info.value.error_type == "server_error"
    assert "an error was encountered while running the model" in str(info.value)


async def test_a_key_in_a_transport_error_is_redacted() -> None:
    google_key = "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot connect to https://gw.example/v1?key={google_key}")

    client, _ = _server(refuse)
    async with client, OpenAIProvider(api_key=PLAIN_KEY, http_client=client) as provider:
        with pytest.raises(ProviderError) as info:
            await provider.complete(_openai_request())
    assert info.value.status is None
    assert google_key not in str(info.value)
    assert isinstance(info.value.__cause__, httpx.ConnectError)  # the cause is kept...
    assert google_key not in str(info.value.__cause__)  # ...and its message redacted too
    assert google_key not in "".join(traceback.format_exception(info.value))
