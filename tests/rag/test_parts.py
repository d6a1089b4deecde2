"""Part vectors: each sentence-sized part of a chunk is embedded too; results stay chunks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from goagent_py.messages import Message, Role, TextBlock
from goagent_py.rag import Document, Pipeline
from goagent_py.rag._chunks import PART_KEY, collapse_parts, is_part_id, sentence_parts

from .conftest import BatchWordEmbedder, PipelineFactory

# One chunk (the default chunker) with several facts; the query words appear in one sentence.
NOTES = (
    "The scheduler wakes every minute and looks for due jobs in the queue table. "
    "Each job runs in its own worker process, which the pool recycles after a hundred jobs. "
    "Failed jobs are retried three times with exponential backoff before they are parked. "
    "Parked jobs stay visible in the dashboard until somebody deletes or requeues them."
)


def test_sentence_parts() -> None:
    parts = sentence_parts(NOTES)
    assert len(parts) == 2  # sentences packed to at least 150 characters
    assert parts[1].startswith("Failed jobs are retried")
    assert " ".join(parts) == NOTES
    assert sentence_parts("One short sentence.") == []  # a single part: the chunk's own vector
    # Short pieces (list items, table rows) are merged until a part says something.
    items = "\n".join(f"- item {n}" for n in range(20))
    assert all(len(p) >= 150 for p in sentence_parts(items)[:-1])


@dataclass
class _Hit:
    id: str
    score: float
    message: Message


def _hit(id: str, score: float, parent: str | None = None) -> _Hit:
    meta = {"source": "a.md"} | ({PART_KEY: parent} if parent else {})
    return _Hit(id, score, Message(Role.USER, [TextBlock(id)], metadata=meta))


def test_collapse_parts_scores_chunk_and_best_part() -> None:
    hits = [
        _hit("a#1:x~0", 0.9, "a#1:x"),
        _hit("a#0:y", 0.8),
        _hit("a#1:x~1", 0.7, "a#1:x"),
        _hit("a#1:x", 0.6),
        _hit("a#2:z~3", 0.5, "a#2:z"),
    ]
    out = collapse_parts(hits, 10)
    scores = {id: score for id, _, score in out}
    assert scores["a#1:x"] == 0.5 * 0.6 + 0.5 * 0.9
    assert scores["a#0:y"] == 0.8  # no part: its own cosine for both
    assert scores["a#2:z"] == 0.5  # its own cosine missing: the list's lowest score
    assert [id for id, _, _ in out] == ["a#0:y", "a#1:x", "a#2:z"]
    assert all(PART_KEY not in message.metadata for _, message, _ in out)
    assert len(collapse_parts(hits, 1)) == 1
    assert is_part_id("a#1:x~0")
    assert not is_part_id("a#1:x")
    assert not is_part_id("a~b.md#1:x")


async def test_parts_are_stored_searched_as_chunks_and_removed(
    make_pipeline: PipelineFactory,
) -> None:
    pipeline = make_pipeline(chunker=None, part_vectors=True)
    report = await pipeline.index(Document(NOTES, "notes.txt"))
    assert report.chunks == report.written == 1
    assert await pipeline.store.count() == 1 + 2  # type: ignore[attr-defined]
    for mode in ("vector", "hybrid"):
        results = await pipeline.search("how often are failed jobs retried", top_k=5, mode=mode)
        assert [r.id for r in results] == [(await pipeline.manifest.get("notes.txt"))[0]]
        assert results[0].text == NOTES
        assert PART_KEY not in results[0].metadata
    assert (await pipeline.index(Document(NOTES, "notes.txt"))).written == 0
    # The threshold applies to the chunk's score (chunk and part combined), never above it.
    [best] = await pipeline.search("failed jobs retried", top_k=1, mode="vector")
    assert await pipeline.search("failed jobs retried", mode="vector", score_threshold=best.score)
    above = best.score + 1e-6
    assert await pipeline.search("failed jobs retried", mode="vector", score_threshold=above) == []
    # A changed document: the old chunk and its parts go, the new ones come.
    changed = NOTES.replace("three times", "five times")
    report = await pipeline.index(Document(changed, "notes.txt"))
    assert (report.written, report.deleted) == (1, 1)
    assert await pipeline.store.count() == 3  # type: ignore[attr-defined]
    assert await pipeline.remove("notes.txt") == 1
    assert await pipeline.store.count() == 0  # type: ignore[attr-defined]


@pytest.mark.needs_extra("vector")
async def test_part_vectors_off_and_on_again(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"
    embedder = BatchWordEmbedder()
    doc = Document(NOTES, "notes.txt")
    async with Pipeline.sqlite(
        path, embedder, dimensions=embedder.dimensions, part_vectors=False
    ) as pipeline:
        await pipeline.index(doc)
        assert await pipeline.store.count() == 1  # type: ignore[attr-defined]
    embedder.texts.clear()
    async with Pipeline.sqlite(
        path, embedder, dimensions=embedder.dimensions, part_vectors=True
    ) as pipeline:
        report = await pipeline.index(doc)  # the chunk is kept; its parts are added
        assert (report.written, report.unchanged) == (0, 1)
        assert len(embedder.texts) == 2
        assert await pipeline.store.count() == 3  # type: ignore[attr-defined]
    async with Pipeline.sqlite(
        path, embedder, dimensions=embedder.dimensions, part_vectors=True
    ) as pipeline:
        [hit] = await pipeline.search("failed jobs retried", top_k=1, mode="vector")
        assert hit.text == NOTES  # reopened: the parts are still there and still collapse
        assert (await pipeline.index(doc)).written == 0
    async with Pipeline.sqlite(
        path, embedder, dimensions=embedder.dimensions, part_vectors=False
    ) as pipeline:
        await pipeline.index(doc)  # the parts are stale now
        assert await pipeline.store.count() == 1  # type: ignore[attr-defined]
