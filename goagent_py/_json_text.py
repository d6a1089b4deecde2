"""Parsing JSON written outside the package (private): a model's tool arguments or typed
answer, a vendor's body or stream chunk.

``json.loads`` raises ``RecursionError``, not ``ValueError``, on text nested deeper than the
interpreter's stack (``"[" * 100_000`` is 100 kB): code that caught the ``ValueError`` of bad
JSON let it through, so a model's answer crashed a typed run and a tool call's arguments ended
the run as a provider error instead of reaching the model as an error result. :func:`loads`
makes it the ``JSONDecodeError`` every caller already handles.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["loads"]


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``, with nesting too deep for the parser as a ``JSONDecodeError``.

    Raises:
        json.JSONDecodeError: ``text`` is not JSON, or is nested too deeply to parse.
    """
    try:
        return json.loads(text)
    except RecursionError:
        doc = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise json.JSONDecodeError("nested too deeply", doc[:64], 0) from None
