"""Tool results as content blocks, with a bound on what serialising them may cost.

A tool function may return anything; what is not text or content blocks becomes JSON text. A
generator, an iterator or a huge structure must not cost more than the model could ever be shown:
serialising ``itertools.count()`` naively never ends and grows memory until the process dies.
So the JSON is written with a budget of characters, and iterators are consumed only while the
budget lasts; past it the text ends with a visible truncation marker. The budget is the
running call's ``max_result_chars`` when the loop provides one, else :data:`DEFAULT_RESULT_CHARS`.

Plain data (str, int, float, bool, None in lists, tuples and dicts) that fits the budget takes
the fast path: one ``pydantic_core.to_json`` call. Everything else is written piece by piece.
"""

from __future__ import annotations

import codecs
import dataclasses
import sys
from collections import deque
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from goagent_py._records import text_block
from goagent_py.messages import ContentBlock, DocumentBlock, ImageBlock, TextBlock, ThinkingBlock
from goagent_py.tool_context import _current, _result_chars

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["DEFAULT_RESULT_CHARS", "bounded_json", "result_char_limit", "to_blocks"]

DEFAULT_RESULT_CHARS = 100_000
"""The most characters a non-text tool result is serialised to when the agent sets no limit."""

_BLOCK_TYPES = (TextBlock, ImageBlock, DocumentBlock, ThinkingBlock)
_PLAIN_LEAVES = (str, int, float, bool, type(None))
# Written as JSON arrays; an iterator is consumed only as far as the budget lasts.
_ARRAYS = (list, tuple, set, frozenset, deque, Iterator)
# Deeper than this is almost surely a cycle (a list that holds itself); to_json refuses cycles too.
_MAX_DEPTH = 200
_BIG = 10**4000  # str() refuses ints of more than 4300 digits


def result_char_limit() -> int:
    """The character budget of the running tool call's result (see the module docstring)."""
    limit = _result_chars()
    return limit if limit is not None and limit > 0 else DEFAULT_RESULT_CHARS


def to_blocks(value: object, limit: int | None = None) -> list[ContentBlock]:
    """Turn what a tool function returned into content blocks.

    ``str`` becomes one text block, a block or a list of blocks passes through, and anything
    else is serialised to JSON text (dicts, lists, dataclasses, pydantic models, iterators) of
    at most ``limit`` characters (default :func:`result_char_limit`), ending with a truncation
    marker when it was cut.
    """
    if isinstance(value, str):
        return [text_block(value)]
    if type(value) is int and -_BIG < value < _BIG:  # the commonest result: its digits
        text = str(value)
        if limit is None:  # :func:`result_char_limit` in this frame (issue 36)
            ctx = _current.get()
            limit = None if ctx is None else ctx.max_result_chars
            if limit is None or limit <= 0:
                limit = DEFAULT_RESULT_CHARS
        if len(text) <= limit:
            return [text_block(text)]
    if isinstance(value, _BLOCK_TYPES):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, _BLOCK_TYPES) for v in value):
        return list(value)
    if value is None:
        return [TextBlock("")]
    return [text_block(bounded_json(value, result_char_limit() if limit is None else limit))]


def bounded_json(value: object, limit: int) -> str:
    """``value`` as compact JSON text (as ``pydantic_core.to_json(value, fallback=str)`` writes
    it), cut to at most ``limit`` characters with a marker; iterators are consumed only as far
    as the text needs.

    Raises:
        ValueError: the value nests deeper than 200 levels (a cycle) or cannot be serialised.
    """
    if _plain_size(value, limit + 1) >= 0:
        text = _std_json(value)
        if text is None:
            from pydantic_core import to_json  # on first use: importing goagent_py stays light

            text = to_json(value, fallback=str).decode()
        if len(text) <= limit:
            return text
        return _cut(text, limit)
    from pydantic_core import to_json

    writer = _Writer(limit, to_json)
    try:
        _write(value, writer, 0)
    except _Full:
        return _cut("".join(writer.parts), limit)
    return "".join(writer.parts)


