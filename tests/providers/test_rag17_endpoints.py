"""A remote embedder's identity names its endpoint when it is not the vendor's (docs/rag.md,
"Which embedder made the vectors"): the same model name on two servers (a local llama.cpp and
the vendor) may be two models, and their vectors must not be mixed. The vendor's endpoint is
left out, so indexes recorded before stay adopted; no secret of the URL is ever included."""

from __future__ import annotations

import httpx
import pytest

from goagent_py.errors import ConfigurationError
from goagent_py.memory.base import embedder_identity
from goagent_py.providers.cohere import CohereEmbedder
from goagent_py.providers.ollama import OllamaEmbedder
from goagent_py.providers.openai import OpenAIEmbedder
from goagent_py.providers.voyage import VoyageEmbedder
from goagent_py.rag.documents import Document
from goagent_py.rag.pipeline import Pipeline

MODEL = "text-embedding-3-small"


def _client() -> httpx.AsyncClient:
    def answer(request: httpx.Request) -> httpx.Response:
        # Another server, another model: each host answers with its own vector.
        vector = [1.0, 0.0, 0.0] if request.url.host == "api.openai.com" else [0.0, 1.0, 0.0]
        return httpx.Response(200, json={"data": [{"index": 0, "embedding": vector}]})

    return httpx.AsyncClient(transport=httpx.MockTransport(answer))


async def test_the_vendors_endpoint_keeps_the_recorded_identity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    async with _client() as client:
        vendor = [
            OpenAIEmbedder(MODEL, api_key="k", http_client=client),
            OpenAIEmbedder(
                MODEL, api_key="k", base_url="HTTPS://API.OpenAI.com:443/v1/", http_client=client
            ),
            OllamaEmbedder("all-minilm", http_client=client),
            CohereEmbedder("embed-v4.0", api_key="k", http_client=client),
            VoyageEmbedder("voyage-3", api_key="k", http_client=client),
        ]
        names = [embedder_identity(e) for e in vendor]
    assert names == [
        f"openai:{MODEL}",
        f"openai:{MODEL}",
        "ollama:all-minilm",
        "cohere:embed-v4.0",
        "voyage:voyage-3",
    ]


async def test_another_server_is_another_identity_without_its_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with _client() as client:
        local = OpenAIEmbedder(
            MODEL, api_key="k", base_url="http://localhost:8080/v1/", http_client=client
        )
        secret = OpenAIEmbedder(
            MODEL,
            api_key="k",
            base_url="https://user:hunter2@Models.Example.com:443/v1?api-key=s3cr3t#frag",
            http_client=client,
        )
        monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8080/v1")
        from_env = OpenAIEmbedder(MODEL, api_key="k", http_client=client)
        ollama = OllamaEmbedder("all-minilm", base_url="http://gpu-box:11434", http_client=client)
    assert embedder_identity(local) == f"openai:{MODEL}@http://localhost:8080/v1"
    assert embedder_identity(from_env) == embedder_identity(local)
    assert embedder_identity(secret) == f"openai:{MODEL}@https://models.example.com/v1"
    assert embedder_identity(ollama) == "ollama:all-minilm@http://gpu-box:11434"


async def test_an_index_of_one_server_refuses_the_same_model_name_on_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    async with _client() as client:
        vendor = OpenAIEmbedder(MODEL, api_key="k", http_client=client)
        local = OpenAIEmbedder(
            MODEL, api_key="k", base_url="http://localhost:8080/v1", http_client=client
        )
        pipeline = Pipeline.in_memory(vendor, hybrid=False)
        await pipeline.index(Document("The capital of Peru is Lima.", source="peru.md"))
        assert (await pipeline.search("Lima", mode="vector"))[0].score > 0.99
        other = Pipeline(local, pipeline.store, manifest=pipeline.manifest)
        with pytest.raises(ConfigurationError, match="localhost:8080"):
            await other.search("Lima", mode="vector")
