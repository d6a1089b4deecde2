"""Rerankers: the protocol, CrossEncoderReranker on a fake model, and in the pipeline."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from goagent_py.errors import ConfigurationError
from goagent_py.rag import CrossEncoderReranker, Document, Pipeline, Reranker

from .conftest import BatchWordEmbedder


class FakeCrossEncoder:
    """Scores a passage by how many times it contains the word "banana"."""

    def __init__(self) -> None:
        self.calls: list[list[tuple[str, str]]] = []

    def predict(self, pairs: list[tuple[str, str]]) -> list[float]:
        self.calls.append(pairs)
        return [float(text.lower().count("banana")) for _, text in pairs]


async def indexed() -> Pipeline:
    pipeline = Pipeline.in_memory(BatchWordEmbedder(), candidates=10)
    await pipeline.index(
        [
            Document("Fruit: apples and pears.", "a"),
            Document("Fruit: banana.", "b"),
            Document("Fruit: banana banana banana.", "c"),
            Document("Fruit: cherries.", "d"),
        ]
    )
    return pipeline


async def test_cross_encoder_reranks_candidates() -> None:
    model = FakeCrossEncoder()
    reranker = CrossEncoderReranker(model)
    assert isinstance(reranker, Reranker)
    pipeline = await indexed()
    results = await pipeline.search("fruit", top_k=2)
    reranked = await reranker.rerank("fruit", [*results], top_k=2)
    assert len(reranked) <= 2
    pipeline.reranker = reranker
    best = await pipeline.search("fruit", top_k=2)
    assert [r.source for r in best] == ["c", "b"]
    assert [r.score for r in best] == [3.0, 1.0]
    assert best[0].vector_score is not None  # earlier scores are kept
    assert len(model.calls[-1]) == 4  # every candidate was scored, not just top_k
    assert model.calls[-1][0][0] == "fruit"
    assert await reranker.rerank("q", [], top_k=3) == []


async def test_reranker_errors() -> None:
    class Wrong:
        def predict(self, pairs: Any) -> list[float]:
            return [1.0]

    pipeline = await indexed()
    results = await pipeline.search("fruit", top_k=3)
    with pytest.raises(ValueError, match="1 scores for 3 passages"):
        await CrossEncoderReranker(Wrong()).rerank("fruit", results, top_k=3)
    with pytest.raises(ConfigurationError, match="predict"):
        CrossEncoderReranker(object())


def test_cross_encoder_by_name_loads_lazily() -> None:
    if importlib.util.find_spec("sentence_transformers") is None:
        pytest.skip('needs the "local" extra (sentence-transformers)')
    reranker = CrossEncoderReranker("/nonexistent/cross-encoder")
    assert "nonexistent" in repr(reranker)  # nothing loaded (or downloaded) yet
