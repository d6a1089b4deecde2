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

MAX_SESSION_BYTES = 1024
"""The longest conversation id (UTF-8 bytes) a storage takes: PostgreSQL's btree index rows
hold at most ~2.7 KB (the appends' key is ``(session_id, append_key)``, and a part's id adds
~80 characters), so a longer id failed at its first append, after the model call."""


class _PartId(str):
    """A session id made by :func:`part_session`: the one kind that may hold the separator."""

    __slots__ = ()


def part_session(session_id: str, name: str) -> str:
    """The session id of ``session_id``'s part ``name``."""
    return _PartId(f"{session_id}{PART_SEPARATOR}{name}")


def owner_of(session_id: str) -> str:
    """The conversation a session id belongs to: itself, or for a part, the conversation whose
    part it is. A part's writes are fenced by its conversation's clears (``_generation``): a
    part stored after the conversation was cleared would be a row of it that nothing deletes."""
    return session_id.split(PART_SEPARATOR, 1)[0]


def parts_range(session_id: str) -> tuple[str, str]:
    """``(low, high)``: the ids of ``session_id``'s parts are those with ``low <= id < high``
    in code-point (binary) order."""
    return f"{session_id}{PART_SEPARATOR}", f"{session_id}{chr(ord(PART_SEPARATOR) + 1)}"


def check_session_id(session_id: object, where: str) -> str:
    """The one rule for a conversation's ``session_id``, in every storage and durable run.

    Refused: anything but a non-empty string; an id holding :data:`PART_SEPARATOR` (it would
    be read as a part of another session: ``a\\x1fb`` of ``a``, cleared with it; parts are
    made by :func:`part_session` only, and accepted); NUL (PostgreSQL text cannot hold it);
    text that is not valid UTF-8 (a lone surrogate); more than :data:`MAX_SESSION_BYTES`.

    Returns:
        The id as a plain ``str``.

    Raises:
        ConfigurationError: the id breaks the rule, with what to do.
    """
    if not isinstance(session_id, str) or not session_id:
        raise ConfigurationError(
            f"{where}: session_id must be a non-empty string, got {session_id!r}"
        )
    if isinstance(session_id, _PartId):
        return str(session_id)
    if PART_SEPARATOR in session_id:
        raise ConfigurationError(
            f"{where}: session_id {session_id[:80]!r} holds \\x1f (the unit separator marks a "
            "session's stored parts): use an id without control characters"
        )
    if "\x00" in session_id:
        raise ConfigurationError(
            f"{where}: session_id {session_id[:80]!r} holds NUL, which PostgreSQL cannot store: "
            "use an id without control characters"
        )
    try:
        size = len(session_id.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ConfigurationError(
            f"{where}: session_id {session_id[:80]!r} is not valid Unicode text ({exc.reason}): "
            "decode it properly, or use a hash of it as the id"
        ) from None
    if size > MAX_SESSION_BYTES:
        raise ConfigurationError(
            f"{where}: session_id is {size} bytes long (UTF-8), over the limit of "
            f"{MAX_SESSION_BYTES}: use a shorter id (a hash of a long key, for instance)"
        )
    return session_id
