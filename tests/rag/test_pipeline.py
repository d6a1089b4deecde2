"""Pipeline: incremental indexing with nothing stale, search modes, filters, observers.

Index/re-index/change/delete counts are checked on both the in-memory store and sqlite-vec in a
real file (the ``make_pipeline`` fixture runs each test on both).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from goagent_py.errors import ConfigurationError, InvalidInputError
from goagent_py.memory.base import Chunk
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.messages import ImageBlock, TextBlock
from goagent_py.rag import (
    Document,
    DocumentReport,
    IndexProgress,
    InMemoryKeywordIndex,
    Pipeline,
    SearchResult,
    load_directory,
)

from .conftest import CORPUS, BatchWordEmbedder, PipelineFactory, WordEmbedder, write_corpus

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


async def counts(pipeline: Pipeline) -> tuple[int, int]:
    """(vector store entries, keyword index entries)."""
    store: Any = pipeline.store
    keyword: Any = pipeline.keyword_index
    return await store.count(), await keyword.count()


async def ids_of(pipeline: Pipeline, source: str) -> list[str]:
    return await pipeline.manifest.get(source)


# -- incremental indexing ---------------------------------------------------------------------


async def test_index_reindex_change_delete(
    make_pipeline: PipelineFactory, corpus_dir: Path
) -> None:
    embedder = BatchWordEmbedder()
    pipeline = make_pipeline(embedder)

    first = await pipeline.index(load_directory(corpus_dir))
    assert [d.source for d in first.documents] == ["config.md", "errors.md", "install.md"]
    assert first.chunks == first.written > 3
    assert first.unchanged == first.deleted == first.skipped == 0
    assert await counts(pipeline) == (first.chunks, first.chunks)
    assert await pipeline.sources() == ["config.md", "errors.md", "install.md"]

    # Unchanged: nothing embedded, nothing written, nothing deleted.
    embedded = len(embedder.texts)
    again = await pipeline.index(load_directory(corpus_dir))
    assert (again.written, again.deleted, again.unchanged) == (0, 0, first.chunks)
    assert len(embedder.texts) == embedded
    assert await counts(pipeline) == (first.chunks, first.chunks)

    # Change one file: only its changed chunks are written, its old ones deleted.
    before = {s: await ids_of(pipeline, s) for s in ("config.md", "errors.md", "install.md")}
    (corpus_dir / "errors.md").write_text(
        CORPUS["errors.md"].replace("Check the firewall rules.", "Open port 8443 instead.")
    )
    changed = await pipeline.index(load_directory(corpus_dir))
    per = {d.source: d for d in changed.documents}
    assert per["config.md"].written == per["install.md"].written == 0
    assert per["errors.md"].written >= 1
    assert per["errors.md"].deleted == per["errors.md"].written
    assert per["errors.md"].unchanged == per["errors.md"].chunks - per["errors.md"].written
    assert await ids_of(pipeline, "config.md") == before["config.md"]
    assert await ids_of(pipeline, "install.md") == before["install.md"]
    assert await ids_of(pipeline, "errors.md") != before["errors.md"]
    assert await counts(pipeline) == (first.chunks, first.chunks)
    hits = await pipeline.search("firewall rules", top_k=10, mode="keyword")
    assert hits == []  # the old text is gone from the keyword index too
    hits = await pipeline.search("port 8443", top_k=1, mode="keyword")
    assert hits[0].source == "errors.md"

    # Delete one file's document: its chunks are gone, the others stay.
    errors_chunks = len(await ids_of(pipeline, "errors.md"))
    deleted = await pipeline.remove("errors.md")
    assert deleted == errors_chunks
    assert await counts(pipeline) == (first.chunks - errors_chunks,) * 2
    assert await pipeline.sources() == ["config.md", "install.md"]
    assert await pipeline.remove("errors.md") == 0
    for mode in ("vector", "keyword", "hybrid"):
        results = await pipeline.search("GA-1042 upstream connection", top_k=10, mode=mode)
        assert all(r.source != "errors.md" for r in results)


async def test_shrinking_document_leaves_no_stale_chunks(make_pipeline: PipelineFactory) -> None:
    pipeline = make_pipeline()
    long = "\n\n".join(f"Paragraph {i} talks about topic number {i} at length." for i in range(8))
    report = await pipeline.index(Document(long, "notes.txt"))
    assert report.written == report.chunks >= 4
    short = await pipeline.index(Document("Only one short paragraph now.", "notes.txt"))
    assert (short.chunks, short.written, short.deleted) == (1, 1, report.chunks)
    assert await counts(pipeline) == (1, 1)
    results = await pipeline.search("topic number", top_k=10, mode="vector")
    assert [r.text for r in results] == ["Only one short paragraph now."]


async def test_empty_document_removes_its_chunks(make_pipeline: PipelineFactory) -> None:
    pipeline = make_pipeline()
    await pipeline.index(Document("Some text to index here.", "a.txt"))
    report = await pipeline.index(Document("   ", "a.txt"))
    assert (report.chunks, report.deleted) == (0, 1)
    assert await counts(pipeline) == (0, 0)
    assert await pipeline.sources() == []


async def test_metadata_change_rewrites_the_chunk(make_pipeline: PipelineFactory) -> None:
    pipeline = make_pipeline()
    await pipeline.index(Document("Text.", "a.txt", metadata={"team": "red"}))
    report = await pipeline.index(Document("Text.", "a.txt", metadata={"team": "blue"}))
    assert (report.written, report.deleted) == (1, 1)
    assert await pipeline.search("text", filter={"team": "red"}, mode="vector") == []
    [hit] = await pipeline.search("text", filter={"team": "blue"}, mode="vector")
    assert hit.metadata["team"] == "blue"


@pytest.mark.needs_extra("vector")
async def test_manifest_survives_reopening_the_sqlite_file(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "docs")
    path = tmp_path / "kb.db"
    async with Pipeline.sqlite(path, BatchWordEmbedder(), dimensions=32) as first:
        report = await first.index(load_directory(corpus))
    (corpus / "install.md").write_text("# Installing Widget\n\nUse the installer.\n")
    embedder = BatchWordEmbedder()
    async with Pipeline.sqlite(path, embedder, dimensions=32) as second:
        again = await second.index(load_directory(corpus))
        per = {d.source: d for d in again.documents}
        assert per["config.md"].written == per["errors.md"].written == 0
        assert per["install.md"].deleted >= 1
        assert await counts(second) == (again.chunks, again.chunks)
        assert again.chunks < report.chunks
        hits = await second.search("pip version", top_k=10, mode="keyword")
        assert all(h.source != "install.md" for h in hits)


async def test_sequential_upsert_path_and_plain_embedder() -> None:
    class PlainStore:
        def __init__(self) -> None:
            self.inner = InMemoryVectorStore()
            self.upserts = 0

        async def upsert(self, id: str, vector: Any, message: Any) -> None:
            self.upserts += 1
            await self.inner.upsert(id, vector, message)

        async def search(self, vector: Any, options: Any = None) -> Any:
            return await self.inner.search(vector, options)

        async def delete(self, id: str) -> None:
            await self.inner.delete(id)

    store = PlainStore()
    pipeline = Pipeline(WordEmbedder(), store, chunker=None)
    await pipeline.index(Document("# T\n\nAlpha beta.\n\n## S\n\nGamma delta.", "a.md"))
    assert store.upserts == 1
    await pipeline.index(Document("Other text.", "a.md"))
    assert await store.inner.count() == 1
    [hit] = await pipeline.search("other", top_k=5)
    assert hit.text == "Other text."


async def test_batches_and_skips_unembeddable_chunks() -> None:
    embedder = BatchWordEmbedder()
    pipeline = Pipeline.in_memory(embedder, batch_size=2, chunker=_EveryParagraph())
    doc = Document(
        [TextBlock("one\n\ntwo\n\nthree"), ImageBlock(PNG, "image/png"), TextBlock("four")],
        "mixed",
    )
    report = await pipeline.index(doc)
    assert (report.chunks, report.written, report.skipped) == (5, 4, 1)
    assert embedder.batch_calls == 2  # 4 text chunks in batches of 2
    assert await pipeline.store.count() == 4  # type: ignore[attr-defined]
    again = await pipeline.index(doc)
    assert (again.written, again.skipped, again.unchanged) == (0, 1, 4)
    assert await pipeline.store.count() == 4  # type: ignore[attr-defined]


class _EveryParagraph:
    def chunk(self, blocks: Any, metadata: dict[str, Any] | None = None) -> list[Chunk]:
        text = "\n\n".join(b.text for b in blocks if isinstance(b, TextBlock))
        return [
            Chunk([TextBlock(p)], {**(metadata or {}), "chunk_index": i})
            for i, p in enumerate(text.split("\n\n"))
        ]


# -- chunk metadata and locations -------------------------------------------------------------


async def test_chunks_carry_source_title_heading_and_lines(corpus_dir: Path) -> None:
    pipeline = Pipeline.in_memory(BatchWordEmbedder())
    await pipeline.index(load_directory(corpus_dir, metadata={"product": "widget"}))
    [hit] = await pipeline.search(
        "max_retry_delay", top_k=1, mode="keyword", filter={"source": "config.md"}
    )
    meta = hit.metadata
    assert meta["source"] == "config.md"
    assert meta["title"] == "Configuration"
    assert meta["product"] == "widget"
    assert meta["format"] == "markdown"
    assert meta["heading"] == "Configuration > Retries"
    lines = CORPUS["config.md"].splitlines()
    cited = lines[meta["line_start"] - 1 : meta["line_end"]]
    assert cited[0] == "# Configuration"  # a heading without text joins the next section
    assert "## Retries" in cited
    assert any("max_retry_delay" in line for line in cited)
    assert "## Logging" not in cited
    span = f"lines {meta['line_start']}-{meta['line_end']}"
    assert hit.location == f'section "Configuration > Retries", {span}'


async def test_pdf_like_documents_record_pages() -> None:
    pipeline = Pipeline.in_memory(BatchWordEmbedder())
    doc = Document(
        [TextBlock("Page one text."), TextBlock(""), TextBlock("Page three mentions kiwis.")],
        "report.pdf",
        metadata={"format": "pdf", "title": "Report"},
    )
    await pipeline.index(doc)
    [hit] = await pipeline.search("kiwis", top_k=1, mode="keyword")
    assert hit.metadata["page"] == 3
    assert "line_start" not in hit.metadata
    assert hit.location == "page 3"


# -- search -----------------------------------------------------------------------------------


async def test_hybrid_finds_exact_identifiers_the_embedder_misses(
    make_pipeline: PipelineFactory,
) -> None:
    pipeline = make_pipeline()
    # The fake embedder reads letters only: both texts (with their context, the file name
    # "errors") embed to the same vector.
    await pipeline.index(
        [
            Document("Error E1042: the request failed. Retry later.", "a/errors.txt"),
            Document("Error E2077: the request failed. Retry later.", "z/errors.txt"),
        ]
    )
    vector = await pipeline.search("what is E2077", top_k=1, mode="vector")
    hybrid = await pipeline.search("what is E2077", top_k=1)
    keyword = await pipeline.search("what is E2077", top_k=1, mode="keyword")
    assert vector[0].source == "a/errors.txt"  # a tie, broken by id: the embedder can't tell
    assert hybrid[0].source == keyword[0].source == "z/errors.txt"
    assert hybrid[0].keyword_score is not None
    assert hybrid[0].vector_score is not None
    assert keyword[0].vector_score is None


async def test_filters_and_thresholds_in_every_mode(
    make_pipeline: PipelineFactory, corpus_dir: Path
) -> None:
    pipeline = make_pipeline(chunker=None)
    await pipeline.index(load_directory(corpus_dir))
    for mode in ("vector", "keyword", "hybrid"):
        results = await pipeline.search(
            "client retries quota", top_k=10, mode=mode, filter={"source": "config.md"}
        )
        assert results
        assert {r.source for r in results} == {"config.md"}
    assert await pipeline.search("quota", mode="vector", score_threshold=1.01) == []
    assert await pipeline.search("quota", mode="keyword", score_threshold=1e9) == []
    strict = await pipeline.search("quota", mode="hybrid", score_threshold=1.01, top_k=5)
    assert strict  # keyword hits stay: they contain the word
    assert all(r.vector_score is None for r in strict)


async def test_search_validates_its_arguments() -> None:
    pipeline = Pipeline.in_memory(BatchWordEmbedder(), hybrid=False)
    assert pipeline.default_mode == "vector"
    with pytest.raises(InvalidInputError, match="non-empty"):
        await pipeline.search("  ")
    with pytest.raises(InvalidInputError, match="top_k"):
        await pipeline.search("x", top_k=0)
    with pytest.raises(ConfigurationError, match="keyword index"):
        await pipeline.search("x", mode="hybrid")
    with pytest.raises(InvalidInputError, match="unknown search mode"):
        await pipeline.search("x", mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="filter"):
        await pipeline.search("x", filter={"bad key!": 1})
    assert await pipeline.search("nothing indexed yet") == []


def test_constructor_checks() -> None:
    with pytest.raises(ConfigurationError, match="embedder is required"):
        Pipeline(None, InMemoryVectorStore())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="store is required"):
        Pipeline(WordEmbedder(), None)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="batch_size"):
        Pipeline(WordEmbedder(), InMemoryVectorStore(), batch_size=0)
    with pytest.raises(ConfigurationError, match="dimensions"):
        Pipeline.sqlite(":memory:", object())  # type: ignore[arg-type]


# -- observers and progress -------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def on_index(self, report: DocumentReport, duration: float, error: Any) -> None:
        self.events.append(("index", report, error))

    async def on_search(
        self, query: str, results: list[SearchResult], duration: float, error: BaseException | None
    ) -> None:
        self.events.append(("search", query, len(results), error))

    def on_remove(self, source: str, deleted: int, duration: float, error: Any) -> None:
        self.events.append(("remove", source, deleted, error))


class Broken:
    def on_index(self, *args: Any) -> None:
        raise RuntimeError("observer bug")


async def test_observers_fire_on_success_and_failure(caplog: pytest.LogCaptureFixture) -> None:
    embedder = BatchWordEmbedder()
    recorder = Recorder()
    pipeline = Pipeline.in_memory(embedder, observers=[Broken(), recorder])
    docs = [Document("Alpha text.", "a"), Document("Bravo BOOM text.", "b"), Document("C.", "c")]
    embedder.fail_on = "BOOM"
    with pytest.raises(RuntimeError, match="BOOM") as info:
        await pipeline.index(docs)
    assert "while indexing document 'b'" in "".join(getattr(info.value, "__notes__", []))
    assert [(e[1].source, e[2]) for e in recorder.events] == [("a", None), ("b", info.value)]
    assert recorder.events[1][1].chunks == 1
    assert recorder.events[1][1].written == 0
    assert "observer bug" in caplog.text
    assert await pipeline.sources() == ["a"]  # earlier documents stay indexed

    recorder.events.clear()
    await pipeline.search("alpha", top_k=2)
    embedder.fail_on = "down"
    with pytest.raises(RuntimeError, match="down"):
        await pipeline.search("down", top_k=2)
    await pipeline.remove("a")
    assert recorder.events[0] == ("search", "alpha", 1, None)
    assert recorder.events[1][:3] == ("search", "down", 0)
    assert str(recorder.events[1][3]) == "embedder failed on 'down'"
    assert recorder.events[2] == ("remove", "a", 1, None)


async def test_progress_is_reported_after_each_document() -> None:
    seen: list[IndexProgress] = []
    pipeline = Pipeline.in_memory(BatchWordEmbedder())
    await pipeline.index([Document("One.", "1"), Document("Two.", "2")], progress=seen.append)
    assert [(p.done, p.total, p.document.source) for p in seen] == [(1, 2, "1"), (2, 2, "2")]

    async def async_progress(p: IndexProgress) -> None:
        seen.append(p)

    seen.clear()
    await pipeline.index((d for d in [Document("Three.", "3")]), progress=async_progress)
    assert [(p.done, p.total) for p in seen] == [(1, None)]


async def test_keyword_only_pipeline_in_memory_index_is_kept_in_step() -> None:
    keyword = InMemoryKeywordIndex()
    pipeline = Pipeline(BatchWordEmbedder(), InMemoryVectorStore(), keyword_index=keyword)
    await pipeline.index(Document("Error E42 happens on Tuesdays.", "a"))
    await pipeline.index(Document("Nothing special.", "a"))
    assert await keyword.count() == 1
    assert await keyword.search("E42", top_k=3) == []


@pytest.mark.needs_extra("vector")
@pytest.mark.needs_extra("simd")
async def test_int8_quantization_finds_what_the_exact_scan_finds(tmp_path: Path) -> None:
    corpus = load_directory(write_corpus(tmp_path / "docs"))
    exact = Pipeline.in_memory(BatchWordEmbedder())
    await exact.index(corpus)
    quick_memory = Pipeline.in_memory(BatchWordEmbedder(), quantization="int8")
    await quick_memory.index(corpus)
    async with Pipeline.sqlite(
        tmp_path / "kb.db", BatchWordEmbedder(), dimensions=32, quantization="int8"
    ) as quick_sqlite:
        await quick_sqlite.index(corpus)
    exact_sqlite = Pipeline.sqlite(tmp_path / "exact.db", BatchWordEmbedder(), dimensions=32)
    await exact_sqlite.index(corpus)
    # The int8 codes are kept in the file: a reopened pipeline searches them at once.
    async with Pipeline.sqlite(
        tmp_path / "kb.db", BatchWordEmbedder(), dimensions=32, quantization="int8"
    ) as reopened:
        assert reopened.store._quantization == "int8"  # type: ignore[attr-defined]
        for query in ("pip version", "widget errors", "configure the installer"):
            want = [(h.id, round(h.score, 5)) for h in await exact.search(query, mode="vector")]
            for pipeline in (quick_memory, reopened):
                got = await pipeline.search(query, mode="vector")
                assert [(h.id, round(h.score, 5)) for h in got] == want
            # Hybrid, against the exact pipeline with the same keyword index (FTS5 here).
            assert [h.id for h in await reopened.search(query)] == [
                h.id for h in await exact_sqlite.search(query)
            ]
            assert [h.id for h in await quick_memory.search(query)] == [
                h.id for h in await exact.search(query)
            ]
    await exact_sqlite.aclose()


# -- interrupted indexing (review7d) -----------------------------------------------------------


class _FailingKeywordAdds(InMemoryKeywordIndex):
    """A keyword index whose next ``add_batch`` fails (a full disk, a killed connection)."""

    fail = False

    async def add_batch(self, entries: Any) -> None:
        if self.fail:
            self.fail = False
            raise OSError("disk full")
        await super().add_batch(entries)


async def test_an_interrupted_index_then_a_change_leaves_no_orphan_chunk() -> None:
    """The vector write of version 2 landed, the run failed before its manifest did; version 3
    is then indexed: version 2's chunks must go, not stay searchable with nothing recording
    them (``remove`` could not delete them either)."""
    keywords = _FailingKeywordAdds()
    pipeline = Pipeline(BatchWordEmbedder(), InMemoryVectorStore(), keyword_index=keywords)
    await pipeline.index(Document("Apples are red and sweet.", "fruit.txt"))
    keywords.fail = True
    with pytest.raises(OSError, match="disk full"):
        await pipeline.index(Document("Bananas are yellow and curved.", "fruit.txt"))
    await pipeline.index(Document("Cherries are small and dark.", "fruit.txt"))
    assert await counts(pipeline) == (1, 1)
    for mode in ("vector", "keyword", "hybrid"):
        hits = await pipeline.search("bananas yellow curved", top_k=10, mode=mode)
        assert all("Bananas" not in h.text for h in hits), mode
    assert await pipeline.remove("fruit.txt") == 1
    assert await counts(pipeline) == (0, 0)
    assert await pipeline.sources() == []


async def test_a_source_removed_after_an_interrupted_index_leaves_nothing() -> None:
    keywords = _FailingKeywordAdds()
    pipeline = Pipeline(BatchWordEmbedder(), InMemoryVectorStore(), keyword_index=keywords)
    keywords.fail = True
    with pytest.raises(OSError, match="disk full"):
        await pipeline.index(Document("Bananas are yellow and curved.", "fruit.txt"))
    assert await pipeline.remove("fruit.txt") == 0
    assert await counts(pipeline) == (0, 0)
    assert await pipeline.sources() == []
