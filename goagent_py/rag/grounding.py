"""Grounding: keep the sentences of an answer that the retrieved passages support, and cite them.

A small model given numbered passages rarely writes ``[1]``, and runs on from a right first
sentence into invented text. :func:`ground_answer` checks each sentence of the answer against
the passages (the share of its content words found in a passage) and keeps only the supported
ones, each cited with the passage that supports it best; the model's own markers are not
trusted. An answer with no supported sentence grounds to nothing: say that the documents do not
hold the answer rather than show it::

    grounded = ground_answer(answer, [r.text for r in results])
    if not grounded.citations:
        print("The documents do not say.")

A small model also reads faster and answers better from a few sentences than from whole
passages: :func:`excerpts` picks the sentences of the passages closest to the question (by the
embedder), which are what the model is given, and the best of them is the quote to fall back
on when the model's answer is not supported (labelled as a quote, never passed off as an
answer).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from goagent_py.memory.base import BatchEmbedder, Embedder
from goagent_py.messages import TextBlock

__all__ = [
    "MAX_SENTENCE_CHARS",
    "Excerpt",
    "GroundedAnswer",
    "excerpts",
    "ground_answer",
    "passage_sentences",
]

MAX_SENTENCE_CHARS = 240
"""The longest sentence :func:`passage_sentences` gives: a longer one (a log line, a table
flattened into one line) is cut at a word boundary and ends with "…"."""

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n{2,}")
_MARKER = re.compile(r"\s*\[\d{1,3}(?:\s*,\s*\d{1,3})*\]")
_WORD = re.compile(r"[a-z0-9]+")
# A line that starts a block of its own in Markdown or reStructuredText (heading, list item,
# table row, quote, code fence): the line before it ended a sentence.
_BLOCK_START = re.compile(r"\n(?=\s*(?:[#>|*+-]|\d+[.)]\s|```|\.\. ))")
_MARKUP = re.compile(r"^\s*(?:#+|[*+-]|\d+[.)]|>)\s+")
_STOP = frozenset({
    "the", "a", "an", "and", "or", "but", "of", "to", "in", "on", "at", "for", "from", "by",
    "with", "as", "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that",
    "these", "those", "there", "here", "they", "them", "their", "he", "she", "his", "her", "you",
    "your", "we", "our", "i", "me", "my", "not", "no", "yes", "do", "does", "did", "done", "can",
    "could", "would", "should", "will", "shall", "may", "might", "must", "has", "have", "had",
    "what", "which", "who", "whom", "when", "where", "why", "how", "than", "then", "so", "if",
    "into", "out", "about", "over", "also", "just", "only", "very", "more", "most", "some", "any",
    "each", "all", "such", "passage", "passages", "answer", "question", "document", "documents",
    "according", "text", "says", "said",
})  # fmt: skip


@dataclass(slots=True, frozen=True)
class GroundedAnswer:
    """An answer cut down to what the passages support.

    Attributes:
        text: the supported sentences, each followed by its citation (``[2]``); "" when none.
        citations: the passage numbers (1-based) the kept sentences cite, in order of first use.
        dropped: how many sentences were left out (no passage supports them).
    """

    text: str
    citations: list[int] = field(default_factory=list)
    dropped: int = 0


def _content(text: str) -> set[str]:
    return {
        w for w in _WORD.findall(text.lower()) if (len(w) > 2 or w.isdigit()) and w not in _STOP
    }


def ground_answer(
    answer: str,
    passages: Sequence[str],
    *,
    min_support: float = 0.6,
    max_sentences: int = 3,
) -> GroundedAnswer:
    """The sentences of ``answer`` that a passage supports, at most ``max_sentences``.

    A sentence is supported by a passage holding at least ``min_support`` of its content
    words (words of three letters or more, and numbers, without the common ones) and at least
    two of them; a sentence with fewer than two content words is never kept. It is cited with
    the passage that holds the most.

    Args:
        answer: the model's answer.
        passages: the passages it was given, in the order they were numbered (``[1]`` first).
        min_support: the least share of a sentence's content words a passage must hold.
        max_sentences: the most sentences kept.
    """
    vocabularies = [set(_WORD.findall(p.lower())) for p in passages]
    kept: list[str] = []
    citations: list[int] = []
    dropped = 0
    # A line break inside a paragraph is not the end of a sentence (small models wrap lines).
    text = re.sub(r"(?<!\n)\n(?!\n)", " ", answer.strip())
    for raw in _SENTENCE.split(text):
        sentence = _MARKER.sub("", raw).strip()
        if not sentence:
            continue
        words = _content(sentence)
        best, best_hits = 0, 0
        for number, vocabulary in enumerate(vocabularies, 1):
            hits = len(words & vocabulary)
            if hits > best_hits:
                best, best_hits = number, hits
        # A fragment with one content word ("Use") says nothing of its own.
        if len(words) < 2 or best_hits < 2 or best_hits < min_support * len(words):
            dropped += 1
            continue
        if len(kept) == max_sentences:
            dropped += 1
            continue
        kept.append(f"{sentence} [{best}]")
        if best not in citations:
            citations.append(best)
    return GroundedAnswer(" ".join(kept), citations, dropped)


def passage_sentences(text: str, *, min_chars: int = 12) -> list[str]:
    """The sentences of a passage: headings left out, wrapped lines joined, list items and
    table rows apart, Markdown list markers removed, fragments under ``min_chars`` left out,
    sentences over :data:`MAX_SENTENCE_CHARS` cut short."""
    # Headings name a subject, they answer nothing: a Markdown heading, or a reStructuredText
    # title (the line above an underline of = - ~ ^ * #) is not a sentence.
    text = re.sub(r"(?m)^[^\n]*\n[=\-~^*#]{3,}[ \t]*$", "", text)
    text = re.sub(r"(?m)^[ \t]*#{1,6}[ \t][^\n]*$", "", text)
    blocks = _BLOCK_START.sub("\n\n", text.strip())
    found: list[str] = []
    for block in re.split(r"\n\s*\n", blocks):
        joined = " ".join(line.strip() for line in block.splitlines() if line.strip())
        joined = _MARKUP.sub("", joined)
        for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z`\[(\"'])", joined):
            sentence = sentence.strip()
            if len(sentence) > MAX_SENTENCE_CHARS:
                cut = sentence[:MAX_SENTENCE_CHARS].rsplit(" ", 1)[0]
                sentence = cut.rstrip(" ,;:") + "…"
            if len(sentence) >= min_chars:
                found.append(sentence)
    return found


@dataclass(slots=True, frozen=True)
class Excerpt:
    """Sentences of one passage picked for a question.

    Attributes:
        number: the passage's number (1-based, in the order the passages were given).
        sentences: the picked sentences, in the passage's order.
        similarity: the best cosine similarity of a picked sentence to the question.
        best: the sentence with that similarity (the quote to fall back on).
    """

    number: int
    sentences: list[str]
    similarity: float
    best: str

    @property
    def text(self) -> str:
        """The picked sentences, joined."""
        return " ".join(self.sentences)


async def excerpts(
    question: str,
    passages: Sequence[str],
    embedder: Embedder,
    *,
    max_sentences: int = 3,
) -> list[Excerpt]:
    """The ``max_sentences`` sentences of ``passages`` closest to ``question``, by passage.

    The question and every sentence are embedded in one batch (a
    :class:`~goagent_py.memory.base.BatchEmbedder`; others one by one). Passages come back in the
    order they were given (a passage none of whose sentences was picked is left out), each
    with its picked sentences in their own order.

    Args:
        question: what was asked.
        passages: the retrieved passages, best first (their numbers are their 1-based places).
        embedder: the embedder that embeds the question and the sentences.
        max_sentences: how many sentences to pick in all.
    """
    places = [
        (number, sentence)
        for number, passage in enumerate(passages, 1)
        for sentence in passage_sentences(passage)
    ]
    if not places:
        return []
    inputs = [[TextBlock(question)], *([TextBlock(s)] for _, s in places)]
    if isinstance(embedder, BatchEmbedder):
        vectors = await embedder.embed_batch(inputs)
    else:
        vectors = np.stack([await embedder.embed(blocks) for blocks in inputs])
    vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    similarities = vectors[1:] @ vectors[0]
    picked = sorted(np.argsort(-similarities, kind="stable")[:max_sentences].tolist())
    found: list[Excerpt] = []
    for number in dict.fromkeys(places[i][0] for i in picked):
        mine = [i for i in picked if places[i][0] == number]
        best = max(mine, key=lambda i: float(similarities[i]))
        found.append(
            Excerpt(
                number,
                [places[i][1] for i in mine],
                float(similarities[best]),
                places[best][1],
            )
        )
    return found
