"""What answered each message an A2A context sent, so a message sent again (the same
``messageId`` in the same context: a client retrying after a network error, a second
"approved") is answered with the same task instead of starting another turn (docs/a2a.md, "A
message sent again").

A record names the task and how its run ended (its state, its answer, its note): it is kept
where the context's conversation is kept, beside it in the served memory's storage
(``<session>/a2a-sent/<context>``: the same SQLite file, the same PostgreSQL tables), so it
outlives a restart as the conversation does; in this process otherwise (an in-memory
storage, no short-term memory, a factory's agents). At most :data:`KEPT` records per context,
the oldest dropped first; a context's records are deleted when the context is forgotten.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from goagent_py.memory._clients import client_key, keyed_session_id, keyed_storage, unkeyable
from goagent_py.memory.storage.in_memory import InMemoryStorage
from goagent_py.messages import Message, Role, TextBlock

__all__ = ["KEPT", "Sent", "SentMessages"]

KEPT = 32
"""Records kept per context: a client sends a message again soon after it, not 32 later."""

_RECORD_KEY = "a2a_sent"
_PROTOCOL = "a2a-sent"


@dataclass(frozen=True, slots=True)
class Sent:
    """How the run of a message ended: the task's id, its state (the SDK's ``TaskState``
    number), its answer and its status note."""

    task_id: str
    state: int
    answer: str
    note: str


class SentMessages:
    """The records of the messages the contexts of one served agent sent (see the module)."""

    def __init__(self, agent: Any) -> None:
        memory = getattr(getattr(agent, "options", None), "short_term_memory", None)
        stored = (
            memory is not None
            and unkeyable(memory) is None
            and type(memory.storage) is not InMemoryStorage
        )
        self._storage: Any = memory.storage if stored and memory is not None else None
        base = getattr(self._storage, "session_id", None)
        self._base = base if isinstance(base, str) else "default"
        # In this process (nothing to keep them beside): context key -> its storage.
        self._here: OrderedDict[str, InMemoryStorage] = OrderedDict()
        self._lock = asyncio.Lock()  # one read-and-rewrite of a context's records at a time

    def _of(self, key: str) -> tuple[Any, bool]:
        if self._storage is None:
            found = self._here.get(key)
            if found is None:
                found = self._here[key] = InMemoryStorage()
            return found, False
        return keyed_storage(self._storage, keyed_session_id(self._base, _PROTOCOL, key))

    async def _read(self, key: str) -> list[Message]:
        if self._storage is None and key not in self._here:
            return []
        storage, owned = self._of(key)
        try:
            loaded: list[Message] = await storage.load()
            return loaded
        finally:
            if owned:
                await storage.aclose()

    async def find(self, context_id: str, message_id: str) -> Sent | None:
        """The record of ``message_id`` sent in ``context_id``, or None."""
        for message in reversed(await self._read(client_key(context_id))):
            record = message.metadata.get(_RECORD_KEY)
            if isinstance(record, dict) and record.get("message_id") == message_id:
                return Sent(
                    str(record["task_id"]),
                    int(record["state"]),
                    str(record["answer"]),
                    str(record["note"]),
                )
        return None

    async def keep(self, context_id: str, message_id: str, sent: Sent) -> None:
        """Record how ``message_id``'s run in ``context_id`` ended."""
        record = {
            "message_id": message_id,
            "task_id": sent.task_id,
            "state": sent.state,
            "answer": sent.answer,
            "note": sent.note,
        }
        entry = Message(
            role=Role.USER, content=[TextBlock(message_id)], metadata={_RECORD_KEY: record}
        )
        key = client_key(context_id)
        async with self._lock:
            storage, owned = self._of(key)
            try:
                kept = await storage.load()
                if len(kept) < KEPT:
                    await storage.append([entry])
                else:  # the oldest go: rewritten as the newest KEPT
                    await storage.clear()
                    await storage.append([*kept[len(kept) - KEPT + 1 :], entry])
            finally:
                if owned:
                    await storage.aclose()

    async def forget(self, key: str) -> None:
        """Delete the records of the context ``key`` (:func:`client_key`)."""
        async with self._lock:
            if self._storage is None:
                self._here.pop(key, None)
                return
            storage, owned = self._of(key)
            try:
                await storage.clear()
            finally:
                if owned:
                    await storage.aclose()

    async def stored(self) -> list[str]:
        """The keys of the contexts with records kept in the storage (met before a restart)."""
        listing = getattr(self._storage, "list_sessions", None)
        if not callable(listing):
            return []
        prefix = keyed_session_id(self._base, _PROTOCOL, "")
        return [s[len(prefix) :] for s in await listing() if s.startswith(prefix)]
