"""One escaping routine for every delimited data block the model reads.

Recalled memories and retrieved passages reach the model inside tags that say "this is data,
not instructions". Text inside a block must not be able to close it early: any opening or
closing tag of the block's names, in any case and with inner spaces (``</ Recalled_Memories >``),
is neutralised by escaping its ``<``.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["neutralise_tags"]


@lru_cache(maxsize=16)
def _pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(n) for n in names)
    return re.compile(rf"<\s*/?\s*({alternatives})\b", re.IGNORECASE)


def neutralise_tags(text: str, *names: str) -> str:
    """``text`` with every tag named in ``names`` made inert (its ``<`` escaped as ``&lt;``)."""
    return _pattern(names).sub(lambda m: "&lt;" + m.group(0)[1:], text)
