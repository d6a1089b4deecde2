"""MaxSimReranker: late interaction over token vectors added to the fused score (issue 36)."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from goagent_py.errors import ConfigurationError
from goagent_py.rag import Document, MaxSimReranker, Pipeline, Reranker, TokenEmbedder
from goagent_py.rag.rerank import maxsim
from goagent_py.rag.results import SearchResult

from .conftest import BatchWordEmbedder


def word_vector(word: str) -> np.ndarray:
    """A fixed random unit vector per word: equal words have cosine 1, others about 0."""
    rng = np.random.default_rng(zlib.crc32(word.lower().encode()))
    v = rng.standard_normal(64).astype(np.float32)
    return v / np.linalg.norm(v)


class WordTokens(BatchWordEmbedder):
    """BatchWordEmbedder with one token vector per word (words, not sub-words)."""

    def __init__(self) -> None:
        super().__init__()
        self.token_calls: list[list[str]] = []

    async def embed_tokens(self, texts: Sequence[str]) -> list[np.ndarray]:
        self.token_calls.append(list(texts))
        out = []
        for text in texts:
            words = [w.strip(".,:?") for w in text.split() if w.strip(".,:?")]
            out.append(
                np.stack([word_vector(w) * 3.0 for w in words])  # not unit: the reranker scales
                if words
                else np.zeros((0, 64), dtype=np.float32)
            )
        return out


def result(id: str, text: str, score: float) -> SearchResult:
    from goagent_py.messages import Message, Role, TextBlock

    return SearchResult(id=id, message=Message(Role.USER, [TextBlock(text)]), score=score)


async def test_the_score_becomes_fused_plus_weight_times_maxsim() -> None:
    embedder = WordTokens()
    reranker = MaxSimReranker(embedder, weight=2.0)
    assert isinstance(reranker, Reranker)
    assert isinstance(embedder, TokenEmbedder)
    candidates = [
        result("a", "pruning runs weekly", 0.9),  # 1 of 3 query words
        result("b", "the pruning job runs nightly", 0.5),  # 3 of 3
        result("c", "unrelated words only", 0.95),  # 0 of 3
    ]
    ranked = await reranker.rerank("pruning job nightly", candidates, top_k=3)
    assert [r.id for r in ranked] == ["b", "a", "c"]
    q = np.stack([word_vector(w) for w in ("pruning", "job", "nightly")])
    for r, before in zip(ranked, (0.5, 0.9, 0.95), strict=True):
        doc = np.stack([word_vector(w) for w in r.text.split()])
        assert r.score == pytest.approx(before + 2.0 * maxsim(q, doc), abs=1e-5)
    assert ranked[0].score == pytest.approx(0.5 + 2.0, abs=1e-5)  # every query word found
    # the query and every candidate in one call
    assert embedder.token_calls == [["pruning job nightly", *(c.text for c in candidates)]]


async def test_weight_zero_keeps_the_fused_order_and_ties_keep_their_place() -> None:
    reranker = MaxSimReranker(WordTokens(), weight=0)
    candidates = [result("a", "x", 0.5), result("b", "y", 0.5), result("c", "z", 0.7)]
    ranked = await reranker.rerank("q", candidates, top_k=2)
    assert [r.id for r in ranked] == ["c", "a"]
    assert await reranker.rerank("q", [], top_k=3) == []


async def test_an_empty_candidate_text_scores_no_maxsim() -> None:
    ranked = await MaxSimReranker(WordTokens()).rerank(
        "apples", [result("a", "", 0.2), result("b", "apples", 0.1)], top_k=2
    )
    assert [(r.id, round(r.score, 4)) for r in ranked] == [("b", 2.1), ("a", 0.2)]


def test_an_embedder_without_token_vectors_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="embed_tokens"):
        MaxSimReranker(BatchWordEmbedder())
    for bad in (-1.0, True, "2"):
        with pytest.raises(ConfigurationError, match="weight"):
            MaxSimReranker(WordTokens(), weight=bad)  # type: ignore[arg-type]


async def test_a_wrong_count_of_token_arrays_is_an_error() -> None:
    class Short(WordTokens):
        async def embed_tokens(self, texts: Sequence[str]) -> list[np.ndarray]:
            return (await super().embed_tokens(texts))[:-1]

    with pytest.raises(ValueError, match="3 texts"):
        await MaxSimReranker(Short()).rerank(
            "q", [result("a", "x", 1), result("b", "y", 1)], top_k=1
        )


async def test_in_the_pipeline_maxsim_reorders_the_candidates() -> None:
    embedder = WordTokens()
    docs = [
        Document("Storage: a pruning job, and pinned files kept for thirty days.", "storage"),
        Document("Pruning pruning pruning pruning.", "words"),
        *(Document(f"Filler {i}: the job of a worker, queue {i}.", f"filler{i}") for i in range(4)),
    ]
    plain = Pipeline.in_memory(embedder, candidates=10)
    await plain.index(docs)
    late = Pipeline.in_memory(embedder, candidates=10, reranker=MaxSimReranker(embedder))
    await late.index(docs)
    query = "pruning job"
    before = [r.source for r in await plain.search(query, top_k=3, mode="keyword")]
    after = [r.source for r in await late.search(query, top_k=3, mode="keyword")]
    assert before[0] == "words"  # BM25 favours the repeated word
    assert after[0] == "storage"  # both of the question's words are in it


# -- the real embedder -----------------------------------------------------------------------

CORPUS = [
    (
        "retry.md",
        "Retries: a tool call that raises a transient error is retried three times "
        "with exponential backoff; the retry policy is set with with_retry.",
    ),
    (
        "breaker.md",
        "The circuit breaker opens after five failures in a row and half-opens "
        "after thirty seconds; calls fail fast while it is open.",
    ),
    (
        "memory.md",
        "Long-term memory stores facts as vectors in sqlite-vec and recalls the "
        "three most similar ones before each turn.",
    ),
    (
        "rag.md",
        "The knowledge base splits documents into chunks, embeds them, and searches by "
        "vector and keyword, fusing the two rankings.",
    ),
]


@pytest.fixture(scope="module")
def real() -> Any:
    from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    asyncio.run(embedder.load())
    return embedder


@pytest.mark.slow
@pytest.mark.needs_extra("local")
async def test_the_local_embedder_gives_its_token_vectors(real: Any) -> None:
    texts = [text for _, text in CORPUS] + ["", "sqlite-vec"]
    got = await real.embed_tokens(texts)
    model = real._sentence_transformer()
    want = model.encode(texts, output_value="token_embeddings", show_progress_bar=False)
    for g, w in zip(got, want, strict=True):
        w = np.asarray(w.float().cpu().numpy(), dtype=np.float32)[1:-1]
        assert g.shape == w.shape
        if len(w):
            cos = (g * w).sum(axis=1) / np.linalg.norm(g, axis=1) / np.linalg.norm(w, axis=1)
            assert float(cos.min()) >= 0.9999
    assert got[len(CORPUS)].shape == (0, 384)  # an empty text has no tokens


@pytest.mark.slow
@pytest.mark.needs_extra("local")
async def test_maxsim_on_a_small_real_corpus(real: Any) -> None:
    """The reranked order is the fused order rescored by MaxSim, and the right passage leads."""
    pipeline = Pipeline.in_memory(real, candidates=10)
    await pipeline.index([Document(text, name) for name, text in CORPUS])
    reranker = MaxSimReranker(real)
    query = "how many times is a failing tool call retried?"
    fused = await pipeline.search(query, top_k=len(CORPUS))
    tokens = await real.embed_tokens([query, *(r.text for r in fused)])
    unit = [t / np.linalg.norm(t, axis=1, keepdims=True) for t in tokens]
    expected = sorted(
        fused, key=lambda r: -(r.score + 2.0 * maxsim(unit[0], unit[1 + fused.index(r)]))
    )
    pipeline.reranker = reranker
    reranked = await pipeline.search(query, top_k=len(CORPUS))
    assert [r.id for r in reranked] == [r.id for r in expected]
    assert reranked[0].source == "retry.md"
