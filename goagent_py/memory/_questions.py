"""Whether a sentence is a question, in any script: one rule for the write policy, the fact
parser and the correction parser (each used to have its own, and two ended at an ASCII "?"
only, so "Do I live in Paris" ending on a full-width question mark was read as a fact).
"""

from __future__ import annotations

import re

__all__ = ["QUESTION_END", "is_question"]

# "?", the full-width one (U+FF1F), Arabic "؟", the Greek question mark (U+037E), the
# interrobangs, and a sentence that ends on a Chinese or Japanese question particle without a mark
# ("你叫什么名字吗"); closing quotes, brackets and "!" may follow ("Really?!", "(where?)").
QUESTION_END = re.compile(
    r"(?:[?\uff1f\u061f\u037e\u203d\u2047\u2048\u2049]|[吗嗎呢么か])"
    r"[\s\u3002.!\uff01\"'\u201d\u2019)\]\u300d\u300f\uff09]*$"
)
# Greek writes its question mark as ";" (U+037E looks the same, and keyboards type ASCII ";"):
# a final ";" ends a question when the sentence is Greek.
_GREEK_END = re.compile(r";[\s\"'\u201d\u2019)\]]*$")
_GREEK = re.compile(r"[\u0370-\u03ff\u1f00-\u1fff]")
# Spanish opens a question with "¿" (its end may be missing in a quick message).
_OPENED = re.compile(r"^[\"'\u201c\u2018(\[]*\u00bf")


def is_question(text: str) -> bool:
    """Whether ``text`` ends as a question, in any script: "?", the full-width question mark,
    "؟", the Greek question mark (or ";" after Greek), an interrobang, a Chinese or Japanese
    question particle ("你好吗", "…ですか"), or it opens with "¿"."""
    text = text.strip()
    if QUESTION_END.search(text) or _OPENED.search(text):
        return True
    if _GREEK_END.search(text):
        last = re.split(r"[.!;\u037e]\s", text)[-1]
        return bool(_GREEK.search(last))
    return False
