"""Chunk context (document and heading path) in the keyword index and the embedded text."""

from __future__ import annotations

from pathlib import Path

import pytest

from goagent_py.memory.chunking import RecursiveChunker
from goagent_py.rag import (
    Document,
    InMemoryKeywordIndex,
    KeywordEntry,
    Pipeline,
    SqliteKeywordIndex,
)
from goagent_py.rag._chunks import chunk_context, clean_heading, prepare
from goagent_py.rag._sqlite import driver

from .conftest import BatchWordEmbedder, PipelineFactory

# The heading names the setting; the section's own text never does.
GUIDE = """# Widget guide

## Telemetry export

Set the collector address and the sampling rate. Nothing is sent until both are set.

## Storage

Files are kept under the data folder and pruned after thirty days.
"""


def test_context_is_file_title_and_headings_without_links() -> None:
    assert chunk_context("docs/orjson.md", "orjson", "orjson > Serialize") == "orjson > Serialize"
    assert (
        chunk_context("tabulate.md", "Headers", "Headers > Table format")
        == "tabulate > Headers > Table format"
    )
    assert chunk_context("a.txt", "", None) == "a"
    assert chunk_context("", "", None) == ""
    title = "Thread-pool Controls [![Build](https://x/badge.svg)](https://x/actions)"
    assert clean_heading(title) == "Thread-pool Controls"
    assert clean_heading("[3.1.0](https://github.com/o/r/compare/a...b) (2023-03-06)") == (
        "3.1.0 (2023-03-06)"
    )


def test_prepared_chunks_carry_their_context_and_keep_their_text() -> None:
    doc = Document(GUIDE, "guide.md", metadata={"format": "markdown", "title": "Widget guide"})
    chunks = prepare(doc, None)
    telemetry = next(c for c in chunks if "collector" in c.message.text)
    assert telemetry.context == "Widget guide > Telemetry export"  # the title names the file
    assert telemetry.embed_text.startswith(telemetry.context + "\n\n")
    assert "Widget guide >" not in telemetry.message.text  # the stored text is the chunk's own


async def test_a_heading_only_query_finds_the_section(make_pipeline: PipelineFactory) -> None:
    pipeline = make_pipeline(chunker=None)
    await pipeline.index(
        Document(GUIDE, "guide.md", metadata={"format": "markdown", "title": "Widget guide"})
    )
    for mode in ("keyword", "hybrid"):
        [hit] = await pipeline.search("telemetry", top_k=1, mode=mode)
        assert "collector address" in hit.text
        assert not hit.text.startswith("Widget guide >")


@pytest.mark.needs_extra("vector")
async def test_context_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"
    doc = Document(GUIDE, "guide.md", metadata={"format": "markdown", "title": "Widget guide"})
    embedder = BatchWordEmbedder()
    async with Pipeline.sqlite(path, embedder, dimensions=embedder.dimensions) as pipeline:
        await pipeline.index(doc)
    async with Pipeline.sqlite(path, embedder, dimensions=embedder.dimensions) as pipeline:
        [hit] = await pipeline.search("telemetry", top_k=1, mode="keyword")
        assert "collector address" in hit.text
        report = await pipeline.index(doc)
        assert report.written == 0  # nothing re-embedded on reopen


async def test_an_index_written_without_context_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "kw.db"
    # The layout before the context column.
    conn = driver().connect(str(path))
    conn.execute(
        "CREATE TABLE kw (pk INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, text TEXT NOT NULL, "
        "metadata TEXT NOT NULL DEFAULT '{}')"
    )
    conn.execute(
        "CREATE VIRTUAL TABLE kw_fts USING fts5(text, content=kw, content_rowid=pk, "
        "tokenize='porter unicode61 remove_diacritics 2')"
    )
    conn.execute("INSERT INTO kw (id, text) VALUES ('old', 'an old entry about kiwis')")
    conn.execute("INSERT INTO kw_fts (rowid, text) VALUES (1, 'an old entry about kiwis')")
    conn.commit()
    conn.close()
    async with SqliteKeywordIndex(path, table="kw") as kw:
        assert await kw.search("kiwis", top_k=5) == [("old", pytest.approx(await _score(kw)))]
        await kw.add_batch([KeywordEntry("new", "about mangoes", {}, context="Fruit > Kiwis")])
        assert {id for id, _ in await kw.search("kiwis", top_k=5)} == {"old", "new"}
        await kw.delete(["old", "new"])
        assert await kw.search("kiwis", top_k=5) == []
        assert await kw.count() == 0


async def _score(kw: SqliteKeywordIndex) -> float:
    return (await kw.search("kiwis", top_k=1))[0][1]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_context_is_searched_but_not_returned(kind: str, tmp_path: Path) -> None:
    index = InMemoryKeywordIndex() if kind == "memory" else SqliteKeywordIndex(tmp_path / "k.db")
    await index.add_batch(
        [
            KeywordEntry("a", "Set the collector address.", {"n": 1}, context="Telemetry"),
            KeywordEntry("b", "Files are pruned.", {"n": 2}, context="Storage"),
        ]
    )
    assert [id for id, _ in await index.search("telemetry", top_k=5)] == ["a"]
    entry = (await index.get(["a"]))["a"]
    assert entry.text == "Set the collector address."
    assert entry.context == "Telemetry"
    await index.delete(["a"])
    assert await index.search("telemetry", top_k=5) == []
    if isinstance(index, SqliteKeywordIndex):
        await index.aclose()


async def test_memory_index_matches_a_name_inside_a_dotted_call() -> None:
    # FTS5 matches the phrase "win_service_get" inside psutil.win_service_get(); so must BM25.
    index = InMemoryKeywordIndex()
    await index.add_batch(
        [
            KeywordEntry("a", "Call psutil.win_service_get('alg') for one service.", {}),
            KeywordEntry("b", "Get the service list.", {}),
        ]
    )
    assert [id for id, _ in await index.search("win_service_get", top_k=5)] == ["a"]
    assert [id for id, _ in await index.search("service_get", top_k=5)] == ["a"]


def test_rst_headings_give_rst_chunks_a_heading_path() -> None:
    from goagent_py.rag.documents import rst_headings

    text = (
        "=====\nGuide\n=====\n\nIntro.\n\nInstall\n-------\n\npip install it.\n\n"
        "Linux\n~~~~~\n\nUse apt.\n\nUsage\n-------\n\nRun it.\n"
    )
    assert rst_headings(text) == [
        (2, "Guide"),
        (7, "Guide > Install"),
        (12, "Guide > Install > Linux"),
        (17, "Guide > Usage"),
    ]
    doc = Document(text, "tool.rst", metadata={"format": "rst", "title": "Guide"})
    chunks = prepare(doc, RecursiveChunker(max_size=6, overlap=0))
    apt = next(c for c in chunks if "apt" in c.message.text)
    assert apt.message.metadata["heading"] == "Guide > Install > Linux"
    assert apt.context == "tool > Guide > Install > Linux"
