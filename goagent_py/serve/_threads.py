"""The thread index (who owns which conversation, its title), the login sessions, and the
stored messages as JSON.

Threads live in the same SQLite file as the conversations (table ``goagent_serve_threads``); a
thread's messages are the short-term memory session ``serve:<user>:<thread id>``, so one user
can never read another's rows: every query is keyed by the authenticated user. Login sessions
(``goagent_serve_logins``) live there too, so they survive a restart; a row keeps the SHA-256
of the cookie, never the cookie itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import sqlite3
import time
from collections.abc import Callable
from typing import Any, TypeVar

from goagent_py._sqlite import (
    HeldConnection,
    NotHere,
    busy_waits,
    in_file_thread,
    read_here,
    shares_writes,
    use_wal,
    write_in_file,
)
from goagent_py.memory.storage.sqlite import delete_session
from goagent_py.messages import Message, Role, TextBlock, ThinkingBlock

__all__ = ["ThreadStore", "message_json", "session_key"]

T = TypeVar("T")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS goagent_serve_threads ("
    " user TEXT NOT NULL, thread_id TEXT NOT NULL, title TEXT NOT NULL,"
    " created_at REAL NOT NULL, updated_at REAL NOT NULL,"
    " PRIMARY KEY (user, thread_id))"
)
# How long each tool call took, for the tool cards after a reload: the stored conversation keeps
# the results the model read, not their timing.
_TIMES = (
    "CREATE TABLE IF NOT EXISTS goagent_serve_tool_times ("
    " user TEXT NOT NULL, thread_id TEXT NOT NULL, call_id TEXT NOT NULL,"
    " duration REAL NOT NULL, PRIMARY KEY (user, thread_id, call_id))"
)

# ``proof`` names the credential that opened the session (Login.proof), checked on every use.
_LOGINS = (
    "CREATE TABLE IF NOT EXISTS goagent_serve_logins ("
    " token_sha256 TEXT PRIMARY KEY, user TEXT NOT NULL, expires_at REAL NOT NULL,"
    " proof TEXT NOT NULL DEFAULT '')"
)


def _add_proof_column(conn: sqlite3.Connection) -> None:
    """A threads file made before ``proof``: its sessions get "" (which no credential holds)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(goagent_serve_logins)")}
    if "proof" not in columns:
        try:
            conn.execute(
                "ALTER TABLE goagent_serve_logins ADD COLUMN proof TEXT NOT NULL DEFAULT ''"
            )
        except sqlite3.OperationalError as exc:  # another process added it first
            if "duplicate column" not in str(exc):
                raise


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def session_key(user: str, thread_id: str) -> str:
    """The short-term memory session id of a user's thread."""
    return f"serve:{user}:{thread_id}"


