"""A conversation and a long-term memory scope of each client of a served agent (an A2A context,
an MCP session), in the served memory's storage kind (docs/a2a.md and docs/mcp.md, "One
conversation per client"). The key that tells two conversations apart is the core's
(goagent_py/_conversation.py); this is the memory side: which storages can name another
conversation, and the client's memory made beside the served one."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any

from goagent_py.errors import ConfigurationError, SessionBusyError
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage.in_memory import InMemoryStorage
from goagent_py.memory.storage.sqlite import SQLiteStorage

__all__ = [
    "CLOCK",
    "ClientAgent",
    "ClientLedger",
    "check_forget_after",
    "client_agent",
    "client_key",
    "client_scope",
    "client_session_id",
    "clients_stored",
    "forget_client",
    "keyed_session_id",
    "keyed_storage",
    "recall_key",
    "sweep_wait",
    "sweeping",
    "unkeyable",
]

_LOG = logging.getLogger(__name__)


# A client's id as it may appear in a stored session id and an agent name; anything else
# (long, control characters, separators) is named by its digest.
_PLAIN_CLIENT = re.compile(r"[A-Za-z0-9_.:-]{1,96}")


def _digest(client: str) -> str:
    return hashlib.sha256(client.encode("utf-8", "surrogatepass")).hexdigest()


def client_key(client: str) -> str:
    """``client``'s name in what is stored for it: its id, or ``sha256-<its digest>`` when the
    id could not be a session id or would be unreadable (any client id is accepted, none maps
    onto another's)."""
    plain = _PLAIN_CLIENT.fullmatch(client) and not client.startswith("sha256-")
    return client if plain else "sha256-" + _digest(client)


def _base(base: str) -> str:
    """The served session id as the prefix of its clients' ones (by its digest when too long
    to leave room for a client's name: session ids hold 1,024 bytes)."""
    if len(base.encode("utf-8", "surrogatepass")) > 512:
        return "sha256-" + _digest(base)
    return base


def client_session_id(base: str, protocol: str, client: str) -> str:
    """The stored session id of ``client``'s conversation beside the served one ``base``:
    ``<base>/<protocol>/<client_key(client)>``."""
    return keyed_session_id(base, protocol, client_key(client))


def keyed_session_id(base: str, protocol: str, key: str) -> str:
    """The stored session id of the client named ``key`` (:func:`client_key`) beside the
    served session ``base``."""
    return f"{_base(base)}/{protocol}/{key}"


def client_scope(name: str, protocol: str, client: str) -> str:
    """The long-term memory scope (the agent name) of ``client`` of the agent ``name``."""
    return _scope_of_key(name, protocol, client_key(client))


def _scope_of_key(name: str, protocol: str, key: str) -> str:
    digest = key[len("sha256-") :] if key.startswith("sha256-") else _digest(key)
    return f"{(name or 'agent')[:80]}.{protocol}-{digest[:32]}"


def _keyed(storage: Any) -> str | None:
    """How a storage of another conversation beside ``storage`` is made, or None when its
    kind cannot name another conversation."""
    if type(storage) is InMemoryStorage:
        return "memory"
    if type(storage) is SQLiteStorage:
        return "sqlite"
    return "for_session" if callable(getattr(storage, "for_session", None)) else None


def keyed_storage(storage: Any, session_id: str) -> tuple[Any, bool]:
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
        storage, owned = keyed_storage(memory.storage, session_id)
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


def _served_base(memory: Any) -> str:
    base = getattr(memory.storage, "session_id", None)
    return base if isinstance(base, str) else "default"


async def clients_stored(agent: Any, protocol: str) -> list[str]:
    """The keys (:func:`client_key`) of the clients of the served ``agent`` whose conversation
    its storage keeps (what a server restarted on it met before), when the storage can list
    its sessions; else none."""
    memory = agent.options.short_term_memory
    listing = getattr(getattr(memory, "storage", None), "list_sessions", None)
    if memory is None or _keyed(memory.storage) == "memory" or not callable(listing):
        return []
    prefix = keyed_session_id(_served_base(memory), protocol, "")
    return [s[len(prefix) :] for s in await listing() if s.startswith(prefix) and s != prefix]


async def forget_client(agent: Any, key: str, *, protocol: str, shared_memory: bool) -> bool:
    """Delete what the served ``agent`` keeps of its client ``key`` (:func:`client_key`): its
    stored conversation, and its remembered facts (its own long-term memory scope, unless
    ``shared_memory``; a vector store that cannot list its entries keeps them).

    Each server knows the use its own messages made: another server on the same storage (a
    worker process) may be running the client's message now. So the conversation is deleted
    holding its run hold (the storage's ``hold_run()``, which that run holds); when a run
    holds it, nothing is deleted and this returns False (the caller sees the client as in use
    now). True once deleted.
    """
    memory = agent.options.short_term_memory
    async with contextlib.AsyncExitStack() as stack:
        if memory is not None and _keyed(memory.storage) != "memory":
            session_id = keyed_session_id(_served_base(memory), protocol, key)
            storage, owned = keyed_storage(memory.storage, session_id)
            if owned:
                stack.push_async_callback(storage.aclose)
            hold = getattr(storage, "hold_run", None)
            if callable(hold):
                try:
                    await stack.enter_async_context(hold())
                except SessionBusyError:
                    return False  # in use on another server (or another Session here)
            await storage.clear()
        await _forget_facts(agent, key, protocol=protocol, shared_memory=shared_memory)
    return True


async def _forget_facts(agent: Any, key: str, *, protocol: str, shared_memory: bool) -> None:
    """Delete the client's own long-term memory scope (see :func:`forget_client`)."""
    recall = agent.options.long_term_memory
    entries = getattr(getattr(recall, "vector_store", None), "entries", None)
    if recall is None or shared_memory or not callable(entries):
        return
    from goagent_py.memory.vector._common import SESSION_KEY

    store = recall.vector_store
    ids = [s.id for s in await entries({SESSION_KEY: _scope_of_key(agent.name, protocol, key)})]
    delete_batch = getattr(store, "delete_batch", None)
    if callable(delete_batch):
        await delete_batch(ids)
    else:
        for entry_id in ids:
            await store.delete(entry_id)


def check_forget_after(value: object) -> None:
    """Refuse a ``forget_after`` that is not None or a number of seconds > 0.

    Raises:
        ConfigurationError: what was given, and what to give.
    """
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigurationError(
            f"forget_after must be a number of seconds > 0 (or None: keep clients' "
            f"conversations however long they are idle), got {value!r}"
        )
    if value != value or value == float("inf"):
        raise ConfigurationError(f"forget_after must be finite (None: never), got {value!r}")


class ClientLedger:
    """When each client of a served agent was last seen, to forget the ones gone (a server
    meeting many clients grew without bound; docs/a2a.md, "How long a context is kept").

    :meth:`due` names the clients to forget: those idle ``forget_after`` seconds or more, and
    past ``max_kept`` clients the ones idle longest, never one held (a task or an ask of it
    running). Clients are known by :func:`client_key`; ``clock`` is the wall clock (seconds).
    """

    def __init__(
        self,
        *,
        forget_after: float | None,
        max_kept: int,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.forget_after = forget_after
        self.max_kept = max_kept
        self.clock = clock or _wall_clock
        self._seen: OrderedDict[str, float] = OrderedDict()  # least recently seen first
        self._held: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._seen)

    def met(self, keys: list[str]) -> None:
        """Clients met before this process (a restart): seen now, before any seen since."""
        now = self.clock()
        for key in keys:
            if key not in self._seen:
                self._seen[key] = now
                self._seen.move_to_end(key, last=False)

    def hold(self, key: str) -> None:
        """``key`` is in use from now until :meth:`release` (seen now, never due meanwhile)."""
        self._seen[key] = self.clock()
        self._seen.move_to_end(key)
        self._held[key] = self._held.get(key, 0) + 1

    def seen(self, key: str) -> None:
        """``key`` is in use now (elsewhere: another server's run holds it): seen now."""
        self._seen[key] = self.clock()
        self._seen.move_to_end(key)

    def release(self, key: str) -> None:
        """One use of ``key`` ended (it is seen now: its idle time starts here)."""
        left = self._held.get(key, 0) - 1
        if left > 0:
            self._held[key] = left
        else:
            self._held.pop(key, None)
        self._seen[key] = self.clock()
        self._seen.move_to_end(key)

    def next_due(self) -> float | None:
        """Seconds until :meth:`due` names a client (0: it would now), or None when time alone
        will not (``forget_after`` is None, or every client is held: a held client is seen
        again when it is released, so it becomes due later)."""
        free = (key for key in self._seen if key not in self._held)
        if len(self._seen) > self.max_kept and next(free, None) is not None:
            return 0.0
        if self.forget_after is None:
            return None
        for key in free:  # the one seen longest ago first
            return max(0.0, self._seen[key] + self.forget_after - self.clock())
        return None

    def due(self) -> list[str]:
        """The clients to forget now (taken off the ledger), idle longest first."""
        now = self.clock()
        excess = len(self._seen) - self.max_kept
        found: list[str] = []
        for key, last in self._seen.items():
            expired = self.forget_after is not None and now - last >= self.forget_after
            if not expired and excess <= 0:
                break  # the rest were seen later
            if key in self._held:
                continue
            found.append(key)
            excess -= 1
        for key in found:
            del self._seen[key]
        return found


def _wall_clock() -> float:
    return CLOCK()


CLOCK: Callable[[], float] = time.time
"""The ledgers' wall clock (seconds), read at each use: tests replace it."""


async def sweep_wait(seconds: float) -> None:
    """How a server's sweep waits for the next client to become due (tests replace it)."""
    await asyncio.sleep(seconds)


# A sweep waits at least this long (a storage that keeps failing is not retried in a busy loop)
# and at most this (a clock set forward is caught up with within the hour).
_MIN_WAIT = 1.0
_MAX_WAIT = 3600.0


@contextlib.asynccontextmanager
async def sweeping(
    sweep: Callable[[], Awaitable[None]], ledger: ClientLedger, *, what: str
) -> AsyncIterator[None]:
    """Forget the clients due (``sweep``) now and each time the next one becomes due, while the
    block runs (a server's lifespan): an idle server forgets too, not only when a new client
    arrives. The sweep is cancelled when the block ends. ``what`` names the server in logs."""

    async def sweeps() -> None:
        while True:
            try:
                await sweep()
            except Exception as exc:  # the storage, for now: tried again at the next sweep
                _LOG.warning("%s: the idle clients could not be forgotten: %s", what, exc)
            # Never longer than forget_after: a client seen during the wait is due that long
            # after it at the earliest, so the next sweep is in time for it.
            limit = (
                _MAX_WAIT if ledger.forget_after is None else min(ledger.forget_after, _MAX_WAIT)
            )
            delay = ledger.next_due()
            await sweep_wait(limit if delay is None else min(max(delay, _MIN_WAIT), limit))

    task = asyncio.create_task(sweeps(), name=f"goagent-py {what} sweep")
    try:
        yield
    finally:
        task.cancel()
        await asyncio.wait([task])
