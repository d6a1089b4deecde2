"""Corrections of what was just said: "Sorry, I meant John." after "My brother is called Jon."

A correction names the right value and sometimes the wrong one ("John, not Jon"); it says
nothing by itself, only as an edit of the statement before it. :func:`parse_correction` reads
one; :func:`corrected_text` applies it to a previous statement, or says it does not fit it
(then the sentence is an ordinary fact). Pure and small on purpose, like
:mod:`goagent_py.memory._fact_slots`: English patterns, not a grammar.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

from goagent_py.memory._fact_slots import parse_fact
from goagent_py.memory._questions import is_question

__all__ = ["Correction", "corrected_text", "is_correction", "parse_correction"]


@dataclass(slots=True, frozen=True)
class Correction:
    """The right value, and the wrong one when the sentence names it ("" otherwise)."""

    value: str
    wrong: str = ""


# Words that say "what I said was a mistake". A correction needs one of them, or "I meant",
# "should be", a leading "*" (the chat convention) or a "not <wrong>" to compare with.
_SORRY = (
    r"(?:sorry|oops|whoops|oh no|my bad|my mistake|my apologies|apologies|pardon|"
    r"typo|correction|i misspoke|i mistyped|i misspelled|i misspelt|i got (?:that|it) wrong|"
    r"(?:that|this)(?:'s| is| was) (?:wrong|not right|incorrect|a typo|a mistake))"
)
_FILLER = r"(?:no|nope|wait|no wait|hang on|hold on|actually|oh|ah|er|erm|um|uh|ok|okay|so)"
_LEAD = rf"(?:(?:{_SORRY}|{_FILLER})\s*[,.!:;-]*\s+)*"
_MEANT = re.compile(
    rf"^{_LEAD}(?:i meant(?: to (?:say|write|type))?|i should have (?:said|written|typed))"
    r"\s*[,:]?\s+(?P<v>.+)$",
    re.IGNORECASE,
)
# "That should be Porto" corrects with a name or a number; "it should be ready tomorrow" is
# a remark.
_SHOULD = re.compile(
    rf"^{_LEAD}(?:(?:it|that) )?should (?:be|read|say|have been)\s*[,:]?\s+(?P<v>.+)$",
    re.IGNORECASE,
)
# "I mean John" corrects after a marker ("No, I mean John") or with the wrong value named;
# alone it is a manner of speaking ("I mean business").
_MEAN = re.compile(rf"^(?P<lead>{_LEAD})i mean\s*[,:]?\s+(?P<v>.+)$", re.IGNORECASE)
_SORRY_IS = re.compile(
    rf"^{_LEAD}{_SORRY}\s*[,.!:;-]*\s*"
    r"(?:(?:it|that|the (?:name|word|city|town|number|one))(?:'s| is| was)"
    r"(?: actually| really| spelled| spelt| written)?|(?:it'?s |it is )?(?:spelled|spelt|written))"
    r"\s+(?P<v>.+)$",
    re.IGNORECASE,
)
_LABEL = re.compile(rf"^{_LEAD}(?:{_SORRY})\s*[:=-]\s*(?P<v>.+)$", re.IGNORECASE)
# "*John" (the chat convention): a name or a number, not "*sigh*" (an action).
_STAR = re.compile(r"^\*\s*(?P<v>[^*\s][^*]*)$")
# "John, not Jon", "not Jon but John", "not Jon, John": the value says which one was wrong.
_NOT_AFTER = re.compile(r"^(?P<v>.+?),?\s+(?:and )?not\s+(?P<w>.+)$", re.IGNORECASE)
_NOT_BEFORE = re.compile(r"^not\s+(?P<w>.+?)(?:,\s*|\s+but\s+)(?P<v>.+)$", re.IGNORECASE)
_INSTEAD = re.compile(r"^(?P<v>.+?)\s+instead of\s+(?P<w>.+)$", re.IGNORECASE)
_BARE = re.compile(rf"^{_LEAD}(?P<rest>(?:not\s+)?[^\s,].*)$", re.IGNORECASE)
# "No wait, Madrid.", "Actually, Madrid.", "Hang on, 555-0199": a word that takes back what was
# just said, then a bare name or number. Not a plain "No, Madrid." or "Ok, Madrid.": those
# answer a question as often as they correct.
_TAKE_BACK = (
    rf"(?:{_SORRY}|no,?\s+wait|wait|hang on|hold on|actually|no,?\s+no|no,?\s+sorry|"
    r"i mean|i meant|scratch that)"
)
_TAKEN_BACK = re.compile(rf"^{_TAKE_BACK}\s*[,.!:;-]*\s+{_LEAD}(?P<v>[^\s,].*)$", re.IGNORECASE)
_NAME_OR_NUMBER = re.compile(
    r"^(?:\+?\d[\d\s().:/-]*"
    r"|(?-i:[A-Z])[\w'.-]*(?:\s+(?:(?:de|da|do|dos|das|del|di|du|van|von|der|den|of|the|la|"
    r"le|el|am|upon)\s+)?(?-i:[A-Z])[\w'.-]*)*)$"
)

# A value is a few words naming something, not a clause or a remark ("I mean it", "sorry,
# it's fine").
_NOT_VALUES = frozenset(
    [
        "it",
        "that",
        "this",
        "what",
        "fine",
        "ok",
        "okay",
        "alright",
        "nothing",
        "yes",
        "no",
        "sure",
        "well",
        "right",
        "true",
        "correct",
        "wrong",
        "later",
        "sorry",
        "same",
        "so",
        "there",
        "here",
    ]
)
_CLAUSE_START = frozenset(
    [
        "i",
        "i'm",
        "i've",
        "i'd",
        "i'll",
        "me",
        "my",
        "mine",
        "we",
        "we're",
        "our",
        "us",
        "you",
        "you're",
        "your",
        "he",
        "she",
        "they",
        "it's",
        "that's",
        "to",
        "what",
        "who",
        "when",
        "where",
        "why",
        "how",
    ]
)
_MAX_WORDS = 6
_QUOTES = "\"'\u201c\u201d\u2018\u2019"


def _value(raw: str) -> str:
    value = raw.strip().strip(_QUOTES + "*").rstrip(".!…").strip().strip(_QUOTES)
    words = value.split()
    if not words or len(words) > _MAX_WORDS:
        return ""
    if words[0].casefold() in _CLAUSE_START or value.casefold() in _NOT_VALUES:
        return ""
    if is_question(value):
        return ""
    return value


def _split_wrong(raw: str) -> Correction | None:
    raw = raw.strip().rstrip(".!…").strip()
    for pattern in (_NOT_BEFORE, _NOT_AFTER, _INSTEAD):
        match = pattern.match(raw)
        if match is not None:
            value, wrong = _value(match.group("v")), _value(match.group("w"))
            if value and wrong and value.casefold() != wrong.casefold():
                return Correction(value, wrong)
            return None
    value = _value(raw)
    return Correction(value) if value else None


def parse_correction(text: str) -> Correction | None:
    """``text`` as a correction of the statement before it, or None.

    "Sorry, I meant John", "I meant John, not Jon", "Correction: John", "*John", "Oops, it's
    spelled John", "That should be Porto", "John, not Jon", "Not Jon but John".
    """
    text = text.strip().replace("\u2019", "'")
    if not text or is_question(text):
        return None
    for pattern in (_MEANT, _SORRY_IS, _LABEL):
        match = pattern.match(text)
        if match is not None:
            return _split_wrong(match.group("v"))
    for pattern in (_SHOULD, _STAR):
        match = pattern.match(text)
        if match is not None:
            found = _split_wrong(match.group("v"))
            return found if found is not None and _names(found.value) else None
    mean = _MEAN.match(text)
    if mean is not None:
        found = _split_wrong(mean.group("v"))
        return found if found is not None and (mean.group("lead") or found.wrong) else None
    taken = _TAKEN_BACK.match(text)
    if taken is not None:
        found = _split_wrong(taken.group("v"))
        if found is not None and (found.wrong or _NAME_OR_NUMBER.match(found.value)):
            return found
    # Without a marker, only a sentence that names the wrong value is a correction.
    bare = _BARE.match(text)
    if bare is not None:
        found = _split_wrong(bare.group("rest"))
        if found is not None and found.wrong:
            return found
    return None


def is_correction(text: str) -> bool:
    """Whether ``text`` reads as a correction of what was said before it."""
    return parse_correction(text) is not None


_WORD_EDGE = r"(?<![\w-]){}(?![\w-])"


def _replace(text: str, old: str, new: str) -> str | None:
    """``text`` with its last ``old`` (a whole word or words, any case) replaced by ``new``."""
    found = list(re.finditer(_WORD_EDGE.format(re.escape(old)), text, re.IGNORECASE))
    if not found:
        return None
    last = found[-1]
    return text[: last.start()] + new + text[last.end() :]


def _names(value: str) -> bool:
    """Whether ``value`` is a name or a number ("John", "Porto", "555-0199")."""
    return value[:1].isupper() or _numeric(value)


def _numeric(value: str) -> bool:
    return any(ch.isdigit() for ch in value)


def _same_kind(old: str, new: str) -> bool:
    """Whether ``new`` can stand where ``old`` stood: both numbers or neither, and both
    names (capitalised) or neither, unless they are spelled alike ("porto" for "Lisbon" is
    a name typed in lower case; "Wednesday" is no "a dentist appointment")."""
    if _numeric(old) != _numeric(new):
        return False
    name = re.sub(r"^(?:the|a|an) ", "", old, flags=re.IGNORECASE)[:1].isupper()
    return name == new[:1].isupper() or _like(old, new) >= 0.5


def _like(a: str, b: str) -> float:
    return SequenceMatcher(None, a.casefold(), b.casefold()).ratio()


# Spans of a statement that a bare value may replace: a run of capitalised words (not the
# sentence's opening word), or a number, a phone number, a date.
_NAME_RUN = re.compile(r"(?<![\w'-])(?-i:[A-Z][\w'-]*)(?: (?-i:[A-Z][\w'-]*))*")
_NUMBER = re.compile(r"(?<![\w-])\+?\d[\d\s().:/-]*\d(?![\w-])|(?<![\w-])\d(?![\w-])")


def _spans(text: str) -> list[str]:
    spans = [m.group(0) for m in _NUMBER.finditer(text)]
    for match in _NAME_RUN.finditer(text):
        words = match.group(0).split()
        if match.start() == 0 or text[: match.start()].rstrip().endswith((".", "!", "?")):
            words = words[1:]  # the sentence's first word is capitalised anyway
        if words and words != ["I"]:
            spans.append(" ".join(w for w in words if w != "I") or words[0])
    return spans


def corrected_text(previous: str, correction: Correction) -> tuple[str, float] | None:
    """``previous`` with ``correction`` applied, and how sure the reading is (higher is
    surer), or None when the correction does not fit it.

    The wrong value, when named, is replaced where ``previous`` says it; else the value the
    rules read in ``previous`` ("Jon" in "My brother is called Jon."); else the one span of
    the same kind (a name, a number) or the one most like the new value.
    """
    value = correction.value
    if correction.wrong:
        replaced = _replace(previous, correction.wrong, value)
        return (replaced, 3.0) if replaced is not None else None
    fact = parse_fact(previous)
    if (
        fact is not None
        and fact.kind != "retract"
        and fact.value
        and _same_kind(fact.value, value)
        and fact.value.casefold() != value.casefold()
    ):
        replaced = _replace(previous, fact.value, value)
        if replaced is not None:
            return replaced, 2.0 + _like(fact.value, value)
    spans = [s for s in _spans(previous) if _same_kind(s, value)]
    spans = [s for s in spans if s.casefold() != value.casefold()]
    if not spans:
        return None
    best = max(spans, key=lambda s: _like(s, value))
    likeness = _like(best, value)
    if len(set(spans)) > 1 and likeness < 0.5:
        return None  # several names and none like the new one: which one is meant is unclear
    replaced = _replace(previous, best, value)
    return (replaced, 1.0 + likeness) if replaced is not None else None
