"""SqliteVecStore's tables and their upkeep on open (private to sqlite_vec.py).

For ``table="memories"`` a store keeps the data table ``memories``, the vec0 table
``memories_vec`` (the session is its partition key) and, with ``quantization="int8"``, the side
tables of ``_sqlite_int8``; ``goagent_vector_tables`` records each table's schema version,
dimensions and metric (and which embedder made its vectors, see ``EmbedderRecordStore``).
Here: the table-name checks, the read-only look at an existing file at construction, and on
first use the creation of the tables or the migration of older ones.

Here so that sqlite_vec.py keeps the store's connection, writes and searches (and both files stay
within the project's 600 lines); the store inherits :class:`_SqliteVecSchema`.
"""

from __future__ import annotations

import contextlib
import os
import re
import urllib.parse
from typing import Any, Literal

from goagent_py._sqlite import transaction, vec_driver
from goagent_py.errors import ConfigurationError
from goagent_py.memory.vector._sqlite_int8 import build_side_table, side_table_sql
from goagent_py.memory.vector.base import Metric, check_registered

SCHEMA_VERSION = 3
"""1: session-less rows in the NULL partition; 2: in the ``_NO_SESSION`` partition; 3: may have
the int8 side table ``<table>_vec_q8``, which every write must keep up to date (so versions that
don't know it refuse the file)."""
_PLAIN_VERSION = 2  # what a table without the side table records: older versions can open it
_REGISTRY = "goagent_vector_tables"
# The registry's column saying a table's long-term memory rows were dated (see _date_records).
# A column, not a schema version: versions without it read and write the file as before (a row
# they write has no record, and counts as a current memory of unknown date).
_RECORDS_COLUMN = "records_dated"
# The registry's column recording which embedder made a table's vectors (EmbedderRecordStore).
# A column too: versions without it open the file as before (and write without checking).
_EMBEDDER_COLUMN = "embedder"
# The partition of entries without a session. Not NULL: sqlite-vec allocates a new chunk for
# every NULL-partition insert (issue 19: 1,000 session-less vectors made a 199 MB file). A NUL
# character, because no session name can contain one (session_of refuses it), so no session
# shares this partition; sqlite-vec compares partition keys by length and bytes.
_NO_SESSION = "\x00"
# Vectors per vec0 chunk. sqlite-vec allocates whole chunks per partition (session), and its
# default of 1024 costs 1.5 MB per session at 384 dimensions; search speed is the same.
_CHUNK_SIZE = 128


def _check_table_name(table: str) -> None:
    """Refuse names SQLite reserves or that collide with a store's derived names."""
    lower = table.lower()
    if lower.startswith("sqlite_"):
        raise ConfigurationError(
            f"invalid table name {table!r}: names starting with 'sqlite_' are reserved for "
            "SQLite's own tables; use another table name"
        )
    if lower == _REGISTRY:
        raise ConfigurationError(
            f"invalid table name {table!r}: it is the store's registry table; use another "
            "table name"
        )


def _check_new_table_name(table: str) -> None:
    """Refuse, for a table not made yet, names another store's derived tables could have.

    Tables made before this check with such names stay usable.
    """
    if re.search(r"_vec(_|$)", table.lower()):
        raise ConfigurationError(
            f"invalid table name {table!r}: a store on table 'x' also makes 'x_vec' and "
            "'x_vec_*', so names ending in '_vec' or containing '_vec_' could be another "
            "store's; use another table name"
        )


def _names(conn: Any) -> set[str]:
    """The lower-cased names of every table, view and index in the main schema."""
    return {str(n).lower() for (n,) in conn.execute("SELECT name FROM sqlite_master")}


def _add_embedder_column(conn: Any) -> None:
    """Add :data:`_EMBEDDER_COLUMN` to the registry of a file made before it existed (NULL:
    nothing recorded, so long-term memory adopts the table as it is)."""
    columns = {str(row[1]) for row in conn.execute(f"PRAGMA table_info({_REGISTRY})")}
    if _EMBEDDER_COLUMN not in columns:
        conn.execute(f"ALTER TABLE {_REGISTRY} ADD COLUMN {_EMBEDDER_COLUMN} TEXT")


def _add_records_column(conn: Any) -> None:
    """Add :data:`_RECORDS_COLUMN` to the registry of a file made before it existed."""
    columns = {str(row[1]) for row in conn.execute(f"PRAGMA table_info({_REGISTRY})")}
    if _RECORDS_COLUMN not in columns:
        conn.execute(
            f"ALTER TABLE {_REGISTRY} ADD COLUMN {_RECORDS_COLUMN} INTEGER NOT NULL DEFAULT 0"
        )


