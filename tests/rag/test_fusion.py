"""Fusion of the vector and keyword lists: RRF, score fusion, identifier queries, the pipeline."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from goagent_py.errors import ConfigurationError
from goagent_py.memory.chunking import RecursiveChunker
from goagent_py.messages import ContentBlock, TextBlock
from goagent_py.rag import (
    DEFAULT_FUSION,
    RRF_K,
    Document,
    Fusion,
    Pipeline,
    fuse,
    looks_like_identifier,
    reciprocal_rank_fusion,
    score_fusion,
)

from .conftest import BatchWordEmbedder, PipelineFactory


def test_rrf_scores_and_order() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a", "d"]])
    scores = dict(fused)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert scores["b"] == pytest.approx(1 / 62)
    assert scores["d"] == pytest.approx(1 / 63)
    assert [id for id, _ in fused] == ["a", "c", "b", "d"]


def test_found_by_both_beats_first_in_one() -> None:
    # "x" is 1st in one list only; "y" is 2nd in both: agreement wins.
    fused = reciprocal_rank_fusion([["x", "y"], ["z", "y"]])
    assert fused[0][0] == "y"


def test_ties_keep_first_appearance_order() -> None:
    fused = reciprocal_rank_fusion([["a", "b"], ["b", "a"]])
    assert [id for id, _ in fused] == ["a", "b"]
    fused = reciprocal_rank_fusion([["p"], ["q"]])
    assert [id for id, _ in fused] == ["p", "q"]


def test_k_weights_duplicates_and_empty() -> None:
    assert RRF_K == 60
    assert dict(reciprocal_rank_fusion([["a"]], k=0)) == {"a": 1.0}
    weighted = reciprocal_rank_fusion([["a", "b"], ["b", "a"]], weights=[1.0, 3.0])
    assert [id for id, _ in weighted] == ["b", "a"]
    assert dict(reciprocal_rank_fusion([["a", "a", "b"]]))["a"] == pytest.approx(1 / 61)
    assert dict(reciprocal_rank_fusion([["a", "a", "b"]]))["b"] == pytest.approx(1 / 63)
    assert reciprocal_rank_fusion([]) == []
    assert reciprocal_rank_fusion([[], []]) == []
    with pytest.raises(ConfigurationError, match="weights"):
        reciprocal_rank_fusion([["a"]], weights=[1.0, 2.0])
    with pytest.raises(ConfigurationError, match="k must"):
        reciprocal_rank_fusion([["a"]], k=-1)


# -- score fusion ------------------------------------------------------------------------------


def test_minmax_fusion_scores() -> None:
    vector = [("a", 0.9), ("b", 0.5), ("c", 0.1)]
    keyword = [("c", 12.0), ("a", 2.0)]
    scores = dict(score_fusion(vector, keyword, keyword_weight=0.5, normalise="minmax"))
    assert scores["a"] == pytest.approx(0.5 * 1.0 + 0.5 * 0.0)
    assert scores["b"] == pytest.approx(0.5 * 0.5)
    assert scores["c"] == pytest.approx(0.5 * 0.0 + 0.5 * 1.0)


def test_relative_fusion_keeps_cosine_and_scales_bm25_by_the_best() -> None:
    fused = score_fusion([("a", 0.8), ("b", -0.2)], [("b", 4.0), ("c", 2.0)], normalise="relative")
    scores = dict(fused)
    assert scores["a"] == pytest.approx(0.7 * 0.8)
    assert scores["b"] == pytest.approx(0.7 * 0.0 + 0.3 * 1.0)  # negative cosine counts as 0
    assert scores["c"] == pytest.approx(0.3 * 0.5)
    assert [id for id, _ in fused] == ["a", "b", "c"]


def test_zscore_fusion_and_edge_cases() -> None:
    vector = [("a", 3.0), ("b", 1.0)]
    scores = dict(score_fusion(vector, [], keyword_weight=0.0, normalise="zscore"))
    assert scores == {"a": pytest.approx(2.0), "b": pytest.approx(0.0)}  # (v - min) / std
    # One candidate (or all equal): it is its list's best and scores 1 there.
    assert dict(score_fusion([("a", 0.3)], [("a", 7.0)], normalise="minmax")) == {"a": 1.0}
    assert score_fusion([], []) == []
    # Duplicates count once, at their first (best) place; ties keep first appearance.
    assert dict(score_fusion([("a", 0.9), ("a", 0.1), ("b", 0.1)], []))["a"] == pytest.approx(0.7)
    assert [id for id, _ in score_fusion([("p", 1.0)], [("q", 1.0)], keyword_weight=0.5)] == [
        "p",
        "q",
    ]


def test_fuse_by_name_and_bad_settings() -> None:
    vector, keyword = [("a", 0.9), ("b", 0.8)], [("b", 5.0), ("a", 1.0)]
    assert fuse(vector, keyword, method="rrf", keyword_weight=1.0) == reciprocal_rank_fusion(
        [["a", "b"], ["b", "a"]]
    )
    assert fuse(vector, keyword, method="minmax", keyword_weight=0.5) == score_fusion(
        vector, keyword, keyword_weight=0.5
    )
    with pytest.raises(ConfigurationError, match="unknown fusion method"):
        fuse(vector, keyword, method="best")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="keyword_weight"):
        score_fusion(vector, keyword, keyword_weight=1.5)
    with pytest.raises(ConfigurationError, match="normalisation"):
        score_fusion(vector, keyword, normalise="rank")  # type: ignore[arg-type]
    for bad in (
        {"method": "best"},
        {"keyword_weight": -1.0},
        {"keyword_weight": 2.0},  # a share for score fusion
        {"identifier_keyword_weight": True},
        {"k": -1},
    ):
        with pytest.raises(ConfigurationError):
            Fusion(**bad)
    assert Fusion("rrf", 2.0, 3.0).keyword_weight == 2.0  # RRF weights are not shares


def test_identifier_queries() -> None:
    for query in (
        "get_cached_controller",
        "What does max_retry_delay do?",
        "How do I fail a workflow with ApplicationError?",
        "client.webhooks.unwrap()",
        "what is --install-completion for",
        "Is PYTHON_DOTENV_DISABLED read at import?",
        "What does E1042 mean?",
        "GA-2077",
    ):
        assert looks_like_identifier(query), query
    for query in (
        "How do I stop a job that hangs?",
        "Which Python 3.11 releases work?",
        "Can I use it in a notebook?",
    ):
        assert not looks_like_identifier(query), query
    fusion = Fusion(keyword_weight=0.1, identifier_keyword_weight=0.6)
    assert fusion.weight_for("get_cached_controller") == 0.6
    assert fusion.weight_for("how do I stop it") == 0.1
    assert Fusion(keyword_weight=0.2, identifier_keyword_weight=None).weight_for("a_b") == 0.2
    assert Fusion() == DEFAULT_FUSION


def test_score_fusion_keeps_a_confident_hit_where_rrf_loses_it() -> None:
    # Prose query: the vector list is sure of "right" (0.9, the next is 0.2); the keyword list
    # only matched common words in "noise". RRF weighs the two ranks alike and picks "noise".
    vector = [("right", 0.9), ("noise", 0.2)]
    keyword = [("noise", 3.0)]
    assert reciprocal_rank_fusion([["right", "noise"], ["noise"]])[0][0] == "noise"
    assert DEFAULT_FUSION.fuse("how do I pause a job", vector, keyword)[0][0] == "right"
    # Identifier query: only the keyword list has the exact name, far ahead of the rest.
    vector = [("decoy", 0.8), ("other", 0.7), ("code", 0.5)]
    keyword = [("code", 9.0), ("decoy", 1.0)]
    assert DEFAULT_FUSION.fuse("what is GA-2077", vector, keyword)[0][0] == "code"


# -- in the pipeline ---------------------------------------------------------------------------


class ConceptEmbedder:
    """Embeds meaning, not words: each concept's synonyms map to one axis (the rest to "other").

    So "take a nap" and "call sleep() to pause" are the same vector although they share no word:
    the paraphrase case where vector search is right and keyword search is not.
    """

    dimensions = 3
    _CONCEPTS = (("sleep", "nap", "pause", "rest"), ("reference", "manual", "overview"))

    async def embed(self, blocks: Sequence[ContentBlock]) -> NDArray[np.float32]:
        text = " ".join(b.text for b in blocks if isinstance(b, TextBlock)).lower()
        vector = np.array(
            [float(any(w in text for w in words)) for words in self._CONCEPTS] + [0.1],
            dtype=np.float32,
        )
        return vector / np.linalg.norm(vector)


def _doc(source: str, text: str) -> Document:
    return Document([TextBlock(text)], source)


async def test_identifier_query_found_by_keyword_wins_in_hybrid(
    make_pipeline: PipelineFactory,
) -> None:
    pipeline = make_pipeline(BatchWordEmbedder(), chunker=RecursiveChunker(max_size=400))
    await pipeline.index(
        [
            # Shares every word of the question with it, but not the code.
            _doc("glossary.md", "What does GA mean? GA means general availability."),
            _doc("e1.md", "GA-1042 means the upstream connection was refused."),
            _doc("e2.md", "GA-2077 means the request quota is exhausted."),
        ]
    )
    query = "What does GA-2077 mean?"
    assert looks_like_identifier(query)
    # The embedder cannot see digits: vector search alone picks the glossary...
    vector = await pipeline.search(query, top_k=1, mode="vector")
    assert vector[0].source == "glossary.md"
    # ...keyword search has the exact code, and the default hybrid search keeps it first.
    assert (await pipeline.search(query, top_k=1, mode="keyword"))[0].source == "e2.md"
    hybrid = await pipeline.search(query, top_k=3)
    assert hybrid[0].source == "e2.md"
    assert hybrid[0].keyword_score is not None
    assert 0.0 < hybrid[0].score <= 1.0


async def test_paraphrase_found_by_vector_stays_first_in_hybrid(
    make_pipeline: PipelineFactory,
) -> None:
    docs = [
        _doc("sleep.md", "Call sleep() to pause for a while."),
        # Repeats the question's words, means something else.
        _doc("jobs.md", "The job overview: take a look at every job you can take."),
        _doc("misc.md", "Unrelated text about colours."),
    ]
    query = "How can the job take a nap?"
    assert not looks_like_identifier(query)
    pipeline = make_pipeline(ConceptEmbedder(), chunker=RecursiveChunker(max_size=400))
    await pipeline.index(docs)
    assert (await pipeline.search(query, top_k=1, mode="vector"))[0].source == "sleep.md"
    assert (await pipeline.search(query, top_k=1, mode="keyword"))[0].source == "jobs.md"
    assert (await pipeline.search(query, top_k=1))[0].source == "sleep.md"
    # Plain RRF (what rrf_k= alone selects) lets the keyword list's noise win here.
    rrf = make_pipeline(ConceptEmbedder(), chunker=RecursiveChunker(max_size=400), rrf_k=60)
    assert rrf.fusion == Fusion("rrf", 1.0, None, 60)
    if make_pipeline.kind == "in_memory":  # type: ignore[attr-defined]
        await rrf.index(docs)  # (the sqlite pipelines share one file, already indexed)
    assert (await rrf.search(query, top_k=1))[0].source == "jobs.md"


def test_pipeline_fusion_options() -> None:
    pipeline = Pipeline.in_memory(BatchWordEmbedder())
    assert pipeline.fusion is DEFAULT_FUSION
    custom = Fusion("minmax", 0.4, None)
    assert Pipeline.in_memory(BatchWordEmbedder(), fusion=custom).fusion is custom
    with pytest.raises(ConfigurationError, match="fusion must be a Fusion"):
        Pipeline.in_memory(BatchWordEmbedder(), fusion="rrf")
    with pytest.raises(ConfigurationError, match="rrf_k"):
        Pipeline.in_memory(BatchWordEmbedder(), rrf_k=-1)
