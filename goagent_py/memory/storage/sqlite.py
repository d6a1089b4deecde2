"""Conversations in a SQLite file (stdlib ``sqlite3``): survives restarts and crashes.

Layout: one table, ``goagent_messages(session_id, seq, message, created_at)``, one row per
message, ``message`` being the message's JSON from :func:`~goagent_py.messages.messages_to_json`
(bytes as base64), ``(session_id, seq)`` the primary key. Many sessions share one file. The
schema version is kept in ``PRAGMA user_version``; a file written by a newer schema is refused
rather than misread. :meth:`SQLiteStorage.append_once` keeps the keys it applied in
``goagent_messages_appends(session_id, append_key)``, made by its first use: a file without
it is the same version (older code reads it as before). ``goagent_messages_generations(
session_id, generation)`` counts each session's clears (``_generation``: a write based on a
read from before a clear is refused); made with the schema, or by the first clear or opening
of an older file: a file without it is the same version, every generation 0.

Durability: the file is in WAL mode and every :meth:`SQLiteStorage.append` is one
``BEGIN IMMEDIATE ... COMMIT`` transaction, so a turn is stored entirely or not at all, and
concurrent writers (other processes too) get sequence numbers without gaps or clashes.
``synchronous=FULL`` makes SQLite fsync the WAL at each commit: once ``append`` has returned,
the messages survive not only a killed process (a committed WAL frame is already in the file,
which ``synchronous=NORMAL`` would also guarantee) but also a power cut or OS crash, which
``NORMAL`` would not. One fsync per turn is cheap next to a model call.

Reads run on the storage's own connection: on the event loop when nothing can make them wait
(``_sqlite.read_here``: the connection is free and open, SQLite's busy handler off), else in
a worker thread (``_sqlite.in_file_thread``).
Writes go to the process's one writer for the file (``_sqlite.write_in_file``): every storage of
a file in a process shares it, so they never wait on each other's write lock, and the writes
queued while one commit syncs share the next commit (one fsync for all; each write keeps its own
savepoint, so each is still all or nothing). ``append`` returns once its commit is synced, as
before. A ``:memory:`` database writes on its own connection. WAL needs a local file system
(not NFS/SMB).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from types import TracebackType
from typing import TypeVar

from goagent_py._deepcopy import message_copier
from goagent_py._generation import STALE, ReadFence, cleared_error
from goagent_py._run_hold import (
    ByteLocks,
    busy_error,
    lock_offset,
    release_in_process,
    take_in_process,
)
from goagent_py._sqlite import (
    NOT_HERE,
    HeldConnection,
    NotHere,
    busy_waits,
    file_identity,
    in_file_thread,
    read_here,
    shares_writes,
    transaction,
    use_wal,
    write_in_file,
)
from goagent_py.errors import ConfigurationError, CorruptedDataError, MemoryStoreError
from goagent_py.memory.storage._parts import (
    PART_SEPARATOR,
    check_session_id,
    owner_of,
    parts_range,
)
from goagent_py.memory.storage.base import check_append_key
from goagent_py.messages import Message, messages_from_json, messages_to_json

__all__ = ["SCHEMA_VERSION", "SQLiteStorage", "delete_session"]

SCHEMA_VERSION = 1
"""The schema version this code writes (``PRAGMA user_version``)."""

_TABLE = "goagent_messages"
_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {_TABLE} ("
    " session_id TEXT NOT NULL,"
    " seq INTEGER NOT NULL,"
    " message TEXT NOT NULL,"
    " created_at REAL NOT NULL,"
    " PRIMARY KEY (session_id, seq))"
)

_APPENDS = "goagent_messages_appends"
_APPENDS_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {_APPENDS} ("
    " session_id TEXT NOT NULL,"
    " append_key TEXT NOT NULL,"
    " PRIMARY KEY (session_id, append_key))"
)

_GENERATIONS = "goagent_messages_generations"
_GENERATIONS_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {_GENERATIONS} ("
    " session_id TEXT PRIMARY KEY,"
    " generation INTEGER NOT NULL)"
)

# Any deletion of a conversation's rows counts as a clear, whoever makes it: a goagent-py from
# before the counter (whose clear deletes the rows alone, and reads and writes this file at the
# same schema version) runs this trigger too, so its clears fence the writers that read before
# them (store12). Per deleted row (SQLite has no statement triggers): a clear moves the counter
# by its row count, and only a change of the counter matters. A part's rows (an id holding the
# unit separator, char(31)) are deleted with their conversation, whose rows count it.
_COUNT_CLEARS = "goagent_messages_count_clears"
_COUNT_CLEARS_SCHEMA = (
    f"CREATE TRIGGER IF NOT EXISTS {_COUNT_CLEARS} AFTER DELETE ON {_TABLE} "
    "WHEN instr(OLD.session_id, char(31)) = 0 BEGIN "
    f"INSERT INTO {_GENERATIONS} (session_id, generation) VALUES (OLD.session_id, 1) "
    "ON CONFLICT (session_id) DO UPDATE SET generation = generation + 1; END"
)

T = TypeVar("T")


def _has_table(conn: sqlite3.Connection, table: str, kind: str = "table") -> bool:
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = ? AND name = ?", (kind, table))
    return found.fetchone() is not None


def _generation(conn: sqlite3.Connection, session_id: str) -> int:
    """How many times ``session_id`` was cleared (0: never, or a file without the table)."""
    try:
        row = conn.execute(
            f"SELECT generation FROM {_GENERATIONS} WHERE session_id = ?", (session_id,)
        ).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise
        return 0
    return 0 if row is None else int(row[0])


def delete_session(conn: sqlite3.Connection, session_id: str) -> int:
    """Delete every row of ``session_id`` in the file (its messages and its applied append
    keys) and of its parts (``_parts``: the durable side's big tool results), and count the
    clear (a write based on a read from before it is refused: ``_generation``), in the
    caller's transaction: :meth:`SQLiteStorage.clear`, and whoever deletes a session together
    with rows of its own (the served thread index).

    Returns:
        The session's generation after this clear.
    """
    low, high = parts_range(session_id)
    for table in (_TABLE, _APPENDS):  # either may not exist yet
        if _has_table(conn, table):
            conn.execute(
                f"DELETE FROM {table} WHERE session_id = ? OR (session_id >= ? AND session_id < ?)",
                (session_id, low, high),
            )
    conn.execute(_GENERATIONS_SCHEMA)
    (generation,) = conn.execute(
        f"INSERT INTO {_GENERATIONS} (session_id, generation) VALUES (?, 1) "
        "ON CONFLICT (session_id) DO UPDATE SET generation = generation + 1 "
        "RETURNING generation",
        (session_id,),
    ).fetchone()
    return int(generation)


def _summary(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."


# A read runs on the event loop only for a conversation of at most this many rows (a copy of a
# decoded row costs ~2 µs) with at most this many new rows to decode (~8.5 µs each).
_ON_LOOP_ROWS = 512
_ON_LOOP_DECODES = 32


class SQLiteStorage:
    """Keeps one session's conversation in a SQLite file; many sessions can share the file.

    Use it as an async context manager (or call :meth:`aclose`) to close the connection, which
    is opened on first use::

        async with SQLiteStorage("chat.db", session_id="alice") as storage:
            memory = ShortTermMemory(storage=storage)

    Args:
        path: the database file (created if missing), or ":memory:".
        session_id: which conversation this storage reads and writes.
        timeout: seconds to wait for another connection's write lock before failing.

    Raises:
        MemoryStoreError: from any method, when the file cannot be opened, is locked past
            ``timeout``, is not a database, has a newer schema, or holds a corrupted row.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, session_id: str = "default", timeout: float = 5.0
    ) -> None:
        session_id = check_session_id(session_id, "SQLiteStorage")
        if timeout < 0:
            raise ConfigurationError(f"SQLiteStorage: timeout must be >= 0, got {timeout!r}")
        path = os.fspath(path)
        # Absolute: the reads, the shared writer and the file checks name one file, whatever
        # the working folder is later (a relative path resolved at each write followed a chdir).
        self.path = os.path.abspath(path) if shares_writes(path) else path
        self.session_id = session_id
        self._counter_id = owner_of(session_id)  # whose clears fence this one's writes
        self.timeout = timeout
        # The read connection: this process's, on the file it opened (see HeldConnection).
        self._file = HeldConnection(self.path, on_fork=self._forked)
        self._closed = False
        # seq -> (the row's type and text as read, its message, the copier of that message):
        # see _decoded. The message is never handed out, only its copies.
        self._memo: dict[int, tuple[str, bytes, Message, Callable[[Message], Message]]] = {}
        self._memo_lock = threading.Lock()
        self._fence = ReadFence()  # the generation each context last read (see _generation)
        # The run hold's byte in the lock file, and its place (see _hold_place).
        self._hold_at = lock_offset(session_id)
        self._hold_known: tuple[tuple[int, int], Hashable, ByteLocks | None] | None = None

    # -- plumbing --------------------------------------------------------------------------

    def _where(self) -> str:
        return f"SQLite storage {self.path!r} (session {self.session_id!r})"

    def _translate(self, exc: sqlite3.Error) -> MemoryStoreError:
        text = str(exc)
        lower = text.lower()
        if "locked" in lower or "busy" in lower:
            hint = (
                f"the file is locked by another connection (waited {self.timeout:g}s); close "
                "the other writer or pass a larger timeout= to SQLiteStorage"
            )
        elif "unable to open" in lower:
            hint = "cannot open the file; check that its folder exists and is writable"
        elif "readonly" in lower:
            hint = "the file is read-only; check its permissions and those of its folder"
        elif "not a database" in lower or "malformed" in lower:
            hint = (
                "the file is not a SQLite database or is corrupted; move it aside (keep it for "
                "recovery) or point SQLiteStorage at another path"
            )
        else:
            hint = "the database call failed"
        return MemoryStoreError(f"{self._where()}: {hint} ({text})")

    def _forked(self) -> None:
        self._memo_lock = threading.Lock()  # in a forked child: see HeldConnection

    def _open(self) -> sqlite3.Connection:
        """The read connection (with ``self._file.lock`` held), opened and migrated if needed."""
        if self._closed:
            raise MemoryStoreError(f"{self._where()} is closed; create a new SQLiteStorage")
        if self._file.conn is None:

            def connect() -> sqlite3.Connection:
                # isolation_level=None: no implicit transactions; each write is an explicit one.
                conn = sqlite3.connect(
                    self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
                )
                try:
                    self._migrate(conn)
                    # Off outside worker calls (_locked): reads on the loop never wait.
                    conn.execute("PRAGMA busy_timeout = 0")
                except BaseException:
                    conn.close()
                    raise
                return conn

            self._file.open(connect)
        self._check_file()
        conn: sqlite3.Connection = self._file.conn
        return conn

    def replaced(self) -> bool:
        """Whether the file this storage opened was deleted or replaced since (a backup
        restored over it): every call is refused then; a new :class:`SQLiteStorage` on the
        same path reads and writes the file now there."""
        return bool(self._file.replaced())

    async def reopen(self) -> bool:
        """Go on with the file now at the path if the one this storage opened was deleted or
        replaced since (a backup restored over it): close it, and let the next call open the
        file at the path. For a turn boundary, with nothing of this storage in flight: a write
        based on a read of the old file (by any task) is refused all the same, since what
        it goes on from is not in the new one; load again first.

        Returns:
            True if the storage now reads the file at the path anew, False if its file is
            still the one there (or it is closed, or a ``:memory:`` database).
        """
        if not shares_writes(self.path):
            return False

        def swap() -> bool:
            with self._file.lock:
                if self._closed or not self._file.replaced():
                    return False
                self._file.close()
                self._fence.renew()  # reads of the old file are no base for a write
            with self._memo_lock:
                self._memo = {}
            return True

        return await in_file_thread(self.path, swap)

    def _stale_error(self) -> MemoryStoreError:
        return MemoryStoreError(
            f"{self._where()}: the file was replaced (a backup restored?) after this writer "
            "read the conversation from the old one, so this write was refused and nothing of "
            "it stored; load the conversation again to go on from the file now there"
        )

    def _check_file(self) -> None:
        """Refuse to go on once the file opened is no longer the one at the path: its writes
        would be lost (a deleted file) or land beside the new file's (a replaced one)."""
        if self._file.replaced():
            raise self._replaced_error()

    def _replaced_error(self) -> MemoryStoreError:
        return MemoryStoreError(
            f"{self._where()}: the file was deleted or replaced while open, so nothing "
            "more is written to it (it would be lost); create a new SQLiteStorage to use "
            "the file now at that path"
        )

    def _migrate(self, conn: sqlite3.Connection) -> None:
        use_wal(conn, self.timeout)
        conn.execute("PRAGMA synchronous=FULL")
        version = self._version(conn)
        if version == SCHEMA_VERSION:
            if not _has_table(conn, _COUNT_CLEARS, "trigger"):  # a file made before the fence
                try:
                    with transaction(conn):
                        conn.execute(_GENERATIONS_SCHEMA)
                        conn.execute(_COUNT_CLEARS_SCHEMA)
                except sqlite3.OperationalError as exc:
                    if "readonly" not in str(exc):  # a read-only file is still read (gen. 0)
                        raise
            return
        if version > SCHEMA_VERSION:
            raise MemoryStoreError(
                f"{self._where()}: the file has schema version {version}, newer than this "
                f"goagent-py understands ({SCHEMA_VERSION}); upgrade goagent-py"
            )
        with transaction(conn):
            # Another process may have created the schema while we waited for the lock.
            if self._version(conn) < SCHEMA_VERSION:
                conn.execute(_SCHEMA)
                conn.execute(_GENERATIONS_SCHEMA)
                conn.execute(_COUNT_CLEARS_SCHEMA)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @staticmethod
    def _version(conn: sqlite3.Connection) -> int:
        row = conn.execute("PRAGMA user_version").fetchone()
        return int(row[0])

    def _opened(self) -> sqlite3.Connection | None:
        conn: sqlite3.Connection | None = None if self._closed else self._file.conn
        return conn

    def _locked(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._file.lock:
            try:
                with busy_waits(self._open(), self.timeout) as conn:
                    return fn(conn)
            except sqlite3.Error as exc:
                raise self._translate(exc) from exc

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        # A cancelled caller does not stop the thread: a started append still commits whole.
        return await in_file_thread(self.path, lambda: self._locked(fn))

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run the write ``fn`` in one transaction: in the file's shared writer (see the module
        docs), or on this storage's connection for a ``:memory:`` database."""
        if not shares_writes(self.path):

            def alone(conn: sqlite3.Connection) -> T:
                with transaction(conn):
                    return fn(conn)

            return await self._call(alone)
        if self._file.conn is None or self._closed:
            await self._call(lambda conn: None)  # open (and migrate) first; refused if closed

        def checked(conn: sqlite3.Connection) -> T:
            # The write goes into the file this storage read: the writer's connection is on
            # the file at the path (checked at its batch's start), so comparing the two files
            # needs no stat of its own (issue 36); unknown, the path is looked at.
            same = self._file.same_file_as_writer()
            if same is None:
                self._check_file()
            elif not same:
                raise self._replaced_error()
            return fn(conn)

        try:
            return await write_in_file(self.path, checked, busy_timeout=self.timeout)
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc

    # -- Storage -----------------------------------------------------------------------------

    async def load(self) -> list[Message]:
        """This session's messages, oldest first.

        Raises:
            MemoryStoreError: the file cannot be read, or a row is corrupted
                (:class:`~goagent_py.errors.CorruptedDataError`, naming the session and the
                row's ``seq``).
        """
        # Issue 36: on the loop when nothing can make it wait (see _sqlite.read_here) and the
        # conversation is short; the first read opens (and migrates) the file in a worker
        # thread, and a long conversation, or one with many rows to decode, is read there too:
        # the event loop is the application's, never held for long.
        self._check_file()
        here: tuple[int, list[tuple[int, str, bytes]]] | NotHere = NOT_HERE
        if len(self._memo) <= _ON_LOOP_ROWS:
            try:
                here = read_here(self._file.lock, self._opened, self._rows)
            except sqlite3.Error as exc:
                raise self._translate(exc) from exc
        if not isinstance(here, NotHere):
            generation, rows = here
            if len(rows) - len(self._memo) > _ON_LOOP_DECODES:
                messages = await in_file_thread(self.path, lambda: self._decoded(rows))
            elif self._memo_lock.acquire(blocking=False):  # else a worker decodes it
                try:
                    messages = self._decode(rows)
                finally:
                    self._memo_lock.release()
            else:
                messages = await in_file_thread(self.path, lambda: self._decoded(rows))
            self._fence.read(generation)  # in the caller's context: what its writes go on from
            return messages

        def read() -> tuple[int, list[Message]]:
            # The rows and their decoding in one worker call (issue 36: a second thread hop per
            # read cost the event loop more than the decoding of a short conversation).
            generation, rows = self._locked(self._rows)
            return generation, self._decoded(rows)

        generation, messages = await in_file_thread(self.path, read)
        self._fence.read(generation)
        return messages

    def _rows(self, conn: sqlite3.Connection) -> tuple[int, list[tuple[int, str, bytes]]]:
        """The session's generation and rows, read by one statement (one snapshot: a clear
        committed between two reads would pair the old rows with the new generation). An empty
        conversation reads its generation apart: pairing "empty" with a later clear's
        generation is what reading it after that clear would give."""
        # As bytes, decoded per row by _decoded: sqlite3 decoding a broken row itself would fail
        # the whole query without saying which row.
        try:
            cursor = conn.execute(
                f"SELECT seq, typeof(message), CAST(message AS BLOB), (SELECT generation FROM "
                f"{_GENERATIONS} WHERE session_id = ?2) FROM {_TABLE} WHERE session_id = ?1 "
                "ORDER BY seq",
                (self.session_id, self._counter_id),
            )
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            cursor = conn.execute(  # a file made before the generations (see _migrate)
                f"SELECT seq, typeof(message), CAST(message AS BLOB), 0 FROM {_TABLE} "
                "WHERE session_id = ? ORDER BY seq",
                (self.session_id,),
            )
        found = cursor.fetchall()
        rows = [(int(seq), str(kind), bytes(raw or b"")) for seq, kind, raw, _ in found]
        if not found:
            return _generation(conn, self._counter_id), rows
        return int(found[0][3] or 0), rows

    def _decoded(self, rows: list[tuple[int, str, bytes]]) -> list[Message]:
        """The messages of ``rows`` (all of the session's, in order), each row decoded once: a
        row whose text is the one decoded before gives a copy of that message (the text read
        is the key, so a row changed or replaced by anyone is decoded again). Issue 36: decoding
        every row again on every read was the largest cost of a served turn."""
        with self._memo_lock:
            return self._decode(rows)

    def _decode(self, rows: list[tuple[int, str, bytes]]) -> list[Message]:
        """:meth:`_decoded` with ``_memo_lock`` held."""
        memo = self._memo
        out: list[Message] = []
        fresh: dict[int, tuple[str, bytes, Message, Callable[[Message], Message]]] = {}
        for row in rows:
            seq, kind, raw = row
            known = memo.get(seq)
            if known is None or known[0] != kind or known[1] != raw:
                (message,) = self._parse([row])
                # Picked once per decoded row (issue 36: most rows are plain messages, whose
                # copy needs no look at their fields).
                known = (kind, raw, message, message_copier(message))
            fresh[seq] = known
            out.append(known[3](known[2]))
        self._memo = fresh  # rows gone from storage are forgotten
        return out

    def _parse(self, rows: list[tuple[int, str, bytes]]) -> list[Message]:
        # Each row is parsed alone: rows that are only valid JSON when joined (one message
        # split over two rows) must not be re-split into other messages.
        out: list[Message] = []
        for seq, kind, raw in rows:
            try:
                if kind != "text":
                    raise TypeError(f"expected JSON text, found a SQLite {kind} (bytes)")
                text = raw.decode("utf-8")
                parsed = messages_from_json("[" + text + "]")
                if len(parsed) != 1:
                    raise ValueError(f"the row holds {len(parsed)} messages instead of one")
            except (ValueError, TypeError) as exc:  # UnicodeDecodeError is a ValueError
                raise CorruptedDataError(
                    f"{self._where()}: the stored message with seq={seq} (table {_TABLE}) is "
                    f"corrupted and cannot be read: {_summary(exc)}; delete that row or clear "
                    "the session"
                ) from exc
            out.extend(parsed)
        return out

    async def append(self, messages: Sequence[Message]) -> None:
        """Add ``messages`` at the end of this session, in one transaction (all or none).

        Raises:
            MemoryStoreError: a message cannot be serialised, or the write failed (nothing of
                this call is stored then).
        """
        if messages:
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

    async def _append(self, messages: Sequence[Message], key: str | None) -> bool:
        rows: list[str] = []
        for i, message in enumerate(messages):
            try:
                # One message per row: the one-element JSON array without its brackets.
                rows.append(messages_to_json([message])[1:-1].decode())
            except (ValueError, TypeError) as exc:  # e.g. a non-JSON value in metadata
                raise MemoryStoreError(
                    f"{self._where()}: message {i} cannot be stored as JSON: {_summary(exc)}"
                ) from exc
        now = time.time()
        expected = self._fence.expected()

        def refusal() -> MemoryStoreError:
            if expected == STALE:
                return self._stale_error()
            return cleared_error(self._where(), self.session_id)

        def write(conn: sqlite3.Connection) -> bool:
            if key is not None:
                conn.execute(_APPENDS_SCHEMA)
                applied = conn.execute(
                    f"INSERT OR IGNORE INTO {_APPENDS} (session_id, append_key) VALUES (?, ?)",
                    (self.session_id, key),
                )
                if applied.rowcount == 0:
                    # Checked all the same: a key spent on a conversation cleared since is
                    # the caller's cue to read it again.
                    if expected is not None and _generation(conn, self._counter_id) != expected:
                        raise refusal()
                    return False
            if not rows:
                if expected is not None and _generation(conn, self._counter_id) != expected:
                    raise refusal()
                return True
            # The next seq and the clear counter in one statement (issue 36: a statement of
            # its own for the counter was ~2% of a served turn); the refusal rolls back
            # whatever this write did before it (the key), being in its transaction.
            start, generation = self._next_seq(conn)
            if expected is not None and generation != expected:
                raise refusal()
            conn.executemany(
                f"INSERT INTO {_TABLE} (session_id, seq, message, created_at) VALUES (?, ?, ?, ?)",
                [(self.session_id, start + i, row, now) for i, row in enumerate(rows)],
            )
            return True

        return await self._write(write)

    def _next_seq(self, conn: sqlite3.Connection) -> tuple[int, int]:
        """The seq the session's next row takes and its generation (see ``_generation``)."""
        try:
            start, generation = conn.execute(
                f"SELECT COALESCE(MAX(seq) + 1, 0), (SELECT generation FROM {_GENERATIONS} "
                f"WHERE session_id = ?2) FROM {_TABLE} WHERE session_id = ?1",
                (self.session_id, self._counter_id),
            ).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            (start,) = conn.execute(  # a file made before the generations (see _migrate)
                f"SELECT COALESCE(MAX(seq) + 1, 0) FROM {_TABLE} WHERE session_id = ?",
                (self.session_id,),
            ).fetchone()
            generation = 0
        return int(start), int(generation or 0)

    async def update_where(
        self, match: Callable[[Message], bool], update: Callable[[Message], Message]
    ) -> Message | None:
        """Replace the newest message of this session that ``match`` accepts with
        ``update(message)``, in one write transaction (``BEGIN IMMEDIATE``): of two processes
        updating the same message, the second reads what the first wrote (a compare-and-set).
        None when no message matches; an exception from ``update`` rolls back and propagates.

        Fenced as :meth:`append` is (approve14): a context that read the conversation before
        another process or task cleared it (and maybe filled it again with the same messages)
        cannot change a message of it until it reads it again.

        Raises:
            ConversationClearedError: the conversation was cleared since this context read it.
        """
        expected = self._fence.expected()

        def change(conn: sqlite3.Connection) -> Message | None:
            if expected is not None and _generation(conn, self._counter_id) != expected:
                raise (
                    self._stale_error()
                    if expected == STALE
                    else cleared_error(self._where(), self.session_id)
                )
            # Newest first, a page at a time: the message sought is nearly always the last.
            before = None
            while True:
                rows = conn.execute(
                    f"SELECT seq, typeof(message), CAST(message AS BLOB) FROM {_TABLE} "
                    "WHERE session_id = ? AND seq < COALESCE(?, seq + 1) "
                    "ORDER BY seq DESC LIMIT 32",
                    (self.session_id, before),
                ).fetchall()
                if not rows:
                    return None
                for seq, kind, raw in rows:
                    (current,) = self._parse([(int(seq), str(kind), bytes(raw or b""))])
                    if not match(current):
                        continue
                    new = update(current)
                    row = messages_to_json([new])[1:-1].decode()
                    conn.execute(
                        f"UPDATE {_TABLE} SET message = ? WHERE session_id = ? AND seq = ?",
                        (row, self.session_id, seq),
                    )
                    return new
                before = int(rows[-1][0])

        return await self._write(change)

    async def clear(self) -> None:
        """Delete this session's messages and the keys :meth:`append_once` applied (other
        sessions in the file are untouched). A writer that read the conversation before this
        clear cannot append to it until it reads it again (``ConversationClearedError``)."""

        generation = await self._write(lambda conn: delete_session(conn, self.session_id))
        self._fence.read(generation)  # this context goes on from its own clear

    async def list_sessions(self) -> list[str]:
        """The ids of every session with at least one message in the file, sorted (not the
        rows a session keeps under ids of its own: its parts, see ``_parts``)."""

        def sessions(conn: sqlite3.Connection) -> list[str]:
            cursor = conn.execute(
                f"SELECT DISTINCT session_id FROM {_TABLE} WHERE instr(session_id, ?) = 0 "
                "ORDER BY session_id",
                (PART_SEPARATOR,),
            )
            return [str(row[0]) for row in cursor.fetchall()]

        return await self._call(sessions)

    # -- lifecycle ---------------------------------------------------------------------------

    def hold_run(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold this conversation for one run: no other run, from another storage of this
        process or from another process, runs in it until the ``async with`` ends (a
        :class:`~goagent_py.Session` takes it around every run: docs/sessions.md "One run at
        a time"). The hold beyond this process is a byte-range lock on ``<path>-runs.lock``
        beside the database (the real file's path: a symlink to it is the same
        conversation), which the system releases when the process dies.

        Raises:
            SessionBusyError: another run holds the conversation; nothing was written.
        """
        return _RunHold(self)

    def _take_hold(self) -> tuple[Hashable, ByteLocks | None] | None:
        """Take the run's hold (see :meth:`hold_run`): what :meth:`_release_hold` lets go of,
        None for a database of this connection alone."""
        if not shares_writes(self.path):
            return None
        key, locks = self._hold_place()
        if not take_in_process(key):
            raise busy_error(self._hold_what(), self.session_id)
        if locks is not None and (pid := locks.take(self._hold_at)) is not None:
            release_in_process(key)
            holder = f"process {pid}" if pid > 0 else "another process"
            raise busy_error(self._hold_what(), self.session_id, holder)
        return key, locks

    def _release_hold(self, taken: tuple[Hashable, ByteLocks | None]) -> None:
        key, locks = taken
        try:
            if locks is not None:
                locks.release(self._hold_at)
        finally:
            release_in_process(key)

    def _hold_what(self) -> str:
        return f"conversation {self.session_id!r} of {self.path}"

    def _hold_place(self) -> tuple[Hashable, ByteLocks | None]:
        """The hold's key in this process and the lock file's locks: the real file's (a
        symlink to the database names the same file, SQLite follows it).

        Derived from the file the storage's connection is on (issue 36: two ``realpath``
        calls, a few ``lstat`` each, a run): remembered with that file's identity once the
        real path is seen to name it, and found again only while the connection is on that
        same file. A file replaced at the path (a backup restored, a symlink pointed
        elsewhere) and opened again by :meth:`reopen` is another identity: looked up anew.
        """
        identity = self._file.identity
        known = self._hold_known
        if known is not None and identity is not None and known[0] == identity:
            return known[1], known[2]
        # The file, not the name: a symlink to the database names the same file.
        real = os.path.realpath(self.path)
        key = ("sqlite", real, self.session_id)
        try:
            locks = ByteLocks.at(real + "-runs.lock")
        except OSError:
            locks = None  # a folder we cannot write to: the database itself will say so
        if identity is not None and file_identity(real) == identity:
            self._hold_known = (identity, key, locks)
        return key, locks

    async def aclose(self) -> None:
        """Close the connection; later calls raise :class:`MemoryStoreError`. Idempotent."""

        def close() -> None:
            with self._file.lock:
                self._closed = True
                self._file.close()

        await in_file_thread(self.path, close)

    async def __aenter__(self) -> SQLiteStorage:
        await self._call(lambda conn: None)  # open now, so a bad path fails here
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"SQLiteStorage({self.path!r}, session_id={self.session_id!r})"


class _RunHold:
    """:meth:`SQLiteStorage.hold_run`'s context: taken on entry, let go of on exit (a class, not
    a generator's context: issue 36, one run's hold was an async generator's worth of work)."""

    __slots__ = ("_storage", "_taken")

    def __init__(self, storage: SQLiteStorage) -> None:
        self._storage = storage
        self._taken: tuple[Hashable, ByteLocks | None] | None = None

    async def __aenter__(self) -> None:
        self._taken = self._storage._take_hold()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        taken, self._taken = self._taken, None
        if taken is not None:
            self._storage._release_hold(taken)
