"""Chunkers: split content into pieces small enough to embed (long-term memory and RAG).

Every chunker implements :class:`~goagent_py.memory.base.Chunker`:
``chunk(blocks, metadata=None) -> list[Chunk]``. They are sync, pure and deterministic.

Sizes: ``max_size`` and ``overlap`` are measured with an estimator's ``count_text``; by default
:class:`~goagent_py.memory.tokens.HeuristicEstimator` (ASCII bytes / 4, other scripts per
character).
Pass ``estimator=CharEstimator()`` to measure characters, or a ``TiktokenEstimator`` for real
tokens. The size of a chunk is the measure of its whole text (separators included), so
``measure(chunk) <= max_size`` holds for every chunk except where a chunker says otherwise.

Metadata: every chunk gets a fresh copy of the caller's metadata plus ``chunk_index`` (0-based)
and ``chunk_total``; chunkers add their own keys (``heading``, ``page``...). The caller's dict is
never mutated.

Choosing one:

* :class:`NoOpChunker` — the content as one chunk (short messages in long-term memory).
* :class:`TextChunker` — words packed up to ``max_size`` with an overlap; whitespace normalised.
* :class:`SentenceChunker` — whole sentences packed up to ``max_size``, overlapping by sentences.
* :class:`RecursiveChunker` — paragraphs, then lines, sentences, words, characters; every chunk
  is an exact slice of the text, separators kept (a sentence keeps its period).
* :class:`MarkdownChunker` — one section per heading, the heading path in ``metadata["heading"]``.
* :class:`BlockChunker` — mixed content: images pass through, PDFs by page, text via an inner
  chunker.
"""

from __future__ import annotations

import importlib
import io
import itertools
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from goagent_py.errors import ConfigurationError
from goagent_py.memory.base import Chunk, Chunker
from goagent_py.memory.tokens import HeuristicEstimator, TokenEstimator
from goagent_py.messages import ContentBlock, DocumentBlock, ImageBlock, TextBlock

__all__ = [
    "DEFAULT_SEPARATORS",
    "BlockChunker",
    "MarkdownChunker",
    "NoOpChunker",
    "RecursiveChunker",
    "SentenceChunker",
    "TextChunker",
    "markdown_sections",
    "split_sentences",
]

log = logging.getLogger(__name__)

Span = tuple[int, int]
_Measure = Callable[[str], int]


# -- shared helpers ----------------------------------------------------------------------------


def _check_sizes(owner: str, max_size: int, overlap: int) -> None:
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
        raise ConfigurationError(f"{owner}: max_size must be an integer >= 1, got {max_size!r}")
    if isinstance(overlap, bool) or not isinstance(overlap, int) or overlap < 0:
        raise ConfigurationError(f"{owner}: overlap must be an integer >= 0, got {overlap!r}")


def _finish(items: list[tuple[list[ContentBlock], dict[str, Any]]]) -> list[Chunk]:
    total = len(items)
    return [
        Chunk(blocks, {**meta, "chunk_index": i, "chunk_total": total})
        for i, (blocks, meta) in enumerate(items)
    ]


def _texts(blocks: Sequence[ContentBlock]) -> list[str]:
    return [b.text for b in blocks if isinstance(b, TextBlock) and b.text.strip()]


def _longest(limit: int, ok: Callable[[int], bool]) -> int:
    """The largest ``k`` in ``[0, limit]`` with ``ok(k)``, for a monotone ``ok`` with ``ok(0)``.

    Gallops then bisects: O(log k) calls, so packing stays near-linear however small the pieces.
    """
    good, step, bad = 0, 1, limit + 1
    while good < limit:
        candidate = min(limit, good + step)
        if ok(candidate):
            good, step = candidate, step * 2
        else:
            bad = candidate
            break
    while bad - good > 1:
        mid = (good + bad) // 2
        if ok(mid):
            good = mid
        else:
            bad = mid
    return good


