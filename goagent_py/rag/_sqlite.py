"""SQLite plumbing shared by the RAG side tables (keyword index, chunk manifest).

They live in the same file as a ``SqliteVecStore``, so they must use the same SQLite library as
that store: two copies of SQLite in one process don't see each other's POSIX locks, and closing
one copy's file handle drops the other's locks. So the driver is the store's when sqlite-vec is
installed, else the first of ``pysqlite3``, ``sqlean`` and the standard library that has FTS5.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self, TypeVar

from goagent_py._sqlite import HeldConnection, use_wal
from goagent_py._sqlite import transaction as _transaction
from goagent_py._workers import to_thread
from goagent_py.errors import ConfigurationError, GoAgentError, MemoryStoreError

T = TypeVar("T")


@functools.cache
def driver() -> Any:
    """The sqlite3 module to use (see the module docstring)."""
    try:
        from goagent_py._sqlite import vec_driver

        return vec_driver()
    except (ImportError, GoAgentError):
        pass
    errors = []
    for name in ("pysqlite3.dbapi2", "sqlean", "sqlite3"):
        try:
            module = importlib.import_module(name)
            conn = module.connect(":memory:")
            try:
                conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
            finally:
                conn.close()
        except Exception as exc:
            errors.append(f"{name}: {exc}")
            continue
        return module
    raise ConfigurationError(
        "no sqlite3 module here has FTS5 ("
        + "; ".join(errors)
        + '); install one: pip install "goagent-py[vector]" or pip install sqlean.py'
    )


def validate_identifier(name: str, *, what: str = "table name") -> str:
    """``name`` quoted for SQL after checking it is a plain identifier (see ``SqliteVecStore``)."""
    from goagent_py.memory.vector._common import validate_identifier as check

    return check(name, what=what)


# One transaction helper for every table in the shared SQLite file.
Transaction = _transaction


class SqliteTable:
    """One lazily opened connection to a SQLite file, used from worker threads one call at a time.

    Subclasses set up their tables in :meth:`_migrate` and run queries with :meth:`_run`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = os.fspath(path)
        driver()  # fail at construction when no usable sqlite3 is installed
        # The connection (see HeldConnection): a file deleted or replaced (a backup restored
        # over it) is opened again, as in a forked child.
        self._file = HeldConnection(self._path)
        self._closed = False

    def _migrate(self, conn: Any) -> None:
        raise NotImplementedError

    async def _run(self, fn: Callable[[Any], T]) -> T:
        return await to_thread(self._locked, fn)

    def _connect(self) -> Any:
        try:
            conn = driver().connect(self._path, isolation_level=None, check_same_thread=False)
        except Exception as exc:  # a folder, a missing folder, no permission
            raise MemoryStoreError(
                f"cannot open the SQLite file {self._path!r} ({exc}): give a file in "
                "a folder that exists and is writable"
            ) from exc
        try:
            conn.execute("PRAGMA busy_timeout = 5000")
            use_wal(conn, 5.0)
            self._migrate(conn)
        except ConfigurationError:
            conn.close()
            raise
        except Exception as exc:
            conn.close()
            raise MemoryStoreError(f"opening {self!r} failed: {exc}") from exc
        return conn

    def _locked(self, fn: Callable[[Any], T]) -> T:
        with self._file.lock:
            if self._closed:
                raise MemoryStoreError(f"{self!r} is closed")
            if self._file.replaced():
                self._file.close()
            if self._file.conn is None:
                self._file.open(self._connect)
            try:
                return fn(self._file.conn)
            except (ValueError, GoAgentError):
                raise
            except Exception as exc:
                raise MemoryStoreError(f"{self!r}: {exc}") from exc

    async def aclose(self) -> None:
        """Close the database connection. Later calls raise :class:`MemoryStoreError`."""

        def close() -> None:
            with self._file.lock:
                self._closed = True
                with contextlib.suppress(Exception):
                    self._file.close()

        await to_thread(close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
