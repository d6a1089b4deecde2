"""The shared HTTP plumbing: client ownership, errors, Retry-After, SSE, NDJSON, embedders."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from goagent_py._retry_after import retry_after_of
from goagent_py.errors import ConfigurationError, NoEmbeddableContentError, ProviderError
from goagent_py.messages import ImageBlock, TextBlock
from goagent_py.providers._http import (
    HTTPBackend,
    RemoteEmbedder,
    error_from_response,
    excerpt,
    resolve_api_key,
)
from goagent_py.providers.cohere import CohereEmbedder
from goagent_py.providers.ollama import OllamaEmbedder
from goagent_py.providers.openai import OpenAIEmbedder
from goagent_py.providers.voyage import VoyageEmbedder

FIXTURES = Path(__file__).parent.parent / "fixtures"

Handler = Callable[[httpx.Request], httpx.Response]


def mock_client(handler: Handler) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


# --- API keys ---------------------------------------------------------------------------------


def test_api_key_argument_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_API_KEY", "from-env")
    assert resolve_api_key("from-arg", "X_API_KEY", provider="x") == "from-arg"


def test_api_key_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_API_KEY", "from-env")
    assert resolve_api_key(None, "X_API_KEY", provider="x") == "from-env"


def test_missing_api_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match=r"set ANTHROPIC_API_KEY or pass api_key=\.\.\."):
        resolve_api_key(None, "ANTHROPIC_API_KEY", provider="anthropic")


def test_optional_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("X_API_KEY", raising=False)
    assert resolve_api_key(None, "X_API_KEY", provider="x", required=False) == ""


# --- Retry-After ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "-3"}, None),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_seconds(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_of(httpx.Headers(headers)) == expected


def test_retry_after_http_date() -> None:
    # Wed, 21 Oct 2015 07:28:00 GMT = 1445412480
    headers = httpx.Headers({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})
    when = datetime.fromtimestamp(1445412480, UTC)
    assert retry_after_of(headers, now=when - timedelta(seconds=30)) == pytest.approx(30.0)
    assert retry_after_of(headers, now=when + timedelta(seconds=30)) == 0.0


# --- error mapping ----------------------------------------------------------------------------


def test_error_from_anthropic_body() -> None:
    body = (FIXTURES / "anthropic" / "error_529_overloaded_error.json").read_text()
    response = httpx.Response(529, text=body, headers={"retry-after": "2"})
    err = error_from_response(response, provider="anthropic")
    assert err.status == 529
    assert err.error_type == "overloaded_error"
    assert err.retry_after == 2.0
    assert err.body == body
    assert "Overloaded" in str(err)
    assert str(err).startswith("provider 'anthropic': HTTP 529 overloaded_error")


def test_error_from_openai_body_uses_code_when_type_is_null() -> None:
    response = httpx.Response(
        429, json={"error": {"message": "slow", "type": None, "param": None, "code": "slow_down"}}
    )
    err = error_from_response(response, provider="openai")
    assert (err.status, err.error_type) == (429, "slow_down")


def test_error_from_ollama_and_voyage_bodies() -> None:
    ollama = error_from_response(httpx.Response(500, json={"error": "boom"}), provider="ollama")
    assert ollama.error_type == ""
    assert "boom" in str(ollama)
    voyage = error_from_response(httpx.Response(400, json={"detail": "bad"}), provider="voyage")
    assert "bad" in str(voyage)


def test_error_from_html_page_gives_an_excerpt() -> None:
    html = "<html><body><h1>502 Bad Gateway</h1>" + "x" * 1000 + "</body></html>"
    err = error_from_response(httpx.Response(502, text=html), provider="p")
    assert err.status == 502
    assert err.error_type == ""
    assert err.body == html
    assert "502 Bad Gateway" in str(err)
    assert len(str(err)) < 400


def test_excerpt_flattens_and_cuts() -> None:
    assert excerpt("a\n  b\tc") == "a b c"
    assert excerpt("x" * 50, limit=10) == "xxxxxxx..."


# --- HTTPBackend ------------------------------------------------------------------------------


async def test_post_json_sends_headers_and_body() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True})

    async with mock_client(handler) as client:
        backend = HTTPBackend(
            "p", base_url="https://api.example.com/", http_client=client, headers={"k": "v"}
        )
        assert await backend.post_json("/v1/x", {"a": 1}) == {"ok": True}
        await backend.aclose()
        assert not client.is_closed  # borrowed: not ours to close
    assert str(seen[0].url) == "https://api.example.com/v1/x"
    assert seen[0].headers["k"] == "v"
    assert json.loads(seen[0].content) == {"a": 1}


async def test_owned_client_is_closed() -> None:
    backend = HTTPBackend("p", base_url="https://api.example.com")
    async with backend:
        client = backend.client
    assert client.is_closed


def test_repr_hides_headers() -> None:
    backend = HTTPBackend("p", base_url="https://x", headers={"x-api-key": "sk-secret"})
    assert "sk-secret" not in repr(backend)


async def test_post_json_maps_status_errors() -> None:
    body = (FIXTURES / "anthropic" / "error_429_rate_limit_error.json").read_text()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, text=body, headers={"retry-after": "12"})

    async with mock_client(handler) as client:
        backend = HTTPBackend("anthropic", base_url="https://x", http_client=client)
        with pytest.raises(ProviderError) as info:
            await backend.post_json("/v1/messages", {})
    assert (info.value.status, info.value.error_type) == (429, "rate_limit_error")
    assert info.value.retry_after == 12.0


async def test_post_json_malformed_body() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text='{"id": "msg_01", "content": [')

    async with mock_client(handler) as client:
        backend = HTTPBackend("p", base_url="https://x", http_client=client)
        with pytest.raises(ProviderError, match="not JSON") as info:
            await backend.post_json("/v1/messages", {})
    assert info.value.status == 200
    assert info.value.body.startswith('{"id"')


async def test_connection_error_has_no_status_and_keeps_the_cause() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with mock_client(handler) as client:
        backend = HTTPBackend(
            "p", base_url="https://x", http_client=client, headers={"authorization": "Bearer sk-1"}
        )
        with pytest.raises(ProviderError) as info:
            await backend.post_json("/v1/messages", {})
    assert info.value.status is None
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    assert "sk-1" not in str(info.value)


async def test_timeout_is_a_provider_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    async with mock_client(handler) as client:
        backend = HTTPBackend("p", base_url="https://x", http_client=client)
        with pytest.raises(ProviderError, match="ReadTimeout") as info:
            await backend.post_json("/v1/messages", {})
    assert isinstance(info.value.__cause__, httpx.ReadTimeout)


# --- streaming --------------------------------------------------------------------------------


async def test_stream_sse_yields_events() -> None:
    raw = (FIXTURES / "anthropic" / "stream_text.sse").read_bytes()

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["accept"] == "text/event-stream"
        return httpx.Response(200, content=raw, headers={"content-type": "text/event-stream"})

    async with mock_client(handler) as client:
        backend = HTTPBackend("p", base_url="https://x", http_client=client)
        events = [e async for e in backend.stream_sse("/v1/messages", {})]
    assert events[0].event == "message_start"
    assert events[-1].event == "message_stop"


async def test_stream_sse_error_status() -> None:
    body = (FIXTURES / "anthropic" / "error_529_overloaded_error.json").read_text()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(529, text=body, headers={"content-type": "application/json"})

    async with mock_client(handler) as client:
        backend = HTTPBackend("p", base_url="https://x", http_client=client)
        with pytest.raises(ProviderError) as info:
            _ = [e async for e in backend.stream_sse("/v1/messages", {})]
    assert (info.value.status, info.value.error_type) == (529, "overloaded_error")


async def test_stream_sse_200_with_json_error_object() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, json={"type": "error", "error": {"type": "api_error", "message": "nope"}}
        )

    async with mock_client(handler) as client:
        backend = HTTPBackend("p", base_url="https://x", http_client=client)
        with pytest.raises(ProviderError, match="nope") as info:
            _ = [e async for e in backend.stream_sse("/v1/messages", {})]
    assert (info.value.status, info.value.error_type) == (200, "api_error")


async def _dropping_stream() -> AsyncIterator[bytes]:
    yield b'event: message_start\ndata: {"type": "message_start"}\n\n'
    raise httpx.RemoteProtocolError("peer closed connection without sending complete message")


async def test_stream_sse_dropped_connection() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, content=_dropping_stream(), headers={"content-type": "text/event-stream"}
        )

    seen: list[str] = []

    async def consume(backend: HTTPBackend) -> None:
        async for event in backend.stream_sse("/v1/messages", {}):
            seen.append(event.event)

    async with mock_client(handler) as client:
        backend = HTTPBackend("p", base_url="https://x", http_client=client)
        with pytest.raises(ProviderError, match="during stream") as info:
            await consume(backend)
    assert seen == ["message_start"]
    assert info.value.status is None
    assert isinstance(info.value.__cause__, httpx.RemoteProtocolError)


async def test_stream_ndjson_lines() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b'{"a": 1}\n\n{"a": 2}\n{"a": 3}')

    async with mock_client(handler) as client:
        backend = HTTPBackend("p", base_url="https://x", http_client=client)
        lines = [line async for line in backend.stream_ndjson("/api/chat", {})]
    assert lines == [{"a": 1}, {"a": 2}, {"a": 3}]


async def test_stream_ndjson_bad_line_and_error_status() -> None:
    def bad_line(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b'{"a": 1}\n{"a": \n')

    def error(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"error": "model 'x' not found"})

    async with mock_client(bad_line) as client:
        backend = HTTPBackend("ollama", base_url="https://x", http_client=client)
        with pytest.raises(ProviderError, match="not JSON"):
            _ = [line async for line in backend.stream_ndjson("/api/chat", {})]
    async with mock_client(error) as client:
        backend = HTTPBackend("ollama", base_url="https://x", http_client=client)
        with pytest.raises(ProviderError, match="not found") as info:
            _ = [line async for line in backend.stream_ndjson("/api/chat", {})]
    assert info.value.status == 404


@pytest.mark.needs_extra("local")
def test_provider_from_string_builds_the_local_model() -> None:
    from goagent_py.providers import LlamaCppProvider, provider_from_string

    local, name = provider_from_string("local")
    assert isinstance(local, LlamaCppProvider)
    assert name == "smollm2-135m-instruct"


def test_provider_from_string_builds_each_vendor(monkeypatch: pytest.MonkeyPatch) -> None:
    from goagent_py.errors import ConfigurationError
    from goagent_py.providers import (
        AnthropicProvider,
        OllamaProvider,
        OpenAIProvider,
        provider_from_string,
    )

    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    provider, model = provider_from_string("anthropic:claude-sonnet-4-6")
    assert isinstance(provider, AnthropicProvider)
    assert model == "claude-sonnet-4-6"
    assert isinstance(provider_from_string("openai:gpt-4o")[0], OpenAIProvider)
    assert provider_from_string("ollama:qwen3")[1] == "qwen3"
    assert isinstance(provider_from_string("ollama:qwen3")[0], OllamaProvider)
    with pytest.raises(ConfigurationError, match="unknown provider 'gemini:x'"):
        provider_from_string("gemini:x")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        provider_from_string("anthropic")


# --- RemoteEmbedder: the checks the three HTTP embedders share, with one set of messages ------


def _indexed(vectors: list[list[float]], indexes: list[int] | None = None) -> dict[str, Any]:
    order = list(range(len(vectors))) if indexes is None else indexes
    return {"data": [{"index": i, "embedding": v} for i, v in zip(order, vectors, strict=True)]}


def _plain(vectors: list[list[float]]) -> dict[str, Any]:
    return {"embeddings": vectors}


def _by_type(vectors: list[list[float]]) -> dict[str, Any]:
    return {"id": "x", "embeddings": {"float": vectors}, "response_type": "embeddings_by_type"}


# vendor -> (class, name of its dimensions argument, answer builder, extra arguments)
_EMBEDDERS: dict[str, tuple[type[RemoteEmbedder], str, Callable[..., Any], dict[str, Any]]] = {
    "openai": (OpenAIEmbedder, "dimensions", _indexed, {"api_key": "k"}),
    "ollama": (OllamaEmbedder, "dimensions", _plain, {}),
    "voyage": (VoyageEmbedder, "output_dimension", _indexed, {"api_key": "k"}),
    "cohere": (CohereEmbedder, "output_dimension", _by_type, {"api_key": "k"}),
}


def _embedder(vendor: str, *answers: Any, **kwargs: Any) -> Any:
    cls, _, _, extra = _EMBEDDERS[vendor]
    replies = iter(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=next(replies))

    return cls("emb-model", http_client=mock_client(handler), **extra, **kwargs)


@pytest.mark.parametrize("vendor", _EMBEDDERS)
def test_embedder_argument_messages(vendor: str) -> None:
    cls, dim_arg, _, extra = _EMBEDDERS[vendor]
    name = cls.__name__
    with pytest.raises(ConfigurationError) as info:
        _embedder(vendor, **{dim_arg: 0})
    assert str(info.value) == (
        f"{name}: {dim_arg} must be >= 1, got 0; leave it None to take the model's own size"
    )
    with pytest.raises(
        ConfigurationError, match=rf"^{name}: batch_size must be (>= 1|between 1 and \d+), got 0$"
    ):
        _embedder(vendor, batch_size=0)
    with pytest.raises(ConfigurationError) as info:
        cls("", **extra)
    assert str(info.value) == f"{name}: model must not be empty: pass the embedding model's name"


@pytest.mark.parametrize("vendor", _EMBEDDERS)
async def test_embedder_without_text_says_what_it_got(vendor: str) -> None:
    name = _EMBEDDERS[vendor][0].__name__
    embedder = _embedder(vendor)  # no answers: no request may be sent
    with pytest.raises(NoEmbeddableContentError) as info:
        await embedder.embed([ImageBlock(b"\x89PNG", "image/png"), TextBlock("  ")])
    assert str(info.value) == (
        f"no text to embed (got blank text, image): {name} embeds text blocks only"
    )
    with pytest.raises(NoEmbeddableContentError) as info:
        await embedder.embed_batch([[TextBlock("ok")], []])
    assert str(info.value) == (
        f"input 1: no text to embed (got no blocks): {name} embeds text blocks only"
    )


@pytest.mark.parametrize("vendor", _EMBEDDERS)
async def test_embedder_answer_checks(vendor: str) -> None:
    _, dim_arg, answer, _ = _EMBEDDERS[vendor]
    head = f"provider {vendor!r}: "
    texts = [[TextBlock(t)] for t in "abc"]

    learned = _embedder(vendor, answer([[1.0, 2.0], [3.0, 4.0]]), answer([[1.0]]), batch_size=2)
    with pytest.raises(ProviderError) as info:
        await learned.embed_batch(texts)
    assert str(info.value) == (
        f"{head}embedding size mismatch: model 'emb-model' returned a vector of size 1 for "
        "input 2, expected 2 (the size of its first vector)"
    )
    assert (info.value.status, json.loads(info.value.body)) == (200, answer([[1.0]]))
    assert learned.dimensions == 2

    configured = _embedder(vendor, answer([[1.0, 2.0]]), **{dim_arg: 3})
    with pytest.raises(ProviderError) as info:
        await configured.embed([TextBlock("a")])
    assert str(info.value) == (
        f"{head}embedding size mismatch: model 'emb-model' returned a vector of size 2 for "
        f"input 0, expected 3 ({dim_arg}=3)"
    )

    fresh = _embedder(vendor, answer([]), answer([[]]), {"oops": 1})
    with pytest.raises(ProviderError) as info:
        await fresh.embed([TextBlock("a")])
    assert str(info.value) == f"{head}embeddings: asked model 'emb-model' for 1, got 0"
    with pytest.raises(ProviderError) as info:
        await fresh.embed([TextBlock("a")])
    assert str(info.value) == f"{head}model 'emb-model' returned an empty vector for input 0"
    assert fresh.dimensions is None
    with pytest.raises(ProviderError) as info:
        await fresh.embed([TextBlock("a")])
    assert str(info.value) == (
        f"""{head}unexpected embeddings response from model 'emb-model': {{"oops": 1}}"""
    )
    assert isinstance(info.value.__cause__, ValidationError)


@pytest.mark.parametrize("vendor", ["openai", "voyage"])
async def test_embedder_indexes_must_be_each_input_once(vendor: str) -> None:
    twice = _indexed([[1.0], [2.0]], indexes=[0, 0])
    embedder = _embedder(vendor, twice)
    with pytest.raises(ProviderError) as info:
        await embedder.embed_batch([[TextBlock("a")], [TextBlock("b")]])
    assert str(info.value) == (
        f"provider {vendor!r}: model 'emb-model' returned embeddings with indexes [0, 0], "
        "expected 0 to 1, each once"
    )
