"""Matching a model's patterns (grep's regular expressions, globs) under a time bound (private).

A pattern comes from the model, so it may backtrack without end (``(a|aa)+$`` on a line of
``a``s; with the standard ``re`` even ``(a+)+$``, or a glob of many ``*a`` on a long name).
The ``regex`` package (the ``code`` extra) releases the GIL while it matches and stops at a
timeout: every match made here is held to one budget of matching time per tool call (the
time spent walking and reading files does not count), and running past it raises a
:class:`~goagent_py.coding._tool.CodingToolError` the model reads.

A call with a timeout costs the ``regex`` package ~13 µs (without one, ~2 µs), so grep does not
search line by line: it searches the whole text (``MULTILINE``) for the next line that may
match and confirms that line alone, one line after another. A pattern whose meaning depends on
what lies beyond its line (``\\A``, ``\\Z``, lookarounds, inline flags) is searched line by line.
"""

from __future__ import annotations

import importlib
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from goagent_py.coding._tool import CodingToolError
from goagent_py.errors import MissingExtraError

__all__ = ["Clock", "LineSearch", "glob_matcher", "glob_regex", "text_lines"]

# What a line alone and the same line inside the whole text may answer differently.
_CONTEXT = re.compile(r"\\[AZzG]|\(\?(?:<[=!]|[=!]|[a-zA-Z]*[-^]|[a-zA-Z]+\))")


def text_lines(text: str) -> list[str]:
    """The lines of ``text`` as ``grep -n``, editors and ``sed`` count them: ended by ``\\n``
    (a ``\\r`` before it dropped), a last line without one kept. ``str.splitlines`` also ends
    a line at a form feed, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028, U+2029 and a lone CR, which
    sit inside lines of real files (old sources, JavaScript, JSON): the line numbers read_file
    and grep gave were not the file's."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def glob_regex(pattern: str) -> str:
    """The regular expression of a glob (``*``, ``?``, ``**``, ``[...]``) over ``/``-separated
    relative paths, to match from the start (see :func:`glob_matcher`)."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out) + r"\Z"


def _regex(tool: str) -> Any:
    try:
        return importlib.import_module("regex")  # an extra; untyped (Any here)
    except ImportError as exc:
        missing = MissingExtraError("regex", "code", feature=tool)
        raise CodingToolError(str(missing)) from exc


class Clock:
    """One tool call's budget of matching time: each match gets what is left of it.

    Only the time spent matching counts: walking and reading a large tree (100k files) may
    take longer than the budget, and a plain pattern must not be blamed for it. ``cancelled``,
    once set (the call was aborted or timed out), ends the search at its next match.
    """

    def __init__(self, tool: str, timeout: float, cancelled: threading.Event | None = None) -> None:
        self.tool = tool
        self.timeout = timeout
        self.used = 0.0
        self.cancelled = cancelled

    def run(self, method: Callable[..., Any], *args: Any) -> Any:
        if self.cancelled is not None and self.cancelled.is_set():
            raise CodingToolError(f"{self.tool} was cancelled")
        left = self.timeout - self.used
        started = time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            return method(*args, timeout=left)
        except TimeoutError as exc:
            raise CodingToolError(
                f"{self.tool} stopped after {self.timeout:g} s of matching: the pattern is too "
                "slow (nested repeats such as (a+)+, or many * in a row, backtrack without "
                "end); simplify the pattern, or narrow the search with path or glob"
            ) from exc
        finally:
            self.used += time.monotonic() - started


def _compile(regex: Any, source: str, flags: int, what: str) -> Any:
    try:
        return regex.compile(source, flags)
    except regex.error as exc:
        raise CodingToolError(f"invalid {what}: {exc}") from exc


def glob_matcher(
    pattern: str,
    *,
    tool: str,
    clock: Clock | None = None,
    timeout: float = 10.0,
    cancelled: threading.Event | None = None,
) -> Callable[[str], bool]:
    """``matches(path) -> bool`` for a glob, held to ``clock`` (or a new ``timeout``)."""
    regex = _regex(tool)
    compiled = _compile(regex, glob_regex(pattern), 0, "glob pattern")
    bound = clock or Clock(tool, timeout, cancelled)
    return lambda path: bound.run(compiled.match, path) is not None


class LineSearch:
    """The lines of texts that a regular expression matches, in one budget of matching time.

    Args:
        pattern: the model's regular expression (the ``regex`` package's syntax, as ``re``'s).
        ignore_case: match without regard to case.
        tool: the tool named in errors.
        timeout: the most seconds all the matching of this search may take.
        cancelled: set when the call was aborted: the search ends at its next match.

    Raises:
        CodingToolError: the pattern is invalid, or the ``regex`` package is missing.
    """

    def __init__(
        self,
        pattern: str,
        *,
        ignore_case: bool,
        tool: str,
        timeout: float,
        cancelled: threading.Event | None = None,
    ) -> None:
        regex = _regex(tool)
        flags = regex.IGNORECASE if ignore_case else 0
        self.clock = Clock(tool, timeout, cancelled)
        self._line = _compile(regex, pattern, flags, "regular expression")
        self._text = (
            None if _CONTEXT.search(pattern) else _compile(regex, pattern, flags | regex.M, "")
        )

    def lines(self, text: str) -> Iterator[tuple[int, str]]:
        """``(number, line)`` of each line of ``text`` (:func:`text_lines`) that matches.

        Raises:
            CodingToolError: the matching time ran out.
        """
        lines = text_lines(text)
        if self._text is None:
            for n, line in enumerate(lines, 1):
                if self.clock.run(self._line.search, line) is not None:
                    yield n, line
            return
        if not lines:
            return
        joined = "\n".join(lines)
        pos = index = 0  # where to search from, and the index of the line it is in
        while pos <= len(joined):
            found = self.clock.run(self._text.search, joined, pos)
            if found is None:
                return
            start = joined.rfind("\n", 0, found.start()) + 1
            index += joined.count("\n", pos, start)
            end = joined.find("\n", start)
            end = len(joined) if end < 0 else end
            # The whole text may match across lines: the line alone decides.
            if self.clock.run(self._line.search, lines[index]) is not None:
                yield index + 1, lines[index]
            pos, index = end + 1, index + 1
