"""After an embedder change, a RAG index's state is true for every source (docs/rag.md, "Which
embedder made the vectors").

rag16 left two ways to mix two models' vectors: an embedder of user code without an
``embedder_identity`` wrote under the recorded identity unchecked, and sources a re-index did
not reach (another folder) stayed listed, blocking every search until someone indexed them
again; they are now re-embedded from the store when what they embedded can be rebuilt
exactly, else removed and reported. These tests run on a real sqlite-vec file.
"""

from __future__ import annotations

import argparse
import io
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from other_model import OtherModel  # tests/other_model.py

from goagent_py.errors import ConfigurationError
from goagent_py.memory.base import embedder_identity
from goagent_py.messages import ContentBlock
from goagent_py.rag.documents import Document
from goagent_py.rag.manifest import EMBEDDER_KEY
from goagent_py.rag.pipeline import Pipeline
from goagent_py.testing import FakeEmbedder

pytestmark = pytest.mark.needs_extra("vector")

DIMS = 16
TEXTS = {
    "peru.md": "The capital of Peru is Lima, on the Pacific coast.",
    "rocks.md": "Basalt forms when lava cools quickly at the surface.",
}
EXTRA = {"other/owls.md": "Owls hunt at night and sleep by day in hollow trees."}


def _docs(texts: dict[str, str] = TEXTS) -> list[Document]:
    return [Document(text, source=source) for source, text in texts.items()]


class UserEmbedder:
    """An embedder of user code with no ``embedder_identity``: another model's vectors."""

    dimensions = DIMS

    def __init__(self) -> None:
        self.inner = OtherModel()

    async def embed(self, blocks: Sequence[ContentBlock]) -> Any:
        return await self.inner.embed(blocks)


class DeclaredWrapper(UserEmbedder):
    """A wrapper of user code that declares its inner embedder's identity (same vectors)."""

    def __init__(self) -> None:
        self.inner = FakeEmbedder(DIMS)
        self.embedder_identity = self.inner.embedder_identity


def _open(path: Path, embedder: Any) -> Pipeline:
    return Pipeline.sqlite(path, embedder, dimensions=DIMS, hybrid=False)


async def _finds(pipeline: Pipeline, doc: Document) -> bool:
    results = await pipeline.search(doc.text, top_k=1, mode="vector")
    return results[0].source == doc.source and (results[0].vector_score or 0.0) > 0.9


def _record(db: Path) -> list[str]:
    import json

    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT ids FROM rag_manifest WHERE source = ?", (EMBEDDER_KEY,))
        found = row.fetchone()
    return list(json.loads(found[0])) if found else []


async def test_an_embedder_without_identity_is_told_apart_by_its_class(tmp_path: Path) -> None:
    docs = _docs()
    db = tmp_path / "rag.db"
    async with _open(db, FakeEmbedder(DIMS)) as pipeline:
        await pipeline.index(docs)
    # Its vectors are another model's: it may neither keep the old ones as "unchanged" nor
    # search them.
    async with _open(db, UserEmbedder()) as pipeline:
        with pytest.raises(ConfigurationError, match="Index the documents again"):
            await pipeline.search("Lima", mode="vector")
        report = await pipeline.index(docs)
        assert report.reembedded == len(docs)
        assert await _finds(pipeline, docs[0])
    derived = f"{__name__}.UserEmbedder:{DIMS}"
    assert embedder_identity(UserEmbedder()) == derived
    assert _record(db) == [derived]
    async with _open(db, FakeEmbedder(DIMS)) as pipeline:
        with pytest.raises(ConfigurationError, match=f"embedded with {derived}"):
            await pipeline.search("Lima", mode="vector")


async def test_a_declared_identity_keeps_the_index(tmp_path: Path) -> None:
    docs = _docs()
    db = tmp_path / "rag.db"
    async with _open(db, FakeEmbedder(DIMS)) as pipeline:
        await pipeline.index(docs)
    async with _open(db, DeclaredWrapper()) as pipeline:
        report = await pipeline.index(docs)
        assert (report.written, report.reembedded, report.unchanged) == (0, 0, report.chunks)
        assert await _finds(pipeline, docs[1])


