"""One escaping routine for every delimited data block the model reads.

Recalled memories and retrieved passages reach the model inside tags that say "this is data,
not instructions". Text inside a block must not be able to close it early: any opening or
closing tag of the block's names, in any case and with inner spaces (``</ Recalled_Memories >``),
is neutralised by escaping its ``<``. So is a look-alike a model reads as the same tag: written
with compatibility forms (full-width brackets, slash and letters, the small "<" U+FE64) or with
invisible characters inside (a zero-width space, a soft hyphen, a word joiner): the tags are
found in the text as a model reads it (NFKC, format characters dropped), and the character
that opens each is escaped in the text as written.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = ["neutralise_tags"]


@lru_cache(maxsize=16)
def _pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(n) for n in names)
    return re.compile(rf"<\s*/?\s*({alternatives})\b", re.IGNORECASE)


# Format characters (invisible) the common text of a block may hold: what makes a look-alike.
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000e0000-\U000e0fff]"
)


def neutralise_tags(text: str, *names: str) -> str:
    """``text`` with every tag named in ``names`` made inert (its ``<`` escaped as ``&lt;``),
    look-alikes included (see the module docstring)."""
    pattern = _pattern(names)
    if text.isascii() or (unicodedata.is_normalized("NFKC", text) and not _INVISIBLE.search(text)):
        return pattern.sub(lambda m: "&lt;" + m.group(0)[1:], text)
    # The text as read, with the index in ``text`` of each of its characters.
    read: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        if _INVISIBLE.match(char) or unicodedata.category(char) == "Cf":
            continue
        folded = unicodedata.normalize("NFKC", char)
        read.append(folded)
        origin.extend([index] * len(folded))
    openers = {origin[m.start()] for m in pattern.finditer("".join(read))}
    if not openers:
        return text
    return "".join("&lt;" if i in openers else c for i, c in enumerate(text))