class ThreadStore:
    """Threads per user in a SQLite file: reads on its own connection (the short keyed ones on
    the event loop when nothing can make them wait, ``_sqlite.read_here``; the rest in a worker
    thread), writes in the file's shared writer (``_sqlite.write_in_file``)."""

    def __init__(self, path: str) -> None:
        # Absolute: the shared writer and this connection name one file, whatever the working
        # folder is later.
        self.path = os.path.abspath(path) if shares_writes(path) else path
        # Its read connection (see HeldConnection): a file deleted or replaced (a backup
        # restored over it) is opened again, as in a forked child.
        self._file = HeldConnection(self.path)
        self._turns: dict[str, set[asyncio.Task[None]]] = {}  # user -> turns being recorded

    def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._file.lock:
            if self._file.replaced():
                self._file.close()
            if self._file.conn is None:
                self._file.open(self._connect)
            with busy_waits(self._file.conn, 5.0) as conn:
                return fn(conn)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=5.0, isolation_level=None, check_same_thread=False
        )
        try:
            use_wal(conn, 5.0)
            conn.execute(_SCHEMA)
            conn.execute(_TIMES)
            conn.execute(_LOGINS)
            _add_proof_column(conn)
            # Off outside worker calls: reads on the loop never wait (read_here).
            conn.execute("PRAGMA busy_timeout = 0")
        except BaseException:
            conn.close()  # the next call opens a fresh one
            raise
        return conn

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await in_file_thread(self.path, lambda: self._run(fn))

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """The short read ``fn`` on the loop when nothing can make it wait (issue 36: a
        thread hop costs more than the lookup), else in a worker thread."""
        here = read_here(self._file.lock, self._opened, fn)
        return await self._call(fn) if isinstance(here, NotHere) else here

    def _opened(self) -> sqlite3.Connection | None:
        # None (a worker opens it again) once the file at the path is not the one it opened.
        conn: sqlite3.Connection | None = None if self._file.replaced() else self._file.conn
        return conn

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run the write ``fn`` in one transaction, in the file's shared writer: the
        conversations' storages write the same file, and a thread's timestamp joins the commit
        of the turn it dates (issue 36)."""
        if not shares_writes(self.path):

            def alone(c: sqlite3.Connection) -> T:
                c.execute("BEGIN IMMEDIATE")
                try:
                    value = fn(c)
                except BaseException:
                    c.execute("ROLLBACK")
                    raise
                c.execute("COMMIT")
                return value

            return await self._call(alone)
        if self._file.conn is None:
            await self._call(lambda c: None)  # the tables first
        try:
            return await write_in_file(self.path, fn, busy_timeout=5.0)
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
        # The file was deleted or replaced by one without the index (the shared writer writes
        # the file at the path; the failed write rolled back): the tables, then the write
        # again. Asked only then, not before every write (issue 36: a stat per turn).
        await self._call(lambda c: None)
        return await write_in_file(self.path, fn, busy_timeout=5.0)

    async def list(self, user: str) -> list[dict[str, Any]]:
        """The user's threads, most recently used first."""
        await self._settled(user)

        def q(c: sqlite3.Connection) -> list[dict[str, Any]]:
            rows = c.execute(
                "SELECT thread_id, title, created_at, updated_at FROM goagent_serve_threads "
                "WHERE user = ? ORDER BY updated_at DESC, thread_id",
                (user,),
            ).fetchall()
            return [
                {"id": r[0], "title": r[1], "created_at": r[2], "updated_at": r[3]} for r in rows
            ]

        return await self._call(q)

    async def get(self, user: str, thread_id: str) -> dict[str, Any] | None:
        """The user's thread, or None (also for another user's thread)."""
        await self._settled(user)

        def q(c: sqlite3.Connection) -> dict[str, Any] | None:
            row = c.execute(
                "SELECT title, created_at, updated_at FROM goagent_serve_threads "
                "WHERE user = ? AND thread_id = ?",
                (user, thread_id),
            ).fetchone()
            if row is None:
                return None
            return {"id": thread_id, "title": row[0], "created_at": row[1], "updated_at": row[2]}

        return await self._read(q)

    async def create(self, user: str, title: str, thread_id: str = "") -> dict[str, Any]:
        """A new thread for ``user`` (a random id unless given)."""
        thread_id = thread_id or secrets.token_hex(8)
        now = time.time()

        def q(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT OR IGNORE INTO goagent_serve_threads VALUES (?, ?, ?, ?, ?)",
                (user, thread_id, title, now, now),
            )

        await self._write(q)
        return {"id": thread_id, "title": title, "created_at": now, "updated_at": now}

    async def update(self, user: str, thread_id: str, title: str) -> bool:
        """Rename and touch a thread; False if it is not the user's. (A turn touches its thread
        in :meth:`record_turn`.)"""

        def q(c: sqlite3.Connection) -> bool:
            cur = c.execute(
                "UPDATE goagent_serve_threads SET title = ?, updated_at = ? WHERE user = ? "
                "AND thread_id = ?",
                (title, time.time(), user, thread_id),
            )
            return cur.rowcount > 0

        return await self._write(q)

    async def delete(self, user: str, thread_id: str) -> bool:
        """Delete the thread and its messages; False if it is not the user's."""
        await self._settled(user)  # no row of a turn being recorded is left behind

        def q(c: sqlite3.Connection) -> bool:
            cur = c.execute(
                "DELETE FROM goagent_serve_threads WHERE user = ? AND thread_id = ?",
                (user, thread_id),
            )
            found = cur.rowcount > 0
            if found:
                c.execute(
                    "DELETE FROM goagent_serve_tool_times WHERE user = ? AND thread_id = ?",
                    (user, thread_id),
                )
                delete_session(c, session_key(user, thread_id))
            return found

        return await self._write(q)

    def record_turn(
        self, user: str, thread_id: str, durations: dict[str, float]
    ) -> asyncio.Task[None]:
        """Touch the thread and keep how long its tool calls took (by call id), in one write
        that starts now. The caller need not wait for its commit (a run's stream ends before
        it, issue 36): this user's reads of the index (:meth:`list`, :meth:`get`,
        :meth:`durations`) wait for it, so they see the turn. The task fails as the write did.
        """
        rows = [(user, thread_id, call_id, d) for call_id, d in durations.items()]
        now = time.time()

        def q(c: sqlite3.Connection) -> None:
            if rows:
                c.executemany(
                    "INSERT OR REPLACE INTO goagent_serve_tool_times VALUES (?, ?, ?, ?)", rows
                )
            c.execute(
                "UPDATE goagent_serve_threads SET updated_at = ? WHERE user = ? AND thread_id = ?",
                (now, user, thread_id),
            )

        task = asyncio.ensure_future(self._write(q))
        pending = self._turns.setdefault(user, set())
        pending.add(task)

        def forget(done: asyncio.Task[None]) -> None:
            pending.discard(done)
            if not pending and self._turns.get(user) is pending:
                del self._turns[user]

        task.add_done_callback(forget)
        return task

    async def _settled(self, user: str) -> None:
        """Wait for the turns of ``user`` still being recorded (see :meth:`record_turn`)."""
        pending = self._turns.get(user)
        if pending:
            await asyncio.wait(list(pending))

    async def recorded(self) -> None:
        """Wait for every turn still being recorded (see :meth:`record_turn`): before the
        store closes, so a turn whose stream ended keeps its record."""
        pending = [task for tasks in self._turns.values() for task in tasks]
        if pending:
            await asyncio.wait(pending)

    async def durations(self, user: str, thread_id: str) -> dict[str, float]:
        """How long the thread's tool calls took, by call id (the calls recorded)."""
        await self._settled(user)

        def q(c: sqlite3.Connection) -> dict[str, float]:
            found = c.execute(
                "SELECT call_id, duration FROM goagent_serve_tool_times"
                " WHERE user = ? AND thread_id = ?",
                (user, thread_id),
            )
            return {call_id: duration for call_id, duration in found}

        return await self._read(q)

    # -- login sessions ----------------------------------------------------------------------

    async def add_login(self, user: str, expires_at: float, *, now: float, proof: str = "") -> str:
        """A new login session of ``user`` until ``expires_at``, opened by the credential
        ``proof`` names: its (random) token. Sessions expired at ``now`` are swept first."""
        token = secrets.token_urlsafe(32)

        def q(c: sqlite3.Connection) -> None:
            c.execute("DELETE FROM goagent_serve_logins WHERE expires_at <= ?", (now,))
            c.execute(
                "INSERT INTO goagent_serve_logins (token_sha256, user, expires_at, proof)"
                " VALUES (?, ?, ?, ?)",
                (_digest(token), user, expires_at, proof),
            )

        await self._write(q)
        return token

    async def login_of(self, token: str) -> tuple[str, float, str] | None:
        """The (user, expiry, proof) of a login session's token, or None."""

        def q(c: sqlite3.Connection) -> tuple[str, float, str] | None:
            row = c.execute(
                "SELECT user, expires_at, proof FROM goagent_serve_logins WHERE token_sha256 = ?",
                (_digest(token),),
            ).fetchone()
            return (row[0], row[1], row[2]) if row else None

        return await self._read(q)

    async def remove_login(self, token: str) -> None:
        """End a login session (nothing happens for an unknown token)."""

        def q(c: sqlite3.Connection) -> None:
            c.execute("DELETE FROM goagent_serve_logins WHERE token_sha256 = ?", (_digest(token),))

        await self._write(q)

    async def sweep_logins(self, now: float) -> int:
        """Delete the login sessions expired at ``now``; how many there were."""

        def q(c: sqlite3.Connection) -> int:
            return c.execute(
                "DELETE FROM goagent_serve_logins WHERE expires_at <= ?", (now,)
            ).rowcount

        return await self._write(q)

    def close(self) -> None:
        """Close the connection."""
        with self._file.lock:
            self._file.close()


def message_json(message: Message, durations: dict[str, float] | None = None) -> dict[str, Any]:
    """A stored message as the page and API show it (tool calls and results included; a tool
    result's ``duration`` in seconds when ``durations`` has its call)."""
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    thinking = "".join(b.thinking for b in message.content if isinstance(b, ThinkingBlock))
    out: dict[str, Any] = {"role": message.role.value, "text": text}
    if thinking:
        out["thinking"] = thinking
    if message.role is Role.ASSISTANT and message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ]
    if message.role is Role.TOOL:
        out["tool_call_id"] = message.tool_call_id
        out["is_error"] = message.is_error
        if durations and message.tool_call_id in durations:
            out["duration"] = durations[message.tool_call_id]
    return out
