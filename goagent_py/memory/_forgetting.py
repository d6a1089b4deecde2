"""What forgetting memories does to the ones left: the chain of replaced facts, and no trace.

:meth:`~goagent_py.memory.long_term.LongTermMemory.forget` deletes entries for good. The others
of the scope may name them: a fact a forgotten one replaced is marked ``superseded`` by it, and
histories quote its text and id. Forgetting is "as if it had never been said", so:

* the memory a forgotten one replaced takes its place in the chain: current again when the
  forgotten one was current ("I live in Lisbon." comes back when "I live in Porto." is
  forgotten), replaced by what replaced the forgotten one when that was replaced in turn
  (Lisbon -> Porto -> Madrid, forget Porto: Lisbon was replaced by Madrid), still replaced, by
  nothing known, when the forgotten one had been retracted (the user lives in neither);
* of several memories the forgotten one replaced (a value said again after another: Porto,
  Madrid, Porto), the one replaced last takes its place, and the others are replaced by it;
* no history keeps the forgotten texts or ids (blanked where quoted).

Pure: :class:`~goagent_py.memory.long_term.LongTermMemory` reads the entries and writes back
what :func:`after_forgetting` returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from goagent_py.memory.records import (
    CURRENT,
    HISTORY_KEY,
    INVALID_AT_KEY,
    STATE_KEY,
    SUPERSEDED,
    SUPERSEDED_BY_KEY,
    UPDATED_AT_KEY,
    MemoryChange,
    MemoryRecord,
    record_of,
)
from goagent_py.messages import Message, ScoredMessage

__all__ = ["after_forgetting"]

_EPOCH = datetime.min.replace(tzinfo=UTC)


def _heir(gone: str, by_id: dict[str, MemoryRecord], ids: set[str]) -> tuple[str, str | None]:
    """What took the place of the forgotten ``gone``, following forgotten links: its state
    (current, superseded or deleted) and, when superseded, by which memory left (None when
    that is unknown or forgotten too)."""
    seen: set[str] = set()
    record = by_id.get(gone)
    while record is not None and record.id not in seen:
        seen.add(record.id)
        if record.state != SUPERSEDED:
            return record.state, None
        after = record.superseded_by
        if after is None:
            return SUPERSEDED, None
        if after not in ids:
            return SUPERSEDED, after
        record = by_id.get(after)
    return SUPERSEDED, None


def after_forgetting(
    listed: Sequence[ScoredMessage], ids: set[str], texts: set[str], now: str
) -> list[tuple[str, Message]]:
    """The entries of ``listed`` (the scope's, before) to rewrite once ``ids`` are deleted:
    each memory a forgotten one replaced, relinked (see the module docstring), and every
    history quoting a forgotten text (``texts``) or id, blanked there."""
    records = [record_of(s) for s in listed]
    by_id = {r.id: r for r in records}
    # The memories each forgotten one replaced, the one replaced last first.
    orphans: dict[str, list[MemoryRecord]] = {}
    for record in records:
        if record.id not in ids and record.state == SUPERSEDED and record.superseded_by in ids:
            orphans.setdefault(record.superseded_by, []).append(record)
    relinked: dict[str, tuple[str, str | None, str]] = {}  # id -> state, by, its text
    for gone, replaced in orphans.items():
        replaced.sort(key=lambda r: (r.invalid_at or _EPOCH, r.id), reverse=True)
        state, by = _heir(gone, by_id, ids)
        heir, *older = replaced
        if state == CURRENT:
            relinked[heir.id] = (CURRENT, None, "")
        else:
            after = by_id[by].text if by is not None and by in by_id else ""
            relinked[heir.id] = (SUPERSEDED, by, after)
        for record in older:
            relinked[record.id] = (SUPERSEDED, heir.id, heir.text)
    out: list[tuple[str, Message]] = []
    for record in records:
        if record.id in ids:
            continue
        quoted = any({c.text, c.previous} & texts or c.other_id in ids for c in record.history)
        if not quoted and record.id not in relinked:
            continue
        history = [
            replace(
                c,
                text="" if c.text in texts else c.text,
                previous="" if c.previous in texts else c.previous,
                other_id="" if c.other_id in ids else c.other_id,
            )
            for c in record.history
        ]
        m = record.message
        metadata = dict(m.metadata)
        if record.id in relinked:
            state, by, after = relinked[record.id]
            metadata[UPDATED_AT_KEY] = now
            metadata[SUPERSEDED_BY_KEY] = by
            if state == CURRENT:
                metadata[STATE_KEY] = CURRENT
                metadata[INVALID_AT_KEY] = None
                history.append(
                    MemoryChange(op="restored", at=now, decider="forget", text=record.text)
                )
            elif by is not None:
                history.append(
                    MemoryChange(op="superseded", at=now, decider="forget", text=after, other_id=by)
                )
        metadata[HISTORY_KEY] = [c.to_json() for c in history]
        out.append(
            (
                record.id,
                Message(
                    m.role,
                    list(m.content),
                    tool_call_id=m.tool_call_id,
                    is_error=m.is_error,
                    metadata=metadata,
                ),
            )
        )
    return out
