"""Parsing JSON written outside the package (private): a model's tool arguments or typed
answer, a vendor's body or stream chunk.

Two things valid JSON grammar allows that Python text must not hold:

- Nesting deeper than the interpreter's stack (``"[" * 100_000`` is 100 kB): ``json.loads``
  raises ``RecursionError``, not ``ValueError``, so code that caught bad JSON let it through (a
  model's answer crashed a typed run; a tool call's arguments ended the run as a provider
  error instead of reaching the model as an error result). :func:`loads` makes it the
  ``JSONDecodeError`` every caller already handles.
- A lone surrogate escape (``"\\ud800"``; a server that splits an emoji's UTF-16 pair across
  stream chunks sends them): ``json.loads`` gives a ``str`` that cannot be UTF-8, so SQLite
  memory refused to store the turn. :func:`loads` replaces each with U+FFFD (a pair stays one
  character).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["loads"]

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``, with nesting too deep for the parser as a ``JSONDecodeError`` and
    lone surrogates as U+FFFD.

    Raises:
        json.JSONDecodeError: ``text`` is not JSON, or is nested too deeply to parse.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        doc = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise json.JSONDecodeError("nested too deeply", doc[:64], 0) from None
    source = text if isinstance(text, str) else text.decode("utf-8", "replace")
    if _SURROGATE_ESCAPE.search(source):
        return _without_lone_surrogates(value)
    return value


def _fixed(text: str) -> str:
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _without_lone_surrogates(value: Any) -> Any:
    # Iterative, in place on the fresh containers json.loads made: they may be deep.
    if isinstance(value, str):
        return _fixed(value)
    todo = [value]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            for key in list(node):
                item = node[key]
                if isinstance(key, str) and _has_surrogate(key):
                    del node[key]
                    key = _fixed(key)
                if isinstance(item, str):
                    node[key] = _fixed(item) if _has_surrogate(item) else item
                else:
                    node[key] = item
                    if isinstance(item, dict | list):
                        todo.append(item)
        elif isinstance(node, list):
            for i, item in enumerate(node):
                if isinstance(item, str):
                    if _has_surrogate(item):
                        node[i] = _fixed(item)
                elif isinstance(item, dict | list):
                    todo.append(item)
    return value


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)
