"""SQLite plumbing shared by every table goagent-py keeps in a SQLite file: the driver that can
load sqlite-vec (stdlib ``sqlite3``, else ``pysqlite3``, else ``sqlean``), opening a connection
with the extension loaded, and one transaction context.

Python's ``sqlite3`` often cannot load extensions (pyenv, macOS builds, this project's CI
image): the driver falls back to ``pysqlite3`` and then ``sqlean``; extension loading is
switched off again as soon as sqlite-vec is loaded.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import functools
import importlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from goagent_py._workers import to_thread
from goagent_py.errors import ConfigurationError, MissingExtraError

if TYPE_CHECKING:
    import sqlite3

T = TypeVar("T")
Job = Callable[["sqlite3.Connection"], Any]


async def in_file_thread(path: str, fn: Callable[[], T]) -> T:
    """Run the blocking SQLite read ``fn`` on the file ``path`` in a worker thread (the
    shared pool: readers of a WAL file never wait on each other). Writes go through
    :func:`write_in_file`. A cancelled caller does not stop a started call."""
    return await to_thread(fn)


def file_identity(path: str) -> tuple[int, int] | None:
    """``(device, inode)`` of the file at ``path``, None when there is none: a connection
    stays on the file it opened, so a file deleted or replaced (a backup restored over it)
    while open would take its writes with it, unseen by anyone opening the path."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return (found.st_dev, found.st_ino)


class HeldConnection:
    """A long-lived connection to one SQLite file, with the lock its users take, and the one
    rule for using it: only in the process that opened it, and only while the file at its
    path is the one it opened. Every object of the package that keeps a SQLite connection
    open between calls keeps it here.

    - A connection stays on the file it opened: a file deleted or replaced while open (a
      backup restored over it) would take what is read and written through it along, unseen
      by anyone opening the path. :meth:`replaced` tells; the owner closes it and opens the
      file now at the path (a store without state of its own), or refuses (a conversation,
      whose writes go on from what it read: SQLiteStorage).
    - SQLite's rule: never carry an open connection across ``fork()`` (its locks are the
      process's; a child using or closing its parent's connection can corrupt the file or
      delete the WAL under the parent). In a forked child every held connection is dropped,
      not closed, and its lock renewed (a thread of the parent may have held it): the
      child's next call opens the file for itself.

    A relative path is the file it named when the connection was opened, whatever the working
    folder is later. ``on_fork`` is called in a forked child too (with nothing else running):
    for the owner's other locks.
    """

    def __init__(self, path: str, *, on_fork: Callable[[], None] | None = None) -> None:
        self.path = path
        self.lock = threading.Lock()
        self._on_fork = on_fork
        self.conn: Any = None
        self._where = path  # the absolute path of the file opened
        self._identity: tuple[int, int] | None = None
        _HELD.add(self)

    def open(self, connect: Callable[[], Any]) -> Any:
        """``connect()`` (called with :attr:`lock` held and no connection open), remembered
        with the file it opened: the file's identity is read before and after, and a file
        replaced in between is opened again."""
        tracked = shares_writes(self.path)
        where = os.path.abspath(self.path) if tracked else self.path
        for attempt in range(3):
            before = file_identity(where) if tracked else None
            conn = connect()
            after = file_identity(where) if tracked else None
            if before is None or before == after or attempt == 2:
                break
            conn.close()
        self.conn, self._where, self._identity = conn, where, after
        return conn

    @property
    def identity(self) -> tuple[int, int] | None:
        """The file the open connection is on (device, inode), None when not tracked."""
        return self._identity if self.conn is not None else None

    def replaced(self) -> bool:
        """Whether the file the open connection is on is no longer the one at its path."""
        return (
            self.conn is not None
            and self._identity is not None
            and file_identity(self._where) != self._identity
        )

    def same_file_as_writer(self) -> bool | None:
        """In a write of a file's shared writer (:func:`write_in_file`): whether that write
        goes into the file this connection opened; None outside one, or when either side
        does not know its file (then :meth:`replaced` says it). The writer made sure at the
        start of its batch that its connection is on the file at the path, so this answers
        what :meth:`replaced` would without a ``stat`` a write (issue 36)."""
        writing = getattr(_writing, "identity", None)
        if writing is None or self._identity is None or self.conn is None:
            return None
        return bool(writing == self._identity)

    def close(self) -> None:
        """Close the connection (with :attr:`lock` held); the next call may open again."""
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.close()

    def _forked(self) -> None:
        self.conn = None  # the parent's: never closed here
        self.lock = threading.Lock()
        if self._on_fork is not None:
            self._on_fork()