def _pack(
    pieces: Sequence[str],
    sep: str,
    max_size: int,
    measure: _Measure,
    carry: Callable[[int, int], int] | None = None,
    *,
    joined: Callable[[int, int], str] | None = None,
) -> list[Span]:
    """Greedily pack ``pieces`` into runs ``[start, end)`` whose joined text fits ``max_size``.

    A piece too big on its own is a run of its own. ``carry(start, end)`` says how many pieces
    at the end of a run to repeat at the start of the next one (the overlap); every run still
    brings at least one new piece, so packing always ends. ``joined(start, end)`` gives the
    joined text of a run when the caller has it as one slice (contiguous pieces of a text): a
    slice is a copy, where joining a million one-character pieces builds a million strings.
    """
    n = len(pieces)
    runs: list[Span] = []
    end = 0
    text_of = joined or (lambda a, b: sep.join(pieces[a:b]))

    def fits_from(start: int) -> Callable[[int], bool]:
        return lambda k: measure(text_of(start, start + k)) <= max_size

    while end < n:
        back = carry(*runs[-1]) if carry and runs else 0
        while True:
            start = end - back
            k = max(1, _longest(n - start, fits_from(start)))
            if start + k > end or back == 0:
                break
            back -= 1  # the overlap left no room for anything new: carry less
        runs.append((start, start + k))
        end = start + k
    return runs


# -- NoOp --------------------------------------------------------------------------------------


class NoOpChunker:
    """The content as a single chunk, whatever it holds (even nothing)."""

    def chunk(
        self, blocks: Sequence[ContentBlock], metadata: dict[str, Any] | None = None
    ) -> list[Chunk]:
        """One chunk with all of ``blocks`` and a copy of ``metadata``."""
        return _finish([(list(blocks), dict(metadata or {}))])

    def __repr__(self) -> str:
        return "NoOpChunker()"


# -- Text --------------------------------------------------------------------------------------


class TextChunker:
    """Packs words into chunks of at most ``max_size``, each overlapping the previous one.

    The text blocks are joined with a space; images and documents are ignored. Text that fits
    is one chunk, unchanged; otherwise words (split on whitespace) are packed greedily and each
    chunk is its words joined by single spaces. A chunk starts with the last words of the
    previous one, up to ``overlap`` in size. Words are never split: a single word larger than
    ``max_size`` is a chunk of its own (the only chunks over the limit).

    Args:
        max_size: the largest chunk, in estimator units (>= 1).
        overlap: how much of the end of a chunk to repeat at the start of the next (>= 0,
            smaller than ``max_size``).
        estimator: what measures size; heuristic tokens by default.
    """

    def __init__(
        self, max_size: int = 500, overlap: int = 50, *, estimator: TokenEstimator | None = None
    ) -> None:
        _check_sizes("TextChunker", max_size, overlap)
        if overlap >= max_size:
            raise ConfigurationError(
                f"TextChunker: overlap ({overlap}) must be smaller than max_size ({max_size})"
            )
        self.max_size = max_size
        self.overlap = overlap
        self.estimator: TokenEstimator = estimator or HeuristicEstimator()

    def split(self, text: str) -> list[str]:
        """The chunk texts of ``text``."""
        measure = self.estimator.count_text
        if not text.strip():
            return []
        if measure(text) <= self.max_size:
            return [text]
        words = text.split()

        def carry(start: int, end: int) -> int:
            return _longest(
                end - start - 1, lambda t: measure(" ".join(words[end - t : end])) <= self.overlap
            )

        return [
            " ".join(words[s:e])
            for s, e in _pack(words, " ", self.max_size, measure, carry if self.overlap else None)
        ]

    def chunk(
        self, blocks: Sequence[ContentBlock], metadata: dict[str, Any] | None = None
    ) -> list[Chunk]:
        """Chunk the text of ``blocks`` (no text: no chunks)."""
        text = " ".join(b.text for b in blocks if isinstance(b, TextBlock))
        meta = metadata or {}
        return _finish([([TextBlock(t)], dict(meta)) for t in self.split(text)])

    def __repr__(self) -> str:
        return f"TextChunker(max_size={self.max_size}, overlap={self.overlap})"


