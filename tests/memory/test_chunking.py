"""Chunkers: reference behaviour, the separator fix, Markdown headings, blocks, and properties."""

from __future__ import annotations

import itertools
import re
import sys
import types
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goagent_py.errors import ConfigurationError
from goagent_py.memory.base import Chunker
from goagent_py.memory.chunking import (
    BlockChunker,
    MarkdownChunker,
    NoOpChunker,
    RecursiveChunker,
    SentenceChunker,
    TextChunker,
)
from goagent_py.memory.tokens import CharEstimator, HeuristicEstimator, TokenEstimator
from goagent_py.messages import DocumentBlock, ImageBlock, TextBlock, ThinkingBlock

CHARS = CharEstimator()
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
WORDS = " ".join(f"word{i}" for i in range(150))


def texts_of(chunker: Chunker, *blocks: Any, metadata: dict[str, Any] | None = None) -> list[str]:
    out = []
    for chunk in chunker.chunk(list(blocks), metadata):
        assert len(chunk.blocks) == 1
        block = chunk.blocks[0]
        assert isinstance(block, TextBlock)
        out.append(block.text)
    return out


ALL = [
    NoOpChunker(),
    TextChunker(),
    SentenceChunker(),
    RecursiveChunker(),
    MarkdownChunker(),
    BlockChunker(),
]


@pytest.mark.parametrize("chunker", ALL, ids=repr)
def test_every_chunker_copies_metadata_and_numbers_chunks(chunker: Chunker) -> None:
    assert isinstance(chunker, Chunker)
    meta = {"source": "doc", "nested": {"a": 1}}
    chunks = chunker.chunk([TextBlock(WORDS * 5)], meta)
    assert meta == {"source": "doc", "nested": {"a": 1}}  # never mutated
    assert chunks
    for i, chunk in enumerate(chunks):
        assert chunk.metadata is not meta
        assert chunk.metadata["source"] == "doc"
        assert chunk.metadata["chunk_index"] == i
        assert chunk.metadata["chunk_total"] == len(chunks)
    chunks[0].metadata["source"] = "changed"
    assert meta["source"] == "doc"
    if len(chunks) > 1:
        assert chunks[1].metadata["source"] == "doc"


@pytest.mark.parametrize("chunker", ALL[1:5], ids=repr)
def test_text_chunkers_give_nothing_for_no_text(chunker: Chunker) -> None:
    assert chunker.chunk([]) == []
    assert chunker.chunk([ImageBlock(PNG, "image/png")]) == []
    assert chunker.chunk([TextBlock("   \n ")]) == []


def test_noop_keeps_all_blocks_in_one_chunk() -> None:
    blocks = [TextBlock("a"), ImageBlock(PNG, "image/png")]
    (chunk,) = NoOpChunker().chunk(blocks, {"k": 1})
    assert chunk.blocks == blocks
    assert chunk.metadata == {"k": 1, "chunk_index": 0, "chunk_total": 1}


@pytest.mark.parametrize(
    "make",
    [
        lambda: TextChunker(0),
        lambda: TextChunker(10, -1),
        lambda: TextChunker(10, 10),
        lambda: RecursiveChunker(10, 12),
        lambda: RecursiveChunker(10, 0, separators=[""]),
        lambda: SentenceChunker(True),  # type: ignore[arg-type]
        lambda: MarkdownChunker(-3),
    ],
)
def test_bad_sizes_are_configuration_errors(make: Any) -> None:
    with pytest.raises(ConfigurationError):
        make()


# -- Text ----------------------------------------------------------------------------------------


def test_text_chunker_short_text_is_unchanged() -> None:
    assert texts_of(TextChunker(), TextBlock("hello  world")) == ["hello  world"]


def test_text_chunker_overlap_and_whole_words() -> None:
    text = "ab cd ef gh ij kl mn op"
    chunks = TextChunker(8, 2, estimator=CHARS).split(text)
    assert chunks == ["ab cd ef", "ef gh ij", "ij kl mn", "mn op"]
    words = set(text.split())
    for chunk in chunks:
        assert len(chunk) <= 8
        assert set(chunk.split()) <= words
    for a, b in itertools.pairwise(chunks):
        assert b.split()[0] == a.split()[-1]  # the last word is repeated


