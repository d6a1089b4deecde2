"""The chunk manifest: which chunk ids each indexed source has, so none is ever left stale.

The vector-store interface can't list ids by source, so the pipeline records them here. On
re-index it compares a document's new chunk ids with the recorded ones: ids in both are left
alone (nothing written), new ids are written, and recorded ids that are gone are deleted. The
manifest is updated last, so a crash part-way leaves at worst extra work for the next run, never
a stale chunk that nothing knows about: before writing, the pipeline records the ids it is about
to write under :func:`pending_key` of the source (in the same manifest), and clears that record
once the source's own is set. A run that failed in between leaves the record, and the next
``index()`` or ``remove()`` of the source deletes those ids too (they may have been written: the
document may have changed again since, and nothing else would know them).

Use a persistent manifest with a persistent store (:class:`SqliteManifest` beside a
``SqliteVecStore``, the same file is fine): an in-memory manifest forgets, after a restart, which
chunks a source had.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from goagent_py.rag._sqlite import SqliteTable, Transaction, validate_identifier

__all__ = ["ChunkManifest", "InMemoryManifest", "SqliteManifest"]

# Two kinds of record share the manifest's keys: a source's ids under the source, the ids being
# written under _PENDING + source. A unit separator starts no usual path or URL, but a file name
# may start with any byte: a source that starts with one is stored under _ESCAPED + source, so
# no source's key is ever another source's pending record (nor the other way round).
_MARK = "\x1f"
_PENDING = "\x1fpending\x1f"
_ESCAPED = "\x1fsource\x1f"


def source_key(source: str) -> str:
    """The manifest key under which ``source``'s chunk ids are recorded (``source`` itself,
    unless it starts like a pending record's key)."""
    return _ESCAPED + source if source.startswith(_MARK) else source


def pending_key(source: str) -> str:
    """The manifest key under which the ids being written for ``source`` are recorded."""
    return _PENDING + source


def source_of_key(key: str) -> str:
    """The source a manifest key belongs to (of its own record, or of a pending one)."""
    if key.startswith(_PENDING):
        return key.removeprefix(_PENDING)
    return key.removeprefix(_ESCAPED)


async def compare_and_set(
    manifest: ChunkManifest, source: str, expected: Sequence[str], ids: Sequence[str]
) -> bool:
    """Record ``ids`` for ``source`` if its ids are still ``expected``; whether it did.

    Atomic with a manifest that has ``replace(source, expected, ids) -> bool`` (both of ours:
    two indexers of one document never both win); any other is read, compared and written,
    which is atomic only within one process.
    """
    replace = getattr(manifest, "replace", None)
    if replace is not None:
        return bool(await replace(source, expected, ids))
    if await manifest.get(source) != list(expected):
        return False
    await manifest.set(source, ids)
    return True


@runtime_checkable
class ChunkManifest(Protocol):
    """Records the chunk ids of every indexed source."""

    async def get(self, source: str) -> list[str]:
        """The recorded chunk ids of ``source``, in chunk order ([] when unknown)."""
        ...

    async def set(self, source: str, ids: Sequence[str]) -> None:
        """Record ``ids`` as the chunks of ``source`` (an empty list forgets the source)."""
        ...

    async def sources(self) -> list[str]:
        """Every recorded source, sorted."""
        ...


