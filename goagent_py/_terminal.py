"""Text the model controls, made safe to show on a terminal.

A tool call's arguments, its result and the model's answer are written by the model. Shown raw,
an ESC starts an escape sequence and a CR moves the cursor back, so a command can repaint the
approval question the user is answering (``["echo", "x\\r\\x1b[2Kallow shell ls? …"]``).
:func:`printable` is the one helper every front end (line mode, the Textual window, the status
line, the `rag` commands) passes such text through.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

# C0 controls but tab and newline, DEL, the C1 controls (0x9b is a one-byte CSI), the Unicode
# bidirectional overrides and isolates (they reorder what the user reads), and lone surrogates
# (valid in JSON as "\ud800", they have no UTF-8: printing one raised UnicodeEncodeError and
# ended the line mode).
_CONTROL = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_NAMES = {"\r": "\\r", "\n": "\\n", "\x1b": "\\e", "\x08": "\\b", "\x0b": "\\v", "\x0c": "\\f"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMES.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, newlines: bool = False) -> str:
    """``text`` with every control character shown as an escape (``\\e``, ``\\r``, ``\\x07``).

    Args:
        text: text the model (or a program it ran) wrote.
        newlines: keep newlines as they are (for multi-line output); otherwise they are shown
            as ``\\n`` too, so the text stays on one line.

    Returns:
        Text that moves no cursor and starts no escape sequence: tabs are kept.
    """
    if newlines:
        return "\n".join(_CONTROL.sub(_escape, line) for line in text.split("\n"))
    return _CONTROL.sub(_escape, text)
