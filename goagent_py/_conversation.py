"""Which stored conversation a short-term memory reads and writes, as a key two memories share
exactly when they are one conversation (as far as it can be told): a server that gives each
client its own conversation refuses a memory another client's conversation already holds
(docs/a2a.md, "Serve an agent")."""

from __future__ import annotations

import hashlib
import os
import re
from collections import OrderedDict
from collections.abc import Hashable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from goagent_py.errors import ConfigurationError

__all__ = [
    "HOLDING",
    "ClientAgent",
    "ConversationOwners",
    "client_agent",
    "client_scope",
    "client_session_id",
    "conversation_key",
    "held_with",
    "recall_key",
    "unkeyable",
]

HOLDING: ContextVar[frozenset[Hashable]] = ContextVar(
    "goagent_py_conversations", default=frozenset()
)
"""The conversations of the runs an agent-as-tool call is inside (set by the call around its
child run): a child whose memory keeps one of them would write its own turns into a parent's
record, in the middle of the parent's turn."""


def conversation_key(memory: Any) -> Hashable:
    """The conversation ``memory`` keeps: the same memory or storage object, a SQLite file and
    session id, or a PostgreSQL pool, table and session id give the same key. A storage of
    another kind is known by its identity only."""
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


# A client's id as it may appear in a stored session id and an agent name; anything else
# (long, control characters, separators) is named by its digest.
_PLAIN_CLIENT = re.compile(r"[A-Za-z0-9_.:-]{1,96}")


def _digest(client: str) -> str:
    return hashlib.sha256(client.encode("utf-8", "surrogatepass")).hexdigest()


def client_session_id(base: str, protocol: str, client: str) -> str:
    """The stored session id of ``client``'s conversation beside the served one ``base``:
    ``<base>/<protocol>/<client>``, the client's id replaced by its digest when it could not
    be a session id or would be unreadable (any client id is accepted, none maps onto
    another's), and a base too long to leave room for it by its digest too."""
    plain = _PLAIN_CLIENT.fullmatch(client) and not client.startswith("sha256-")
    if len(base.encode("utf-8", "surrogatepass")) > 512:  # session ids hold 1,024 bytes
        base = "sha256-" + _digest(base)
    return f"{base}/{protocol}/{client if plain else 'sha256-' + _digest(client)}"


def client_scope(name: str, protocol: str, client: str) -> str:
    """The long-term memory scope (the agent name) of ``client`` of the agent ``name``."""
    return f"{(name or 'agent')[:80]}.{protocol}-{_digest(client)[:32]}"


def _keyed(storage: Any) -> str | None:
    """How a storage of another conversation beside ``storage`` is made, or None when its
    kind cannot name another conversation."""
    from goagent_py.memory.storage.in_memory import InMemoryStorage
    from goagent_py.memory.storage.sqlite import SQLiteStorage

    if type(storage) is InMemoryStorage:
        return "memory"
    if type(storage) is SQLiteStorage:
        return "sqlite"
    return "for_session" if callable(getattr(storage, "for_session", None)) else None


def _keyed_storage(storage: Any, session_id: str) -> tuple[Any, bool]:
    """A storage of ``session_id`` of the kind of ``storage`` (one :func:`unkeyable`
    accepts), and whether the caller closes it."""
    kind = _keyed(storage)
    if kind == "memory":
        return type(storage)(), False
    if kind == "sqlite":
        return type(storage)(storage.path, session_id=session_id, timeout=storage.timeout), True
    if kind == "for_session":  # PostgresStorage: the same pool and tables
        return storage.for_session(session_id), False
    raise ConfigurationError(  # refused at construction, by unkeyable
        f"a {type(storage).__name__} cannot name another conversation: pass a factory"
    )


def unkeyable(memory: Any) -> str | None:
    """Why ``memory`` cannot give each client a conversation of its own, or None if it can."""
    from goagent_py.memory.short_term import ShortTermMemory

    if type(memory) is not ShortTermMemory:
        return f"its short-term memory is a {type(memory).__name__}, not a ShortTermMemory"
    if _keyed(memory.storage) is not None:
        return None
    return (
        f"its storage, a {type(memory.storage).__name__}, cannot name another conversation "
        "(InMemoryStorage, SQLiteStorage and any storage with for_session(session_id) can)"
    )


@dataclass(slots=True)
class ClientAgent:
    """The agent of one client of a served agent, and what to close when the client goes."""

    agent: Any
    storage: Any = None  # a storage opened for this client (closed with it)

    async def aclose(self) -> None:
        """Close what was opened for this client (never the served agent's own parts)."""
        storage, self.storage = self.storage, None
        if storage is not None:
            await storage.aclose()


def client_agent(agent: Any, client: str, *, protocol: str, shared_memory: bool) -> ClientAgent:
    """The served ``agent`` as ``client`` (an A2A context, an MCP session) gets it: its
    short-term memory keeps the client's own conversation, in the served memory's storage
    kind (``<session>/<protocol>/<client>`` in the same file, pool or process), with the
    served memory's window policy; its long-term memory recalls the client's own facts only
    (the agent is named :func:`client_scope`), unless ``shared_memory``. Call
    :func:`unkeyable` first: a memory it refuses raises here."""
    settings: dict[str, Any] = {}
    opened = None
    memory = agent.options.short_term_memory
    if memory is not None:
        from goagent_py.memory.short_term import ShortTermMemory

        base = getattr(memory.storage, "session_id", None)
        session_id = client_session_id(
            base if isinstance(base, str) else "default", protocol, client
        )
        storage, owned = _keyed_storage(memory.storage, session_id)
        opened = storage if owned else None
        settings["short_term_memory"] = ShortTermMemory(storage, policy=memory.policy)
    if agent.options.long_term_memory is not None and not shared_memory:
        settings["name"] = client_scope(agent.name, protocol, client)
    return ClientAgent(agent.replace(**settings) if settings else agent, opened)


def recall_key(agent: Any) -> Hashable | None:
    """The long-term memory scope ``agent`` recalls from (its memory and name), or None."""
    memory = agent.options.long_term_memory
    return None if memory is None else ("recall", id(memory), agent.name)
