"""Grounding: keep the sentences of an answer that the retrieved passages support, and cite them.

A small model given numbered passages rarely writes ``[1]``, and runs on from a right first
sentence into invented text. :func:`ground_answer` checks each sentence of the answer against
the passages and keeps only the supported ones, each cited with the passage that supports it
best; the model's own markers are not trusted. Support is what a sentence *adds* to the
question: the numbers and names it adds must be in the passage, and most of its other new
words. Words it shares with the question prove nothing (a passage that holds the question, a
chat transcript say, would otherwise "support" any answer that repeats it). An answer with no
supported sentence grounds to nothing: say that the documents do not hold the answer rather
than show it::

    grounded = ground_answer(answer, [r.text for r in results], question=question)
    if not grounded.citations:
        print("The documents do not say.")

A small model also reads faster and answers better from a few sentences than from whole
passages: :func:`excerpts` picks the sentences of the passages closest to the question (by the
embedder), which are what the model is given, and the best of them is the quote to fall back
on when the model's answer is not supported (labelled as a quote, never passed off as an
answer; :func:`adds_to` tells whether it says more than the question).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from goagent_py.memory.base import BatchEmbedder, Embedder
from goagent_py.messages import TextBlock

__all__ = [
    "MAX_SENTENCE_CHARS",
    "Excerpt",
    "GroundedAnswer",
    "adds_to",
    "excerpts",
    "ground_answer",
    "passage_sentences",
    "says_nothing",
]

MAX_SENTENCE_CHARS = 240
"""The longest sentence :func:`passage_sentences` gives: a longer one (a log line, a table
flattened into one line) is cut at a word boundary and ends with "…"."""

# A sentence ends at . ! ? and a space, or at the full stop, ! and ? of Chinese and Japanese.
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[\u3002\uff01\uff1f])\s*|\n{2,}")
_MARKER = re.compile(r"\s*\[\d{1,3}(?:\s*,\s*\d{1,3})*\]")
# A word: a number ("2.5"; thousands separators are dropped first, so "1,200" is "1200"; "5ms"
# and "21st" are the number and a word), a run of letters and digits ("E1042"), or one
# character of a script written without spaces (Chinese, Japanese, Korean, Thai).
_CJK = "\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WORD = re.compile(rf"\d+(?:\.\d+)+|\d+(?=[^\W\d_])|[{_CJK}]|[^\W_{_CJK}]+")
_THOUSANDS = re.compile(r"(?<=\d)[,'\u00a0\u202f](?=\d{3}(?!\d))")
# A line that starts a block of its own in Markdown or reStructuredText (heading, list item,
# table row, quote, code fence): the line before it ended a sentence.
_BLOCK_START = re.compile(r"\n(?=\s*(?:[#>|*+-]|\d+[.)]\s|```|\.\. ))")
_MARKUP = re.compile(r"^\s*(?:#+|[*+-]|\d+[.)]|>)\s+")
# "The passages do not say", "does not contain any of those passages", "no information on":
# a sentence about what the passages lack is not an answer, whatever words it shares.
_NEGATED = re.compile(
    r"(?:\bnot|n't|\bno)\s+(?:\w+\s+){0,2}?(?:say|says|said|mention|mentions|mentioned|"
    r"contain|contains|include|includes|provide|provides|provided|specify|specifies|specified|"
    r"state|states|stated|cover|covers|covered|answer|answers|information|details)\b",
    re.IGNORECASE,
)
_NEGATION = re.compile(r"\b(?:not|never|no|none|nor|cannot)\b|n't\b", re.IGNORECASE)
_ABOUT_SOURCES = re.compile(
    r"\b(?:passages?|documents?|context|texts?|sources?|information)\b", re.IGNORECASE
)
_NUMBER_WORDS = {
    word: str(value)
    for value, word in enumerate((
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
        "eighteen", "nineteen", "twenty",
    ))
}  # fmt: skip
_STOP = frozenset({
    "the", "a", "an", "and", "or", "but", "of", "to", "in", "on", "at", "for", "from", "by",
    "with", "as", "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that",
    "these", "those", "there", "here", "they", "them", "their", "he", "she", "his", "her", "you",
    "your", "we", "our", "i", "me", "my", "not", "no", "yes", "do", "does", "did", "done", "can",
    "could", "would", "should", "will", "shall", "may", "might", "must", "has", "have", "had",
    "what", "which", "who", "whom", "when", "where", "why", "how", "than", "then", "so", "if",
    "into", "out", "off", "about", "over", "also", "just", "only", "very", "more", "most", "some",
    "any", "each", "all", "such", "passage", "passages", "answer", "question", "document",
    "documents", "according", "text", "says", "said", "etc", "doing", "way", "ways", "thing",
    "things", "able", "like", "well", "following", "please", "really", "simply", "use", "uses",
    "used", "using", "get", "gets", "got", "make", "makes", "made", "making", "need", "needs",
    "let", "lets", "see", "however", "therefore", "additionally", "basically", "actually",
    "unfortunately", "sure", "okay", "indeed", "instead", "finally", "thus", "hence", "note",
    "generally", "usually", "typically", "sorry", "certainly", "first", "second", "next",
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


def _fold(text: str) -> str:
    """Lower case without accents ("Zürich" -> "zurich"), numbers without separators."""
    decomposed = unicodedata.normalize("NFKD", _THOUSANDS.sub("", text))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def _stem(word: str) -> str:
    """One form for a word's inflections: "retries", "retried", "retrying" -> "retry"."""
    if word in _NUMBER_WORDS:
        return _NUMBER_WORDS[word]
    if word[:1].isdigit():  # "07" is "7", "2.50" is "2.5"
        whole, _, part = word.partition(".")
        part = part.rstrip("0")
        return (whole.lstrip("0") or "0") + (f".{part}" if part else "")
    if not word.isalpha() or len(word) < 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix, replacement in (("ied", "y"), ("ing", ""), ("ed", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 2:
            word = word[: -len(suffix)] + replacement
            break
    if word.endswith("e") and len(word) >= 3:
        word = word[:-1]
    if len(word) >= 4 and word[-1] == word[-2] and word[-1] not in "aeiouylsz":
        word = word[:-1]  # "stopp" -> "stop", "embedd" -> "embed"
    return word


def _words(text: str) -> list[tuple[str, bool]]:
    """The content words of ``text`` as (stem, named): ``named`` for a number written in
    digits, or a name: a word with a capital letter inside it or past a sentence's first
    word (a capitalised first word may be a verb: "Run pip install ...")."""
    found: list[tuple[str, bool]] = []
    first = True
    for match in _WORD.finditer(_THOUSANDS.sub("", text)):
        surface = match.group()
        word = _fold(surface)
        if not word:
            continue
        cjk = len(surface) == 1 and re.match(rf"[{_CJK}]", surface) is not None
        short = len(word) <= 2 and not (surface.isupper() and len(surface) == 2)
        if cjk or not (word in _STOP or (short and not word.isdigit())):
            named = any(c.isdigit() or c.isupper() for c in surface[1:]) or (
                surface[:1].isdigit() or (surface[:1].isupper() and not first)
            )
            found.append((_stem(word), named and not cjk))
        first = False
    return found


def _content(text: str) -> set[str]:
    return {stem for stem, _ in _words(text)}


def _vocabulary(text: str) -> set[str]:
    return {_stem(_fold(w)) for w in _WORD.findall(_THOUSANDS.sub("", text))}


def says_nothing(sentence: str) -> bool:
    """Whether ``sentence`` is about what the passages lack ("The documents do not say"),
    not an answer."""
    return bool(_NEGATED.search(sentence) and _ABOUT_SOURCES.search(sentence))


def adds_to(sentence: str, question: str) -> bool:
    """Whether ``sentence`` may answer ``question``: it holds a content word the question does
    not (inflections count as the same word), does not hold the question itself, and is not
    about what the passages lack. A transcript line that repeats the question ("question>
    What is the capital of Peru?", and whatever follows it on the line) answers nothing."""
    asked = " ".join(_WORD.findall(_fold(question)))
    if asked and asked in " ".join(_WORD.findall(_fold(sentence))):
        return False
    return bool(_content(sentence) - _content(question)) and not says_nothing(sentence)


def _support(
    words: list[tuple[str, bool]],
    asked: set[str],
    names: set[str],
    vocabulary: set[str],
    min_support: float,
) -> int:
    """How many of a sentence's content words the passage holds, or 0 when the passage does
    not support the sentence."""
    content = {stem for stem, _ in words}
    added = content - asked
    # The names of the question count too: "Jupiter has 146 moons." is not supported by a
    # passage on Saturn's 146 moons.
    named = {stem for stem, is_named in words if is_named} | (content & names)
    held = content & vocabulary
    found = added & vocabulary
    if not found or not named <= vocabulary or len(held) < 2:
        return 0
    return len(held) if len(found) >= min_support * len(added) else 0


def ground_answer(
    answer: str,
    passages: Sequence[str],
    *,
    question: str = "",
    min_support: float = 0.6,
    max_sentences: int = 3,
) -> GroundedAnswer:
    """The sentences of ``answer`` that a passage supports, at most ``max_sentences``.

    Support is what a sentence adds to the question: the words it shares with ``question``
    prove nothing (a passage may hold the question itself). A sentence is supported by a
    passage that holds

    * every number written in digits and every name the sentence holds (a word capitalised
      past the sentence's first word, or with capitals or digits inside: "Lima", "E1042",
      "RetryPolicy"), whether it adds them or they are the question's ("Jupiter has 146
      moons." is not supported by a passage on Saturn's 146 moons),
    * at least ``min_support`` of the content words it adds, and at least one (content words:
      three letters or more, or numbers, without the common ones; inflections, accents and
      thousands separators do not matter: "retries" is "retry", "Zurich" "Zürich", "1200"
      "1,200", "two" "2"; a decimal is one number, "2.5" is not "25"),
    * at least two of its content words in all,
    * and, when the sentence is negated ("not", "never", "n't"...), a negation.

    A sentence that adds nothing to the question (it restates it), or that speaks of what the
    passages lack ("The passages do not say"), is never kept. A kept sentence is cited with the
    passage that holds the most of its words; the model's own ``[n]`` markers are not trusted.
    The check is lexical: a paraphrase in other words is dropped, and a sentence stitched from
    a passage's words can pass.

    Args:
        answer: the model's answer.
        passages: the passages it was given, in the order they were numbered (``[1]`` first).
        question: what was asked; "" checks every content word of a sentence against the
            passages (a restated question then passes where a passage holds it).
        min_support: the least share of the added content words a passage must hold.
        max_sentences: the most sentences kept.
    """
    vocabularies = [_vocabulary(p) for p in passages]
    negated = [bool(_NEGATION.search(p)) for p in passages]
    asked = _content(question)
    names = {stem for stem, named in _words(question) if named}
    kept: list[str] = []
    citations: list[int] = []
    dropped = 0
    # A line break inside a paragraph is not the end of a sentence (small models wrap lines).
    text = re.sub(r"(?<!\n)\n(?!\n)", " ", answer.strip())
    for raw in _SENTENCE.split(text):
        sentence = _MARKER.sub("", raw).strip()
        if not sentence:
            continue
        words = _words(sentence)
        best, best_held = 0, 0
        negative = bool(_NEGATION.search(sentence))
        if not says_nothing(sentence):
            for number, vocabulary in enumerate(vocabularies, 1):
                if negative and not negated[number - 1]:
                    continue  # "E1042 does not mean ..." on a passage that says it does
                held = _support(words, asked, names, vocabulary, min_support)
                if held > best_held:
                    best, best_held = number, held
        if not best or len(kept) == max_sentences:
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