_HELD: weakref.WeakSet[HeldConnection] = weakref.WeakSet()
# In a writer thread during a batch: ``identity``, the file its connection writes.
_writing = threading.local()


def _forget_held_connections() -> None:
    for held in list(_HELD):
        held._forked()


os.register_at_fork(after_in_child=_forget_held_connections)


class NotHere:
    """:func:`read_here`'s answer when the read must go to a worker thread instead."""


NOT_HERE = NotHere()


def read_here(
    lock: threading.Lock,
    opened: Callable[[], sqlite3.Connection | None],
    fn: Callable[[sqlite3.Connection], T],
) -> T | NotHere:
    """Run the short read ``fn(conn)`` on the calling thread (the event loop's) if it cannot
    wait on anything, else :data:`NOT_HERE` (the caller then reads in a worker thread, with
    :func:`in_file_thread`, as before).

    It cannot wait on a lock: ``lock`` (the one guarding the connection) is taken only if
    free, and the connection's owner keeps SQLite's busy handler off outside its worker calls
    (``busy_timeout`` 0, see :func:`busy_waits`), so a file that another connection holds (an
    exclusive lock, WAL recovery, a checkpoint resetting the WAL) answers "busy" at once
    instead of sleeping; that answer gives :data:`NOT_HERE`. ``opened()``, called with
    ``lock`` held, gives the connection, or None when it is not open (opening migrates and may
    write: a worker's job) or closed: :data:`NOT_HERE` too. Other SQLite errors are raised.
    Issue 36: a hop to a worker thread costs ~60-120 µs of CPU, a read of a short
    conversation ~40 µs.

    What it cannot bound: a read from a disk that stalls (the pages of a served file are in
    the OS's cache), and SQLite's own short retries while another connection rewrites the
    WAL index (``walTryBeginRead``), which workers would wait through too.
    """
    if not lock.acquire(blocking=False):
        return NOT_HERE
    import sqlite3

    try:
        conn = opened()
        if conn is None:
            return NOT_HERE
        try:
            return fn(conn)
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED):
                return NOT_HERE
            raise
    finally:
        lock.release()


@contextlib.contextmanager
def busy_waits(conn: sqlite3.Connection, timeout: float) -> Iterator[sqlite3.Connection]:
    """SQLite's busy handler on (waiting up to ``timeout`` seconds for another connection's
    lock) for a worker's call on ``conn``, off again after it: a connection that
    :func:`read_here` also reads on the event loop stays at ``busy_timeout`` 0 otherwise (one
    statement less per read there than switching it off and on around each)."""
    conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    try:
        yield conn
    finally:
        conn.execute("PRAGMA busy_timeout = 0")


_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6

# How long an idle writer waits for the next write before its thread ends and its connection
# closes. Issue 36: at 50 served users the queue emptied between bursts ~0.2 times a turn, and
# a new thread and connection cost ~340 µs of CPU (the thread's start on the event loop).
_LINGER = 1.0
_exiting = False  # the interpreter is shutting down: idle writers end at once


