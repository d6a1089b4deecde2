"""A run lease on one PostgreSQL session: a row with an expiry and a fencing token, renewed
while held.

See :meth:`goagent_py.memory.storage.PostgresStorage.lease`. An advisory lock would pin one
pooled connection for the whole run; a lease row needs a connection only for a moment, every
``ttl / 3`` seconds, and a holder that dies frees the session when its lease expires.

Expiry alone cannot stop a holder that was paused past its lease (SIGSTOP, a long GC pause, a
partition) from writing on when it wakes, next to the run that took the session over. So each
grant of the lease increments the row's ``token`` (it is never reset: a released lease keeps
its row, expired), and while a lease is held every append to its session made in the holder's
context checks, in the append's own transaction, that the token is still the one in force
(``SELECT ... FOR SHARE`` on the lease row, which a takeover's upsert must wait for): a stale
holder's write is refused with :class:`~goagent_py.errors.LeaseLostError` and nothing of it is
stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from types import MappingProxyType, TracebackType
from typing import Any, Protocol, Self

from goagent_py.errors import MemoryStoreError, SessionBusyError

__all__ = ["SessionLease", "current_fence"]

_Key = tuple[str, str, str]  # (schema, table, session_id)

# The leases held in this context, with their tokens: appends made here are fenced by them.
_fences: ContextVar[Mapping[_Key, int]] = ContextVar(
    "goagent_lease_fences", default=MappingProxyType({})
)


def current_fence(schema: str, table: str, session_id: str) -> int | None:
    """The fencing token of the lease this context holds on the session (None: no lease)."""
    return _fences.get().get((schema, table, session_id))


class _LeaseTable(Protocol):
    """What a lease needs of its storage (a :class:`PostgresStorage`): the session, its
    tables' SQL and a pooled connection. Defined here so the storage can import this module
    without it importing the storage back."""

    @property
    def session_id(self) -> str: ...

    @property
    def schema(self) -> str: ...

    @property
    def table(self) -> str: ...

    def _sql(self, template: str) -> Any: ...

    def _connection(self) -> AbstractAsyncContextManager[Any]: ...


class SessionLease:
    """A held (or wanted) run lease on one session; see :meth:`PostgresStorage.lease`.

    Attributes:
        owner: this holder's id (host, process and a random part).
        token: the fencing token of this grant (0 until acquired); each grant of a session's
            lease gets a larger one.
        lost: True if a renewal found the lease taken over (it had expired).
    """

    def __init__(
        self,
        storage: _LeaseTable,
        *,
        wait: bool,
        timeout: float | None,
        ttl: float,
        poll: float,
    ) -> None:
        self._storage = storage
        self._wait = wait
        self._timeout = timeout
        self._ttl = ttl
        self._poll = poll
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self.token = 0
        self.lost = False
        self._renewer: asyncio.Task[None] | None = None

    @property
    def session_id(self) -> str:
        """The leased session."""
        return self._storage.session_id

    def _key(self) -> _Key:
        s = self._storage
        return (s.schema, s.table, s.session_id)

    async def _try(self) -> str | None:
        """Take the lease if it is free or expired; None on success, else the holder."""
        s = self._storage
        async with s._connection() as conn:
            cur = await conn.execute(
                s._sql(
                    "INSERT INTO {leases} AS l (session_id, owner, expires_at, token) "
                    "VALUES (%s, %s, now() + make_interval(secs => %s), 1) "
                    "ON CONFLICT (session_id) DO UPDATE SET owner = EXCLUDED.owner, "
                    "expires_at = EXCLUDED.expires_at, token = l.token + 1 "
                    "WHERE l.expires_at < now() "
                    "RETURNING token"
                ),
                (s.session_id, self.owner, self._ttl),
            )
            granted = await cur.fetchone()
            if granted is not None:
                self.token = int(granted[0])
                return None
            cur = await conn.execute(
                s._sql("SELECT owner FROM {leases} WHERE session_id = %s"), (s.session_id,)
            )
            row = await cur.fetchone()
            return str(row[0]) if row is not None else ""

    async def acquire(self) -> None:
        """Take the lease (waiting if asked to) and start renewing it.

        Raises:
            SessionBusyError: another holder has it (and ``wait`` is off, or timed out).
        """
        loop = asyncio.get_running_loop()
        deadline = None if self._timeout is None else loop.time() + self._timeout
        while True:
            try:
                holder = await self._try()
            except BaseException:
                # Cancelled (or failed) after the server may have granted it: a grant nobody
                # knows of would keep the session busy for the whole ttl.
                await self._abandon()
                raise
            if holder is None:
                break
            if not self._wait or (deadline is not None and loop.time() >= deadline):
                by = f" (held by {holder})" if holder else ""
                raise SessionBusyError(
                    f"session {self.session_id!r} is busy: another run holds its lease{by}; "
                    "retry later or take the lease with wait=True",
                    session_id=self.session_id,
                    holder=holder,
                )
            await asyncio.sleep(self._poll)
        _fences.set({**_fences.get(), self._key(): self.token})
        self._renewer = asyncio.create_task(self._renew())

    async def _abandon(self) -> None:
        """Free a grant this holder may have got without learning of it (best effort)."""
        s = self._storage
        with contextlib.suppress(Exception):
            async with s._connection() as conn:
                await conn.execute(
                    s._sql(
                        "UPDATE {leases} SET expires_at = '-infinity' "
                        "WHERE session_id = %s AND owner = %s AND expires_at > now()"
                    ),
                    (s.session_id, self.owner),
                )

    async def _renew(self) -> None:
        s = self._storage
        while True:
            await asyncio.sleep(self._ttl / 3)
            try:
                async with s._connection() as conn:
                    cur = await conn.execute(
                        s._sql(
                            "UPDATE {leases} SET expires_at = now() + make_interval(secs => %s) "
                            "WHERE session_id = %s AND owner = %s AND token = %s"
                        ),
                        (self._ttl, s.session_id, self.owner, self.token),
                    )
                    if cur.rowcount == 0:
                        self.lost = True
                        return
            except MemoryStoreError:
                continue  # a blip: the next renewal (well before expiry) tries again

    async def release(self) -> None:
        """Stop renewing and free the lease (its row stays, expired, keeping the token).
        Idempotent."""
        renewer, self._renewer = self._renewer, None
        if renewer is None:
            return
        key = self._key()
        if _fences.get().get(key) == self.token:
            _fences.set({k: v for k, v in _fences.get().items() if k != key})
        renewer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewer
        s = self._storage
        async with s._connection() as conn:
            await conn.execute(
                s._sql(
                    "UPDATE {leases} SET expires_at = '-infinity' "
                    "WHERE session_id = %s AND owner = %s AND token = %s"
                ),
                (s.session_id, self.owner, self.token),
            )

    async def __aenter__(self) -> Self:
        await self.acquire()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            await self.release()
            return
        # The run's own error is what the caller must see: a lease that cannot be freed now
        # (the database went away too) expires on its own after ttl.
        with contextlib.suppress(MemoryStoreError):
            await self.release()
