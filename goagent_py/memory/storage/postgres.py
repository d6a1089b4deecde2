"""Conversations in PostgreSQL (psycopg 3 with a connection pool): one history, many processes.

Layout for ``table="goagent_messages"`` in ``schema="public"`` (created on first use)::

    goagent_messages           session_id, seq, message (JSON text), created_at
                               PRIMARY KEY (session_id, seq): append-only, one row per message
    goagent_messages_sessions  session_id PRIMARY KEY, next_seq: the per-session counter,
                               generation: how many times the session was cleared
    goagent_messages_appends   session_id, append_key: appends already applied (append_once)
    goagent_messages_leases    session_id PRIMARY KEY, owner, expires_at, token: run leases
    goagent_storage_tables     table_name PRIMARY KEY, schema_version: what created the table

Writers never rewrite a session: :meth:`PostgresStorage.append` is one short transaction that
bumps the session's counter row (``INSERT ... ON CONFLICT DO UPDATE ... RETURNING``, which
row-locks it until commit) and inserts the new rows after it, so concurrent writers in any
number of processes get gap-free, strictly increasing sequence numbers and a turn is stored
whole or not at all. A connection is taken from the pool for each call and given back at once,
never held across a model call; each one taken is checked first, and one that the server or a
proxy closed while idle is replaced at once instead of failing (or delaying) the next append.

A run lease (:meth:`PostgresStorage.lease`) is a row with an expiry, renewed in the background
while the run holds it: an advisory lock would pin a connection for the whole run. Each grant
carries a larger fencing token, and an append made under a lease commits only if its token is
still the one in force, so a holder paused past its lease cannot write next to the run that
took the session over (:class:`~goagent_py.errors.LeaseLostError`).

A clear increments the session's ``generation`` (``_generation``), in the counter row an append
locks: an append whose caller read the session before the clear is refused in its own
transaction (:class:`~goagent_py.errors.ConversationClearedError`), so what a run writes after
another process cleared its conversation never lands in the emptied one. The column is added
in place to older tables (the same schema version: older code writes on, unfenced).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from goagent_py._generation import ReadFence, cleared_error
from goagent_py._redact import check_dsn, redact, secrets_from_dsn
from goagent_py._run_hold import busy_error, held_in_process, lock_offset
from goagent_py.errors import (
    ConfigurationError,
    CorruptedDataError,
    LeaseLostError,
    MemoryStoreError,
    MissingExtraError,
)
from goagent_py.memory.storage._lease import current_fence
from goagent_py.memory.storage._parts import (
    PART_SEPARATOR,
    check_session_id,
    owner_of,
    parts_range,
)
from goagent_py.memory.storage.base import check_append_key
from goagent_py.messages import Message, messages_from_json, messages_to_json

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from goagent_py.memory.storage._lease import SessionLease

__all__ = ["SCHEMA_VERSION", "PostgresStorage"]

SCHEMA_VERSION = 2
"""The schema version this code writes (kept in ``goagent_storage_tables``); version 1 tables
are upgraded in place (2 adds the leases' fencing token)."""

_REGISTRY = "goagent_storage_tables"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
# Table names get suffixes (_sessions, _appends, _leases): keep room for the longest.
_MAX_TABLE = 63 - len("_sessions")


def _check_identifier(name: object, what: str, limit: int = 63) -> str:
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name) or len(name) > limit:
        raise ConfigurationError(
            f"PostgresStorage: invalid {what} {name!r}: use letters, digits and '_', starting "
            f"with a letter or '_', at most {limit} characters"
        )
    return name


def _check_session(session_id: object) -> str:
    return check_session_id(session_id, "PostgresStorage")


