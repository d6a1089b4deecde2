"""Rerankers: reorder retrieved candidates with a model that reads query and passage together.

A bi-encoder (the embedder) compares two vectors made separately; a cross-encoder reads the
query and a passage in one pass and scores their relevance, which is slower but more precise.
The pipeline fetches ``candidates`` hits, fuses them, and lets the reranker pick the ``top_k``.

:class:`CrossEncoderReranker` runs a sentence-transformers ``CrossEncoder`` (extra ``local``).
No cross-encoder model ships inside a PyPI package that goagent-py depends on, so give it a
local model folder (for example ``cross-encoder/ms-marco-MiniLM-L-6-v2`` downloaded once with
``huggingface-cli download``), a model name to fetch from the Hugging Face Hub when online, or
any object with a ``predict(pairs) -> scores`` method.

:class:`MaxSimReranker` needs no new model: late interaction (ColBERT's MaxSim) over the
embedder's own contextual token vectors, added to the fused score. On the labelled benchmark's
test half it lifts hybrid recall@1 from 0.508 to 0.524 with the local MiniLM embedder (its
weight picked on the dev half), for a token-level forward pass over the candidates per query.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from goagent_py._workers import to_thread
from goagent_py.errors import ConfigurationError, MissingExtraError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from goagent_py.rag.results import SearchResult

__all__ = ["CrossEncoderReranker", "MaxSimReranker", "Reranker", "TokenEmbedder"]


@runtime_checkable
class Reranker(Protocol):
    """Reorders search results for a query."""

    async def rerank(
        self, query: str, results: Sequence[SearchResult], *, top_k: int
    ) -> list[SearchResult]:
        """The best ``top_k`` of ``results`` for ``query``, best first, with new scores."""
        ...


class CrossEncoderReranker:
    """Reranks with a sentence-transformers cross-encoder (extra ``local``).

    The model is loaded lazily, once, in a worker thread; scoring runs in a worker thread too.
    Each result's ``score`` becomes the cross-encoder's score; its vector and keyword scores are
    kept.

    Args:
        model: a local model folder or Hugging Face model name (loaded with
            ``sentence_transformers.CrossEncoder``), or a loaded model: any object with
            ``predict(pairs: list[tuple[str, str]]) -> Sequence[float]``.
        device: the torch device, when ``model`` is a name or path.
        max_chars: passage text is cut to this many characters before scoring (cross-encoders
            truncate long input anyway; this keeps the tokenizer's work bounded).

    Raises:
        MissingExtraError: ``model`` is a name or path and sentence-transformers is missing.
    """

    def __init__(
        self, model: str | os.PathLike[str] | Any, *, device: str = "cpu", max_chars: int = 2000
    ) -> None:
        self._lock = threading.Lock()
        self._device = device
        self._max_chars = max_chars
        if isinstance(model, str | os.PathLike):
            import importlib.util

            if importlib.util.find_spec("sentence_transformers") is None:
                raise MissingExtraError(
                    "sentence-transformers", "local", feature="CrossEncoderReranker"
                )
            self._name: str | None = os.fspath(model)
            self._model: Any = None
        else:
            if not callable(getattr(model, "predict", None)):
                raise ConfigurationError(
                    "model must be a name, a path, or an object with predict(pairs)"
                )
            self._name = None
            self._model = model

    def __repr__(self) -> str:
        return f"CrossEncoderReranker({self._name or type(self._model).__name__!r})"

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                from goagent_py.providers.sentence_transformers import (
                    _import_sentence_transformers,
                )

                st = _import_sentence_transformers()
                self._model = st.CrossEncoder(self._name, device=self._device)
            return self._model

    def _score(self, pairs: list[tuple[str, str]]) -> list[float]:
        scores = self._load().predict(pairs)
        return [float(s) for s in scores]

    async def rerank(
        self, query: str, results: Sequence[SearchResult], *, top_k: int
    ) -> list[SearchResult]:
        """The ``top_k`` results the cross-encoder scores highest (ties keep their order)."""
        if not results:
            return []
        pairs = [(query, r.text[: self._max_chars]) for r in results]
        scores = await to_thread(self._score, pairs)
        if len(scores) != len(results):
            raise ValueError(
                f"cross-encoder returned {len(scores)} scores for {len(results)} passages"
            )
        order = sorted(range(len(results)), key=lambda i: (-scores[i], i))
        return [dataclasses.replace(results[i], score=scores[i]) for i in order[:top_k]]


@runtime_checkable
class TokenEmbedder(Protocol):
    """An embedder that also gives each text's contextual token vectors (for MaxSim)."""

    async def embed_tokens(self, texts: Sequence[str]) -> list[NDArray[np.float32]]:
        """One (tokens x dimensions) array per text, special tokens left out."""
        ...


def maxsim(query: NDArray[np.float32], passage: NDArray[np.float32]) -> float:
    """The mean over the query's tokens of their best cosine with the passage's tokens (0.0
    when either has no tokens). Rows must be unit length."""
    if len(query) == 0 or len(passage) == 0:
        return 0.0
    return float((query @ passage.T).max(axis=1).mean())


def _unit_rows(vectors: NDArray[np.float32]) -> NDArray[np.float32]:
    import numpy as np

    rows = np.asarray(vectors, dtype=np.float32)
    if rows.ndim != 2 or len(rows) == 0:
        return rows.reshape(0, 0) if rows.size == 0 else rows.reshape(len(rows), -1)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    out: NDArray[np.float32] = rows / np.maximum(norms, 1e-12)
    return out


class MaxSimReranker:
    """Adds late interaction (MaxSim) over token vectors to each candidate's score.

    Each candidate's score becomes ``score + weight * maxsim``, where ``maxsim`` is the mean over
    the query's tokens of their best cosine with the candidate text's tokens (ColBERT's late
    interaction, here on the embedder's own token vectors, which were trained for mean pooling:
    a nudge to the fused ranking, not a ranking on its own). The candidates' token vectors are
    computed at query time, in one batch with the query's: no index change, and a forward pass
    over the candidates per search (the pipeline's ``candidates``, 30 by default).

    Args:
        embedder: a :class:`TokenEmbedder`, such as
            :class:`~goagent_py.providers.sentence_transformers.SentenceTransformerEmbedder`.
        weight: how much MaxSim counts against the fused score. The default 2.0 was picked on
            the dev half of ``bench/rag_labelled`` for the local MiniLM embedder and the default
            score fusion (hybrid search); another embedder or fusion needs its own.
        max_chars: passage text is cut to this many characters first (the embedder truncates
            at its token limit anyway).

    Raises:
        ConfigurationError: ``embedder`` has no ``embed_tokens``, or a bad ``weight``.
    """

    def __init__(self, embedder: Any, *, weight: float = 2.0, max_chars: int = 2000) -> None:
        if not isinstance(embedder, TokenEmbedder):
            raise ConfigurationError(
                f"{type(embedder).__name__} has no embed_tokens(texts): MaxSimReranker needs "
                "token vectors (SentenceTransformerEmbedder gives them)"
            )
        if isinstance(weight, bool) or not isinstance(weight, int | float) or weight < 0:
            raise ConfigurationError(f"weight must be a number >= 0, got {weight!r}")
        self._embedder = embedder
        self._weight = float(weight)
        self._max_chars = max_chars

    def __repr__(self) -> str:
        return f"MaxSimReranker({type(self._embedder).__name__}, weight={self._weight})"

    async def rerank(
        self, query: str, results: Sequence[SearchResult], *, top_k: int
    ) -> list[SearchResult]:
        """The ``top_k`` results by ``score + weight * maxsim`` (ties keep their order)."""
        if not results:
            return []
        texts = [query, *(r.text[: self._max_chars] for r in results)]
        tokens = await self._embedder.embed_tokens(texts)
        if len(tokens) != len(texts):
            raise ValueError(f"embed_tokens returned {len(tokens)} arrays for {len(texts)} texts")
        q = _unit_rows(tokens[0])
        scores = [
            r.score + self._weight * maxsim(q, _unit_rows(t))
            for r, t in zip(results, tokens[1:], strict=True)
        ]
        order = sorted(range(len(results)), key=lambda i: (-scores[i], i))
        return [dataclasses.replace(results[i], score=scores[i]) for i in order[:top_k]]
