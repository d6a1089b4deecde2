"""VoyageEmbedder against Voyage's /v1/embeddings wire format.

Fixtures in tests/fixtures/voyage (provenance in its README.md); HTTP through httpx.MockTransport.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from goagent_py.errors import ConfigurationError, NoEmbeddableContentError, ProviderError
from goagent_py.memory.base import BatchEmbedder, Embedder
from goagent_py.messages import ImageBlock, TextBlock
from goagent_py.providers.voyage import VoyageEmbedder

FIXTURES = Path(__file__).parent.parent / "fixtures" / "voyage"
KEY = "pa-test-key"


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


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


def embedder(recorder: Recorder, **kwargs: Any) -> VoyageEmbedder:
    kwargs.setdefault("api_key", KEY)
    return VoyageEmbedder(http_client=recorder.client(), **kwargs)


def texts(*values: str) -> list[list[TextBlock]]:
    return [[TextBlock(v)] for v in values]


async def test_batch_request_and_response_match_the_fixtures() -> None:
    recorder = Recorder(httpx.Response(200, json=fixture("embeddings_response.json")))
    e = embedder(recorder, model="voyage-large-2", input_type="document")
    assert isinstance(e, Embedder)
    assert isinstance(e, BatchEmbedder)
    matrix = await e.embed_batch(texts("Sample text 1", "Sample text 2"))
    request = recorder.requests[0]
    assert str(request.url) == "https://api.voyageai.com/v1/embeddings"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    expected = fixture("embeddings_request.json")
    assert recorder.body["input"] == expected["input"]
    assert recorder.body["model"] == expected["model"]
    assert recorder.body["input_type"] == expected["input_type"]
    assert recorder.body == expected
    assert matrix.dtype == np.float32
    assert matrix.shape == (2, 4)
    data = fixture("embeddings_response.json")["data"]
    np.testing.assert_allclose(matrix[0], data[0]["embedding"], rtol=1e-6)
    assert e.dimensions == 4


async def test_output_dimension_is_sent_and_checked() -> None:
    dims = 256
    answer = {"data": [{"embedding": [0.1] * dims, "index": i} for i in range(2)]}
    recorder = Recorder(
        httpx.Response(200, json=answer),
        httpx.Response(200, json=fixture("embeddings_response.json")),  # 4 floats each
    )
    e = embedder(recorder, model="voyage-3-large", input_type="document", output_dimension=dims)
    matrix = await e.embed_batch(texts("Sample text 1", "Sample text 2"))
    assert recorder.body == fixture("embeddings_request_output_dimension.json")
    assert matrix.shape == (2, dims)
    with pytest.raises(
        ProviderError,
        match=re.escape(
            "embedding size mismatch: model 'voyage-3-large' returned a vector of size 4 for "
            "input 0, expected 256 (output_dimension=256)"
        ),
    ):
        await e.embed_batch(texts("a", "b"))


async def test_single_embed_defaults_and_text_joining() -> None:
    answer = {"data": [{"embedding": [1.0, 0.0], "index": 0}], "usage": {"total_tokens": 3}}
    recorder = Recorder(httpx.Response(200, json=answer))
    e = embedder(recorder)
    vector = await e.embed([TextBlock("a"), ImageBlock(b"\x89PNG", "image/png"), TextBlock("b")])
    assert recorder.body == {"input": ["a\nb"], "model": "voyage-3.5"}
    assert vector.shape == (2,)


async def test_out_of_order_indexes_are_reordered_and_batches_split() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        inputs = json.loads(request.content)["input"]
        data = [{"embedding": [float(text), 0.0], "index": i} for i, text in enumerate(inputs)]
        return httpx.Response(200, json={"object": "list", "data": data[::-1]})

    recorder = Recorder(answer, answer, answer)
    e = embedder(recorder, batch_size=2)
    matrix = await e.embed_batch(texts("0", "1", "2", "3", "4"))
    assert matrix[:, 0].tolist() == [0, 1, 2, 3, 4]
    assert [len(json.loads(r.content)["input"]) for r in recorder.requests] == [2, 2, 1]


async def test_missing_or_extra_rows_are_errors() -> None:
    one = {"data": [{"embedding": [1.0], "index": 0}]}
    recorder = Recorder(httpx.Response(200, json=one), httpx.Response(200, json={"oops": 1}))
    e = embedder(recorder)
    with pytest.raises(ProviderError, match=r"embeddings: asked model 'voyage-3.5' for 2, got 1$"):
        await e.embed_batch(texts("a", "b"))
    with pytest.raises(
        ProviderError,
        match=re.escape("""unexpected embeddings response from model 'voyage-3.5': {"oops": 1}"""),
    ):
        await e.embed_batch(texts("a"))


@pytest.mark.parametrize("status", [400, 401, 403, 429, 500, 503])
async def test_http_errors_are_mapped(status: int) -> None:
    headers = {"retry-after": "3"} if status == 429 else {}
    recorder = Recorder(httpx.Response(status, json=fixture("error_4xx.json"), headers=headers))
    with pytest.raises(ProviderError) as info:
        await embedder(recorder).embed([TextBlock("a")])
    error = info.value
    assert error.provider == "voyage"
    assert error.status == status
    assert "<error message; wording not documented>" in str(error)
    assert json.loads(error.body) == fixture("error_4xx.json")
    assert error.retry_after == (3.0 if status == 429 else None)
    assert KEY not in str(error)


async def test_html_error_page_and_malformed_body() -> None:
    recorder = Recorder(
        httpx.Response(502, content=b"<html><body>Bad Gateway</body></html>"),
        httpx.Response(200, content=b'{"data": [{"embedding": [1.0'),
    )
    e = embedder(recorder)
    with pytest.raises(ProviderError, match="Bad Gateway") as info:
        await e.embed([TextBlock("a")])
    assert info.value.status == 502
    with pytest.raises(ProviderError, match="not JSON"):
        await e.embed([TextBlock("a")])


async def test_no_text_and_empty_batch() -> None:
    e = embedder(Recorder())
    with pytest.raises(NoEmbeddableContentError):
        await e.embed([ImageBlock(b"\x89PNG", "image/png")])
    with pytest.raises(NoEmbeddableContentError, match="input 1"):
        await e.embed_batch([[TextBlock("a")], [TextBlock("   ")]])
    assert (await e.embed_batch([])).shape == (0, 0)


def test_api_key_from_env_and_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOYAGE_API_KEY", "pa-env")
    assert "pa-env" not in repr(VoyageEmbedder())
    monkeypatch.delenv("VOYAGE_API_KEY")
    with pytest.raises(ConfigurationError, match="VOYAGE_API_KEY"):
        VoyageEmbedder()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"model": ""},
        {"input_type": "passage"},
        {"output_dimension": 0},
        {"batch_size": 0},
        {"batch_size": 1001},
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        VoyageEmbedder(api_key=KEY, **kwargs)


async def test_owned_client_is_closed_and_borrowed_one_is_not() -> None:
    borrowed = httpx.AsyncClient(transport=httpx.MockTransport(Recorder()))
    async with VoyageEmbedder(api_key=KEY, http_client=borrowed):
        pass
    assert not borrowed.is_closed
    await borrowed.aclose()
    owned = VoyageEmbedder(api_key=KEY)
    client = owned.client
    await owned.aclose()
    assert client.is_closed
