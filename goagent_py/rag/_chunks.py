"""Chunk preparation for the pipeline: documents to content-addressed chunk messages.

A chunk's id is ``<source>#<index>:<hash>``, the hash covering its content and metadata (the
location included), so the same document always gives the same ids and any change gives new
ones. Locations (lines, heading path, page) are recorded in the metadata for citations.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from goagent_py.memory.base import Chunk, Chunker
from goagent_py.messages import Message, Role, TextBlock, messages_to_json, text_from
from goagent_py.rag.documents import Document, markdown_headings, rst_headings

# Keys the pipeline owns in chunk metadata (they win over document metadata).
LOCATION_KEYS = ("heading", "page", "line_start", "line_end")


# -- chunk preparation ------------------------------------------------------------------------


@dataclass(slots=True)
class Prepared:
    """A chunk ready to index: ``embed_text`` is what is embedded (context + text), ``context``
    what the keyword index searches beside the text; the stored text is the message's."""

    id: str
    message: Message
    embed_text: str
    context: str = ""
    parts: list[str] = field(default_factory=list)


# Markdown images and links in titles and headings: keep the link text, drop the URLs (a
# badge's URL or a changelog's compare link is noise to an embedder and a keyword index).
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def clean_heading(text: str) -> str:
    """A title or heading as plain words: link text kept, images and URLs dropped."""
    text = _IMAGE.sub("", text)
    text = _LINK.sub(r"\1", text)
    text = text.replace("[]", "")
    return " ".join(text.split())


def chunk_context(source: str, title: str, heading: str | None) -> str:
    """The context a chunk is embedded and keyword-indexed with: document, title, headings.

    ``"orjson > Serialize > Options"``: the source's file name (without suffix) unless the
    title already names it, then the title and the heading path (the title not repeated).
    """
    parts: list[str] = []
    title = clean_heading(title)
    stem = PurePosixPath(source.replace("\\", "/")).stem if source else ""
    if stem and stem.casefold() not in title.casefold():
        parts.append(stem)
    if title:
        parts.append(title)
    if heading:
        path = [clean_heading(h) for h in heading.split(" > ")]
        if path and path[0] == title:
            path = path[1:]
        parts += [h for h in path if h]
    return " > ".join(parts)


# -- part vectors -----------------------------------------------------------------------------

PART_KEY = "part_of"
"""Metadata key of a part vector's entry in the store: the id of the chunk it belongs to."""

# A part ends at a sentence end or a line break (list items, table rows); short pieces are
# merged with the next so that a part says something on its own.
_PART_END = re.compile(r"(?<=[.!?])[\t ]+|\n+")
_PART_MIN = 150  # tuned on bench/rag_labelled.py's dev half (60/300 ranked vector search
_PART_MAX = 400  # higher but hybrid lower, at 2.2x the parts)


def sentence_parts(body: str) -> list[str]:
    """The sentence-sized parts of a chunk's text, embedded on their own (see ``Pipeline``).

    A small embedder averages a whole chunk into one vector, which blurs a single fact; a
    part's vector keeps it. Returns [] when the chunk is a single part (its own vector is the
    part's).
    """
    out: list[str] = []
    current = ""
    for piece in _PART_END.split(body):
        piece = piece.strip()
        if not piece:
            continue
        if current and len(current) + len(piece) + 1 > _PART_MAX:
            out.append(current)
            current = piece
        else:
            current = f"{current} {piece}" if current else piece
        if len(current) >= _PART_MIN:
            out.append(current)
            current = ""
    if current:
        if out and len(out[-1]) + len(current) < _PART_MAX:
            out[-1] += " " + current
        else:
            out.append(current)
    return out if len(out) > 1 else []


def part_id(chunk_id: str, number: int) -> str:
    """The store id of a chunk's part vector."""
    return f"{chunk_id}~{number}"


def is_part_id(id: str) -> bool:
    """Whether a store id is a part vector's (a chunk id ends with its hash, no ``~``)."""
    return "~" in id.rpartition(":")[2]