def test_text_chunker_oversized_word_is_its_own_chunk() -> None:
    chunks = TextChunker(5, 0, estimator=CHARS).split("ab " + "x" * 20 + " cd")
    assert chunks == ["ab", "x" * 20, "cd"]


def test_text_chunker_thirty_words_make_several_chunks() -> None:
    text = " ".join(f"w{i}" for i in range(30))
    assert len(TextChunker(12, 0).chunk([TextBlock(text)])) >= 2


# -- Sentence ------------------------------------------------------------------------------------


def test_sentence_chunker_packs_and_overlaps_by_sentence() -> None:
    text = "One is here. Two is here! Three is here? Four is here."
    chunks = SentenceChunker(32, 1, estimator=CHARS).split(text)
    assert chunks == [
        "One is here. Two is here!",
        "Two is here! Three is here?",
        "Three is here? Four is here.",
    ]
    assert SentenceChunker(32, 0, estimator=CHARS).split(text) == [
        "One is here. Two is here!",
        "Three is here? Four is here.",
    ]


def test_sentence_chunker_paragraph_breaks_and_long_sentences() -> None:
    assert SentenceChunker(18, 0, estimator=CHARS).split("first part\n\nsecond part") == [
        "first part",
        "second part",
    ]
    long = "a " * 30 + "end."
    chunks = SentenceChunker(10, 0, estimator=CHARS).split(long)
    assert all(len(c) <= 10 for c in chunks)
    assert " ".join(chunks).split() == long.split()


# -- Recursive -----------------------------------------------------------------------------------


def test_recursive_keeps_the_boundary_separator() -> None:
    # The reference dropped the period (and the space) at the end of every chunk (§31).
    text = "The cat sat down. The dog ran off. The bird flew away."
    chunks = RecursiveChunker(20, 0, estimator=CHARS).split(text)
    assert chunks == ["The cat sat down. ", "The dog ran off. ", "The bird flew away."]
    assert "".join(chunks) == text


def test_recursive_paragraphs_first() -> None:
    text = "para one line one\npara one line two\n\npara two"
    chunks = RecursiveChunker(40, 0, estimator=CHARS).split(text)
    assert chunks == ["para one line one\npara one line two\n\n", "para two"]


def test_recursive_single_chunk_and_custom_separators() -> None:
    assert RecursiveChunker().split("short text") == ["short text"]
    chunks = RecursiveChunker(8, 0, separators=["|"], estimator=CHARS).split("aaa|bbb|ccc|ddd")
    assert chunks == ["aaa|bbb|", "ccc|ddd"]


def test_recursive_giant_token_is_cut_by_characters() -> None:
    chunks = RecursiveChunker(50, 0, estimator=CHARS).split("x" * 300)
    assert chunks == ["x" * 50] * 6


def test_recursive_overlap_repeats_whole_words_within_limits() -> None:
    chunker = RecursiveChunker(40, 12, estimator=CHARS)
    chunks = chunker.split(WORDS)
    assert len(chunks) > 2
    for a, b in itertools.pairwise(chunks):
        assert len(b) <= 40
        assert b.split()[0] in a.split()
    words = {w for c in chunks for w in c.split()}
    assert words == set(WORDS.split())  # all 150 words are kept
    repeated = sum(len(c) for c in chunks) - len(WORDS)
    assert repeated < 0.7 * len(WORDS)


def test_recursive_joins_several_text_blocks() -> None:
    texts = texts_of(
        RecursiveChunker(), TextBlock("first"), ImageBlock(PNG, "image/png"), TextBlock("second")
    )
    assert texts == ["first\n\nsecond"]


# -- Markdown ------------------------------------------------------------------------------------

MARKDOWN = """Intro text.

# Guide

Welcome.

## Install

```sh
# not a heading
pip install goagent-py
```

### Linux
Use apt.

## Usage ##
Call it.

# Appendix
The end.
"""


def test_markdown_carries_the_heading_path() -> None:
    chunks = MarkdownChunker(200, estimator=CHARS).chunk([TextBlock(MARKDOWN)], {"doc": "g"})
    got = [(c.metadata["heading"], c.blocks[0].text.split("\n")[0]) for c in chunks]  # type: ignore[union-attr]
    assert got == [
        ("", "Intro text."),
        ("Guide", "# Guide"),
        ("Guide > Install", "## Install"),
        ("Guide > Install > Linux", "### Linux"),
        ("Guide > Usage", "## Usage ##"),
        ("Appendix", "# Appendix"),
    ]
    assert all(c.metadata["doc"] == "g" for c in chunks)
    assert "".join(c.blocks[0].text for c in chunks) == MARKDOWN  # type: ignore[union-attr]


