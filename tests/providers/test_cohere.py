"""CohereEmbedder against Cohere's v2 /embed wire format (fixtures in tests/fixtures/cohere)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from goagent_py.errors import ConfigurationError, ProviderError
from goagent_py.memory.base import BatchEmbedder, Embedder
from goagent_py.messages import TextBlock
from goagent_py.providers import CohereEmbedder as LazyCohereEmbedder
from goagent_py.providers.cohere import CohereEmbedder

FIXTURES = Path(__file__).parent.parent / "fixtures" / "cohere"
KEY = "Zq81mXk2Lw9Pq3Rt7Yv5Nb6Hc4Jd0Fs1Ga8Ke2W"


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


class Server:
    def __init__(self, *replies: httpx.Response) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.replies.pop(0)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))

    def body(self, i: int = -1) -> Any:
        return json.loads(self.requests[i].content)


def _texts(*values: str) -> list[list[TextBlock]]:
    return [[TextBlock(v)] for v in values]


def _vectors(n: int, size: int = 3) -> httpx.Response:
    rows = [[float(i)] * size for i in range(n)]
    return httpx.Response(200, json={"id": "x", "embeddings": {"float": rows}})


async def test_request_and_response_match_the_fixtures() -> None:
    server = Server(httpx.Response(200, json=fixture("embed_response.json")))
    async with CohereEmbedder(api_key=KEY, http_client=server.client()) as embedder:
        assert isinstance(embedder, Embedder)
        assert isinstance(embedder, BatchEmbedder)
        matrix = await embedder.embed_batch(_texts("hello", "goodbye"))
    request = server.requests[0]
    assert str(request.url) == "https://api.cohere.com/v2/embed"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert server.body() == fixture("embed_request.json")
    expected = fixture("embed_response.json")["embeddings"]["float"]
    assert matrix.dtype == np.float32
    np.testing.assert_allclose(matrix, np.asarray(expected, dtype=np.float32))
    assert embedder.dimensions == 4


async def test_batches_of_at_most_batch_size_and_output_dimension_sent() -> None:
    server = Server(_vectors(2), _vectors(1))
    embedder = CohereEmbedder(
        api_key=KEY,
        http_client=server.client(),
        batch_size=2,
        output_dimension=3,
        input_type="search_query",
    )
    matrix = await embedder.embed_batch(_texts("a", "b", "c"))
    assert matrix.shape == (3, 3)
    assert [server.body(i)["texts"] for i in range(2)] == [["a", "b"], ["c"]]
    assert server.body(0)["output_dimension"] == 3
    assert server.body(0)["input_type"] == "search_query"
    vector = await CohereEmbedder(api_key=KEY, http_client=Server(_vectors(1, 4)).client()).embed(
        [TextBlock("x")]
    )
    assert vector.shape == (4,)


def test_arguments_and_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="input_type must be one of 'search_document'"):
        CohereEmbedder(api_key=KEY, input_type="query")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="batch_size must be between 1 and 96, got 97"):
        CohereEmbedder(api_key=KEY, batch_size=97)
    monkeypatch.delenv("CO_API_KEY", raising=False)
    monkeypatch.delenv("COHERE_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="set CO_API_KEY"):
        CohereEmbedder()
    monkeypatch.setenv("COHERE_API_KEY", "from-cohere-api-key")
    assert CohereEmbedder()._headers["Authorization"] == "Bearer from-cohere-api-key"
    monkeypatch.setenv("CO_API_KEY", "from-co-api-key")
    assert CohereEmbedder()._headers["Authorization"] == "Bearer from-co-api-key"
    assert LazyCohereEmbedder is CohereEmbedder
    assert KEY not in repr(CohereEmbedder(api_key=KEY))


async def test_error_body_message_is_in_the_error_and_an_echoed_key_is_not() -> None:
    server = Server(
        httpx.Response(400, json=fixture("error_400.json")),
        httpx.Response(401, json={"id": "e", "message": f"invalid api token: {KEY}"}),
    )
    embedder = CohereEmbedder(api_key=KEY, http_client=server.client())
    with pytest.raises(ProviderError) as info:
        await embedder.embed([TextBlock("x")])
    assert str(info.value) == (
        "provider 'cohere': HTTP 400: invalid request: texts must contain at most 96 items"
    )
    with pytest.raises(ProviderError) as info:
        await embedder.embed([TextBlock("x")])
    assert info.value.status == 401
    assert KEY not in str(info.value)
    assert KEY not in info.value.body