# -- Sentence ----------------------------------------------------------------------------------

# ASCII whitespace only, like the reference (Go RE2's \s); a blank line also ends a sentence.
_SENTENCE_END = re.compile(r"[.!?]+[\t\n\f\r ]+|\n\n+")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``, trimmed, punctuation kept (ends: ``.!?`` + space, blank lines)."""
    out: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        sentence = text[start : match.end()].strip()
        if sentence:
            out.append(sentence)
        start = match.end()
    rest = text[start:].strip()
    if rest:
        out.append(rest)
    return out


class SentenceChunker:
    """Packs whole sentences into chunks of at most ``max_size``, overlapping by sentences.

    Sentences end at ``.``, ``!`` or ``?`` followed by whitespace, or at a blank line; a chunk is
    its sentences joined by single spaces. The next chunk repeats the last ``overlap`` sentences
    of the previous one when they leave room for a new sentence (fewer otherwise). A sentence
    larger than ``max_size`` is split at word boundaries (a single oversized word stays whole).

    Args:
        max_size: the largest chunk, in estimator units (>= 1).
        overlap: how many sentences to repeat (>= 0).
        estimator: what measures size; heuristic tokens by default.
    """

    def __init__(
        self, max_size: int = 500, overlap: int = 1, *, estimator: TokenEstimator | None = None
    ) -> None:
        _check_sizes("SentenceChunker", max_size, overlap)
        self.max_size = max_size
        self.overlap = overlap
        self.estimator: TokenEstimator = estimator or HeuristicEstimator()

    def split(self, text: str) -> list[str]:
        """The chunk texts of ``text``."""
        measure = self.estimator.count_text
        units: list[str] = []
        for sentence in split_sentences(text):
            if measure(sentence) <= self.max_size:
                units.append(sentence)
            else:
                words = sentence.split()
                units.extend(
                    " ".join(words[s:e]) for s, e in _pack(words, " ", self.max_size, measure)
                )

        def carry(start: int, end: int) -> int:
            return min(self.overlap, end - start - 1)

        return [
            " ".join(units[s:e])
            for s, e in _pack(units, " ", self.max_size, measure, carry if self.overlap else None)
        ]

    def chunk(
        self, blocks: Sequence[ContentBlock], metadata: dict[str, Any] | None = None
    ) -> list[Chunk]:
        """Chunk the text of ``blocks`` (no text: no chunks)."""
        meta = metadata or {}
        text = " ".join(_texts(blocks))
        return _finish([([TextBlock(t)], dict(meta)) for t in self.split(text)])

    def __repr__(self) -> str:
        return f"SentenceChunker(max_size={self.max_size}, overlap={self.overlap})"


# -- Recursive ---------------------------------------------------------------------------------

DEFAULT_SEPARATORS: tuple[str, ...] = ("\n\n", "\n", ". ", "! ", "? ", " ")


def _pieces(text: str, start: int, end: int, sep: str) -> list[Span]:
    """Split ``text[start:end]`` after each ``sep`` (kept with the text before it).

    Whitespace-only pieces join a neighbour, so every piece has content.
    """
    spans: list[Span] = []
    pos = start
    while True:
        i = text.find(sep, pos, end)
        if i < 0:
            break
        spans.append((pos, i + len(sep)))
        pos = i + len(sep)
    if pos < end:
        spans.append((pos, end))
    merged: list[Span] = []
    for s, e in spans:
        if merged and (text[s:e].isspace() or text[merged[-1][0] : merged[-1][1]].isspace()):
            merged[-1] = (merged[-1][0], e)
        else:
            merged.append((s, e))
    return merged


class RecursiveChunker:
    """Splits at the largest boundary that works: paragraphs, lines, sentences, words, chars.

    Text that fits is one chunk. Otherwise the text is cut after each separator of the first
    level (``"\\n\\n"``); pieces that fit are packed together up to ``max_size``, and a piece too
    big is split again with the next level (``"\\n"``, ``". "``, ``"! "``, ``"? "``, ``" "``),
    and at the very end by characters. Separators stay with the text before them, so a sentence
    keeps its period and joining the chunks gives back the text (whitespace-only pieces aside):
    every chunk is an exact slice of the text and no chunk exceeds ``max_size``, but for a
    single character that alone does (an emoji is 2 heuristic tokens: with ``max_size=1`` it
    is a chunk of its own).

    With ``overlap``, text is first cut to ``max_size - overlap``, then each chunk also starts
    with the last whole words of the previous chunk, as many as fit in ``overlap`` (and in
    ``max_size`` with the chunk): the overlap counts within ``max_size``.

    Several text blocks are joined with a blank line; other blocks are ignored.

    Args:
        max_size: the largest chunk, in estimator units (>= 1).
        overlap: how much of the previous chunk to repeat (>= 0, smaller than ``max_size``).
        separators: the boundaries to try, largest first.
        estimator: what measures size; heuristic tokens by default.
    """

    def __init__(
        self,
        max_size: int = 500,
        overlap: int = 50,
        *,
        separators: Sequence[str] = DEFAULT_SEPARATORS,
        estimator: TokenEstimator | None = None,
    ) -> None:
        _check_sizes("RecursiveChunker", max_size, overlap)
        if overlap >= max_size:
            raise ConfigurationError(
                f"RecursiveChunker: overlap ({overlap}) must be smaller than max_size ({max_size})"
            )
        if any(not isinstance(s, str) or not s for s in separators):
            raise ConfigurationError("RecursiveChunker: separators must be non-empty strings")
        self.max_size = max_size
        self.overlap = overlap
        self.separators = tuple(separators)
        self.estimator: TokenEstimator = estimator or HeuristicEstimator()

    def spans(self, text: str) -> list[Span]:
        """The chunks of ``text`` as ``(start, end)`` offsets, in order (they may overlap)."""
        if not text.strip():
            return []
        if self._fits(text):
            return [(0, len(text))]
        # With an overlap, pieces leave room for it (the overlap counts within max_size).
        budget = self.max_size - self.overlap
        spans = [
            (s, e) for s, e in self._split(text, 0, len(text), 0, budget) if not text[s:e].isspace()
        ]
        if self.overlap:
            spans = self._overlap(text, spans)
        return spans

    def split(self, text: str) -> list[str]:
        """The chunk texts of ``text``."""
        return [text[s:e] for s, e in self.spans(text)]

    def _fits(self, text: str, budget: int | None = None) -> bool:
        limit = self.max_size if budget is None else budget
        return self.estimator.count_text(text) <= limit

    def _split(self, text: str, start: int, end: int, level: int, budget: int) -> list[Span]:
        measure = self.estimator.count_text
        if self._fits(text[start:end], budget):
            return [(start, end)]
        if level == len(self.separators):
            chars = text[start:end]

            def cut(a: int, b: int) -> str:
                return text[start + a : start + b]

            return [
                (start + s, start + e) for s, e in _pack(chars, "", budget, measure, joined=cut)
            ]
        pieces = _pieces(text, start, end, self.separators[level])
        if len(pieces) == 1:
            return self._split(text, start, end, level + 1, budget)
        out: list[Span] = []
        run: list[Span] = []

        def flush() -> None:
            strings = [text[s:e] for s, e in run]
            # The pieces are contiguous: a run's text is one slice of ``text``.
            starts, ends = [s for s, _ in run], [e for _, e in run]

            def cut(i: int, j: int) -> str:
                return text[starts[i] : ends[j - 1]] if j > i else ""

            for i, j in _pack(strings, "", budget, measure, joined=cut):
                out.append((run[i][0], run[j - 1][1]))
            run.clear()

        for s, e in pieces:
            if self._fits(text[s:e], budget):
                run.append((s, e))
            else:
                flush()
                out.extend(self._split(text, s, e, level + 1, budget))
        flush()
        return out

    def _overlap(self, text: str, spans: list[Span]) -> list[Span]:
        out = [spans[0]]
        for (prev_start, prev_end), (start, end) in itertools.pairwise(spans):
            best = start
            # Word starts inside the previous chunk, nearest the end first (never its start).
            starts = [m.start() for m in re.finditer(r"(?<=\s)\S", text[prev_start:prev_end])]
            for offset in reversed(starts):
                candidate = prev_start + offset
                if self.estimator.count_text(text[candidate:prev_end]) > self.overlap:
                    break
                if not self._fits(text[candidate:end]):
                    break
                best = candidate
            out.append((best, end))
        return out

    def chunk(
        self, blocks: Sequence[ContentBlock], metadata: dict[str, Any] | None = None
    ) -> list[Chunk]:
        """Chunk the text of ``blocks`` (no text: no chunks)."""
        meta = metadata or {}
        text = "\n\n".join(_texts(blocks))
        return _finish([([TextBlock(t)], dict(meta)) for t in self.split(text)])

    def __repr__(self) -> str:
        return f"RecursiveChunker(max_size={self.max_size}, overlap={self.overlap})"


# -- Markdown ----------------------------------------------------------------------------------

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def markdown_sections(text: str) -> list[tuple[int, int, list[str]]]:
    """Split Markdown at ATX headings (``#`` to ``######``, not inside fenced code).

    Returns ``(start, end, headings)`` per section, in order: the section's slice of ``text``
    (its heading line included) and the titles from the top-level heading down to its own.
    Setext headings (underlined with ``===``) are not recognised.
    """
    sections: list[tuple[int, int, list[str]]] = []
    stack: list[tuple[int, str]] = []
    section_start, pos = 0, 0
    fence: str | None = None
    path: list[str] = []
    for line in text.splitlines(keepends=True):
        stripped = line.rstrip("\r\n")
        fence_match = _FENCE.match(stripped)
        if fence is not None:
            if (
                fence_match
                and fence_match.group(1)[0] == fence[0]
                and len(fence_match.group(1)) >= len(fence)
            ):
                fence = None
        elif fence_match:
            fence = fence_match.group(1)
        else:
            heading = _HEADING.match(stripped)
            if heading:
                if pos > section_start:
                    sections.append((section_start, pos, path))
                level = len(heading.group(1))
                while stack and stack[-1][0] >= level:
                    stack.pop()
                stack.append((level, (heading.group(2) or "").strip()))
                path = [title for _, title in stack]
                section_start = pos
        pos += len(line)
    if pos > section_start:
        sections.append((section_start, pos, path))
    return sections


class MarkdownChunker:
    """One chunk per Markdown section, with its heading path in ``metadata["heading"]``.

    Sections start at ATX headings outside fenced code; a section keeps its heading line, and a
    heading with no text under it joins the section after it. ``metadata["heading"]`` is the
    path of titles joined with ``" > "`` (e.g. ``"Guide > Install > Linux"``; ``""`` before the
    first heading). A section larger than ``max_size`` is split by an inner
    :class:`RecursiveChunker` (each piece keeps the section's heading).

    Args:
        max_size: the largest chunk, in estimator units (>= 1).
        overlap: overlap between pieces of one section (>= 0, smaller than ``max_size``).
        estimator: what measures size; heuristic tokens by default.
    """

    def __init__(
        self, max_size: int = 500, overlap: int = 0, *, estimator: TokenEstimator | None = None
    ) -> None:
        _check_sizes("MarkdownChunker", max_size, overlap)
        self._inner = RecursiveChunker(max_size, overlap, estimator=estimator)
        self.max_size = max_size
        self.overlap = overlap
        self.estimator = self._inner.estimator

    def split(self, text: str) -> list[tuple[str, str]]:
        """``(heading, chunk text)`` pairs for ``text``, in order."""
        out: list[tuple[str, str]] = []
        pending: int | None = None  # start of heading-only sections waiting for their body
        sections = markdown_sections(text)
        for index, (start, end, path) in enumerate(sections):
            newline = text.find("\n", start, end)
            body = text[newline + 1 : end] if newline >= 0 else ""
            begin = start if pending is None else pending
            if path and not body.strip() and index + 1 < len(sections):
                pending = begin
                continue
            pending = None
            section = text[begin:end]
            heading = " > ".join(path)
            out.extend((heading, section[s:e]) for s, e in self._inner.spans(section))
        return out

    def chunk(
        self, blocks: Sequence[ContentBlock], metadata: dict[str, Any] | None = None
    ) -> list[Chunk]:
        """Chunk the Markdown in the text blocks of ``blocks`` (joined by blank lines)."""
        meta = metadata or {}
        text = "\n\n".join(_texts(blocks))
        return _finish(
            [([TextBlock(t)], {**meta, "heading": heading}) for heading, t in self.split(text)]
        )

    def __repr__(self) -> str:
        return f"MarkdownChunker(max_size={self.max_size}, overlap={self.overlap})"


# -- Block -------------------------------------------------------------------------------------


def _pdf_pages(data: bytes) -> list[str] | None:
    """The text of each page with ``pypdf`` when it is installed and can read ``data``."""
    try:
        pypdf = importlib.import_module("pypdf")
    except ImportError:
        return None
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        return [str(page.extract_text() or "") for page in reader.pages]
    except Exception as exc:  # pypdf raises many types on damaged files
        log.warning("BlockChunker: cannot read the PDF (%s); keeping it as one chunk", exc)
        return None


class BlockChunker:
    """Chunks mixed content block by block, in order.

    * text — split by ``text_chunker`` (a :class:`RecursiveChunker` by default);
    * images — passed through, one chunk each;
    * PDFs — one group of chunks per page (``page``, ``total_pages`` and ``source`` = title in
      the metadata) when ``pypdf`` is installed and finds text; otherwise the document passes
      through as one chunk (a multimodal embedder may still take it);
    * plain-text documents — decoded and split like text (``source`` = title);
    * thinking — dropped.

    Args:
        text_chunker: the chunker for text; ``RecursiveChunker()`` by default.
    """

    def __init__(self, text_chunker: Chunker | None = None) -> None:
        self.text_chunker: Chunker = text_chunker or RecursiveChunker()

    def _text(
        self, text: str, meta: dict[str, Any]
    ) -> list[tuple[list[ContentBlock], dict[str, Any]]]:
        return [
            (
                c.blocks,
                {k: v for k, v in c.metadata.items() if k not in ("chunk_index", "chunk_total")},
            )
            for c in self.text_chunker.chunk([TextBlock(text)], meta)
        ]

    def chunk(
        self, blocks: Sequence[ContentBlock], metadata: dict[str, Any] | None = None
    ) -> list[Chunk]:
        """Chunk every block of ``blocks`` (see the class docstring)."""
        meta = metadata or {}
        items: list[tuple[list[ContentBlock], dict[str, Any]]] = []
        for block in blocks:
            if isinstance(block, TextBlock):
                items.extend(self._text(block.text, dict(meta)))
            elif isinstance(block, ImageBlock):
                items.append(([block], dict(meta)))
            elif isinstance(block, DocumentBlock):
                items.extend(self._document(block, meta))
        return _finish(items)

    def _document(
        self, block: DocumentBlock, meta: dict[str, Any]
    ) -> list[tuple[list[ContentBlock], dict[str, Any]]]:
        source = {"source": block.title} if block.title else {}
        if block.media_type == "text/plain":
            return self._text(block.data.decode("utf-8", errors="replace"), {**meta, **source})
        pages = _pdf_pages(block.data)
        items: list[tuple[list[ContentBlock], dict[str, Any]]] = []
        if pages is not None:
            for number, page in enumerate(pages, start=1):
                if page.strip():
                    page_meta = {**meta, **source, "page": number, "total_pages": len(pages)}
                    items.extend(self._text(page, page_meta))
        return items or [([block], {**meta, **source})]

    def __repr__(self) -> str:
        return f"BlockChunker(text_chunker={self.text_chunker!r})"
