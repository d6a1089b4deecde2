"""What edit_file matches and writes, as pure text work (private).

A model writes ``old_string`` from what read_file showed: lines without their ``\\r``, tabs as
tabs. These helpers find where it applies in the file's own text and tell the model why not
when it does not.
"""

from __future__ import annotations

import re

from goagent_py.coding._tool import CodingToolError

__all__ = ["apply_edit", "line_endings", "not_found_hint", "occurrences"]

# What read_file puts before each line: the number, right-aligned, and a tab.
_NUMBERED = re.compile(r"^ *\d+\t", re.M)


def occurrences(text: str, old: str, *, stop: int | None = None) -> int:
    """How many places ``old`` matches in ``text``, overlapping ones included (``"\\n\\n"`` is
    at two places of ``"a\\n\\n\\nb"``: an edit there is ambiguous, though ``str.count`` says
    1); counting ends at ``stop``."""
    count, at = 0, text.find(old)
    while at != -1:
        count += 1
        if stop is not None and count >= stop:
            break
        at = text.find(old, at + 1)
    return count


def line_endings(text: str, old: str, new: str) -> tuple[str, str]:
    """``old`` and ``new`` in the file's line endings, so the file keeps one kind.

    In a file whose every line ends in ``\r\n``, read_file showed the lines without it: an
    ``old`` spanning lines with bare ``\n`` matches with ``\r\n``, and every line break of
    ``new`` is written as ``\r\n`` (also when ``old`` is one line). A file with mixed endings
    keeps ``old`` as given, unless only its CRLF form is there.
    """
    crlf_old = old.replace("\r\n", "\n").replace("\n", "\r\n")
    crlf_new = new.replace("\r\n", "\n").replace("\n", "\r\n")
    if "\r\n" in text and text.count("\n") == text.count("\r\n"):
        return crlf_old, crlf_new
    if "\n" in old and old not in text and crlf_old in text:
        return crlf_old, crlf_new
    return old, new


def not_found_hint(text: str, old: str) -> str:
    """What the model should do about an ``old`` that does not match: whitespace is the
    usual cause (tabs for spaces, trailing spaces), so say so when only whitespace differs."""
    lines = [line for line in old.splitlines() if line.strip()]
    if lines and all(_NUMBERED.match(line) for line in lines):
        return (
            "it holds read_file's line numbers (the number and the tab before each line): "
            "leave them out of old_string and new_string"
        )
    squeeze = " ".join
    if old.strip() and squeeze(old.split()) in squeeze(text.split()):
        return (
            "text matching it except for whitespace (tabs, spaces, line ends) is in the file: "
            "copy old_string exactly as read_file shows it (after the tab that follows the "
            "line number)"
        )
    return "read the file again"


def apply_edit(text: str, old: str, new: str, *, replace_all: bool, path: str) -> tuple[str, int]:
    """``text`` with ``old`` replaced by ``new`` as edit_file does it, and how many times.

    The one place the edit is worked out: edit_file writes it, and the approval preview shows
    it (a preview working it out by itself showed a CRLF edit as failing, and then it was made).

    Raises:
        CodingToolError: ``old`` is not in ``text``, or is there more than once without
            ``replace_all`` (the message tells the model what to do).
    """
    find, put = line_endings(text, old, new)
    count = occurrences(text, find, stop=None if replace_all else 2)
    if count == 0:
        raise CodingToolError(f"{path}: old_string not found; {not_found_hint(text, old)}")
    if count > 1 and not replace_all:
        raise CodingToolError(
            f"{path}: old_string appears {count} times; give more surrounding context "
            "to make it unique, or set replace_all"
        )
    if replace_all:
        return text.replace(find, put), text.count(find)  # the replacements made (no overlap)
    return text.replace(find, put, 1), 1
