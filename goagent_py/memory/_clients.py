"""A conversation and a long-term memory scope of each client of a served agent (an A2A context,
an MCP session), in the served memory's storage kind (docs/a2a.md and docs/mcp.md, "One
conversation per client"). The key that tells two conversations apart is the core's
(goagent_py/_conversation.py); this is the memory side: which storages can name another
conversation, and the client's memory made beside the served one."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from goagent_py.errors import ConfigurationError
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage.in_memory import InMemoryStorage
from goagent_py.memory.storage.sqlite import SQLiteStorage

__all__ = [
    "ClientAgent",
    "client_agent",
    "client_scope",
    "client_session_id",
    "recall_key",
    "unkeyable",
]


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
    (the agent is named :func:`client_scope`), unless ``shared_memory``; its tools, their
    dispatch (circuit breakers, rate limits) and MCP connections are the served agent's. Call
    :func:`unkeyable` first: a memory it refuses raises here."""
    settings: dict[str, Any] = {}
    opened = None
    memory = agent.options.short_term_memory
    if memory is not None:
        base = getattr(memory.storage, "session_id", None)
        session_id = client_session_id(
            base if isinstance(base, str) else "default", protocol, client
        )
        storage, owned = _keyed_storage(memory.storage, session_id)
        opened = storage if owned else None
        settings["short_term_memory"] = ShortTermMemory(storage, policy=memory.policy)
    if agent.options.long_term_memory is not None and not shared_memory:
        settings["name"] = client_scope(agent.name, protocol, client)
    # Its tools, their circuit breakers and rate limits, its MCP connections: the served
    # agent's, whichever client calls (one server's breaker, one server's limit).
    return ClientAgent(agent._sharing_tools(**settings) if settings else agent, opened)


def recall_key(agent: Any) -> Hashable | None:
    """The long-term memory scope ``agent`` recalls from (its memory and name), or None."""
    memory = agent.options.long_term_memory
    return None if memory is None else ("recall", id(memory), agent.name)