class InMemoryManifest:
    """A manifest in a dict (lost when the process ends). Implements :class:`ChunkManifest`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: dict[str, list[str]] = {}

    def __repr__(self) -> str:
        return f"InMemoryManifest(sources={len(self._ids)})"

    async def get(self, source: str) -> list[str]:
        """The recorded chunk ids of ``source``."""
        with self._lock:
            return list(self._ids.get(source, ()))

    async def set(self, source: str, ids: Sequence[str]) -> None:
        """Record ``ids`` for ``source``."""
        with self._lock:
            if ids:
                self._ids[source] = list(ids)
            else:
                self._ids.pop(source, None)

    async def sources(self) -> list[str]:
        """Every recorded source, sorted."""
        with self._lock:
            return sorted(self._ids)

    async def replace(self, source: str, expected: Sequence[str], ids: Sequence[str]) -> bool:
        """Record ``ids`` for ``source`` if its ids are still ``expected``; whether it did."""
        with self._lock:
            if self._ids.get(source, []) != list(expected):
                return False
            if ids:
                self._ids[source] = list(ids)
            else:
                self._ids.pop(source, None)
            return True


class SqliteManifest(SqliteTable):
    """A manifest in an SQLite table (one row per source); can share a ``SqliteVecStore`` file.

    Args:
        path: the database file, or ":memory:".
        table: the table name (a plain identifier).

    Raises:
        ConfigurationError: a bad table name, or no usable sqlite3 module.
    """

    def __init__(self, path: str | os.PathLike[str], *, table: str = "rag_manifest") -> None:
        self._table = validate_identifier(table)
        self._name = table
        super().__init__(path)

    def __repr__(self) -> str:
        return f"SqliteManifest({self._path!r}, table={self._name!r})"

    def _migrate(self, conn: Any) -> None:
        with Transaction(conn):
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self._table} (source TEXT PRIMARY KEY, "
                "ids TEXT NOT NULL, updated_at REAL NOT NULL "
                # Seconds since 1970 in every SQLite (unixepoch('subsec') needs 3.42).
                "DEFAULT ((julianday('now') - 2440587.5) * 86400.0))"
            )

    async def get(self, source: str) -> list[str]:
        """The recorded chunk ids of ``source``."""

        def get(conn: Any) -> list[str]:
            row = conn.execute(
                f"SELECT ids FROM {self._table} WHERE source = ?", (source,)
            ).fetchone()
            return [str(id) for id in json.loads(row[0])] if row else []

        return await self._run(get)

    async def set(self, source: str, ids: Sequence[str]) -> None:
        """Record ``ids`` for ``source`` (one statement, atomic)."""
        data = json.dumps(list(ids))

        def put(conn: Any) -> None:
            if ids:
                conn.execute(
                    f"INSERT INTO {self._table} (source, ids, updated_at) VALUES (?, ?, ?) "
                    "ON CONFLICT(source) DO UPDATE SET ids = excluded.ids, "
                    "updated_at = excluded.updated_at",
                    (source, data, time.time()),
                )
            else:
                conn.execute(f"DELETE FROM {self._table} WHERE source = ?", (source,))

        await self._run(put)

    async def replace(self, source: str, expected: Sequence[str], ids: Sequence[str]) -> bool:
        """Record ``ids`` for ``source`` if its ids are still ``expected`` (checked and written
        in one transaction, so two processes never both succeed); whether it did."""
        data = json.dumps(list(ids))

        def swap(conn: Any) -> bool:
            with Transaction(conn):
                row = conn.execute(
                    f"SELECT ids FROM {self._table} WHERE source = ?", (source,)
                ).fetchone()
                if (json.loads(row[0]) if row else []) != list(expected):
                    return False
                if ids:
                    conn.execute(
                        f"INSERT INTO {self._table} (source, ids, updated_at) VALUES (?, ?, ?) "
                        "ON CONFLICT(source) DO UPDATE SET ids = excluded.ids, "
                        "updated_at = excluded.updated_at",
                        (source, data, time.time()),
                    )
                else:
                    conn.execute(f"DELETE FROM {self._table} WHERE source = ?", (source,))
                return True

        return await self._run(swap)

    async def sources(self) -> list[str]:
        """Every recorded source, sorted."""

        def sources(conn: Any) -> list[str]:
            rows = conn.execute(f"SELECT source FROM {self._table} ORDER BY source").fetchall()
            return [str(row[0]) for row in rows]

        return await self._run(sources)
