"""RAG work sent to threads against a function that raises StopIteration (fix10)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from goagent_py.messages import Message
from goagent_py.rag import CrossEncoderReranker, SearchResult


class Exhausted:
    """A cross-encoder whose predict calls ``next()`` on an empty iterator."""

    def predict(self, pairs: Any) -> list[float]:
        return next(iter([]))


async def test_a_reranker_model_raising_stop_iteration_fails_the_call_instead_of_hanging() -> None:
    results = [SearchResult(id="a", message=Message("user", "banana"), score=1.0)]
    # The guard only keeps a regression from hanging the suite; the call fails at once.
    with pytest.raises(RuntimeError, match="StopIteration") as caught:
        await asyncio.wait_for(
            CrossEncoderReranker(Exhausted()).rerank("q", results, top_k=1), timeout=120
        )
    assert isinstance(caught.value.__cause__, StopIteration)