PART_WEIGHT = 0.5
"""A chunk's vector score with part vectors: ``(1 - w) * cosine(chunk) + w * max cosine(part)``
(tuned on the dev half of ``bench/rag_labelled.py``)."""


def collapse_parts(hits: Sequence[Any], limit: int) -> list[tuple[str, Message, float]]:
    """Store hits (chunks and part vectors, best first) as ``(chunk id, message, score)``.

    A chunk scores ``(1 - PART_WEIGHT) * its cosine + PART_WEIGHT * its best part's cosine``.
    Where the hits hold only one of the two (the store returned a limited list), the missing
    one is taken as the list's lowest score, the most it can be; a chunk without parts counts
    its own cosine for both.
    """
    if not hits:
        return []
    floor = min(float(h.score) for h in hits)
    own: dict[str, float] = {}
    best_part: dict[str, float] = {}
    messages: dict[str, Message] = {}
    order: list[str] = []
    for h in hits:
        parent = h.message.metadata.get(PART_KEY)
        chunk_id = parent if isinstance(parent, str) else h.id
        if chunk_id not in messages:
            order.append(chunk_id)
            message = h.message
            if isinstance(parent, str):
                meta = {k: v for k, v in message.metadata.items() if k != PART_KEY}
                message = Message(message.role, list(message.content), metadata=meta)
            messages[chunk_id] = message
        target = best_part if isinstance(parent, str) else own
        target[chunk_id] = max(target.get(chunk_id, -1.0), float(h.score))
    scored = []
    for chunk_id in order:
        whole = own.get(chunk_id, floor)
        part = best_part.get(chunk_id, own.get(chunk_id, floor))
        score = (1.0 - PART_WEIGHT) * whole + PART_WEIGHT * part
        scored.append((chunk_id, messages[chunk_id], score))
    scored.sort(key=lambda item: -item[2])
    return scored[:limit]


def part_entries(chunk: Prepared) -> list[Prepared]:
    """The chunk's part vectors to index: the chunk's message, tagged with its id."""
    meta = {**chunk.message.metadata, PART_KEY: chunk.id}
    message = Message(chunk.message.role, list(chunk.message.content), metadata=meta)
    return [Prepared(part_id(chunk.id, n), message, text) for n, text in enumerate(chunk.parts)]


def rebuilt(chunk_id: str, message: Message) -> Prepared | None:
    """The chunk ``chunk_id`` as :func:`prepare` made it, from the message the store keeps:
    what it embedded is rebuilt from its metadata (source, title, heading) and its text, and
    accepted only when the id's digest says it is exactly that (None otherwise: another
    version's context, a message the store did not keep byte for byte)."""
    meta = message.metadata
    source, title, heading = meta.get("source"), meta.get("title"), meta.get("heading")
    context = chunk_context(
        source if isinstance(source, str) else "",
        title if isinstance(title, str) else "",
        heading if isinstance(heading, str) else None,
    )
    body = text_from(list(message.content))
    embed_text = (context + "\n\n" + body) if context and body else body
    if chunk_id.rpartition(":")[2] != digest(message, embed_text):
        return None
    parts = sentence_parts(body) if body else []
    return Prepared(chunk_id, message, embed_text, context if body else "", parts)


def default_chunker(fmt: str) -> Chunker:
    from goagent_py.memory.chunking import MarkdownChunker, RecursiveChunker

    # ~800 characters (heuristic tokens are UTF-8 bytes / 4): under the 256-token input limit
    # of small sentence embedders such as all-MiniLM-L6-v2, with room for the title header.
    if fmt in ("markdown", "html"):
        return MarkdownChunker(max_size=200, overlap=20)
    return RecursiveChunker(max_size=200, overlap=20)


def digest(message: Message, embed_text: str = "") -> str:
    # The embedded text is covered too: when the way context is built changes, every chunk
    # gets a new id, so the next index() re-embeds it instead of keeping a vector of old text.
    h = hashlib.sha256(messages_to_json([message]))
    if embed_text:
        h.update(b"\0" + embed_text.encode())
    return h.hexdigest()[:16]


