"""Fusing the vector and keyword rankings of hybrid search.

Two families of methods:

- :func:`reciprocal_rank_fusion` (RRF, Cormack et al. 2009): ranks only. Robust to scales, but
  it throws away how confident each list is, so a keyword list that matched only a common word
  weighs as much as one that matched the exact identifier.
- :func:`score_fusion`: a convex combination of the lists' scores after normalising each list
  per query (min-max, z-score, or "relative": cosine kept as it is and BM25 divided by the
  query's best BM25). Confident hits win, weak ones fade.

:func:`fuse` picks one by name. A :class:`Fusion` holds a whole setting, including how much
the keyword list weighs for a query that names an identifier (``max_retry_delay``,
``client.webhooks.unwrap()``, ``DataConverter``: see :func:`looks_like_identifier`) and for plain
prose. The pipeline's default, :data:`DEFAULT_FUSION`, was tuned on the dev half of a labelled
set of real documentation and checked on the other half (``bench/rag_labelled.py``); on that
set it is above both vector-only and keyword-only search for identifier and prose questions
alike, where rank fusion fell below keyword search on identifiers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from goagent_py.errors import ConfigurationError

__all__ = [
    "DEFAULT_FUSION",
    "Fusion",
    "FusionMethod",
    "RRF_K",
    "fuse",
    "looks_like_identifier",
    "reciprocal_rank_fusion",
    "score_fusion",
]

RRF_K = 60
"""The reciprocal-rank-fusion constant of Cormack et al. (2009); dampens the top ranks."""

FusionMethod = Literal["rrf", "minmax", "zscore", "relative"]
_METHODS: tuple[str, ...] = ("rrf", "minmax", "zscore", "relative")


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]],
    *,
    k: int = RRF_K,
    weights: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """Fuse ranked id lists: each id scores ``sum(weight / (k + rank))`` (ranks from 1).

    Only ranks matter, so lists scored on different scales (cosine, BM25) fuse fairly, and an
    id that only one list found still ranks by its place there. Ties keep the order in which
    ids first appear (the first ranking's order first).

    Args:
        rankings: id lists, best first (duplicates within a list count once, at the best rank).
        k: the RRF constant (60 in the paper); larger flattens the top ranks.
        weights: one weight per ranking (default 1.0 each).

    Returns:
        ``(id, score)`` pairs, best first.
    """
    if k < 0:
        raise ConfigurationError(f"k must be >= 0, got {k}")
    if weights is not None and len(weights) != len(rankings):
        raise ConfigurationError(f"got {len(weights)} weights for {len(rankings)} rankings")
    scores: dict[str, float] = {}
    for i, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[i]
        seen: set[str] = set()
        for rank, id in enumerate(ranking, start=1):
            if id in seen:
                continue
            seen.add(id)
            scores[id] = scores.get(id, 0.0) + weight / (k + rank)
    return _sorted(scores)


def _sorted(scores: dict[str, float]) -> list[tuple[str, float]]:
    order = {id: n for n, id in enumerate(scores)}
    return sorted(scores.items(), key=lambda item: (-item[1], order[item[0]]))


def _normalise(hits: Sequence[tuple[str, float]], how: str, absolute: bool) -> dict[str, float]:
    """Per-query normalised scores of one list (first occurrence of an id wins)."""
    scores: dict[str, float] = {}
    for id, score in hits:
        scores.setdefault(id, float(score))
    if not scores:
        return {}
    values = list(scores.values())
    if how == "zscore":
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        # Shifted so the list's worst candidate is 0: an id missing from a list scores 0 there.
        low = min(values)
        return {id: (v - low) / std if std > 0 else 1.0 for id, v in scores.items()}
    if how == "relative":
        if absolute:  # cosine similarity: already on a fixed scale, keep it
            return {id: max(v, 0.0) for id, v in scores.items()}
        top = max(values)
        return {id: v / top if top > 0 else 0.0 for id, v in scores.items()}
    low, high = min(values), max(values)
    span = high - low
    # One candidate (or all equal): it is the list's best, so it scores 1.
    return {id: (v - low) / span if span > 0 else 1.0 for id, v in scores.items()}


def score_fusion(
    vector: Sequence[tuple[str, float]],
    keyword: Sequence[tuple[str, float]],
    *,
    keyword_weight: float = 0.3,
    normalise: Literal["minmax", "zscore", "relative"] = "minmax",
) -> list[tuple[str, float]]:
    """Combine two scored lists: ``(1 - w) * vector + w * keyword`` after normalising each.

    Each list is normalised over its own candidates for this query: "minmax" maps the best to
    1 and the worst to 0; "zscore" divides by the spread (worst = 0); "relative" keeps cosine
    similarities as they are and divides BM25 scores by the best one. An id that one list did
    not return scores 0 there. Ties keep first appearance (vector list first).

    Args:
        vector: ``(id, cosine similarity)`` pairs, best first.
        keyword: ``(id, BM25 score)`` pairs, best first (higher is better).
        keyword_weight: ``w`` in [0, 1], the keyword list's share.
        normalise: "minmax", "zscore" or "relative".

    Returns:
        ``(id, fused score)`` pairs, best first.

    Raises:
        ConfigurationError: a weight outside [0, 1] or an unknown normalisation.
    """
    if not 0.0 <= keyword_weight <= 1.0:
        raise ConfigurationError(f"keyword_weight must be in [0, 1], got {keyword_weight!r}")
    if normalise not in ("minmax", "zscore", "relative"):
        raise ConfigurationError(f"unknown normalisation {normalise!r}")
    v = _normalise(vector, normalise, absolute=True)
    k = _normalise(keyword, normalise, absolute=False)
    scores: dict[str, float] = {}
    for id in [*v, *k]:
        if id not in scores:
            scores[id] = (1.0 - keyword_weight) * v.get(id, 0.0) + keyword_weight * k.get(id, 0.0)
    return _sorted(scores)


def fuse(
    vector: Sequence[tuple[str, float]],
    keyword: Sequence[tuple[str, float]],
    *,
    method: FusionMethod = "minmax",
    keyword_weight: float = 0.3,
    k: int = RRF_K,
) -> list[tuple[str, float]]:
    """Fuse a vector and a keyword list with one of the methods, by name.

    Args:
        vector: ``(id, cosine similarity)`` pairs, best first.
        keyword: ``(id, BM25 score)`` pairs, best first.
        method: "rrf" (:func:`reciprocal_rank_fusion`, weights ``(1, keyword_weight)``) or a
            normalisation of :func:`score_fusion` ("minmax", "zscore", "relative").
        keyword_weight: the keyword list's weight (a share in [0, 1] for score fusion).
        k: the RRF constant (RRF only).

    Returns:
        ``(id, fused score)`` pairs, best first.

    Raises:
        ConfigurationError: an unknown method or a bad weight or ``k``.
    """
    if method == "rrf":
        if keyword_weight < 0:
            raise ConfigurationError(f"keyword_weight must be >= 0, got {keyword_weight!r}")
        return reciprocal_rank_fusion(
            [[id for id, _ in vector], [id for id, _ in keyword]],
            k=k,
            weights=(1.0, keyword_weight),
        )
    if method not in _METHODS:
        raise ConfigurationError(f"unknown fusion method {method!r}; use one of {_METHODS}")
    return score_fusion(vector, keyword, keyword_weight=keyword_weight, normalise=method)


# Code-shaped tokens: snake_case, camelCase/PascalCase inside a word, dotted names, calls,
# --flags, ALL_CAPS constants (3+ capitals), codes (E1042, GA-1042) and a one-token query.
_IDENTIFIER = re.compile(
    r"[^\W_]_[^\W_]|[a-z][A-Z]|[A-Z]{2,}[a-z]|[A-Za-z]\.[A-Za-z]|\(\)|(?:^|\s)--\w"
    r"|[A-Z]{3,}|\b[A-Za-z]+-?\d{2,}\b|^\S+$"
)


def looks_like_identifier(query: str) -> bool:
    """Whether ``query`` names something exactly: a function, key, class, flag or constant.

    True for a query with a snake_case, camelCase, PascalCase, dotted or called name, a
    ``--flag``, an all-capitals constant, or one bare token; False for plain prose. Keyword
    search finds such names where embeddings blur them, so hybrid search weighs it more.
    """
    return bool(_IDENTIFIER.search(query.strip()))


@dataclass(frozen=True, slots=True)
class Fusion:
    """How hybrid search fuses its vector and keyword lists.

    Args:
        method: "relative" (default: cosine as it is, BM25 over the query's best), "minmax",
            "zscore" (see :func:`score_fusion`) or "rrf" (:func:`reciprocal_rank_fusion`).
        keyword_weight: the keyword list's weight for a prose query (a share in [0, 1] for
            score fusion; the second list's RRF weight for "rrf", the first weighing 1).
        identifier_keyword_weight: the keyword list's weight for a query that
            :func:`looks_like_identifier`; None for ``keyword_weight``.
        k: the RRF constant ("rrf" only).

    Raises:
        ConfigurationError: an unknown method, or a weight or ``k`` out of range.
    """

    method: FusionMethod = "relative"
    keyword_weight: float = 0.1
    identifier_keyword_weight: float | None = 0.6
    k: int = RRF_K

    def __post_init__(self) -> None:
        if self.method not in _METHODS:
            raise ConfigurationError(
                f"unknown fusion method {self.method!r}; use one of {_METHODS}"
            )
        for name in ("keyword_weight", "identifier_keyword_weight"):
            value = getattr(self, name)
            if value is None and name == "identifier_keyword_weight":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigurationError(f"Fusion: {name} must be a number >= 0, got {value!r}")
            if self.method != "rrf" and value > 1:
                raise ConfigurationError(f"Fusion: {name} must be in [0, 1], got {value!r}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 0:
            raise ConfigurationError(f"Fusion: k must be an int >= 0, got {self.k!r}")

    def weight_for(self, query: str) -> float:
        """The keyword weight used for ``query``."""
        if self.identifier_keyword_weight is not None and looks_like_identifier(query):
            return self.identifier_keyword_weight
        return self.keyword_weight

    def fuse(
        self,
        query: str,
        vector: Sequence[tuple[str, float]],
        keyword: Sequence[tuple[str, float]],
    ) -> list[tuple[str, float]]:
        """Fuse the two lists for ``query`` (see :func:`fuse`); ``(id, score)``, best first."""
        return fuse(
            vector, keyword, method=self.method, keyword_weight=self.weight_for(query), k=self.k
        )


DEFAULT_FUSION = Fusion()
"""The pipeline's default: score fusion ("relative"), keyword weight 0.1 for prose and 0.6
for identifier queries (tuned on ``bench/rag_labelled.py``'s dev half)."""
