"""The entries long-term memory writes: a memory's id, its record, and what a consolidation's
decisions write (new memories, and the records of those they replace or retract, marked, never
deleted).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from goagent_py.memory._provenance import PROVENANCE_KEY
from goagent_py.memory.consolidation import Decision
from goagent_py.memory.records import (
    CREATED_AT_KEY,
    CURRENT,
    DELETED,
    HISTORY_KEY,
    INVALID_AT_KEY,
    SOURCE_MESSAGE_KEY,
    SOURCE_SESSION_KEY,
    STATE_KEY,
    SUPERSEDED,
    SUPERSEDED_BY_KEY,
    TURN_KEY,
    UPDATED_AT_KEY,
    MemoryChange,
    MemoryRecord,
    MemoryState,
    with_change,
)
from goagent_py.memory.vector._common import SESSION_KEY
from goagent_py.messages import Message, Role, TextBlock, messages_to_json

__all__ = [
    "applied",
    "change_of",
    "fact_entry",
    "marked",
    "message_digest",
    "new_record",
    "reworded",
    "source_message",
]


def message_digest(message: Message) -> str:
    """The hex SHA-256 of ``message`` as JSON: the same message always gives the same digest.

    The turn it was stated in (:data:`TURN_KEY`) is not part of it: a fact said again in
    another turn is the same memory (its id, and the history a forgotten one continues)."""
    if TURN_KEY in message.metadata:
        metadata = {k: v for k, v in message.metadata.items() if k != TURN_KEY}
        message = replace(message, metadata=metadata)
    return hashlib.sha256(messages_to_json([message])).hexdigest()


def source_message(message: Message) -> str:
    """The id of the message a memory comes from: given in its metadata, else its digest."""
    value = message.metadata.get(SOURCE_MESSAGE_KEY)
    return value if isinstance(value, str) and value else message_digest(message)[:16]


def new_record(
    message: Message, now: str, change: MemoryChange, history: Sequence[MemoryChange] = ()
) -> dict[str, Any]:
    """The record keys of a memory stored ``now`` (see :mod:`goagent_py.memory.records`)."""
    return {
        STATE_KEY: CURRENT,
        CREATED_AT_KEY: now,
        UPDATED_AT_KEY: now,
        INVALID_AT_KEY: None,
        SUPERSEDED_BY_KEY: None,
        SOURCE_SESSION_KEY: str(message.metadata.get(SOURCE_SESSION_KEY) or ""),
        SOURCE_MESSAGE_KEY: source_message(message),
        HISTORY_KEY: [*(c.to_json() for c in history), change.to_json()],
    }


def fact_entry(
    message: Message,
    session: str,
    now: str,
    change: MemoryChange,
    history: Sequence[MemoryChange],
) -> Message:
    """A user fact as stored by consolidation (one entry, no chunking)."""
    metadata = {
        **message.metadata,
        **new_record(message, now, change, history),
        SESSION_KEY: session,
        PROVENANCE_KEY: "user",
    }
    return Message(Role.USER, list(message.content), metadata=metadata)


def reworded(fact: Message, text: str) -> Message:
    """``fact`` said as ``text`` (a decider's merged or canonical wording)."""
    metadata = {**fact.metadata, SOURCE_MESSAGE_KEY: source_message(fact)}
    return Message(Role.USER, [TextBlock(text)], metadata=metadata)


def marked(
    old: MemoryRecord, change: MemoryChange, state: MemoryState, now: str, *, by: str | None = None
) -> Message:
    """``old``'s message with its record marked ``state`` (kept, never deleted)."""
    fields = {STATE_KEY: state, UPDATED_AT_KEY: now, INVALID_AT_KEY: now, SUPERSEDED_BY_KEY: by}
    m = old.message
    return Message(
        m.role,
        list(m.content),
        tool_call_id=m.tool_call_id,
        is_error=m.is_error,
        metadata=with_change(m.metadata, change, **fields),
    )


def change_of(op: Any, now: str, message: Message, *, decider: str, **fields: str) -> MemoryChange:
    return MemoryChange(
        op=op, at=now, decider=decider, source_message=source_message(message), **fields
    )


def applied(
    decisions: list[Decision],
    facts: list[Message],
    candidates: dict[str, MemoryRecord],
    session: str,
    now: str,
    decider: str,
    past: Mapping[str, MemoryRecord] | None = None,
) -> list[tuple[str, Message]]:
    """The entries ``decisions`` write: new memories, and the records they mark; a new
    memory written over a ``past`` one (same words, same source) continues its history."""
    past = past or {}
    out: list[tuple[str, Message]] = []
    for d in decisions:
        fact = facts[d.fact]
        if d.op == "NOOP":
            continue
        if d.op == "DELETE":
            old = candidates[d.target]
            change = change_of("delete", now, fact, decider=decider, previous=old.text)
            out.append((old.id, marked(old, change, DELETED, now)))
            continue
        text = d.text.strip() or fact.text
        message = fact if text == fact.text else reworded(fact, text)
        id = f"{session}:{message_digest(message)}:0"
        if d.op == "ADD":
            if id in candidates:
                continue  # stored already, under the same id: its record stays as it is
            change = change_of("add", now, fact, decider=decider, text=text)
            before = past[id].history if id in past else ()
            out.append((id, fact_entry(message, session, now, change, before)))
            continue
        old = candidates[d.target]
        if id == old.id or text == old.text:
            if text != fact.text:
                # An UPDATE that keeps the old words drops the fact (a small model's
                # mistake): the fact is added as said instead, nothing lost.
                change = change_of("add", now, fact, decider=decider, text=fact.text)
                plain = f"{session}:{message_digest(fact)}:0"
                out.append((plain, fact_entry(fact, session, now, change, ())))
            continue  # the same words again: nothing changes
        update = change_of(
            "update", now, fact, decider=decider, text=text, previous=old.text, other_id=old.id
        )
        out.append((id, fact_entry(message, session, now, update, old.history)))
        replaced = change_of(
            "superseded", now, fact, decider=decider, text=text, previous=old.text, other_id=id
        )
        out.append((old.id, marked(old, replaced, SUPERSEDED, now, by=id)))
    return out
