"""A RAG index records which embedder made its vectors (docs/rag.md, "Which embedder made the
vectors").

Chunk ids cover content and metadata, not the embedder: an index re-indexed with another model
of the same size kept every old vector as "unchanged", and searches silently compared vectors
of two models. These tests run on a real sqlite-vec file.
"""

from __future__ import annotations

import argparse
import io
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from other_model import OtherModel  # tests/other_model.py

from goagent_py.errors import ConfigurationError
from goagent_py.rag.documents import Document
from goagent_py.rag.manifest import EMBEDDER_KEY
from goagent_py.rag.pipeline import Pipeline
from goagent_py.testing import FakeEmbedder

pytestmark = pytest.mark.needs_extra("vector")

DIMS = 16
# Texts, not Documents: a module-level Document stays alive through the whole session, and
# tests/rag/test_ragcode14_streaming.py counts the live ones.
TEXTS = {
    "peru.md": "The capital of Peru is Lima, on the Pacific coast.",
    "rocks.md": "Basalt forms when lava cools quickly at the surface.",
    "music.md": "The violin has four strings tuned in fifths.",
}


def _docs() -> list[Document]:
    return [Document(text, source=source) for source, text in TEXTS.items()]


def _open(path: Path, embedder: Any) -> Pipeline:
    return Pipeline.sqlite(path, embedder, dimensions=DIMS, hybrid=False)


async def _indexed(tmp_path: Path) -> tuple[list[Document], Path]:
    """The documents, indexed with the first model into a new file; and the file."""
    docs = _docs()
    db = tmp_path / "rag.db"
    async with _open(db, FakeEmbedder(DIMS)) as pipeline:
        await pipeline.index(docs)
    return docs, db


async def _finds(pipeline: Pipeline, doc: Document) -> bool:
    """Whether a vector search for the document's text finds it as close as the same model's
    vectors are (another model's vectors score near 0 against this model's query)."""
    results = await pipeline.search(doc.text, top_k=1, mode="vector")
    return results[0].source == doc.source and (results[0].vector_score or 0.0) > 0.9


async def test_another_embedder_re_embeds_everything(tmp_path: Path) -> None:
    docs, db = await _indexed(tmp_path)
    async with _open(db, OtherModel()) as pipeline:
        report = await pipeline.index(docs)
        assert report.unchanged == 0
        assert report.written == report.chunks
        assert report.reembedded == len(docs)
        # The search compares the new model's query with the new model's vectors.
        assert all([await _finds(pipeline, doc) for doc in docs])
        assert await pipeline.other_embedder_sources() == []
        # Indexed again with the same model: nothing re-embedded.
        again = await pipeline.index(docs)
        assert (again.written, again.reembedded) == (0, 0)


async def test_a_query_with_another_embedder_is_refused(tmp_path: Path) -> None:
    docs, db = await _indexed(tmp_path)
    async with _open(db, OtherModel()) as pipeline:
        with pytest.raises(ConfigurationError, match="Index the documents again"):
            await pipeline.search("Lima", mode="vector")
        # The keyword index needs no embedder: a keyword search is still answered.
    async with _open(db, FakeEmbedder(DIMS)) as pipeline:
        assert await _finds(pipeline, docs[0])


async def test_a_wrapper_passes_its_embedders_identity_through(tmp_path: Path) -> None:
    from goagent_py.otel import instrument_embedder

    docs, db = await _indexed(tmp_path)
    async with _open(db, instrument_embedder(FakeEmbedder(DIMS), model="fake")) as pipeline:
        report = await pipeline.index(docs)
        assert (report.written, report.reembedded) == (0, 0)
        assert report.unchanged == report.chunks
        assert await _finds(pipeline, docs[2])


async def test_an_index_from_before_identities_is_adopted(tmp_path: Path) -> None:
    docs, db = await _indexed(tmp_path)
    with sqlite3.connect(db) as conn:  # as an index made before the record existed
        conn.execute("DELETE FROM rag_manifest WHERE source = ?", (EMBEDDER_KEY,))
    async with _open(db, FakeEmbedder(DIMS)) as pipeline:
        assert await _finds(pipeline, docs[0])
        report = await pipeline.index(docs)
        assert (report.written, report.reembedded) == (0, 0)
        assert await pipeline.sources() == sorted(d.source for d in docs)
    async with _open(db, OtherModel()) as pipeline:  # adopted: now checked
        with pytest.raises(ConfigurationError, match="embedded with fake:fnv32a-lcg"):
            await pipeline.search("Lima", mode="vector")


async def test_a_crash_mid_re_index_leaves_the_sources_listed(tmp_path: Path) -> None:
    docs, db = await _indexed(tmp_path)
    async with _open(db, OtherModel()) as pipeline:
        store: Any = pipeline.store
        write = store.upsert_batch

        async def crash_after_writing(entries: Any) -> None:
            await write(entries)  # the new vectors are in the file...
            raise OSError("killed")  # ...and the run dies before it records anything more

        store.upsert_batch = crash_after_writing
        with pytest.raises(OSError, match="killed"):
            await pipeline.index(docs)
    # Neither embedder may search the half re-embedded index silently.
    async with _open(db, OtherModel()) as pipeline:
        with pytest.raises(ConfigurationError, match="3 indexed sources still hold"):
            await pipeline.search("Lima", mode="vector")
        assert await pipeline.other_embedder_sources() == sorted(d.source for d in docs)
    async with _open(db, FakeEmbedder(DIMS)) as pipeline:
        with pytest.raises(ConfigurationError, match="embedded with fake:other-model"):
            await pipeline.search("Lima", mode="vector")
    async with _open(db, OtherModel()) as pipeline:
        report = await pipeline.index(docs)
        assert report.reembedded == len(docs)
        for doc in docs:
            assert await _finds(pipeline, doc)


async def test_rag_index_says_it_re_embedded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = _docs()
    from goagent_py.cli import _rag as cli_rag
    from goagent_py.cli import main as cli

    root = tmp_path / "docs"
    root.mkdir()
    for doc in docs:
        (root / doc.source).write_text(doc.text, encoding="utf-8")
    other = tmp_path / "other"
    other.mkdir()
    (other / "extra.md").write_text("Owls hunt at night.", encoding="utf-8")
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
    said = await index(root)
    # The other folder, not indexed in this run, is re-embedded from the store
    # (tests/rag/test_rag17_embedder_change.py): nothing is left holding the old vectors.
    assert "4 documents were embedded again" in said
    assert "still hold" not in said


async def test_an_indexer_whose_embedder_was_replaced_meanwhile_stops(tmp_path: Path) -> None:
    db = tmp_path / "rag.db"
    docs = _docs()
    async with _open(db, FakeEmbedder(DIMS)) as old, _open(db, OtherModel()) as new:
        await old.index(docs[0])
        await new.index(docs[0])  # another process moves the index to its model...
        # ...while this one, started with the old model, goes on: it must not write old
        # vectors under the new identity.
        with pytest.raises(ConfigurationError, match="another indexer moved this index"):
            await old._index_one(docs[1], {})
        assert await new.sources() == ["peru.md"]
        assert await _finds(new, docs[0])
