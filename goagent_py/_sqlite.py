"""SQLite plumbing shared by every table goagent-py keeps in a SQLite file: the driver that can
load sqlite-vec (stdlib ``sqlite3``, else ``pysqlite3``, else ``sqlean``), opening a connection
with the extension loaded, and one transaction context.

Python's ``sqlite3`` often cannot load extensions (pyenv, macOS builds, this project's CI
image): the driver falls back to ``pysqlite3`` and then ``sqlean``; extension loading is
switched off again as soon as sqlite-vec is loaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from goagent_py.errors import ConfigurationError, MissingExtraError

T = TypeVar("T")


async def in_file_thread(path: str, fn: Callable[[], T]) -> T:
    """Run the blocking SQLite call ``fn`` on the file ``path`` in a worker thread.

    The one seam for the storages' and the served thread index's calls (issue 36 tried one
    thread per file here: a race left a served run waiting, so calls go to the shared pool
    as before until that is understood). A cancelled caller does not stop a started call: a
    started write still commits whole.
    """
    return await asyncio.to_thread(fn)


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
