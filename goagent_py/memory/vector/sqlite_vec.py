"""The embedded persistent vector store: one SQLite file with the sqlite-vec extension.

Layout for ``table="memories"`` (created on first use, recorded in ``goagent_vector_tables``
with its schema version, dimensions and metric)::

    memories      pk, id (unique), session, text, message (JSON), metadata (JSON), created_at
    memories_vec  vec0(session text partition key, embedding float[D] distance_metric=M,
                       chunk_size=128)

The session (``metadata["session"]``, how long-term memory scopes an agent's memories) is the
vec0 partition key, so a session-scoped search is a KNN query inside that partition only. Other
metadata filters are SQL conditions (``json_extract``) in an exact scan, so ``top_k`` always
counts matching entries. The metric (``cosine`` or ``l2``) is fixed when the table is made.
The ``text`` column is there for a later FTS5 index (hybrid search).

With ``quantization="int8"`` the file also holds ``memories_vec_q8`` and ``memories_vec_f32``
(int8 codes, and the exact
vectors, see ``_sqlite_int8``): searches without a filter or on the session alone scan an
in-memory copy of the codes and rescore the best candidates exactly, ~5x faster than
sqlite-vec's own scan at 100k vectors.

Python's ``sqlite3`` often cannot load extensions (pyenv, macOS builds, this project's CI
image): the store falls back to ``pysqlite3`` and then ``sqlean``; extension loading is switched
off again as soon as sqlite-vec is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self, TypeVar

from goagent_py._describe import message_of
from goagent_py._sqlite import HeldConnection, connect_vec, transaction, vec_driver
from goagent_py._workers import to_thread
from goagent_py.errors import ConfigurationError, MemoryStoreError
from goagent_py.memory.vector._common import (
    FilterValue,
    as_vector,
    check_dimensions,
    check_filter,
    entries_version,
    filter_sql,
    serialize_entries,
    split_session,
    validate_identifier,
)
from goagent_py.memory.vector._int8 import _simsimd, candidate_count
from goagent_py.memory.vector._sqlite_int8 import Int8Mirror, encode, fresh_mirror, rescore
from goagent_py.memory.vector._sqlite_vec_schema import (
    _NO_SESSION,
    _check_new_table_name,
    _check_table_name,
    _SqliteVecSchema,
)
from goagent_py.memory.vector.base import (
    Metric,
    SearchOptions,
    UpsertEntry,
    Vector,
    check_metric,
    score_of,
)
from goagent_py.messages import Message, ScoredMessage, messages_from_json

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["SqliteVecStore"]

_KNN_MAX_K = 4096  # sqlite-vec's limit on k in one KNN query

T = TypeVar("T")


def _blob(vector: NDArray[np.float32]) -> bytes:
    return vector.astype("<f4", copy=False).tobytes()


def _where(session: str | None, filter: Mapping[str, FilterValue]) -> tuple[str, list[Any]]:
    """The WHERE clause on data table ``t`` for a session (its column) and a metadata filter."""
    conds, params = filter_sql(filter)
    if session is not None:
        conds.insert(0, "t.session = ?")
        params.insert(0, session)
    return " AND ".join(conds) or "1", params


class SqliteVecStore(_SqliteVecSchema):
    """A persistent vector store in one SQLite file, on sqlite-vec (exact search).

    Implements ``VectorStore``, ``BulkVectorStore``, ``CountableStore``, ``ListableStore``,
    ``EmbedderRecordStore`` (in the registry table) and ``GuardedStore`` (the check and the
    write of ``upsert_batch_if`` share one ``BEGIN IMMEDIATE`` transaction, so other processes
    writing the file wait for it).
    SQLite calls run in a worker thread, one at a time. Use ``async with`` (or call
    :meth:`aclose`) to close the file.

    Args:
        path: the database file (created if missing), or ":memory:".
        table: the table name (a plain identifier); the vector table is ``<table>_vec``.
        dimensions: the vector length; must match what the table was created with.
        metric: ``"cosine"`` (score = cosine similarity) or ``"l2"`` (score = ``1 / (1 + d)``
            for the Euclidean distance ``d``); must match what the table was created with.
        quantization: ``"int8"``: searches without a filter or on the session alone scan int8
            codes held in memory and rescore their best ``max(4 * top_k, 64)`` candidates
            exactly (exact scores; the exact results unless the int8 pass ranks a true top-k
            entry below that many others). Adds ``<table>_vec_q8`` (built on first use for a
            table without it; every store then keeps it up to date). Cosine only; needs the
            ``simd`` extra. See ``_sqlite_int8``.

    Raises:
        ConfigurationError: a bad table name (not a plain identifier, reserved by SQLite or
            the store, ending in ``_vec`` or containing ``_vec_``, or taken in the file by a
            table the store did not make), dimensions or metric (also when they differ from
            those the table was created with; checked at construction when the file exists,
            else on first use), or no sqlite3 module here can load extensions (the message
            says what to install).
        MissingExtraError: sqlite-vec is not installed (``pip install "goagent-py[vector]"``),
            or ``quantization="int8"`` without simsimd (the ``simd`` extra).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table: str = "memories",
        dimensions: int,
        metric: Metric = "cosine",
        quantization: Literal["int8"] | None = None,
    ) -> None:
        self._table = validate_identifier(table)
        _check_table_name(table)
        self._vec = f'"{table}_vec"'
        self._q8 = f'"{table}_vec_q8"'
        self._f32 = f'"{table}_vec_f32"'
        self._name = table
        try:
            self._dims = check_dimensions(dimensions)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        self._metric = check_metric(metric)
        if quantization not in (None, "int8"):
            raise ConfigurationError(
                f"quantization={quantization!r}: use None (exact float32) or 'int8'"
            )
        if quantization == "int8":
            if self._metric != "cosine":
                raise ConfigurationError(
                    "quantization='int8' ranks by cosine: use it with metric='cosine'"
                )
            _simsimd()  # a missing extra fails here, not at the first search
        self._quantization = quantization
        # Whether the file has the side table (known once opened), and its codes in memory.
        self._has_q8 = False
        self._mirror: Int8Mirror | None = None
        self._path = os.fspath(path)
        vec_driver()  # fail at construction, not on first use, when the setup can't work
        if not self._peek():
            _check_new_table_name(table)
        # The connection (see HeldConnection): a file deleted or replaced (a backup restored
        # over it) is opened again, as in a forked child.
        self._file = HeldConnection(self._path)
        self._closed = False

    @property
    def dimensions(self) -> int:
        """The vector length."""
        return self._dims

    @property
    def metric(self) -> Metric:
        """How nearness is measured: ``"cosine"`` or ``"l2"``."""
        return self._metric

    def __repr__(self) -> str:
        return (
            f"SqliteVecStore({self._path!r}, table={self._name!r}, dimensions={self._dims}, "
            f"metric={self._metric!r}"
            + (f", quantization={self._quantization!r})" if self._quantization else ")")
        )

    # -- plumbing ------------------------------------------------------------------------------

    async def _run(self, fn: Callable[[Any], T]) -> T:
        return await to_thread(self._locked, fn)

    def _locked(self, fn: Callable[[Any], T]) -> T:
        with self._file.lock:
            if self._closed:
                raise MemoryStoreError(f"{self!r} is closed")
            if self._file.replaced():
                self._file.close()
            if self._file.conn is None:
                self._mirror = None  # the codes of the file it opens, read again
                try:
                    self._file.open(self._connect)
                except ConfigurationError:
                    raise
                except Exception as exc:
                    raise MemoryStoreError(f"opening {self!r} failed: {message_of(exc)}") from exc
            try:
                return fn(self._file.conn)
            except (ValueError, ConfigurationError, MemoryStoreError):
                raise
            except Exception as exc:
                raise MemoryStoreError(f"{self!r}: {message_of(exc)}") from exc

    def _connect(self) -> Any:
        conn = connect_vec(self._path)
        try:
            self._migrate(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    async def aclose(self) -> None:
        """Close the database file. Later calls raise :class:`MemoryStoreError`."""

        def close() -> None:
            with self._file.lock:
                self._closed = True
                self._mirror = None
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

    # -- writes --------------------------------------------------------------------------------

    def _prepare(self, entries: Sequence[UpsertEntry]) -> list[tuple[Any, ...]]:
        return [
            (e.id, e.session, e.text, e.message, e.metadata, e.vector)
            for e in serialize_entries(entries, self._dims, self._metric)
        ]

    def _write_row(
        self, conn: Any, row: tuple[Any, ...]
    ) -> tuple[int, str | None, float, bytes] | None:
        """Write one prepared row; returns what the int8 mirror must learn once it commits."""
        id, session, text, message, metadata, vector = row
        blob = _blob(vector)
        (pk,) = conn.execute(
            f"INSERT INTO {self._table} (id, session, text, message, metadata) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET session = excluded.session, "
            "text = excluded.text, message = excluded.message, metadata = excluded.metadata "
            "RETURNING pk",
            (id, session, text, message, metadata),
        ).fetchone()
        # vec0 has no upsert; the partition key may change too.
        conn.execute(f"DELETE FROM {self._vec} WHERE rowid = ?", (pk,))
        conn.execute(
            f"INSERT INTO {self._vec} (rowid, session, embedding) VALUES (?, ?, ?)",
            (pk, _NO_SESSION if session is None else session, blob),
        )
        if not self._has_q8:
            return None
        scale, codes = encode(vector)
        conn.execute(
            f"INSERT OR REPLACE INTO {self._q8} (pk, session, scale, codes) VALUES (?, ?, ?, ?)",
            (pk, session, scale, codes),
        )
        conn.execute(
            f"INSERT OR REPLACE INTO {self._f32} (pk, embedding) VALUES (?, ?)", (pk, blob)
        )
        return pk, session, scale, codes

    def _delete_ids(self, conn: Any, ids: Sequence[str]) -> list[int]:
        """Delete ``ids``; returns the primary keys deleted."""
        deleted = []
        for id in ids:
            row = conn.execute(f"SELECT pk FROM {self._table} WHERE id = ?", (id,)).fetchone()
            if row is None:
                continue
            conn.execute(f"DELETE FROM {self._vec} WHERE rowid = ?", (row[0],))
            conn.execute(f"DELETE FROM {self._table} WHERE pk = ?", (row[0],))
            if self._has_q8:
                conn.execute(f"DELETE FROM {self._q8} WHERE pk = ?", (row[0],))
                conn.execute(f"DELETE FROM {self._f32} WHERE pk = ?", (row[0],))
            deleted.append(int(row[0]))
        return deleted

    async def upsert(self, id: str, vector: Vector, message: Message) -> None:
        """Insert or replace entry ``id`` (one transaction).

        Raises:
            ConfigurationError: a bad vector, id or metadata; nothing is written.
            MemoryStoreError: SQLite failed; the transaction is rolled back.
        """
        await self.upsert_batch([UpsertEntry(id, vector, message)])

    async def upsert_batch(self, entries: Sequence[UpsertEntry]) -> None:
        """Insert or replace all ``entries`` in one transaction: all are written or none.

        The last of duplicate ids wins.
        """
        rows = self._prepare(entries)
        if not rows:
            return

        def write(conn: Any) -> None:
            with transaction(conn):
                written = [self._write_row(conn, row) for row in rows]
            # Committed: the mirror follows (a failed write raised above and left it alone).
            if self._mirror is not None:
                for item in written:
                    if item is not None:
                        self._mirror.set(*item)

        await self._run(write)

    def _version_sql(self, filter: Mapping[str, Any]) -> tuple[str, list[Any]]:
        checked = check_filter(filter)
        where, params = _where(split_session(checked), checked)
        return f"SELECT t.id, t.message FROM {self._table} AS t WHERE {where}", params

    async def version(self, filter: Mapping[str, Any]) -> str:
        """The version token of the entries matching ``filter`` (see ``GuardedStore``).

        Raises:
            ConfigurationError: a bad filter.
        """
        sql, params = self._version_sql(filter)

        def read(conn: Any) -> str:
            return entries_version(conn.execute(sql, params).fetchall())

        return await self._run(read)

    async def upsert_batch_if(
        self, entries: Sequence[UpsertEntry], *, filter: Mapping[str, Any], version: str
    ) -> bool:
        """Write all ``entries`` in one transaction if the entries matching ``filter`` still
        have ``version``; else write nothing and return False.

        The check and the write are one ``BEGIN IMMEDIATE`` transaction: a writer in another
        process waits for it (``busy_timeout``), then sees what it wrote.
        """
        rows = self._prepare(entries)
        sql, params = self._version_sql(filter)

        def write(conn: Any) -> bool:
            with transaction(conn):
                if entries_version(conn.execute(sql, params).fetchall()) != version:
                    return False
                written = [self._write_row(conn, row) for row in rows]
            if self._mirror is not None:
                for item in written:
                    if item is not None:
                        self._mirror.set(*item)
            return True

        return await self._run(write)

    async def embedder_record(self) -> str | None:
        """Which embedder made the vectors, as recorded in the registry (see
        ``EmbedderRecordStore``); None for a table made before the record."""
        return await self._run(self._read_embedder)

    async def replace_embedder_record(self, expected: str | None, record: str) -> bool:
        """Record ``record`` if the record is still ``expected``, checked and written in one
        transaction (other processes on the file included); whether it did."""
        return await self._run(lambda conn: self._swap_embedder(conn, expected, record))

    async def delete(self, id: str) -> None:
        """Remove entry ``id`` (no error if it does not exist)."""
        await self.delete_batch([id])

    async def delete_batch(self, ids: Sequence[str]) -> None:
        """Remove all ``ids`` in one transaction (missing ones are ignored)."""
        if not ids:
            return
        ids = list(ids)

        def delete(conn: Any) -> None:
            with transaction(conn):
                deleted = self._delete_ids(conn, ids)
            if self._mirror is not None:
                for pk in deleted:
                    self._mirror.remove(pk)

        await self._run(delete)

    async def count(self, filter: Mapping[str, Any] | None = None) -> int:
        """How many entries the table holds, or how many match ``filter``.

        Raises:
            ConfigurationError: a bad filter.
        """
        checked = check_filter(filter)
        where, params = _where(split_session(checked), checked)
        sql = f"SELECT count(*) FROM {self._table} AS t WHERE {where}"

        def count(conn: Any) -> int:
            return int(conn.execute(sql, params).fetchone()[0])

        return await self._run(count)

    async def entries(self, filter: Mapping[str, Any] | None = None) -> list[ScoredMessage]:
        """Every entry matching ``filter``, in insertion order, with score 0.

        Raises:
            ConfigurationError: a bad filter.
            MemoryStoreError: SQLite failed, or a stored row is corrupted.
        """
        checked = check_filter(filter)
        where, params = _where(split_session(checked), checked)
        sql = f"SELECT t.id, t.message FROM {self._table} AS t WHERE {where} ORDER BY t.pk"

        def rows(conn: Any) -> list[tuple[str, str]]:
            return list(conn.execute(sql, params).fetchall())

        return [ScoredMessage(self._load(id, data), 0.0, id) for id, data in await self._run(rows)]

    # -- search --------------------------------------------------------------------------------

    async def search(
        self, vector: Vector, options: SearchOptions | None = None
    ) -> list[ScoredMessage]:
        """The entries nearest ``vector`` under the store's metric, best first.

        A filter on ``session`` alone (long-term memory's scope) is a KNN query inside that
        partition; other filters are SQL conditions in an exact scan. Either way ``top_k`` counts
        entries that match the filter.

        Raises:
            ConfigurationError: a bad vector or filter.
            MemoryStoreError: SQLite failed, or a stored row is corrupted.
        """
        options = options or SearchOptions()
        filter = check_filter(options.filter)
        query_vector = as_vector(vector, self._dims, what="query vector", metric=self._metric)
        blob = _blob(query_vector)
        session = split_session(filter)
        k = options.top_k
        t, v = self._table, self._vec
        # The int8 pass, then exact distances of its candidates from the side table.
        quick = self._quantization is not None and not filter
        where, where_params = _where(session, filter)
        # CROSS JOIN: walk the (filtered) data rows, fetch each vector by rowid.
        scan_sql = (
            f"SELECT t.id, t.message, vec_distance_{self._metric}(v.embedding, ?) AS distance "
            f"FROM {t} AS t CROSS JOIN {v} AS v ON v.rowid = t.pk "
            f"WHERE {where} ORDER BY distance, t.id LIMIT ?"
        )
        scan_params = [blob, *where_params, k]
        # The KNN query picks among entries tied at the k-th distance in storage order; extra
        # rows show whether the tie group at the k-th distance is complete (a later row lies
        # beyond it, or the partition has no more rows). When it may not be, the KNN query is
        # asked for more rows, and only at sqlite-vec's k limit does the exact scan run. Then
        # sorting by (distance, id) breaks ties by id, as in every store. Duplicate texts (the
        # same chunk in several files) tie exactly: the exact scan they used to trigger cost
        # ~40x the KNN query at 10k rows.
        first_fetch = min(2 * k + 8, _KNN_MAX_K)
        knn_sql = (
            f"SELECT t.id, t.message, knn.distance FROM (SELECT rowid, distance FROM {v} "
            "WHERE embedding MATCH ? AND k = ?"
            + (" AND session = ?" if session is not None else "")
            + f") AS knn JOIN {t} AS t ON t.pk = knn.rowid ORDER BY knn.distance, t.id"
        )
        partition = [session] if session is not None else []

        def query(conn: Any) -> list[tuple[str, str, float]]:
            if quick and self._has_q8:
                self._mirror = fresh_mirror(conn, self._mirror, self._q8, self._dims)
                pks = self._mirror.candidates(query_vector, session, candidate_count(k))
                return rescore(conn, self._f32, t, blob, pks, k)
            if filter or k > _KNN_MAX_K:
                return list(conn.execute(scan_sql, scan_params).fetchall())
            fetch = first_fetch
            while True:
                rows = list(conn.execute(knn_sql, [blob, fetch, *partition]).fetchall())
                if len(rows) < fetch or len(rows) <= k or rows[-1][2] != rows[k - 1][2]:
                    return rows[:k]
                if fetch == _KNN_MAX_K:
                    return list(conn.execute(scan_sql, scan_params).fetchall())
                fetch = min(4 * fetch, _KNN_MAX_K)

        rows = await self._run(query)
        threshold = options.score_threshold
        out = []
        for id, message, distance in rows:
            score = score_of(self._metric, float(distance))
            if threshold is not None and score < threshold:
                continue
            out.append(ScoredMessage(self._load(id, message), score, id))
        return out

    def _load(self, id: str, data: str) -> Message:
        try:
            (message,) = messages_from_json(data)
        except Exception as exc:
            raise MemoryStoreError(
                f"entry {id!r} in table {self._name!r} of {self._path!r} is corrupted: {exc}"
            ) from exc
        return message