def test_a_failing_dimensions_property_still_gives_an_identity() -> None:
    class Broken:
        @property
        def dimensions(self) -> int:
            raise RuntimeError("model not loaded")

        async def embed(self, blocks: object) -> object:
            raise NotImplementedError

    assert embedder_identity(Broken()).endswith(".Broken")


async def test_sources_a_re_index_did_not_reach_are_re_embedded_from_the_store(
    tmp_path: Path,
) -> None:
    docs, extra = _docs(), _docs(EXTRA)
    db = tmp_path / "rag.db"
    async with _open(db, FakeEmbedder(DIMS)) as pipeline:
        await pipeline.index(docs)
        await pipeline.index(extra)  # another folder, into the same index
    async with _open(db, OtherModel()) as pipeline:
        report = await pipeline.index(docs)
        # The other folder's chunks are rebuilt exactly from the store and embedded again.
        assert report.dropped == []
        assert report.reembedded == len(docs) + 1
        assert report.documents[-1].source == "other/owls.md"
        assert await pipeline.sources() == sorted([*TEXTS, *EXTRA])
        assert await pipeline.other_embedder_sources() == []
        for doc in [*docs, *extra]:  # every source is searchable with the new model at once
            assert await _finds(pipeline, doc)
        assert _record(db) == [f"fake:other-model:{DIMS}"]
        report = await pipeline.index(extra)  # and its vectors count as the new model's
        assert (report.written, report.reembedded, report.unchanged) == (0, 0, 1)


def _tamper(db: Path, word: str) -> None:
    """Change a stored chunk's text in place: what it embedded can no longer be rebuilt."""
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE rag SET message = replace(message, ?, 'Bats')", (word,))


async def test_sources_that_cannot_be_rebuilt_are_dropped_and_reported(tmp_path: Path) -> None:
    docs, extra = _docs(), _docs(EXTRA)
    db = tmp_path / "rag.db"
    async with _open(db, FakeEmbedder(DIMS)) as pipeline:
        await pipeline.index([*docs, *extra])
    _tamper(db, "Owls")
    async with _open(db, OtherModel()) as pipeline:
        report = await pipeline.index(docs)
        assert report.reembedded == len(docs)
        # Its vectors are the old model's, and what they embedded is unknown: removed, said so.
        assert report.dropped == ["other/owls.md"]
        assert await pipeline.sources() == sorted(TEXTS)
        assert await pipeline.other_embedder_sources() == []
        for doc in docs:
            assert await _finds(pipeline, doc)
        assert await pipeline.store.count() == len(docs)  # type: ignore[attr-defined]
        assert _record(db) == [f"fake:other-model:{DIMS}"]
        report = await pipeline.index(extra)  # indexed again: searchable again
        assert report.written == 1
        assert await _finds(pipeline, extra[0])


async def test_a_crash_while_dropping_leaves_the_source_listed(tmp_path: Path) -> None:
    docs, extra = _docs(), _docs(EXTRA)
    db = tmp_path / "rag.db"
    async with _open(db, FakeEmbedder(DIMS)) as pipeline:
        await pipeline.index([*docs, *extra])
    _tamper(db, "Owls")
    async with _open(db, OtherModel()) as pipeline:
        store: Any = pipeline.store
        delete = store.delete_batch

        async def crash_after_deleting(ids: Any) -> None:
            await delete(ids)
            raise OSError("killed")

        store.delete_batch = crash_after_deleting
        with pytest.raises(OSError, match="killed"):
            await pipeline.index(docs)
    # Nothing claims to be the new model's that is not: the source is still listed.
    assert _record(db) == [f"fake:other-model:{DIMS}", "other/owls.md"]
    async with _open(db, OtherModel()) as pipeline:
        with pytest.raises(ConfigurationError, match="1 indexed sources still hold"):
            await pipeline.search("Lima", mode="vector")
        report = await pipeline.index(docs)  # the next run finishes the drop
        assert (report.reembedded, report.dropped) == (0, ["other/owls.md"])
        assert await pipeline.sources() == sorted(TEXTS)
        assert await _finds(pipeline, docs[0])
    assert _record(db) == [f"fake:other-model:{DIMS}"]