def line_spans(text: str, chunker: Chunker, chunks: list[Chunk]) -> list[tuple[int, int] | None]:
    """Each chunk's (first, last) line in ``text``, or None where it can't be placed."""
    spans_fn = getattr(chunker, "spans", None)
    offsets: list[tuple[int, int] | None] = []
    texts = [text_from(c.blocks) for c in chunks]
    exact = None
    if callable(spans_fn):
        try:
            candidate = [(int(s), int(e)) for s, e in spans_fn(text)]
        except Exception:
            candidate = None
        if (
            candidate is not None
            and len(candidate) == len(chunks)
            and all(text[s:e] == t for (s, e), t in zip(candidate, texts, strict=True))
        ):
            exact = candidate
    if exact is not None:
        offsets = list(exact)
    else:
        cursor = 0
        for chunk_text in texts:
            probe = chunk_text.strip()
            pos = text.find(probe, cursor) if probe else -1
            if pos < 0 and probe:
                pos = text.find(probe)
            if pos < 0:
                offsets.append(None)
                continue
            offsets.append((pos, pos + len(probe)))
            cursor = pos + 1
    # Line numbers by bisecting the newlines' offsets: counting from the start for every chunk
    # was quadratic (a 6 MB file of one line took minutes).
    newlines = [m.start() for m in re.finditer("\n", text)]
    out: list[tuple[int, int] | None] = []
    for span in offsets:
        if span is None:
            out.append(None)
            continue
        start, end = span
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        before = bisect.bisect_left(newlines, start)
        out.append((before + 1, bisect.bisect_left(newlines, end) + 1))
    return out


def prepare(doc: Document, chunker: Chunker | None) -> list[Prepared]:
    """The document's chunks as messages with deterministic, content-addressed ids."""
    fmt = str(doc.metadata.get("format", ""))
    chunker = chunker or default_chunker(fmt)
    paged = fmt == "pdf" and len(doc.blocks) > 1
    base: dict[str, Any] = dict(doc.metadata)
    for key in (*LOCATION_KEYS, "chunk_index", "chunk_total"):
        base.pop(key, None)
    base["source"] = doc.source
    title = doc.title
    out: list[Prepared] = []
    for block_number, block in enumerate(doc.blocks):
        if isinstance(block, TextBlock):
            if not block.text.strip():
                continue
            chunks = chunker.chunk([block], {})
            lines = line_spans(block.text, chunker, chunks)
            if fmt in ("markdown", "html"):
                headings = markdown_headings(block.text)
            elif fmt == "rst":
                headings = rst_headings(block.text)
            else:
                headings = []
        else:
            chunks = [Chunk([block], {})]
            lines, headings = [None], []
        for chunk, span in zip(chunks, lines, strict=True):
            meta = dict(base)
            extra = {k: v for k, v in chunk.metadata.items() if k not in ("chunk_total",)}
            meta.update(extra)
            meta["chunk_index"] = len(out)
            heading = meta.get("heading")
            if span is not None:
                if not paged:
                    meta["line_start"], meta["line_end"] = span
                if not heading and headings:
                    found = [path for line, path in headings if line <= span[0]]
                    if found:
                        meta["heading"] = heading = found[-1]
            if not heading:
                meta.pop("heading", None)
            if paged:
                meta["page"] = block_number + 1
            message = Message(Role.USER, list(chunk.blocks), metadata=meta)
            context = chunk_context(
                doc.source, title, heading if isinstance(heading, str) else None
            )
            body = text_from(list(chunk.blocks))
            embed_text = (context + "\n\n" + body) if context and body else body
            chunk_id = f"{doc.source}#{len(out)}:{digest(message, embed_text)}"
            parts = sentence_parts(body) if body else []
            out.append(Prepared(chunk_id, message, embed_text, context if body else "", parts))
    return out