class _SqliteVecSchema:
    """The schema methods of :class:`~goagent_py.memory.vector.sqlite_vec.SqliteVecStore` (its
    base class): they read the store's settings and set ``_has_q8``."""

    _table: str
    _vec: str
    _q8: str
    _f32: str
    _name: str
    _dims: int
    _metric: Metric
    _quantization: Literal["int8"] | None
    _has_q8: bool
    _path: str

    def _peek(self) -> bool:
        """Check an existing file at construction (read-only): a table of another shape under
        this name, or other dimensions or metric, fail now rather than on first write.

        Returns:
            Whether the file has this table registered already.
        """
        if self._path == ":memory:" or self._path.startswith("file:"):
            return False
        if not os.path.isfile(self._path) or os.path.getsize(self._path) == 0:
            return False
        try:
            conn = vec_driver().connect(
                f"file:{urllib.parse.quote(os.path.abspath(self._path))}?mode=ro", uri=True
            )
        except Exception:
            return False  # opening for real reports it, with the translation of _locked
        try:
            names = _names(conn)
            registered = self._registered(conn) if _REGISTRY in names else []
        except Exception:
            return False
        finally:
            conn.close()
        if not registered:
            self._check_free(names)
        for name, row in registered:
            check_registered(
                self._describe(name),
                row,
                dimensions=self._dims,
                metric=self._metric,
                schema_version=SCHEMA_VERSION,
            )
        return bool(registered)

    def _migrate(self, conn: Any) -> None:
        with transaction(conn):
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {_REGISTRY} (name TEXT PRIMARY KEY, "
                "schema_version INTEGER NOT NULL, dimensions INTEGER NOT NULL, "
                "metric TEXT NOT NULL)"
            )
            _add_embedder_column(conn)
            registered = self._registered(conn)
            if not registered:
                _check_new_table_name(self._name)
                self._check_free(_names(conn))
                self._create(conn)
                self._mark_dated(conn)
                if self._quantization:
                    for sql in side_table_sql(self._q8, self._f32):
                        conn.execute(sql)
                    self._has_q8 = True
                return
            for name, row in registered:
                check_registered(
                    self._describe(name),
                    row,
                    dimensions=self._dims,
                    metric=self._metric,
                    schema_version=SCHEMA_VERSION,
                )
            self._has_q8 = f"{self._name}_vec_q8".lower() in _names(conn)
            self._date_records(conn)
            version = min(row[0] for _, row in registered)
            if self._quantization and not self._has_q8:
                build_side_table(conn, self._vec, self._table, self._q8, self._f32)
                self._has_q8 = True
                self._set_version(conn, max(version, SCHEMA_VERSION))
            if version >= 2:
                return
            self._upgrade_v1(conn)
            self._set_version(conn, SCHEMA_VERSION if self._has_q8 else _PLAIN_VERSION)
        # The rebuild freed the old chunks; give the space back (best effort: another
        # connection reading the file makes VACUUM fail, and the pages are reused anyway).
        with contextlib.suppress(Exception):
            conn.execute("VACUUM")

    def _read_embedder(self, conn: Any) -> str | None:
        """The table's embedder record (None: none, or a file the store has not migrated)."""
        row = conn.execute(
            f"SELECT {_EMBEDDER_COLUMN} FROM {_REGISTRY} WHERE name = ? COLLATE NOCASE "
            "ORDER BY name",
            (self._name,),
        ).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def _swap_embedder(self, conn: Any, expected: str | None, record: str) -> bool:
        """Set the embedder record if it is still ``expected`` (one ``BEGIN IMMEDIATE``
        transaction: another process's swap waits for it, then sees this one's)."""
        with transaction(conn):
            if self._read_embedder(conn) != expected:
                return False
            conn.execute(
                f"UPDATE {_REGISTRY} SET {_EMBEDDER_COLUMN} = ? WHERE name = ? COLLATE NOCASE",
                (record, self._name),
            )
            return True

    def _set_version(self, conn: Any, version: int) -> None:
        conn.execute(
            f"UPDATE {_REGISTRY} SET schema_version = ? WHERE name = ? COLLATE NOCASE",
            (version, self._name),
        )

    def _registered(self, conn: Any) -> list[tuple[str, tuple[int, int, str]]]:
        # SQLite table names ignore case, so "Memories" is the table registered as "memories"
        # (files written before this check may hold both rows).
        rows = conn.execute(
            f"SELECT name, schema_version, dimensions, metric FROM {_REGISTRY} "
            "WHERE name = ? COLLATE NOCASE ORDER BY name",
            (self._name,),
        ).fetchall()
        return [(str(name), (int(v), int(d), str(m))) for name, v, d, m in rows]

    def _describe(self, registered_as: str) -> str:
        if registered_as == self._name:
            return f"table {self._name!r} in {self._path!r}"
        return (
            f"table {self._name!r} in {self._path!r} (SQLite table names ignore case: it is "
            f"the table {registered_as!r})"
        )

    def _check_free(self, existing: set[str]) -> None:
        """Refuse a new table whose name or derived names are taken by other tables."""
        mine = {self._name.lower(), f"{self._name}_vec".lower()}
        prefix = f"{self._name}_vec_".lower()
        taken = sorted(n for n in existing if n in mine or n.startswith(prefix))
        if taken:
            raise ConfigurationError(
                f"SqliteVecStore table {self._name!r}: {self._path!r} already has "
                f"{', '.join(map(repr, taken))}, which the store would create (it makes "
                f"{self._name!r} and {self._name + '_vec'!r}); use another table name"
            )

    def _create(self, conn: Any) -> None:
        conn.execute(
            f"CREATE TABLE {self._table} ("
            "pk INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, session TEXT, "
            "text TEXT NOT NULL DEFAULT '', message TEXT NOT NULL, "
            "metadata TEXT NOT NULL DEFAULT '{}', "
            "created_at REAL NOT NULL DEFAULT (unixepoch('subsec')))"
        )
        self._create_vec(conn, self._vec)
        conn.execute(
            f"INSERT INTO {_REGISTRY} (name, schema_version, dimensions, metric) "
            "VALUES (?, ?, ?, ?)",
            (
                self._name,
                SCHEMA_VERSION if self._quantization else _PLAIN_VERSION,
                self._dims,
                self._metric,
            ),
        )

    def _create_vec(self, conn: Any, name: str) -> None:
        conn.execute(
            f"CREATE VIRTUAL TABLE {name} USING vec0("
            f"session text partition key, embedding float[{self._dims}] "
            f"distance_metric={self._metric}, chunk_size={_CHUNK_SIZE})"
        )

    def _date_records(self, conn: Any) -> None:
        """Once per table: long-term memory rows written before memory records existed (those
        with a session) become current records dated by their row's ``created_at``, in the
        metadata column and in the message's own metadata (what a search returns). Other rows
        (RAG chunks) are left as they are. Runs inside the caller's transaction."""
        _add_records_column(conn)
        (dated,) = conn.execute(
            f"SELECT max({_RECORDS_COLUMN}) FROM {_REGISTRY} WHERE name = ? COLLATE NOCASE",
            (self._name,),
        ).fetchone()
        if dated:
            return
        record = (
            "json_set(metadata, '$.memory_state', 'current', '$.\"goagent.created_at\"', "
            "strftime('%Y-%m-%dT%H:%M:%f+00:00', created_at, 'unixepoch'))"
        )
        conn.execute(
            f"UPDATE {self._table} SET metadata = {record}, "
            f"message = json_set(message, '$[0].metadata', json({record})) "
            "WHERE session IS NOT NULL AND json_type(metadata, '$.memory_state') IS NULL"
        )
        self._mark_dated(conn)

    def _mark_dated(self, conn: Any) -> None:
        _add_records_column(conn)
        conn.execute(
            f"UPDATE {_REGISTRY} SET {_RECORDS_COLUMN} = 1 WHERE name = ? COLLATE NOCASE",
            (self._name,),
        )

    def _upgrade_v1(self, conn: Any) -> None:
        """Schema 1 -> 2: session-less rows move from the NULL partition to ``_NO_SESSION``.

        sqlite-vec gives every NULL-partition insert a chunk of its own (1,000 session-less
        vectors took 199 MB), so the vector table is rebuilt rather than updated in place.
        Runs inside the caller's transaction: on any error the file is left as it was.
        """
        conn.execute(
            "CREATE TEMP TABLE goagent_vec_upgrade AS "
            f"SELECT rowid AS pk, COALESCE(session, ?) AS session, embedding FROM {self._vec}",
            (_NO_SESSION,),
        )
        conn.execute(f"DROP TABLE {self._vec}")
        self._create_vec(conn, self._vec)
        conn.execute(
            f"INSERT INTO {self._vec} (rowid, session, embedding) "
            "SELECT pk, session, embedding FROM temp.goagent_vec_upgrade ORDER BY pk"
        )
        conn.execute("DROP TABLE temp.goagent_vec_upgrade")
