"""Rerankers: reorder retrieved candidates with a model that reads query and passage together.

A bi-encoder (the embedder) compares two vectors made separately; a cross-encoder reads the
query and a passage in one pass and scores their relevance, which is slower but more precise.
The pipeline fetches ``candidates`` hits, fuses them, and lets the reranker pick the ``top_k``.

:class:`CrossEncoderReranker` runs a sentence-transformers ``CrossEncoder`` (extra ``local``).
No cross-encoder model ships inside a PyPI package that goagent-py depends on, so give it a
local model folder (for example ``cross-encoder/ms-marco-MiniLM-L-6-v2`` downloaded once with
``huggingface-cli download``), a model name to fetch from the Hugging Face Hub when online, or
any object with a ``predict(pairs) -> scores`` method.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from goagent_py.errors import ConfigurationError, MissingExtraError

if TYPE_CHECKING:
    from goagent_py.rag.results import SearchResult

__all__ = ["CrossEncoderReranker", "Reranker"]


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
        scores = await asyncio.to_thread(self._score, pairs)
        if len(scores) != len(results):
            raise ValueError(
                f"cross-encoder returned {len(scores)} scores for {len(results)} passages"
            )
        order = sorted(range(len(results)), key=lambda i: (-scores[i], i))
        return [dataclasses.replace(results[i], score=scores[i]) for i in order[:top_k]]
