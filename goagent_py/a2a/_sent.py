"""What answered each message an A2A context sent, so a message sent again (the same
``messageId`` in the same context: a client retrying after a network error, a second
"approved") is answered with the same task instead of starting another turn (docs/a2a.md, "A
message sent again").

A record names the task and how its run ended (its state, its answer, its note): it is kept
where the context's conversation is kept, beside it in the served memory's storage
(``<session>/a2a-sent/<context>``: the same SQLite file, the same PostgreSQL tables), so it
outlives a restart as the conversation does; in this process otherwise (an in-memory
storage, no short-term memory, a factory's agents). At least the last :data:`KEPT` records
of each context are kept, the oldest dropped first; a context's records are deleted when the
context is forgotten.

A message being answered is claimed where its record will be (:meth:`SentMessages.claim`),
so a second server on the same storage (another worker process) sent the same message waits
for the first one's answer instead of running it again: in SQLite, the run hold
(``hold_run()``) of a name of its own, ``<session>/a2a-claim/<context>/<message digest>``,
a byte-range lock the system lets go of when its holder dies; in PostgreSQL, a lease
(``lease()``) on one of a fixed set of names, which a killed worker's claim holds for at most
its ``ttl`` (30 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from goagent_py.errors import SessionBusyError
from goagent_py.memory._clients import client_key, keyed_session_id, keyed_storage, unkeyable
from goagent_py.memory.storage.in_memory import InMemoryStorage
from goagent_py.messages import Message, Role, TextBlock

__all__ = ["KEPT", "Sent", "SentMessages", "claim_wait"]

KEPT = 32
"""Records kept per context at least (up to twice as many before the oldest are dropped): a
client sends a message again soon after it, not 32 messages later."""

_RECORD_KEY = "a2a_sent"
_OPEN = 64  # storages of records kept open (SQLite: one connection each)


def _digest(message_id: str) -> str:
    """How a record names its message: a client's id may be long, or any text."""
    return hashlib.sha256(message_id.encode("utf-8", "surrogatepass")).hexdigest()


_PROTOCOL = "a2a-sent"
_CLAIMS = "a2a-claim"
# A claim in a storage with leases (PostgreSQL) is one of this many lease rows per served
# session (a lease's row is never deleted): two messages of one slot wait for each other.
_LEASE_SLOTS = 1 << 16
_LEASE_TTL = 30.0  # how long a killed worker's claim outlives it (seconds)