async def test_rag_index_says_what_it_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from goagent_py.cli import _rag as cli_rag
    from goagent_py.cli import main as cli

    root = tmp_path / "docs"
    root.mkdir()
    for source, text in TEXTS.items():
        (root / source).write_text(text, encoding="utf-8")
    other = tmp_path / "other"
    other.mkdir()
    (other / "owls.md").write_text(EXTRA["other/owls.md"], encoding="utf-8")
    db = tmp_path / "rag.db"
    embedders: list[Any] = [FakeEmbedder(DIMS), FakeEmbedder(DIMS), OtherModel()]
    monkeypatch.setattr(cli_rag, "_pipeline", lambda path: _open(path, embedders.pop(0)))

    async def index(folder: Path) -> str:
        console = cli.Console(io.StringIO(), io.StringIO(), interactive=False)
        args = argparse.Namespace(paths=[str(folder)], db=str(db), root=str(tmp_path))
        assert await cli_rag.index(args, console) == cli.EXIT_OK
        return console.out.getvalue() + console.err.getvalue()  # type: ignore[attr-defined]

    await index(root)
    await index(other)
    _tamper(db, "Owls")
    said = await index(root)
    assert "2 documents were embedded again" in said
    assert "1 indexed documents held another embedder's vectors and were removed" in said
    assert "other/owls.md" in said
    assert "still hold" not in said


async def test_part_vectors_and_keywords_are_re_embedded_from_the_store(tmp_path: Path) -> None:
    sentences = [
        "Owls hunt at night and find mice by sound alone, even under deep snow.",
        "They sleep by day in hollow trees, barns and the eaves of old churches.",
        "Swifts eat, drink and even sleep on the wing, landing only to nest.",
        "A young swift may fly for two years before it first lands at all.",
        "Herons stand still in shallow water for an hour before they strike.",
        "Their neck folds into an S, so the strike is faster than the eye.",
    ]
    long = {"other/notes.md": "# Birds\n\n" + " ".join(sentences)}
    docs, extra = _docs(), _docs(long)
    db = tmp_path / "rag.db"

    def open_full(embedder: Any) -> Pipeline:
        return Pipeline.sqlite(db, embedder, dimensions=DIMS, part_vectors=True)

    async with open_full(FakeEmbedder(DIMS)) as pipeline:
        await pipeline.index([*docs, *extra])
        rows = await pipeline.store.count()  # type: ignore[attr-defined]
        assert len(await pipeline.manifest.get("other/notes.md")) > 1  # the chunk and its parts
    async with open_full(OtherModel()) as pipeline:
        report = await pipeline.index(docs)
        assert (report.dropped, report.reembedded) == ([], len(docs) + 1)
        assert await pipeline.store.count() == rows  # type: ignore[attr-defined]
        hits = await pipeline.search("Swifts sleep on the wing", top_k=1)
        assert hits[0].source == "other/notes.md"
        assert hits[0].keyword_score  # its keyword row is kept
    # The chunk's and its parts' vectors are the ones a fresh index with the new model makes.
    only = {"source": "other/notes.md"}
    async with Pipeline.sqlite(
        tmp_path / "fresh.db", OtherModel(), dimensions=DIMS, part_vectors=True
    ) as fresh:
        await fresh.index(extra)
        expected = await fresh.search("Swifts sleep on the wing", mode="vector", filter=only)
    async with open_full(OtherModel()) as pipeline:
        got = await pipeline.search("Swifts sleep on the wing", mode="vector", filter=only)
        assert [r.vector_score for r in got] == pytest.approx([r.vector_score for r in expected])
        report = await pipeline.index(extra)
        assert (report.written, report.reembedded) == (0, 0)
