"""Embedders name the vectors they make (docs/rag.md, "Which embedder made the vectors"): a
RAG index records the identity and refuses a query embedded by another."""

from __future__ import annotations

import httpx
import pytest

from goagent_py.otel import instrument_embedder
from goagent_py.providers.ollama import OllamaEmbedder
from goagent_py.providers.openai import OpenAIEmbedder
from goagent_py.rag._indexing import embedder_identity
from goagent_py.testing import FakeEmbedder


def _client() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(500)))


async def test_remote_embedders_name_provider_model_and_size() -> None:
    async with _client() as client:
        small = OpenAIEmbedder("text-embedding-3-small", api_key="k", http_client=client)
        sized = OpenAIEmbedder(
            "text-embedding-3-small", api_key="k", dimensions=256, http_client=client
        )
        large = OpenAIEmbedder("text-embedding-3-large", api_key="k", http_client=client)
        local = OllamaEmbedder("all-minilm", http_client=client)
        names = [embedder_identity(e) for e in (small, sized, large, local)]
    assert names == [
        "openai:text-embedding-3-small",
        "openai:text-embedding-3-small:256",
        "openai:text-embedding-3-large",
        "ollama:all-minilm",
    ]


def test_a_wrapper_passes_the_identity_through_and_user_code_has_none() -> None:
    fake = FakeEmbedder(16)
    assert embedder_identity(fake) == "fake:fnv32a-lcg:16"
    assert embedder_identity(FakeEmbedder(32)) != embedder_identity(fake)
    assert embedder_identity(instrument_embedder(fake, model="fake")) == "fake:fnv32a-lcg:16"

    class Mine:
        async def embed(self, blocks: object) -> object:
            raise NotImplementedError

    # User code without one gets one derived from its class (rag17: never unchecked).
    derived = f"{Mine.__module__}.{Mine.__qualname__}"
    assert embedder_identity(Mine()) == derived
    assert embedder_identity(instrument_embedder(Mine(), model="mine")) == derived  # type: ignore[arg-type]


@pytest.mark.needs_extra("local")
def test_the_onnx_path_and_torch_of_one_model_are_one_identity() -> None:
    from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder

    fast = SentenceTransformerEmbedder()
    torch_only = SentenceTransformerEmbedder(onnx=False, onnx_cache=False)
    assert fast.embedder_identity == "sentence-transformers:all-MiniLM-L6-v2:384"
    assert torch_only.embedder_identity == fast.embedder_identity