async def claim_wait(attempt: int) -> None:
    """The pause before asking again for a message another server is answering (``attempt``
    pauses so far): 20 ms doubling to 1 s; a module seam, read at each use (the tests of
    workers replace it to be told a server waits)."""
    await asyncio.sleep(min(0.02 * 2**attempt, 1.0))


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
        # The storages of the contexts used last, open (opening a SQLite one per message cost
        # ~10 ms at load 11), and whether this closes them; the least recently used closed.
        self._open: OrderedDict[str, tuple[Any, bool]] = OrderedDict()
        # One use of a context's records at a time (a rewrite is read then write; a storage
        # in use is never closed past the limit); other contexts' go on meanwhile.
        self._locks: dict[str, asyncio.Lock] = {}

    def _lock(self, key: str) -> asyncio.Lock:
        found = self._locks.get(key)
        if found is None:
            found = self._locks[key] = asyncio.Lock()
        return found

    async def _of(self, key: str) -> Any:
        """The storage of ``key``'s records (call it holding ``key``'s lock)."""
        if self._storage is None:
            found = self._here.get(key)
            if found is None:
                found = self._here[key] = InMemoryStorage()
            return found
        opened = self._open.pop(key, None)
        if opened is None:
            session_id = keyed_session_id(self._base, _PROTOCOL, key)
            opened = keyed_storage(self._storage, session_id)
        self._open[key] = opened
        while len(self._open) > _OPEN:
            idle = [k for k in self._open if k != key and not self._lock(k).locked()]
            if not idle:
                break
            old, owned = self._open.pop(idle[0])
            self._locks.pop(idle[0], None)
            if owned:
                await old.aclose()
        return opened[0]

    async def _read(self, key: str) -> list[Message]:
        async with self._lock(key):
            if self._storage is None and key not in self._here:
                return []
            loaded: list[Message] = await (await self._of(key)).load()
            return loaded

    async def aclose(self) -> None:
        """Close the storages opened here (the app's shutdown)."""
        opened, self._open = list(self._open.values()), OrderedDict()
        for storage, owned in opened:
            if owned:
                await storage.aclose()

    async def claim(self, context_id: str, message_id: str) -> contextlib.AsyncExitStack:
        """Claim the answering of ``message_id`` in ``context_id`` where its record is kept,
        waiting while another server on the same storage holds it (it is answering it: its
        record is then there once the claim is free); closing the stack lets go. In this
        process only (an empty stack) when the records are (the caller's own claim), or when
        the storage has neither ``lease()`` (PostgreSQL's) nor ``hold_run()``.

        Raises:
            MemoryStoreError: the storage failed (its database is down).
        """
        stack = contextlib.AsyncExitStack()
        if self._storage is None:
            return stack
        key, digest = client_key(context_id), _digest(message_id)
        hold: Callable[[], contextlib.AbstractAsyncContextManager[object]] | None
        lease = getattr(self._storage, "lease", None)
        if callable(lease):
            # PostgreSQL: a lease row (no pooled connection pinned for the run, which holds one
            # for its conversation already), in one of _LEASE_SLOTS rows per served session.
            slot = int(_digest(f"{key}\x1f{digest}")[:8], 16) % _LEASE_SLOTS
            name = keyed_session_id(self._base, _CLAIMS, f"slot-{slot}")
            hold = functools.partial(lease, name, wait=False, ttl=_LEASE_TTL)
        else:
            name = keyed_session_id(self._base, _CLAIMS, f"{key}/{digest[:32]}")
            storage, owned = keyed_storage(self._storage, name)
            if owned:
                stack.push_async_callback(storage.aclose)
            found = getattr(storage, "hold_run", None)
            hold = found if callable(found) else None
        try:
            attempt = 0
            while hold is not None:
                try:
                    await stack.enter_async_context(hold())
                    break
                except SessionBusyError:  # another server answers it: its record comes
                    await claim_wait(attempt)
                    attempt += 1
        except BaseException:
            await stack.aclose()
            raise
        return stack

    async def find(self, context_id: str, message_id: str) -> Sent | None:
        """The record of ``message_id`` sent in ``context_id``, or None."""
        named = _digest(message_id)
        for message in reversed(await self._read(client_key(context_id))):
            record = message.metadata.get(_RECORD_KEY)
            if not isinstance(record, dict) or record.get("message") != named:
                continue
            try:
                return Sent(
                    str(record["task_id"]),
                    int(record["state"]),
                    str(record["answer"]),
                    str(record["note"]),
                )
            except (KeyError, TypeError, ValueError):  # not a record of ours: none
                return None
        return None

    async def keep(self, context_id: str, message_id: str, sent: Sent) -> None:
        """Record how ``message_id``'s run in ``context_id`` ended."""
        named = _digest(message_id)
        record = {
            "message": named,
            "task_id": sent.task_id,
            "state": sent.state,
            "answer": sent.answer,
            "note": sent.note,
        }
        entry = Message(role=Role.USER, content=[TextBlock(named)], metadata={_RECORD_KEY: record})
        key = client_key(context_id)
        async with self._lock(key):
            storage = await self._of(key)
            kept = await storage.load()
            if len(kept) < 2 * KEPT:
                await storage.append([entry])
            else:  # the oldest go, every KEPT records (a rewrite is two writes)
                await storage.clear()
                await storage.append([*kept[len(kept) - KEPT + 1 :], entry])

    async def forget(self, key: str) -> None:
        """Delete the records of the context ``key`` (:func:`client_key`)."""
        async with self._lock(key):
            if self._storage is None:
                self._here.pop(key, None)
            else:
                await (await self._of(key)).clear()
                storage, owned = self._open.pop(key)
                if owned:
                    await storage.aclose()
        self._locks.pop(key, None)

    async def stored(self) -> list[str]:
        """The keys of the contexts with records kept in the storage (met before a restart)."""
        listing = getattr(self._storage, "list_sessions", None)
        if not callable(listing):
            return []
        prefix = keyed_session_id(self._base, _PROTOCOL, "")
        return [s[len(prefix) :] for s in await listing() if s.startswith(prefix)]