def test_markdown_heading_without_body_joins_the_next_section() -> None:
    text = "# Title\n## Part\nbody\n"
    (chunk,) = MarkdownChunker(200, estimator=CHARS).chunk([TextBlock(text)])
    assert chunk.metadata["heading"] == "Title > Part"
    assert chunk.blocks == [TextBlock(text)]


def test_markdown_splits_big_sections_keeping_the_heading() -> None:
    text = "# Big\n" + "\n".join(f"line {i} of the big section." for i in range(20))
    chunks = MarkdownChunker(60, estimator=CHARS).chunk([TextBlock(text)])
    assert len(chunks) > 3
    assert {c.metadata["heading"] for c in chunks} == {"Big"}


# -- Block ---------------------------------------------------------------------------------------


def test_block_chunker_images_pass_through_and_thinking_is_dropped() -> None:
    image = ImageBlock(PNG, "image/png")
    chunks = BlockChunker(RecursiveChunker(10, 0, estimator=CHARS)).chunk(
        [TextBlock("one two three four"), image, ThinkingBlock("secret")], {"k": "v"}
    )
    assert [c.blocks for c in chunks] == [
        [TextBlock("one two ")],
        [TextBlock("three four")],
        [image],
    ]
    assert [c.metadata["chunk_index"] for c in chunks] == [0, 1, 2]
    assert all(c.metadata["chunk_total"] == 3 and c.metadata["k"] == "v" for c in chunks)


def test_block_chunker_pdf_without_pypdf_is_one_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pypdf", None)  # import fails
    pdf = DocumentBlock(b"%PDF-1.4 ...", "application/pdf", title="report.pdf")
    (chunk,) = BlockChunker().chunk([pdf])
    assert chunk.blocks == [pdf]
    assert chunk.metadata["source"] == "report.pdf"


def test_block_chunker_pdf_by_page_with_pypdf(monkeypatch: pytest.MonkeyPatch) -> None:
    class Page:
        def __init__(self, text: str) -> None:
            self.text = text

        def extract_text(self) -> str:
            return self.text

    class PdfReader:
        def __init__(self, stream: Any) -> None:
            assert stream.read() == b"%PDF fake"
            self.pages = [Page("page one text"), Page(""), Page("page three text")]

    monkeypatch.setitem(sys.modules, "pypdf", types.SimpleNamespace(PdfReader=PdfReader))
    pdf = DocumentBlock(b"%PDF fake", "application/pdf", title="r.pdf")
    chunks = BlockChunker().chunk([pdf], {"k": 1})
    assert [c.blocks for c in chunks] == [
        [TextBlock("page one text")],
        [TextBlock("page three text")],
    ]
    assert [(c.metadata["page"], c.metadata["total_pages"]) for c in chunks] == [(1, 3), (3, 3)]
    assert all(c.metadata["source"] == "r.pdf" and c.metadata["k"] == 1 for c in chunks)


