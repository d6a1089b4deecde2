"""What a turn follows: the memories a correction or "That's no longer true." is about.

A consolidation's candidates are marked with what the new facts follow
(:attr:`~goagent_py.memory.records.MemoryRecord.just_said`: the scope's latest statement, minutes
ago, in the same conversation, and stated in the turn the facts reply to when they name it;
:attr:`~goagent_py.memory.records.MemoryRecord.recalled`: the memories the answer the facts reply
to was given, named by the facts' :data:`~goagent_py.memory.records.RECALLED_KEY`). The deciders
correct or retract only those.

The agent carries that context on the answer it records and hands it with the next turn's
facts (:mod:`goagent_py._recall`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from goagent_py.memory._questions import is_question
from goagent_py.memory.records import (
    FOLLOWS_KEY,
    JUST_SAID,
    RECALLED_KEY,
    SOURCE_SESSION_KEY,
    MemoryRecord,
    parse_time,
)
from goagent_py.messages import Message

__all__ = [
    "CONTEXT_KEYS",
    "EPOCH",
    "answer_used",
    "followed",
    "mark_just_said",
    "mark_recalled",
    "turn_followed",
    "without_context",
]

CONTEXT_KEYS = (RECALLED_KEY, FOLLOWS_KEY)
"""The keys of a turn's context handed with its facts, which no memory keeps."""

EPOCH = datetime.min.replace(tzinfo=UTC)
"""Before every memory: the time of an entry stored before records existed."""


def answer_used(messages: Sequence[Message], session: str) -> list[str]:
    """The ids of ``session``'s memories the answer ``messages`` reply to was given (their
    :data:`RECALLED_KEY`, best first): an id of another scope is never one, whoever wrote the
    metadata."""
    ids: list[str] = []
    for message in messages:
        found = message.metadata.get(RECALLED_KEY)
        if isinstance(found, list):
            ids += [i for i in found if isinstance(i, str) and i.startswith(f"{session}:")]
    return list(dict.fromkeys(ids))


def turn_followed(messages: Sequence[Message]) -> str | None:
    """The turn ``messages`` follow (their :data:`FOLLOWS_KEY`), or None when they name none
    (facts stored by hand, or after an answer recorded without its turn)."""
    for message in messages:
        found = message.metadata.get(FOLLOWS_KEY)
        if isinstance(found, str) and found:
            return found
    return None


def without_context(message: Message) -> Message:
    """``message`` without the turn's context (:data:`CONTEXT_KEYS`), which no memory keeps."""
    if not any(k in message.metadata for k in CONTEXT_KEYS):
        return message
    metadata = {k: v for k, v in message.metadata.items() if k not in CONTEXT_KEYS}
    return replace(message, metadata=metadata)


def mark_recalled(found: dict[str, MemoryRecord], current: Sequence[MemoryRecord],
                   recalled: Sequence[str]) -> None:  # fmt: skip
    """Mark in ``found`` (adding them) the ``current`` memories the answer was given, with
    their rank among ``recalled``."""
    rank = {id: i for i, id in enumerate(recalled, 1)}
    for record in current:
        if record.id in rank:
            found[record.id] = replace(found.get(record.id, record), recalled=rank[record.id])


def mark_just_said(
    found: dict[str, MemoryRecord],
    latest: Sequence[MemoryRecord],
    facts: Sequence[Message],
    now: str,
    follows: str | None = None,
) -> None:
    """Add to ``found`` the newest of ``latest`` (all of those stored together), marked
    ``just_said``, when ``facts`` follow them directly: when the facts name the turn they
    follow (``follows``), the newest were stated in it (a question answered between, with
    nothing stored, leaves the statement before it behind); a question is never a
    statement."""
    newest = max(r.created_at or EPOCH for r in latest)
    for record in latest:
        if (
            (record.created_at or EPOCH) == newest
            and followed(record, facts, now)
            and (follows is None or record.turn == follows)
            and not is_question(record.text)
        ):
            found[record.id] = replace(found.get(record.id, record), just_said=True)


def followed(latest: MemoryRecord, facts: Sequence[Message], now: str) -> bool:
    """Whether ``facts`` (stored ``now``) follow ``latest``, the scope's latest statement:
    stored less than :data:`JUST_SAID` before, and in the same conversation when both record
    one. A correction a week later, or in another conversation, is about something else."""
    said, at = latest.created_at, parse_time(now)
    if said is None or at is None or not timedelta(0) <= at - said < JUST_SAID:
        return False
    theirs = {str(f.metadata.get(SOURCE_SESSION_KEY) or "") for f in facts} - {""}
    return not (latest.source_session and theirs and theirs != {latest.source_session})
