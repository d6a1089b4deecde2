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
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["GroundedAnswer", "ground_answer"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n{2,}")
_MARKER = re.compile(r"\s*\[\d{1,3}(?:\s*,\s*\d{1,3})*\]")
_WORD = re.compile(r"[a-z0-9]+")
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
    two of them (one, when the sentence has one). It is cited with the passage that holds the
    most.

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
        needed = min(2, len(words))
        if not words or best_hits < needed or best_hits < min_support * len(words):
            dropped += 1
            continue
        if len(kept) == max_sentences:
            dropped += 1
            continue
        kept.append(f"{sentence} [{best}]")
        if best not in citations:
            citations.append(best)
    return GroundedAnswer(" ".join(kept), citations, dropped)
