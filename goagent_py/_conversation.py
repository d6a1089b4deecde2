"""Which stored conversation a short-term memory reads and writes, as a key two memories share
exactly when they are one conversation (as far as it can be told): a server that gives each
client its own conversation refuses a memory another client's conversation already holds
(docs/a2a.md, "Serve an agent")."""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Hashable
from contextvars import ContextVar
from typing import Any

__all__ = ["HOLDING", "ConversationOwners", "conversation_key", "held_with"]

HOLDING: ContextVar[frozenset[Hashable]] = ContextVar(
    "goagent_py_conversations", default=frozenset()
)
"""The conversations of the runs an agent-as-tool call is inside (set by the call around its
child run): a child whose memory keeps one of them would write its own turns into a parent's
record, in the middle of the parent's turn."""


def conversation_key(memory: Any) -> Hashable:
    """The conversation ``memory`` keeps: the same memory or storage object, a SQLite file and
    session id, or a PostgreSQL pool, table and session id give the same key. A storage of
    another kind is known by its ``conversation_key`` attribute (any hashable value naming its
    conversation: two storages of its type with equal keys are one conversation), or else by
    its identity only (docs/sessions.md "A storage of your own")."""
    storage = getattr(memory, "storage", None)
    if storage is None:
        return ("memory", id(memory))
    kind = type(storage).__name__
    session_id = getattr(storage, "session_id", None)
    if kind == "SQLiteStorage" and isinstance(session_id, str):
        path = str(getattr(storage, "path", ""))
        if path not in ("", ":memory:") and not path.startswith("file:"):
            return ("sqlite", os.path.realpath(path), session_id)
    if kind == "PostgresStorage" and isinstance(session_id, str):
        pool = getattr(storage, "_pool", None)
        return (
            "postgres",
            id(pool),
            getattr(storage, "schema", ""),
            getattr(storage, "table", ""),
            session_id,
        )
    named = getattr(storage, "conversation_key", None)
    if named is not None and not callable(named):
        try:
            hash(named)
        except TypeError:
            pass
        else:
            return ("named", f"{type(storage).__module__}.{type(storage).__qualname__}", named)
    return ("storage", id(storage))


def held_with(memory: Any) -> frozenset[Hashable]:
    """The conversations held where this is called (see :data:`HOLDING`), with ``memory``'s."""
    held = HOLDING.get()
    return held if memory is None else held | {conversation_key(memory)}


class ConversationOwners:
    """Which client (an A2A context, an MCP session) each conversation belongs to, for a server
    that gives every client a conversation of its own: a memory whose conversation another
    client holds is refused (one memory for every client let each read the others' messages).
    An owner is kept past its client's end, as its stored conversation is; at most ``limit``
    are kept, the least recently claimed forgotten first."""

    def __init__(self, limit: int = 65536) -> None:
        self._owners: OrderedDict[Hashable, str] = OrderedDict()
        self._limit = limit

    def claim(self, client: str, memory: Any) -> str | None:
        """Bind ``memory``'s conversation to ``client``; the other client that holds it
        already (the caller refuses the memory then), or None (no memory: the client's session
        keeps its transcript itself)."""
        return None if memory is None else self.claim_key(client, conversation_key(memory))

    def claim_key(self, client: str, key: Hashable) -> str | None:
        """Bind ``key`` (a conversation or a long-term memory scope) to ``client``; the other
        client that holds it already, or None."""
        owner = self._owners.get(key)
        if owner is not None and owner != client:
            return owner
        self._owners[key] = client
        self._owners.move_to_end(key)
        while len(self._owners) > self._limit:
            self._owners.popitem(last=False)
        return None
