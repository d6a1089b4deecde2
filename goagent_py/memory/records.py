"""Long-term memory records: when a memory was said, where it came from, and what became of it.

A stored memory is a message whose metadata carries its record (the store is the one source
of truth; there is no side table):

=============================  ==============================================================
``memory_state``               ``"current"``, ``"superseded"`` or ``"deleted"``
``goagent.created_at``         when it was first stored (ISO 8601, UTC)
``goagent.updated_at``         when its record last changed
``goagent.invalid_at``         when it stopped being true (None while current)
``goagent.superseded_by``      the id of the memory that replaced it (None unless superseded)
``goagent.source_session``     the conversation it came from ("" when unknown)
``goagent.source_message``     the id of the message it came from (a digest when unknown)
``goagent.turn``               the agent's turn it was stated in ("" when unknown)
``goagent.history``            its changes, oldest first (:class:`MemoryChange` as JSON)
=============================  ==============================================================

Consolidation never deletes a row: a replaced fact is marked ``superseded`` (with
``superseded_by``), a retracted one ``deleted``; both keep their text and history, so "where did
I live before?" can still be answered, and every change can be listed. This module is pure
(no I/O): :class:`~goagent_py.memory.long_term.LongTermMemory` reads and writes the records.
An entry without ``memory_state`` (stored before records existed, in any backend) is current.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from goagent_py.memory.base import (
    MEMORY_CREATED_AT_KEY,
    MEMORY_FOLLOWS_KEY,
    MEMORY_FORMERLY,
    MEMORY_INVALID_AT_KEY,
    MEMORY_RECALLED_KEY,
    MEMORY_STATE_KEY,
    MEMORY_TURN_KEY,
)
from goagent_py.messages import Message, ScoredMessage

__all__ = [
    "CREATED_AT_KEY",
    "CURRENT",
    "DELETED",
    "FOLLOWS_KEY",
    "HISTORY_KEY",
    "INVALID_AT_KEY",
    "JUST_SAID",
    "RECALLED_KEY",
    "SOURCE_MESSAGE_KEY",
    "SOURCE_SESSION_KEY",
    "STATE_KEY",
    "SUPERSEDED",
    "SUPERSEDED_BY_KEY",
    "TURN_KEY",
    "UPDATED_AT_KEY",
    "as_present",
    "asks_about_past",
    "ChangeOp",
    "MemoryChange",
    "MemoryRecord",
    "MemoryState",
    "format_time",
    "history_of",
    "parse_time",
    "record_of",
    "state_of",
    "with_change",
]

STATE_KEY = MEMORY_STATE_KEY
CREATED_AT_KEY = MEMORY_CREATED_AT_KEY
INVALID_AT_KEY = MEMORY_INVALID_AT_KEY
UPDATED_AT_KEY = "goagent.updated_at"
SUPERSEDED_BY_KEY = "goagent.superseded_by"
SOURCE_SESSION_KEY = "goagent.source_session"
SOURCE_MESSAGE_KEY = "goagent.source_message"
HISTORY_KEY = "goagent.history"
RECALLED_KEY = MEMORY_RECALLED_KEY
"""The ids of the memories an answer was given (:data:`~goagent_py.memory.base.MEMORY_RECALLED_KEY`;
see :attr:`MemoryRecord.recalled`)."""
TURN_KEY = MEMORY_TURN_KEY
"""The id of the turn a memory was stated in (:data:`~goagent_py.memory.base.MEMORY_TURN_KEY`;
see :attr:`MemoryRecord.turn`)."""
FOLLOWS_KEY = MEMORY_FOLLOWS_KEY
"""The turn the facts handed to ``store`` follow
(:data:`~goagent_py.memory.base.MEMORY_FOLLOWS_KEY`)."""

JUST_SAID = timedelta(minutes=30)
"""How recent the scope's latest memory must be for a new turn to follow it (a correction of
what was "just said"): see :attr:`MemoryRecord.just_said`."""

MemoryState = Literal["current", "superseded", "deleted"]
CURRENT: MemoryState = "current"
SUPERSEDED: MemoryState = MEMORY_FORMERLY
DELETED: MemoryState = "deleted"

ChangeOp = Literal["add", "update", "superseded", "delete", "restored"]
"""What happened to a memory: stored (``add``), stored as the new version of another
(``update``), replaced by a newer one (``superseded``), retracted (``delete``), current again
because the memory that replaced it was forgotten (``restored``)."""


def format_time(moment: datetime) -> str:
    """``moment`` as ISO 8601 in UTC (a naive datetime is taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 string as an aware datetime; None for anything else (old or bad records)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(slots=True, frozen=True, kw_only=True)
class MemoryChange:
    """One change of a memory.

    Attributes:
        op: what happened (see :data:`ChangeOp`).
        at: when (ISO 8601, UTC).
        decider: who decided ("rules", "model", "none", ...).
        source_message: the id of the message that caused it.
        text: the memory's text after the change (for ``superseded``: the new fact's).
        previous: the text before the change ("" for ``add``).
        other_id: the memory replaced (``update``) or replacing (``superseded``), or "".
    """

    op: ChangeOp
    at: str
    decider: str
    source_message: str = ""
    text: str = ""
    previous: str = ""
    other_id: str = ""

    def to_json(self) -> dict[str, str]:
        """The change as JSON data (how it is kept in the record's metadata)."""
        return {
            "op": self.op,
            "at": self.at,
            "decider": self.decider,
            "source_message": self.source_message,
            "text": self.text,
            "previous": self.previous,
            "other_id": self.other_id,
        }

    @classmethod
    def from_json(cls, data: Any) -> MemoryChange | None:
        """The change kept as ``data``; None when it is not one (a hand-edited record)."""
        if not isinstance(data, Mapping) or data.get("op") not in (
            "add",
            "update",
            "superseded",
            "delete",
            "restored",
        ):
            return None
        fields = ("at", "decider", "source_message", "text", "previous", "other_id")
        values = {k: str(data.get(k) or "") for k in fields}
        return cls(op=data["op"], **values)


def history_of(metadata: Mapping[str, Any]) -> tuple[MemoryChange, ...]:
    """The changes kept in a record's metadata, oldest first (unreadable ones skipped)."""
    raw = metadata.get(HISTORY_KEY)
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        return ()
    return tuple(c for c in (MemoryChange.from_json(item) for item in raw) if c is not None)


@dataclass(slots=True, frozen=True, kw_only=True)
class MemoryRecord:
    """A long-term memory with its record (see the module docstring).

    Attributes:
        id: the entry id in the vector store.
        text: what is remembered.
        message: the stored message (its metadata holds the record).
        state: current, superseded or deleted; entries stored before records existed are
            current.
        created_at: when it was stored (None for entries older than records).
        updated_at: when its record last changed.
        invalid_at: when it stopped being true (None while current).
        superseded_by: the id of the memory that replaced it.
        source_session: the conversation it came from.
        source_message: the message it came from.
        turn: the agent's turn it was stated in (:data:`TURN_KEY`; "" when unknown).
        history: its changes, oldest first.
        score: its similarity to the query it was found by (0 when listed).
        just_said: set on a consolidation's candidates only: the memory is the statement
            the new facts follow directly (the scope's latest, stored less than
            :data:`JUST_SAID` before them, in the same conversation when both record one,
            and, when the facts name the turn they follow (:data:`FOLLOWS_KEY`), stated in
            that turn; never a question): what a correction ("Sorry, I meant John.") or
            "That's no longer true." is about. An older fact, one of another conversation, or
            one with a question answered between, is never corrected or retracted by such
            words.
        recalled: set on a consolidation's candidates only: the memory's rank (1 = best)
            among those the answer the new facts follow was given (the facts'
            :data:`RECALLED_KEY`), 0 when it was not one: what "No wait, Madrid." corrects
            after "Where do I live?" was answered from a week-old "I live in Lisbon.".
    """

    id: str
    text: str
    message: Message
    state: MemoryState = CURRENT
    created_at: datetime | None = None
    updated_at: datetime | None = None
    invalid_at: datetime | None = None
    superseded_by: str | None = None
    source_session: str = ""
    source_message: str = ""
    turn: str = ""
    history: tuple[MemoryChange, ...] = field(default=())
    score: float = 0.0
    just_said: bool = False
    recalled: int = 0

    @property
    def is_current(self) -> bool:
        """Whether the memory is still true."""
        return self.state == CURRENT

    def to_json(self) -> dict[str, Any]:
        """The record as JSON data (times as ISO 8601 or None; the history oldest first), as
        ``goagent-py serve``'s ``/api/memories/history`` returns it."""

        def moment(value: datetime | None) -> str | None:
            return format_time(value) if value is not None else None

        return {
            "id": self.id,
            "text": self.text,
            "role": str(self.message.role),
            "state": self.state,
            "created_at": moment(self.created_at),
            "updated_at": moment(self.updated_at),
            "invalid_at": moment(self.invalid_at),
            "superseded_by": self.superseded_by,
            "source_session": self.source_session,
            "source_message": self.source_message,
            "history": [change.to_json() for change in self.history],
        }


def state_of(metadata: Mapping[str, Any]) -> MemoryState:
    """The state kept in ``metadata``; current when absent (entries older than records)."""
    value = metadata.get(STATE_KEY)
    if value == SUPERSEDED:
        return SUPERSEDED
    if value == DELETED:
        return DELETED
    return CURRENT


def record_of(scored: ScoredMessage) -> MemoryRecord:
    """The record of a stored memory found by a search or a listing."""
    meta = scored.message.metadata
    by = meta.get(SUPERSEDED_BY_KEY)
    return MemoryRecord(
        id=scored.id,
        text=scored.message.text,
        message=scored.message,
        state=state_of(meta),
        created_at=parse_time(meta.get(CREATED_AT_KEY)),
        updated_at=parse_time(meta.get(UPDATED_AT_KEY)),
        invalid_at=parse_time(meta.get(INVALID_AT_KEY)),
        superseded_by=by if isinstance(by, str) and by else None,
        source_session=str(meta.get(SOURCE_SESSION_KEY) or ""),
        source_message=str(meta.get(SOURCE_MESSAGE_KEY) or ""),
        turn=str(meta.get(TURN_KEY) or ""),
        history=history_of(meta),
        score=scored.score,
    )


def with_change(
    metadata: Mapping[str, Any],
    change: MemoryChange,
    **fields: Any,
) -> dict[str, Any]:
    """``metadata`` with ``change`` appended to its history and ``fields`` set (record keys)."""
    history = [c.to_json() for c in history_of(metadata)]
    return {**metadata, **fields, HISTORY_KEY: [*history, change.to_json()]}


_PAST = re.compile(
    r"\b(?:before|previously|formerly|former|used to|earlier|originally|at first|in the past|"
    r"last (?:year|time)|old (?:address|job|number|phone|car|name|home|employer|flat|house)|"
    r"prior|did i (?:use to|live|work|have|drive))\b",
    re.IGNORECASE,
)


def asks_about_past(text: str) -> bool:
    """Whether ``text`` asks about how things were ("Where did I live before?"), so recall
    should include memories a newer fact replaced (English cues)."""
    return bool(_PAST.search(text))


_PRESENT = [
    (re.compile(r"\bdid (i|we) use to\b", re.IGNORECASE), r"do \1"),
    (re.compile(r"\b(i|we) used to\b", re.IGNORECASE), r"\1"),
    (re.compile(r"\bdid (i|we)\b", re.IGNORECASE), r"do \1"),
    (re.compile(r"\bwas (my|our)\b", re.IGNORECASE), r"is \1"),
    (re.compile(r"\bwere (my|our)\b", re.IGNORECASE), r"are \1"),
    (re.compile(r"\b(my|our) (?:old|former|previous) ", re.IGNORECASE), r"\1 "),
]
_CUES = re.compile(
    r",?\s*\b(?:before|previously|formerly|earlier|originally|at first|in the past|"
    r"last (?:year|time))\b",
    re.IGNORECASE,
)


def as_present(question: str) -> str:
    """A question about the past asked about the present, to search with: "Where did I live
    before?" becomes "Where do I live?" (a past-tense question with "before" scores under 0.3
    against "I live in Lisbon." with the local MiniLM embedder; the present one 0.47)."""
    text = question
    for pattern, replacement in _PRESENT:
        text = pattern.sub(replacement, text)
    text = _CUES.sub("", text)
    return re.sub(r"\s+([?.!])", r"\1", text).strip() or question