def _summary(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."


def _pool_class() -> Any:
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError("psycopg", "postgres", feature="PostgresStorage") from exc
    try:
        from psycopg_pool import AsyncConnectionPool
    except ImportError as exc:
        raise MissingExtraError("psycopg-pool", "postgres", feature="PostgresStorage") from exc
    return AsyncConnectionPool


def serialize_rows(messages: Sequence[Message], where: str) -> list[str]:
    """One JSON text per message (the one-element JSON array without its brackets)."""
    rows: list[str] = []
    for i, message in enumerate(messages):
        try:
            rows.append(messages_to_json([message])[1:-1].decode())
        except (ValueError, TypeError) as exc:  # e.g. a non-JSON value in metadata
            raise MemoryStoreError(
                f"{where}: message {i} cannot be stored as JSON: {_summary(exc)}"
            ) from exc
    return rows


def parse_rows(rows: Sequence[tuple[int, object]], where: str, table: str) -> list[Message]:
    """The messages of ``(seq, json)`` rows, each row parsed alone; a bad row is named by its
    ``seq``. (Never joined into one array first: two broken rows, a message split over them,
    would parse as one and be loaded silently.)"""
    out: list[Message] = []
    for seq, raw in rows:
        try:
            if not isinstance(raw, str):
                raise TypeError(f"expected JSON text, found {type(raw).__name__}")
            parsed = messages_from_json("[" + raw + "]")
            if len(parsed) != 1:
                raise ValueError(f"the row holds {len(parsed)} messages instead of one")
        except (ValueError, TypeError) as exc:
            raise CorruptedDataError(
                f"{where}: the stored message with seq={seq} (table {table}) is corrupted and "
                f"cannot be read: {_summary(exc)}; delete that row or clear the session"
            ) from exc
        out.extend(parsed)
    return out


class PostgresStorage:
    """Keeps one session's conversation in PostgreSQL; any number of processes share it.

    Use it as an async context manager (or call :meth:`aclose`) to close the pool it opened::

        async with PostgresStorage("postgresql://...", session_id="alice") as storage:
            memory = ShortTermMemory(storage=storage)

    Many sessions in one process should share one pool: :meth:`for_session` gives a storage
    of another session on the same pool (closing it leaves the pool open).

    Args:
        dsn_or_pool: a libpq connection string (the storage opens and closes its own pool), or
            an ``psycopg_pool.AsyncConnectionPool`` (the caller opens and closes it). Either
            way the storage checks each connection it takes and replaces a dead one at once;
            a pool of your own needs no ``check=`` (which would sleep between failed checks).
        session_id: which conversation this storage reads and writes.
        schema: the PostgreSQL schema of the tables (created if missing).
        table: the name of the message table; the other tables are named after it.
        min_size: connections the pool keeps open (own pool only).
        max_size: the most connections the pool opens (own pool only).
        timeout: seconds to wait for a free connection before failing.

    Raises:
        ConfigurationError: a bad session id, schema or table name, pool size, or connection
            string (malformed; the message leaves its password out).
        MissingExtraError: psycopg or psycopg-pool is missing (``goagent-py[postgres]``).
        MemoryStoreError: from any method, when the server cannot be reached, has a newer
            schema, or holds a corrupted row (:class:`~goagent_py.errors.CorruptedDataError`).
        LeaseLostError: from ``append``/``append_once``/``clear`` made under a run lease that
            another run has taken over (see :meth:`lease`).
    """

    def __init__(
        self,
        dsn_or_pool: str | AsyncConnectionPool[Any],
        *,
        session_id: str = "default",
        schema: str = "public",
        table: str = "goagent_messages",
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 30.0,
    ) -> None:
        pool_class = _pool_class()
        self.session_id = _check_session(session_id)
        self.schema = _check_identifier(schema, "schema name")
        self.table = _check_identifier(table, "table name", _MAX_TABLE)
        if not 0 <= min_size <= max_size or max_size < 1:
            raise ConfigurationError(
                f"PostgresStorage: need 0 <= min_size <= max_size and max_size >= 1, got "
                f"min_size={min_size}, max_size={max_size}"
            )
        if timeout <= 0:
            raise ConfigurationError(f"PostgresStorage: timeout must be > 0, got {timeout!r}")
        self.timeout = timeout
        # A malformed connection string is quoted in errors: its password is taken out.
        self._secrets = secrets_from_dsn(dsn_or_pool) if isinstance(dsn_or_pool, str) else ()
        if isinstance(dsn_or_pool, str):
            check_dsn(dsn_or_pool, "PostgresStorage")
        self._owns_pool = isinstance(dsn_or_pool, str)
        if isinstance(dsn_or_pool, str):
            self._pool: Any = pool_class(
                dsn_or_pool,
                min_size=min_size,
                max_size=max_size,
                open=False,
                timeout=timeout,
                kwargs={"autocommit": True},
                # No check= here: the storage checks each connection it takes (_lend), without
                # the pool's backoff between failed checks.
                name=f"goagent-{table}",
            )
        else:
            self._pool = dsn_or_pool
        # Shared with for_session() storages: one migration, one pool opening, whoever comes first.
        self._shared: dict[str, Any] = {
            "ready": False,
            "lock": asyncio.Lock(),
            "opened": False,
            "owned": self._owns_pool,
        }
        self._closed = False
        self._fence = ReadFence()  # the generation each context last read (see _generation)
        # The connection a run's hold keeps (hold_run), which this storage's calls use while
        # it is held, one call at a time: a run takes one connection of the pool, not two.
        self._held: Any = None
        self._held_lock = asyncio.Lock()

    # -- plumbing ------------------------------------------------------------------------------

    def for_session(self, session_id: str) -> PostgresStorage:
        """A storage of ``session_id`` on the same pool and tables (it does not own the pool)."""
        other = PostgresStorage.__new__(PostgresStorage)
        other.__dict__.update(self.__dict__)
        other.session_id = _check_session(session_id)
        other._owns_pool = False
        other._closed = False
        other._fence = ReadFence()
        other._held = None  # another conversation: not this one's run
        other._held_lock = asyncio.Lock()
        return other

    @property
    def pool(self) -> AsyncConnectionPool[Any]:
        """The connection pool (shared by :meth:`for_session` storages)."""
        return self._pool  # type: ignore[no-any-return]

    def _where(self) -> str:
        return f"PostgreSQL storage {self.schema}.{self.table} (session {self.session_id!r})"

    def _sql(self, template: str) -> Any:
        from psycopg import sql

        return sql.SQL(template).format(
            schema=sql.Identifier(self.schema),
            t=sql.Identifier(self.schema, self.table),
            sessions=sql.Identifier(self.schema, f"{self.table}_sessions"),
            appends=sql.Identifier(self.schema, f"{self.table}_appends"),
            leases=sql.Identifier(self.schema, f"{self.table}_leases"),
            reg=sql.Identifier(self.schema, _REGISTRY),
        )

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        """A pooled connection for one call; database errors become MemoryStoreError."""
        import psycopg
        from psycopg_pool import PoolTimeout

        if self._closed:
            raise MemoryStoreError(f"{self._where()} is closed; create a new PostgresStorage")
        try:
            if self._held is not None:
                # A run holds the conversation on this connection: the run's writes (and
                # reads) take it rather than a second one of the pool (a pool of one
                # deadlocked), one call at a time.
                async with self._held_lock:
                    held = self._held
                    if held is not None:
                        async with held:  # each call commits (or rolls back), as _lend's
                            yield held
                        return
            await self._ready()
            async with self._lend() as conn:
                yield conn
        except PoolTimeout as exc:
            raise MemoryStoreError(
                f"{self._where()}: no database connection within {self.timeout:g}s "
                f"(is the server up, and is max_size large enough?): {_summary(exc)}"
            ) from exc
        except psycopg.Error as exc:
            text = redact(_summary(exc), self._secrets)
            raise MemoryStoreError(f"{self._where()}: {text}") from exc

    @contextlib.asynccontextmanager
    async def _lend(self) -> AsyncIterator[Any]:
        """A live connection from the pool, given back after the call.

        Each connection taken is checked first; a dead one (its server process killed while it
        sat idle: a restart, a failover, an idle-connection reaper) is given back, which makes
        the pool close it and open a replacement, and the next one is taken at once. The pool's
        own ``check=`` sleeps 1, 2, 4, 8... s between failed checks, so a handful of dead
        connections made an append wait past its timeout.
        """
        import psycopg

        pool = self._pool
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while True:
            conn = await pool.getconn(timeout=deadline - loop.time())
            try:
                await pool.check_connection(conn)
            except psycopg.Error:
                await pool.putconn(conn)  # a broken connection is closed and replaced
                if not conn.closed:
                    raise  # alive, but the check failed: not a dead connection, say why
                continue
            except BaseException:
                await pool.putconn(conn)
                raise
            break
        try:
            async with conn:
                yield conn
        finally:
            await pool.putconn(conn)

    async def _ready(self) -> None:
        shared = self._shared
        if shared["ready"]:
            return
        async with shared["lock"]:
            if shared["ready"]:
                return
            if shared["owned"] and not shared["opened"]:
                await self._pool.open()
                shared["opened"] = True
            async with self._lend() as conn:
                await self._migrate(conn)
            shared["ready"] = True

    async def _migrate(self, conn: Any) -> None:
        async with conn.transaction():
            # Concurrent CREATE ... IF NOT EXISTS can still collide in PostgreSQL's catalogs:
            # one process at a time creates the tables.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('goagent_py.storage'))")
            await conn.execute(self._sql("CREATE SCHEMA IF NOT EXISTS {schema}"))
            await conn.execute(
                self._sql(
                    "CREATE TABLE IF NOT EXISTS {reg} (table_name TEXT PRIMARY KEY, "
                    "schema_version INTEGER NOT NULL)"
                )
            )
            cur = await conn.execute(
                self._sql("SELECT schema_version FROM {reg} WHERE table_name = %s"),
                (self.table,),
            )
            row = await cur.fetchone()
            if row is not None:
                if int(row[0]) > SCHEMA_VERSION:
                    raise MemoryStoreError(
                        f"{self._where()}: the table has schema version {row[0]}, newer than "
                        f"this goagent-py understands ({SCHEMA_VERSION}); upgrade goagent-py"
                    )
                if int(row[0]) < 2:
                    await conn.execute(
                        self._sql(
                            "ALTER TABLE {leases} "
                            "ADD COLUMN IF NOT EXISTS token BIGINT NOT NULL DEFAULT 0"
                        )
                    )
                    await conn.execute(
                        self._sql("UPDATE {reg} SET schema_version = %s WHERE table_name = %s"),
                        (SCHEMA_VERSION, self.table),
                    )
                await self._add_generation(conn)
                await self._add_clear_trigger(conn)
                return
            await conn.execute(
                self._sql(
                    "CREATE TABLE IF NOT EXISTS {t} (session_id TEXT NOT NULL, "
                    "seq BIGINT NOT NULL, message TEXT NOT NULL, "
                    "created_at TIMESTAMPTZ NOT NULL DEFAULT now(), "
                    "PRIMARY KEY (session_id, seq))"
                )
            )
            await conn.execute(
                self._sql(
                    "CREATE TABLE IF NOT EXISTS {sessions} (session_id TEXT PRIMARY KEY, "
                    "next_seq BIGINT NOT NULL, generation BIGINT NOT NULL DEFAULT 0)"
                )
            )
            await conn.execute(
                self._sql(
                    "CREATE TABLE IF NOT EXISTS {appends} (session_id TEXT NOT NULL, "
                    "append_key TEXT NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now(), "
                    "PRIMARY KEY (session_id, append_key))"
                )
            )
            await conn.execute(
                self._sql(
                    "CREATE TABLE IF NOT EXISTS {leases} (session_id TEXT PRIMARY KEY, "
                    "owner TEXT NOT NULL, expires_at TIMESTAMPTZ NOT NULL, "
                    "token BIGINT NOT NULL DEFAULT 0)"
                )
            )
            await conn.execute(
                self._sql("INSERT INTO {reg} (table_name, schema_version) VALUES (%s, %s)"),
                (self.table, SCHEMA_VERSION),
            )
            await self._add_clear_trigger(conn)

    async def _add_clear_trigger(self, conn: Any) -> None:
        """Any deletion of a session's rows counts as a clear, whoever makes it: a goagent-py
        from before the counter (whose clear deletes the rows alone, at the same schema
        version) runs this trigger too, so its clears fence the writers that read before them
        (store12). One bump per session and statement; a part's rows (an id holding the unit
        separator) are deleted with their session, whose rows count it. Looked up first, as
        the column is (a CREATE TRIGGER locks the table against writes)."""
        from psycopg import sql

        name = f"{self.table}_clears"
        cur = await conn.execute(
            "SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass(%s) AND tgname = %s",
            (f'"{self.schema}"."{self.table}"', name),
        )
        if await cur.fetchone() is not None:
            return
        function = sql.Identifier(self.schema, name)
        await conn.execute(
            sql.SQL(
                "CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ "
                "BEGIN UPDATE {sessions} AS s SET generation = s.generation + 1 "
                "WHERE s.session_id IN (SELECT DISTINCT session_id FROM gone "
                "WHERE strpos(session_id, chr(31)) = 0); RETURN NULL; END $$"
            ).format(
                function=function,
                sessions=sql.Identifier(self.schema, f"{self.table}_sessions"),
            )
        )
        await conn.execute(
            sql.SQL(
                "CREATE TRIGGER {name} AFTER DELETE ON {t} REFERENCING OLD TABLE AS gone "
                "FOR EACH STATEMENT EXECUTE PROCEDURE {function}()"
            ).format(
                name=sql.Identifier(name),
                t=sql.Identifier(self.schema, self.table),
                function=function,
            )
        )

    async def _add_generation(self, conn: Any) -> None:
        """The clear counter on a table made before it (an additive change: no new version,
        so older code keeps writing; its clears are not counted). Looked up first: an ALTER
        TABLE takes the table's strongest lock even when the column exists."""
        cur = await conn.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = %s "
            "AND table_name = %s AND column_name = 'generation'",
            (self.schema, f"{self.table}_sessions"),
        )
        if await cur.fetchone() is None:
            await conn.execute(
                self._sql(
                    "ALTER TABLE {sessions} "
                    "ADD COLUMN IF NOT EXISTS generation BIGINT NOT NULL DEFAULT 0"
                )
            )

    # -- Storage -------------------------------------------------------------------------------

    async def load(self) -> list[Message]:
        """This session's messages, oldest first.

        Raises:
            CorruptedDataError: a row is corrupted (the error names the session and the row's
                ``seq``); a :class:`MemoryStoreError`, as is a server failure.
        """
        async with self._connection() as conn:
            # One statement, one snapshot: the generation the rows were read at (see
            # _generation), and a row with a NULL seq when the session has none.
            cur = await conn.execute(
                self._sql(
                    "SELECT g.generation, m.seq, m.message FROM (SELECT COALESCE(("
                    "SELECT generation FROM {sessions} WHERE session_id = %s), 0) AS generation"
                    ") AS g LEFT JOIN {t} AS m ON m.session_id = %s ORDER BY m.seq"
                ),
                (owner_of(self.session_id), self.session_id),
            )
            found = await cur.fetchall()
        rows = [(int(seq), raw) for _, seq, raw in found if seq is not None]
        messages = parse_rows(rows, self._where(), self.table) if rows else []
        self._fence.read(int(found[0][0]))
        return messages

    async def append(self, messages: Sequence[Message]) -> None:
        """Add ``messages`` at the end of this session, in one transaction (all or none).

        Raises:
            MemoryStoreError: a message cannot be serialised, or the write failed (nothing of
                this call is stored then).
            LeaseLostError: made under a lease that another run has taken over (nothing of
                this call is stored).
        """
        await self._append(messages, None)

    async def append_once(self, key: str, messages: Sequence[Message]) -> bool:
        """Like :meth:`append`, but at most once per ``key`` in this session.

        A retried write (a durable activity that committed, then lost its worker before it
        could report it) is recognised by its key and skipped, in the same transaction.

        Returns:
            True if the messages were stored now, False if ``key`` was already applied.
        """
        check_append_key(key)
        return await self._append(messages, key)

    async def update_where(
        self, match: Callable[[Message], bool], update: Callable[[Message], Message]
    ) -> Message | None:
        """Replace the newest message of this session that ``match`` accepts with
        ``update(message)``, in one transaction that row-locks what it reads (``FOR UPDATE``):
        of two updaters of one message, the second reads what the first wrote (a
        compare-and-set). None when no message matches; an exception from ``update`` rolls
        back and propagates.

        Fenced as :meth:`append` is (approve14): a context that read the conversation before a
        clear cannot change a message of it (one that came back with a refill) until it reads
        it again.

        Raises:
            ConversationClearedError: the conversation was cleared since this context read it.
        """
        expected = self._fence.expected()
        async with self._connection() as conn, conn.transaction():
            await self._check_fence(conn)
            if expected is not None:
                await self._check_generation(conn, expected)
            before: int | None = None
            while True:  # newest first, a page at a time: the one sought is nearly always last
                cur = await conn.execute(
                    self._sql(
                        "SELECT seq, message FROM {t} WHERE session_id = %s "
                        "AND (%s::bigint IS NULL OR seq < %s::bigint) "
                        "ORDER BY seq DESC LIMIT 32 FOR UPDATE"
                    ),
                    (self.session_id, before, before),
                )
                rows = [(int(seq), raw) for seq, raw in await cur.fetchall()]
                if not rows:
                    return None
                for seq, raw in rows:
                    (current,) = parse_rows([(seq, raw)], self._where(), self.table)
                    if not match(current):
                        continue
                    new = update(current)
                    (row,) = serialize_rows([new], self._where())
                    await conn.execute(
                        self._sql("UPDATE {t} SET message = %s WHERE session_id = %s AND seq = %s"),
                        (row, self.session_id, seq),
                    )
                    return new
                before = rows[-1][0]

    async def _append(self, messages: Sequence[Message], key: str | None) -> bool:
        rows = serialize_rows(messages, self._where())
        if not rows and key is None:
            return True
        expected = self._fence.expected()
        async with self._connection() as conn, conn.transaction():
            await self._check_fence(conn)
            if key is not None:
                cur = await conn.execute(
                    self._sql(
                        "INSERT INTO {appends} (session_id, append_key) VALUES (%s, %s) "
                        "ON CONFLICT DO NOTHING RETURNING 1"
                    ),
                    (self.session_id, key),
                )
                if await cur.fetchone() is None:
                    return False
            if not rows:  # a key alone: spent only if the session was not cleared since
                if expected is not None:
                    await self._check_generation(conn, expected)
                return True
            # The upsert row-locks the session's counter until commit: writers of one session
            # queue here for a few milliseconds, and their seq ranges never overlap. A clear
            # locks the same row, so the generation read here stays the one in force.
            cur = await conn.execute(
                self._sql(
                    "INSERT INTO {sessions} AS s (session_id, next_seq) VALUES (%s, %s) "
                    "ON CONFLICT (session_id) DO UPDATE SET next_seq = s.next_seq + %s "
                    "RETURNING next_seq, generation"
                ),
                (self.session_id, len(rows), len(rows)),
            )
            found = await cur.fetchone()
            generation = int(found[1])
            owner = owner_of(self.session_id)
            if expected is not None and owner != self.session_id:  # a part: its conversation's
                cur = await conn.execute(
                    self._sql("SELECT generation FROM {sessions} WHERE session_id = %s FOR SHARE"),
                    (owner,),
                )
                row = await cur.fetchone()
                generation = 0 if row is None else int(row[0])
            if expected is not None and generation != expected:
                raise cleared_error(self._where(), self.session_id)  # rolls the key back too
            start = int(found[0]) - len(rows)
            async with conn.cursor() as cursor:
                await cursor.executemany(
                    self._sql("INSERT INTO {t} (session_id, seq, message) VALUES (%s, %s, %s)"),
                    [(self.session_id, start + i, row) for i, row in enumerate(rows)],
                )
        return True

    async def _check_generation(self, conn: Any, expected: int) -> None:
        """Refuse the write unless the conversation's clear counter is still ``expected`` (the
        one this context read); ``FOR SHARE`` holds the counter's row until the write commits,
        so a clear cannot come in between."""
        cur = await conn.execute(
            self._sql("SELECT generation FROM {sessions} WHERE session_id = %s FOR SHARE"),
            (owner_of(self.session_id),),
        )
        found = await cur.fetchone()
        if (0 if found is None else int(found[0])) != expected:
            raise cleared_error(self._where(), self.session_id)

    async def _check_fence(self, conn: Any) -> None:
        """Under a run lease (held in this context), refuse the write unless the lease's token
        is still the one in force. ``FOR SHARE`` holds the lease row until this write commits:
        a takeover's upsert waits for it, so no write of a stale holder lands after a newer
        holder's grant."""
        token = current_fence(self.schema, self.table, self.session_id)
        if token is None:
            return
        cur = await conn.execute(
            self._sql("SELECT token, owner FROM {leases} WHERE session_id = %s FOR SHARE"),
            (self.session_id,),
        )
        row = await cur.fetchone()
        current, holder = (int(row[0]), str(row[1])) if row is not None else (0, "")
        if current != token:
            raise LeaseLostError(
                f"{self._where()}: this run's lease (token {token}) expired and was taken over "
                f"(token {current}, held by {holder or 'nobody'}); the write was refused and "
                "nothing of it stored. Stop this run: another run owns the session now",
                session_id=self.session_id,
                holder=holder,
                token=token,
                current_token=current,
            )

    async def clear(self) -> None:
        """Delete this session's messages and those of its parts (``_parts``: the durable
        side's big tool results); sequence numbers are not reused afterwards. A writer that
        read the session before this clear cannot append to it until it reads it again
        (``ConversationClearedError``)."""
        low, high = parts_range(self.session_id)
        # COLLATE "C": the parts' range is in code-point order, whatever the database's collation.
        where = 'session_id = %s OR (session_id COLLATE "C" >= %s AND session_id COLLATE "C" < %s)'
        async with self._connection() as conn, conn.transaction():
            await self._check_fence(conn)
            # First: the counter row's lock waits for appends in flight, whose rows the
            # deletes below then see (and any append after it sees the new generation).
            cur = await conn.execute(
                self._sql(
                    "INSERT INTO {sessions} AS s (session_id, next_seq, generation) "
                    "VALUES (%s, 0, 1) ON CONFLICT (session_id) DO UPDATE "
                    "SET generation = s.generation + 1 RETURNING generation"
                ),
                (self.session_id,),
            )
            for table in ("{t}", "{appends}"):
                await conn.execute(
                    self._sql(f"DELETE FROM {table} WHERE {where}"), (self.session_id, low, high)
                )
            # Read after the deletes: their trigger counts them too (_add_clear_trigger).
            cur = await conn.execute(
                self._sql("SELECT generation FROM {sessions} WHERE session_id = %s"),
                (self.session_id,),
            )
            found = await cur.fetchone()
        self._fence.read(int(found[0]))  # this context goes on from its own clear

    async def list_sessions(self) -> list[str]:
        """The ids of every session with at least one message in the table, sorted (not the
        rows a session keeps under ids of its own: its parts, see ``_parts``)."""
        async with self._connection() as conn:
            cur = await conn.execute(
                self._sql(
                    "SELECT DISTINCT session_id FROM {t} WHERE strpos(session_id, %s) = 0 "
                    "ORDER BY 1"
                ),
                (PART_SEPARATOR,),
            )
            return [str(row[0]) for row in await cur.fetchall()]

    # -- leases --------------------------------------------------------------------------------

    def lease(
        self,
        session_id: str | None = None,
        *,
        wait: bool = False,
        timeout: float | None = None,
        ttl: float = 30.0,
        poll_interval: float = 0.2,
    ) -> SessionLease:
        """A run lease on a session, so two workers never run it at once::

            async with storage.lease(wait=False):     # SessionBusyError if another holds it
                await agent.run(prompt)

        The lease is a row with an expiry ``ttl`` seconds ahead, renewed every ``ttl / 3``
        seconds while held; a holder that dies frees it when it expires. It is fenced: while
        held, every append and clear of the session made in the holder's context (the body of
        the ``async with`` and the tasks it starts) commits only if this grant's token is still
        the one in force, so a holder paused past ``ttl`` whose session was taken over gets
        :class:`~goagent_py.errors.LeaseLostError` instead of writing next to the new holder.
        Writes made outside any lease are not fenced.

        Args:
            session_id: the session to lease (this storage's by default).
            wait: wait until the lease is free instead of raising at once.
            timeout: with ``wait``, give up after this many seconds (None: wait forever).
            ttl: how long a lease outlives a holder that stopped renewing it.
            poll_interval: with ``wait``, seconds between attempts.
        """
        if ttl <= 0 or poll_interval <= 0 or (timeout is not None and timeout < 0):
            raise ConfigurationError(
                f"lease: ttl and poll_interval must be > 0 and timeout >= 0, got ttl={ttl!r}, "
                f"poll_interval={poll_interval!r}, timeout={timeout!r}"
            )
        from goagent_py.memory.storage._lease import SessionLease

        session = self if session_id is None else self.for_session(session_id)
        return SessionLease(session, wait=wait, timeout=timeout, ttl=ttl, poll=poll_interval)

    @contextlib.asynccontextmanager
    async def hold_run(self) -> AsyncIterator[None]:
        """Hold this conversation for one run: no other run, from this process or another,
        runs in it until the ``async with`` ends (a :class:`~goagent_py.Session` takes it
        around every run: docs/sessions.md "One run at a time").

        The hold is a session-level advisory lock (``pg_try_advisory_lock``) on a pooled
        connection kept for the run: the server releases it when that connection ends, so a
        process that dies leaves nothing held. This storage's calls during the run use that
        connection too, so a run takes one connection of the pool (a pool of ``max_size=1``
        runs one conversation at a time; another waits for the connection up to ``timeout``).
        Two storages of this process on one pool, table and session are refused here first,
        without a connection.

        Raises:
            SessionBusyError: another run holds the conversation; nothing was written.
        """
        key = lock_offset("postgres", self.schema, self.table, self.session_id)
        what = f"conversation {self.session_id!r} in PostgreSQL {self.schema}.{self.table}"
        here = ("postgres", id(self._pool), self.schema, self.table, self.session_id)
        with held_in_process(here, busy_error(what, self.session_id)):
            async with self._connection() as conn:
                cur = await conn.execute("SELECT pg_try_advisory_lock(%s)", (key,))
                row = await cur.fetchone()
                if row is None or not row[0]:
                    raise busy_error(what, self.session_id)
                await conn.commit()  # a pool without autocommit: no transaction left open
                self._held = conn
                try:
                    yield
                finally:
                    self._held = None  # the calls from now on take their own connection
                    async with self._held_lock:  # after a call still on it, if one is
                        pass
                    # Ending the connection releases it too: a failed unlock loses nothing.
                    with contextlib.suppress(Exception):
                        await conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    # -- lifecycle -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the pool if this storage opened it; later calls raise. Idempotent."""
        self._closed = True
        if self._owns_pool and self._shared["opened"]:
            self._shared["opened"] = False
            await self._pool.close()

    async def __aenter__(self) -> Self:
        async with self._connection():
            pass  # connect and migrate now, so a bad server fails here
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return (
            f"PostgresStorage(schema={self.schema!r}, table={self.table!r}, "
            f"session_id={self.session_id!r})"
        )