def _std_json(value: object) -> str | None:
    """Plain data without floats as the standard library writes it, which is byte for byte what
    ``to_json`` writes (floats are formatted differently, strings with lone surrogates are an
    error there): a tool's first result then needs no pydantic_core import (~10 ms). ``None``
    when ``value`` holds a float or the text a surrogate, or once pydantic_core is loaded (its
    ``to_json`` is the faster)."""
    kind = type(value)
    if kind is int and -_BIG < value < _BIG:  # type: ignore[operator]
        return str(value)
    if kind is bool:
        return "true" if value else "false"
    if "pydantic_core" in sys.modules:
        return None
    return _stdlib_json(value)


def _stdlib_json(value: object) -> str | None:
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is list or kind is tuple:
            stack.extend(item)
        elif kind is dict:
            stack.extend(item.values())
        elif kind is float:
            return None
    import json

    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        text.encode()
    except (ValueError, UnicodeEncodeError):  # an int beyond str()'s digits, a surrogate
        return None
    return text


def _cut(text: str, limit: int) -> str:
    marker = f"\n[truncated: the result was cut at {limit} characters while being serialised]"
    keep = max(limit - len(marker), limit // 2)
    return text[:keep] + marker


def _plain_size(value: object, budget: int) -> int:
    """A bound on the JSON size of plain data, or -1 if ``value`` holds anything else (an
    iterator, an object) or may exceed ``budget`` characters."""
    stack: list[Any] = [value]
    size = 0
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            size += len(item) * 6 + 2  # worst case: every character escaped as \\uXXXX
        elif kind is int or kind is float or kind is bool or item is None:
            size += 25
        elif kind is list or kind is tuple:
            size += len(item) + 2
            if size > budget:  # before copying the items: the list may be huge
                return -1
            stack.extend(item)
        elif kind is dict:
            size += 2 * len(item) + 2
            if size > budget:
                return -1
            for key, val in item.items():
                if type(key) is not str:
                    return -1
                size += len(key) * 6 + 2
                stack.append(val)
        else:
            return -1
        if size > budget:
            return -1
    return size


class _Full(Exception):
    """The budget is spent."""


class _Writer:
    __slots__ = ("dump", "limit", "parts", "size")

    def __init__(self, limit: int, dump: Callable[..., bytes]) -> None:
        self.dump = dump  # pydantic_core.to_json
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0

    def write(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        if self.size > self.limit:
            raise _Full

    @property
    def left(self) -> int:
        """Characters left, plus one so that a longer piece overflows the budget."""
        return self.limit - self.size + 1


def _write(value: Any, w: _Writer, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise ValueError(
            f"tool result nests deeper than {_MAX_DEPTH} levels (a container holding itself?)"
        )
    if isinstance(value, str):
        w.write(w.dump(value[: w.left]).decode())
    elif value is None or isinstance(value, int | float):
        w.write(w.dump(value).decode())
    elif isinstance(value, bytes | bytearray | memoryview):
        # A cut may split a UTF-8 sequence: the incremental decoder leaves that tail out.
        head = bytes(value[: w.left])
        w.write(w.dump(codecs.getincrementaldecoder("utf-8")().decode(head)).decode())
    elif isinstance(value, Mapping):
        _write_items(((k, v) for k, v in value.items()), w, depth)
    elif isinstance(value, _ARRAYS):
        w.write("[")
        for i, item in enumerate(value):
            if i:
                w.write(",")
            _write(item, w, depth + 1)
        w.write("]")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        _write_items(((f.name, getattr(value, f.name)) for f in fields), w, depth)
    else:
        # Models, dates, UUIDs, enums, anything else: pydantic's own serialisation (which
        # never iterates a non-iterator), then the budget.
        w.write(w.dump(value, fallback=str).decode()[: w.left])


def _write_items(items: Iterator[tuple[Any, Any]], w: _Writer, depth: int) -> None:
    w.write("{")
    for i, (key, val) in enumerate(items):
        if i:
            w.write(",")
        if isinstance(key, str):
            w.write(w.dump(key[: w.left]).decode())
        else:  # the key as pydantic writes it ({1: x} -> "1", {None: x} -> "None")
            w.write(w.dump({key: None}, fallback=str).decode()[1:-6])
        w.write(":")
        _write(val, w, depth + 1)
    w.write("}")
