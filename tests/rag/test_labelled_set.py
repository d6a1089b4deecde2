"""The labelled retrieval set of bench/rag_labelled: well formed, and every label answerable.

The corpus is committed (bench/rag_labelled/corpus/, extracted from pinned package versions), so
this test does not depend on what pip installs; each answer phrase must be in its source, so a
refreshed corpus whose text moved shows up here, not as a silent drop in the benchmark's recall.
"""

from __future__ import annotations

import collections
import importlib.util
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench" / "rag_labelled"


def _build_corpus() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_corpus", BENCH / "build_corpus.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_questions_are_many_varied_and_unique() -> None:
    corpus = _build_corpus()
    questions = corpus.load_questions()
    assert len(questions) >= 300
    kinds = collections.Counter(q["kind"] for q in questions)
    assert set(kinds) <= {"identifier", "paraphrase", "factual"}
    assert len(questions) / 4 <= kinds["identifier"] <= len(questions) / 2
    assert len({q["question"] for q in questions}) == len(questions)
    assert {q["source"] for q in questions} <= set(corpus.SOURCES)
    assert len({q["source"] for q in questions}) >= 20


def test_every_answer_is_in_its_source(tmp_path: Path) -> None:
    corpus = _build_corpus()
    corpus.build(tmp_path)
    assert corpus.check_questions(tmp_path, corpus.load_questions()) == []
    # And a wrong label is reported.
    bad = [{"question": "q", "kind": "identifier", "source": "orjson.md", "answer": "no such"}]
    assert len(corpus.check_questions(tmp_path, bad)) == 1
