"""Retrieval quality on the labelled set in tests/rag/data, with the real local embedder.

``data/docs`` holds five Markdown documents written for this repo (agent loop, memory,
configuration keys, error codes, operations) and ``data/questions.json`` 38 questions, each
labelled with its source and a passage the top-5 results must contain. 12 are exact-identifier
questions (error codes, config keys, environment variables), the case embeddings are weak at.

Recall@5 vector-only vs hybrid (vector + keyword, fused by the default Fusion): hybrid must not be
worse, and it must find every exact-identifier question. ``bench/rag_quality.py`` prints the
full table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from goagent_py.rag import Pipeline, SearchResult, load_directory

DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Question:
    question: str
    source: str
    passage: str
    kind: str


def load_questions() -> list[Question]:
    return [Question(**q) for q in json.loads((DATA / "questions.json").read_text())]


def _norm(text: str) -> str:
    return " ".join(text.split())


def found(question: Question, results: list[SearchResult]) -> bool:
    passage = _norm(question.passage)
    return any(r.source == question.source and passage in _norm(r.text) for r in results)


def test_labelled_set_is_well_formed() -> None:
    questions = load_questions()
    docs = {d.source: d.text for d in load_directory(DATA / "docs")}
    assert len(questions) >= 30
    assert len(docs) >= 4
    assert sum(q.kind == "identifier" for q in questions) >= 8
    for q in questions:
        assert q.kind in ("semantic", "identifier")
        assert q.passage in docs[q.source], q


@pytest.fixture(scope="module")
def embedder() -> Any:
    from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder

    try:
        return SentenceTransformerEmbedder()
    except ImportError as exc:
        pytest.skip(f'needs the "local" extra: {exc}')


@pytest.mark.slow
async def test_hybrid_recall_at_5_is_not_worse_and_finds_identifiers(
    embedder: Any, tmp_path: Path
) -> None:
    questions = load_questions()
    async with Pipeline.sqlite(tmp_path / "kb.db", embedder, dimensions=384) as pipeline:
        report = await pipeline.index(load_directory(DATA / "docs"))
        assert report.written == report.chunks > 10
        hits: dict[str, list[bool]] = {"vector": [], "hybrid": []}
        for q in questions:
            for mode in hits:
                results = await pipeline.search(q.question, top_k=5, mode=mode)  # type: ignore[arg-type]
                hits[mode].append(found(q, results))
        again = await pipeline.index(load_directory(DATA / "docs"))
        assert again.written == 0

    recall = {mode: sum(h) / len(h) for mode, h in hits.items()}
    identifiers = [i for i, q in enumerate(questions) if q.kind == "identifier"]
    missed = [questions[i].question for i in identifiers if not hits["hybrid"][i]]
    print(f"recall@5: {recall}")
    assert recall["hybrid"] >= recall["vector"], recall
    assert missed == [], f"hybrid missed exact-identifier questions: {missed}"
    assert recall["hybrid"] >= 0.9, recall
