"""``json.dumps`` with fixed options, without what ``dumps`` redoes at every call.

``json.dumps(obj, **options)`` checks its keywords, builds a new ``JSONEncoder`` and, inside it,
a new C encoder and a closure, on every call (issue 36: once per AG-UI event of a served run,
and once per stored message). :func:`fast_encoder` builds the C encoder once; the output is
``json.dumps``'s, which a probe checks when it is built (``JSONEncoder(...).encode`` itself where
the C encoder is missing or differs). For plain JSON its callers built, never circular (no
circle check: the messages' writer refuses a circle before it encodes).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["fast_encoder"]

_PROBE = {"a": ["\u00e9\n\ud800\u2028", 1, 2.5, -0.0, None, True, {"b": float("nan")}], "": {}}


def fast_encoder(
    *, ensure_ascii: bool = True, separators: tuple[str, str] = (", ", ": ")
) -> Callable[[Any], str]:
    """``lambda obj: json.dumps(obj, ensure_ascii=..., separators=...)``, cheaper per call."""
    item, key = separators
    plain = json.JSONEncoder(ensure_ascii=ensure_ascii, separators=separators)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return plain.encode
    try:
        strings = (
            json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
        )
        encode = make(None, plain.default, strings, None, key, item, False, False, True)
        fast: Callable[[Any], str] = lambda o: "".join(encode(o, 0))  # noqa: E731
        if fast(_PROBE) == plain.encode(_PROBE):
            return fast
    except Exception:  # another Python's C encoder: the documented one
        pass
    return plain.encode