def test_block_chunker_unreadable_pdf_passes_through(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(stream: Any) -> Any:
        raise ValueError("EOF marker not found")

    monkeypatch.setitem(sys.modules, "pypdf", types.SimpleNamespace(PdfReader=broken))
    pdf = DocumentBlock(b"%PDF", "application/pdf")
    assert [c.blocks for c in BlockChunker().chunk([pdf])] == [[pdf]]


def test_block_chunker_plain_text_document_is_split_as_text() -> None:
    doc = DocumentBlock(b"alpha beta gamma delta", "text/plain", title="notes.txt")
    chunks = BlockChunker(RecursiveChunker(12, 0, estimator=CHARS)).chunk([doc])
    assert [c.blocks[0].text for c in chunks] == ["alpha beta ", "gamma delta"]  # type: ignore[union-attr]
    assert all(c.metadata["source"] == "notes.txt" for c in chunks)


# -- properties ----------------------------------------------------------------------------------

texts = st.text(alphabet="ab cé.!?\n\t", max_size=400)
estimators: st.SearchStrategy[TokenEstimator] = st.sampled_from([CHARS, HeuristicEstimator()])


def _in_order_slices(text: str, chunks: list[str]) -> None:
    """Chunks are slices of ``text`` in order; what lies between them is whitespace."""
    pos = 0
    for chunk in chunks:
        found = text.find(chunk, pos)
        assert found >= 0
        assert text[pos:found].strip() == ""
        pos = found + len(chunk)
    assert text[pos:].strip() == ""


@settings(max_examples=200, deadline=None)
@given(texts, st.integers(1, 60), estimators)
def test_recursive_chunks_reconstruct_the_text(text: str, size: int, est: TokenEstimator) -> None:
    chunker = RecursiveChunker(size, 0, estimator=est)
    chunks = chunker.split(text)
    _in_order_slices(text, chunks)
    assert all(est.count_text(c) <= size for c in chunks)
    assert all(c.strip() for c in chunks)
    assert chunker.split(text) == chunks  # deterministic


@settings(max_examples=200, deadline=None)
@given(texts, st.integers(2, 60), st.data(), estimators)
def test_recursive_overlap_stays_bounded(
    text: str, size: int, data: st.DataObject, est: TokenEstimator
) -> None:
    overlap = data.draw(st.integers(1, size - 1))
    chunker = RecursiveChunker(size, overlap, estimator=est)
    spans = chunker.spans(text)
    assert [text[s:e] for s, e in spans] == chunker.split(text)
    covered = 0
    for start, end in spans:
        assert est.count_text(text[start:end]) <= size
        assert start < covered or text[covered:start].strip() == ""  # no gap but whitespace
        assert end > covered  # every chunk brings something new
        covered = end
    assert text[covered:].strip() == ""


@settings(max_examples=200, deadline=None)
@given(texts, st.integers(1, 60), st.integers(0, 59), estimators)
def test_text_chunks_cover_every_word(
    text: str, size: int, overlap: int, est: TokenEstimator
) -> None:
    overlap = min(overlap, size - 1)
    chunker = TextChunker(size, overlap, estimator=est)
    chunks = chunker.split(text)
    words = text.split()
    if len(chunks) == 1 and chunks[0] == text:
        return
    assert all(est.count_text(c) <= size or len(c.split()) == 1 for c in chunks)
    # Each chunk is a run of consecutive words; runs move forward and cover every word.
    pos, prev = 0, -1
    for chunk in chunks:
        run = chunk.split()
        starts = [
            i
            for i in range(prev + 1, pos + 1)
            if words[i : i + len(run)] == run and i + len(run) > pos
        ]
        assert starts  # a run of consecutive words that brings new ones
        prev, pos = starts[0], starts[0] + len(run)
    assert pos == len(words)
    if overlap == 0:
        assert " ".join(chunks).split() == words
    assert chunker.split(text) == chunks


@settings(max_examples=200, deadline=None)
@given(texts, st.integers(1, 60), st.integers(0, 3), estimators)
def test_sentence_chunks_cover_every_word(
    text: str, size: int, overlap: int, est: TokenEstimator
) -> None:
    chunks = SentenceChunker(size, overlap, estimator=est).split(text)
    assert all(est.count_text(c) <= size or len(c.split()) == 1 for c in chunks)
    seen = " ".join(chunks).split()
    assert set(seen) == set(text.split())
    if overlap == 0:
        assert seen == text.split()


headings = st.lists(
    st.tuples(st.integers(1, 3), st.text(alphabet="xyz", min_size=1, max_size=5), texts),
    max_size=6,
)


@settings(max_examples=150, deadline=None)
@given(texts, headings, st.integers(5, 80))
def test_markdown_chunks_are_slices_with_known_headings(
    intro: str, sections: list[tuple[int, str, str]], size: int
) -> None:
    text = intro.replace("#", "") + "".join(
        f"\n{'#' * level} {title}\n{body.replace('#', '')}" for level, title, body in sections
    )
    chunks = MarkdownChunker(size, estimator=CHARS).chunk([TextBlock(text)])
    pieces = [c.blocks[0].text for c in chunks]  # type: ignore[union-attr]
    _in_order_slices(text, pieces)
    titles = {t for _, t, _ in sections}
    for c in chunks:
        heading = c.metadata["heading"]
        assert heading == "" or set(re.split(" > ", heading)) <= titles
        assert CHARS.count_text(c.blocks[0].text) <= size  # type: ignore[union-attr]