class _Writer:
    """This process's writes to one SQLite file: one connection, used by one thread at a time,
    that lives while writes are queued. The writes queued while a commit syncs go into the next
    transaction together (group commit: one fsync for all of them), each inside a savepoint of
    its own, so each is still all or nothing and one that fails leaves the others to commit.

    Issue 36: with a connection per conversation, a server's conversations fought for the
    file's write lock (SQLite's busy handler sleeps 1-100 ms between tries) and each turn paid
    its own fsync (5-20 ms on the development machine), one after another.
    """

    def __init__(self, path: str, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._lock = threading.Lock()
        self._queue: collections.deque[_Write] = collections.deque()
        self._running = False
        self._more = threading.Condition(self._lock)  # an idle writer waits on it
        # Used by the one thread writing at a time (its lock is not taken).
        self._file = HeldConnection(path)

    def submit(self, job: _Write) -> None:
        with self._lock:
            self._queue.append(job)
            if self._running:
                self._more.notify()
            else:
                self._running = True
                # Not a daemon: at exit the interpreter waits for the writes already queued.
                threading.Thread(target=self._work, name="goagent-sqlite-writer").start()

    def withdraw(self, job: _Write) -> bool:
        """Take ``job`` out of the queue if it has not begun (its caller was cancelled)."""
        with self._lock:
            try:
                self._queue.remove(job)
            except ValueError:
                return False  # begun: it commits whole
            return True

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._queue and not _exiting:
                    self._more.wait(_LINGER)
                if not self._queue:
                    self._running = False
                    self._file.close()  # idle: no connection kept per file written
                    return
                batch = list(self._queue)  # begun: withdraw() no longer finds them
                self._queue.clear()
            _settle(batch, self._commit(batch))

    def _connect(self) -> sqlite3.Connection:
        if self._file.conn is None:
            import sqlite3

            def connect() -> sqlite3.Connection:
                conn = sqlite3.connect(
                    self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
                )
                try:
                    use_wal(conn, self.timeout)
                    # Every write of the file syncs at its commit (see SQLiteStorage).
                    conn.execute("PRAGMA synchronous=FULL")
                except BaseException:
                    conn.close()
                    raise
                return conn

            self._file.open(connect)
        conn: sqlite3.Connection = self._file.conn
        return conn

    def _commit(self, batch: list[_Write]) -> list[tuple[bool, Any]]:
        """Each write's outcome, in order: (True, its value) or (False, its exception)."""
        done: list[tuple[bool, Any]] = []
        if self._file.replaced():
            # The file was deleted or replaced since: write the one at the path now (a write
            # that expects the old one refuses itself, see SQLiteStorage).
            self._file.close()
        try:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            _writing.identity = self._file.identity
            try:
                if len(batch) == 1:
                    # A write alone: its transaction is its savepoint (issue 36: two
                    # statements less); one that fails rolls it back, and nothing commits.
                    (job,) = batch
                    try:
                        value = job.context.run(job.fn, conn)
                    except Exception as exc:
                        if conn.in_transaction:  # not rolled back by SQLite itself
                            conn.execute("ROLLBACK")
                        return [(False, exc)]
                    done.append((True, value))
                else:
                    for job in batch:
                        conn.execute("SAVEPOINT goagent_write")
                        try:
                            value = job.context.run(job.fn, conn)
                        except Exception as exc:
                            conn.execute("ROLLBACK TO goagent_write")
                            conn.execute("RELEASE goagent_write")
                            done.append((False, exc))
                            continue
                        conn.execute("RELEASE goagent_write")
                        done.append((True, value))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            finally:
                _writing.identity = None
        except BaseException as exc:  # nothing of the batch is stored: each caller learns it
            return [(False, exc)] * len(batch)
        return done


class _Write:
    """One queued write: the function, the context it runs in, and where its caller waits."""

    __slots__ = ("context", "fn", "loop", "waiter")

    def __init__(
        self, fn: Job, loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[Any]
    ) -> None:
        self.fn = fn
        self.context = contextvars.copy_context()
        self.loop = loop
        self.waiter = waiter


def _settle(batch: list[_Write], outcomes: list[tuple[bool, Any]]) -> None:
    """Hand the outcomes of a commit to their callers: one call into each event loop for all
    of its writes (issue 36: a ``concurrent.futures.Future`` per write, wrapped for asyncio,
    woke the loop once per write, through two callbacks and a copy of its state)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], bool, Any]]] = {}
    for job, (ok, value) in zip(batch, outcomes, strict=True):
        by_loop.setdefault(job.loop, []).append((job.waiter, ok, value))
    for loop, results in by_loop.items():
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits there any more
            loop.call_soon_threadsafe(_deliver, results)


def _deliver(results: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for waiter, ok, value in results:
        if waiter.done():  # its caller was cancelled after the write began
            continue
        if ok:
            waiter.set_result(value)
        else:
            waiter.set_exception(value)


_WRITERS: dict[str, _Writer] = {}
_WRITERS_LOCK = threading.Lock()
# A forked child has none of the parent's threads: it starts with none of their queues.
os.register_at_fork(after_in_child=_WRITERS.clear)


def _end_idle_writers() -> None:
    """At interpreter exit, before it waits for the writer threads: the idle ones end now
    instead of after their linger (queued writes are still made)."""
    global _exiting
    _exiting = True
    for writer in list(_WRITERS.values()):
        with writer._lock:
            writer._more.notify_all()


# Called before non-daemon threads are joined (what concurrent.futures uses for its workers);
# an interpreter without it gets no linger, so exit never waits for one.
_register_atexit = getattr(threading, "_register_atexit", None)
if _register_atexit is not None:
    _register_atexit(_end_idle_writers)
else:  # pragma: no cover - CPython has had it since 3.9
    _LINGER = 0.0


def _writer(path: str, timeout: float) -> _Writer:
    # An absolute path as given first (realpath costs a few system calls); a relative one
    # names another file once the working folder changes, so it is always resolved.
    absolute = os.path.isabs(path)
    found = _WRITERS.get(path) if absolute else None
    if found is not None:
        return found
    key = os.path.realpath(path)
    with _WRITERS_LOCK:
        found = _WRITERS.get(key)
        if found is None:
            found = _Writer(key, timeout)
            _WRITERS[key] = found
        if absolute:
            _WRITERS[path] = found
        return found


def shares_writes(path: str) -> bool:
    """Whether writes to ``path`` can go through :func:`write_in_file` (a file: ``:memory:``
    and ``""`` are a new database per connection)."""
    return path not in ("", ":memory:") and not path.startswith("file:")


async def write_in_file(
    path: str, fn: Callable[[sqlite3.Connection], T], *, busy_timeout: float
) -> T:
    """Run the write ``fn(connection)`` on the SQLite file ``path`` in this process's one
    writer for that file (see :class:`_Writer`): inside a transaction it must not begin or end
    itself, committed (with ``synchronous=FULL``) before this returns. The tables ``fn`` writes
    must exist. An exception from ``fn`` rolls back its own changes only; a failed commit fails
    every write of its batch. A cancelled caller does not stop a write that has begun: it
    still commits whole. ``busy_timeout``: seconds to wait for another process's write lock
    (the first caller's value sets it for the file).
    """
    loop = asyncio.get_running_loop()
    writer = _writer(path, busy_timeout)
    job = _Write(fn, loop, loop.create_future())
    writer.submit(job)
    try:
        result: T = await job.waiter
    except asyncio.CancelledError:
        if not writer.withdraw(job):
            # Begun: it still commits whole; a failure then is nobody's to raise.
            job.waiter.cancel()
        raise
    return result


@functools.cache
def vec_driver() -> Any:
    """The first sqlite3 module that can load sqlite-vec (stdlib, pysqlite3, sqlean)."""
    try:
        sqlite_vec = importlib.import_module("sqlite_vec")
    except ImportError as exc:
        raise MissingExtraError("sqlite-vec", "vector", feature="SqliteVecStore") from exc
    import sqlite3

    candidates: list[Any] = []
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        candidates.append(sqlite3)
    for name in ("pysqlite3.dbapi2", "sqlean"):
        with contextlib.suppress(ImportError):
            candidates.append(importlib.import_module(name))
    errors = []
    for module in candidates:
        try:
            conn = module.connect(":memory:")
            try:
                conn.enable_load_extension(True)
                sqlite_vec.load(conn)
                conn.enable_load_extension(False)
                conn.execute("SELECT vec_version()").fetchone()
            finally:
                conn.close()
        except Exception as exc:
            errors.append(f"{module.__name__}: {exc}")
            continue
        return module
    tried = "; ".join(errors) or "this Python's sqlite3 cannot load extensions"
    raise ConfigurationError(
        "SqliteVecStore needs a sqlite3 module that can load the sqlite-vec extension "
        f'({tried}). Install one: pip install "goagent-py[vector]" (brings pysqlite3-binary '
        "on Linux) or pip install sqlean.py"
    )


def use_wal(conn: Any, timeout: float) -> None:
    """``PRAGMA journal_mode=WAL`` on ``conn``, tried again for up to ``timeout`` seconds while
    another connection holds the file.

    Switching a new file to WAL takes an exclusive lock, and SQLite answers "database is
    locked" at once there, without waiting in its busy handler, when another process opens
    the same new file at the same moment (two workers starting on one chat file): without
    this, one of them failed to open it.
    """
    import sqlite3

    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            text = str(exc).lower()
            if ("locked" not in text and "busy" not in text) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def connect_vec(path: str) -> Any:
    sqlite_vec = importlib.import_module("sqlite_vec")

    conn = vec_driver().connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.enable_load_extension(True)
        try:
            sqlite_vec.load(conn)
        finally:
            conn.enable_load_extension(False)
        conn.execute("PRAGMA busy_timeout = 5000")
        use_wal(conn, 5.0)
    except BaseException:
        conn.close()
        raise
    return conn


class transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, or ``ROLLBACK`` on any error (autocommit connection).

    A failed ``COMMIT`` (e.g. the database stayed busy) is rolled back too, so the connection
    is never left inside a transaction; a transaction SQLite already rolled back itself (disk
    full, I/O error) is not rolled back twice.
    """

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            try:
                self.conn.execute("COMMIT")
                return
            except BaseException:
                self._rollback()
                raise
        self._rollback()

    def _rollback(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
