"""Reciprocal rank fusion: order, ties, weights, duplicates, and in the pipeline."""

from __future__ import annotations

import pytest

from goagent_py.errors import ConfigurationError
from goagent_py.rag import RRF_K, reciprocal_rank_fusion


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
