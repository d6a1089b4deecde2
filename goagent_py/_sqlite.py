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
from collections.abc import Callable
from concurrent.futures import Future
from types import TracebackType
from typing import Any, TypeVar

from goagent_py.errors import ConfigurationError, MissingExtraError

T = TypeVar("T")


class _FileThread:
    """Runs the calls on one file in order, in a thread that lives while there is work (a
    process that opens many files keeps no idle thread per file). Not a daemon: at exit the
    interpreter waits for the calls already queued, so an acknowledged write is never cut."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: collections.deque[tuple[Callable[[], Any], Future[Any]]] = collections.deque()
        self._running = False

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            self._queue.append((fn, future))
            if not self._running:
                self._running = True
                threading.Thread(target=self._work, name="goagent-sqlite").start()
        return future

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._running = False
                    return
                fn, future = self._queue.popleft()
            if not future.set_running_or_notify_cancel():
                continue  # its caller was cancelled before it started
            try:
                result = fn()
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)


_FILE_THREADS: dict[str, _FileThread] = {}
_FILE_THREADS_LOCK = threading.Lock()
# A forked child has none of the parent's threads: it starts with none of their queues.
os.register_at_fork(after_in_child=_FILE_THREADS.clear)


def _file_thread(path: str) -> _FileThread:
    found = _FILE_THREADS.get(path)  # as given: realpath costs a few system calls
    if found is not None:
        return found
    key = path if path in ("", ":memory:") else os.path.realpath(path)
    with _FILE_THREADS_LOCK:
        found = _FILE_THREADS.get(key)
        if found is None:
            found = _FileThread()
            _FILE_THREADS[key] = found
        _FILE_THREADS[path] = found
        return found


async def in_file_thread(path: str, fn: Callable[[], T]) -> T:
    """Run the blocking ``fn`` in this process's one thread for the SQLite file ``path``,
    after the calls queued before it.

    Issue 36: with a thread from the shared pool per call, the connections of one file (a
    served conversation each, the thread index) fought for its write lock, and SQLite's busy
    handler sleeps between tries (1, 2, 5 ... 100 ms), while the waiting calls held every pool
    thread. In one thread per file, this process's connections never wait on each other; the
    loop's other blocking work keeps the shared pool. A cancelled caller does not stop a call
    that has started: a started write still commits whole.
    """
    context = contextvars.copy_context()
    return await asyncio.wrap_future(_file_thread(path).submit(lambda: context.run(fn)))


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
        conn.execute("PRAGMA journal_mode = WAL")
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
