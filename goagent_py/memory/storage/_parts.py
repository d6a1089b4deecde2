"""Rows a session owns under sessions of their own (its parts), deleted with it.

A part of session ``S`` is a session named ``S + PART_SEPARATOR + name``: the durable side keeps
a big tool result of ``S`` so (one row, read by one indexed lookup). Clearing ``S`` deletes its
parts too, so deleting a conversation leaves none of its rows behind. The separator is a control
character (unit separator) no session id of ours holds, so ``S``'s parts are never another
conversation's (``serve:u:t`` does not own ``serve:u:t2``'s rows).
"""

from __future__ import annotations

from goagent_py.errors import ConfigurationError

PART_SEPARATOR = "\x1f"


def part_session(session_id: str, name: str) -> str:
    """The session id of ``session_id``'s part ``name``."""
    return f"{session_id}{PART_SEPARATOR}{name}"


def parts_range(session_id: str) -> tuple[str, str]:
    """``(low, high)``: the ids of ``session_id``'s parts are those with ``low <= id < high``
    in code-point (binary) order."""
    return f"{session_id}{PART_SEPARATOR}", f"{session_id}{chr(ord(PART_SEPARATOR) + 1)}"


def check_session_id(session_id: str, where: str) -> None:
    """Refuse a conversation's ``session_id`` that holds :data:`PART_SEPARATOR`: it would be
    read as a part of another session (``a\\x1fb`` of ``a``, cleared with it). Parts are made
    by :func:`part_session` only, and still read.

    Raises:
        ConfigurationError: the id holds the separator, with what to do.
    """
    if PART_SEPARATOR in session_id:
        raise ConfigurationError(
            f"{where}: session_id {session_id!r} holds \\x1f (the unit separator marks a "
            "session's stored parts): use an id without control characters"
        )
