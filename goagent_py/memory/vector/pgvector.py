"""A PostgreSQL vector store on psycopg 3 (async) and the pgvector extension.

Layout for ``table="memories"`` (created on first use, recorded in ``goagent_vector_tables``)::

    memories       id TEXT PRIMARY KEY, session TEXT, embedding vector(D), text, message (JSON
                   text), metadata JSONB, created_at
                   + an HNSW index (vector_cosine_ops or vector_l2_ops), a session index, a GIN
                     index on metadata, and triggers that keep memories_half in step
    memories_half  id TEXT PRIMARY KEY, session TEXT, half halfvec(D) (the unit vector)
                   + a covering index (session) INCLUDE (id, half)

Search orders by cosine distance (``<=>``) or Euclidean distance (``<->``), with the session
and metadata filters (``@>``) and the score threshold in the SQL. A search filtered by session
is exact. Under the cosine metric it scans the session's entries in the side table's covering
index (an index-only scan: one session's rows are contiguous there, and half precision halves
the bytes the scan reads), rescores the best ``max(4 * top_k, 64)`` from the float vectors
and checks the result against a bound on the half-precision error (:func:`_half_error`):
when no entry outside the candidates can rank in the top ``top_k``, which is nearly always,
it is the exact answer (the same entries and float scores as a float scan); otherwise the
search widens, then falls back to scoring the session's float vectors. Vectors go to the
server as binary parameters (pgvector's own format).
Under the l2 metric the table's session index covers the float vectors instead
(``INCLUDE (id, embedding)``). A covering index is made only when a vector leaves room in a
btree row (2704 bytes) for an id and a session (cosine: up to 1196 dimensions, l2: 598);
beyond that the session index leads to the rows and the scan reads their vectors from the table.

Other filtered searches use HNSW and turn on pgvector's iterative index scan, so a selective
filter still returns ``top_k`` matches when there are that many.
"""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, cast

from goagent_py._redact import check_dsn, redact, secrets_from_dsn
from goagent_py.errors import ConfigurationError, MemoryStoreError, MissingExtraError
from goagent_py.memory.vector._common import (
    as_vector,
    check_dimensions,
    check_filter,
    entries_version,
    serialize_entries,
    split_session,
    validate_identifier,
)
from goagent_py.memory.vector._pg_layout import (
    _BTREE_MAX_ROW,
    _HALF,
    _PLAIN,
    _ROW_OVERHEAD,
    _half_error,
    _index_name,
    _PgLayout,
    _vector_bytes,
)
from goagent_py.memory.vector.base import (
    Metric,
    SearchOptions,
    UpsertEntry,
    Vector,
    check_metric,
    check_registered,
    max_distance,
    score_of,
)
from goagent_py.messages import Message, ScoredMessage, messages_from_json

if TYPE_CHECKING:
    import numpy as np
    import psycopg
    from numpy.typing import NDArray

__all__ = ["PgVectorStore"]

SCHEMA_VERSION = 1
_REGISTRY = "goagent_vector_tables"
_UPSERT = (
    "INSERT INTO {t} (id, session, embedding, text, message, metadata) "
    "VALUES (%s, %s, %b, %s, %s, %s::jsonb) ON CONFLICT (id) DO UPDATE SET "
    "session = EXCLUDED.session, embedding = EXCLUDED.embedding, text = EXCLUDED.text, "
    "message = EXCLUDED.message, metadata = EXCLUDED.metadata"
)
# metric -> (distance operator, HNSW operator class)
_OPERATORS = {"cosine": ("<=>", "vector_cosine_ops"), "l2": ("<->", "vector_l2_ops")}
# Sent with every exact session search, in the same round trip (a pipeline). The planner's
# estimates are off until the table is analysed (it chose a sequential scan of every session,
# 100 ms at 100k); the covering index is always the way here, one query is too short for
# parallel workers, and JIT compilation (where the server has it) would cost more than the
# query once a large session's scan looks expensive.
_EXACT_SETTINGS = (
    "SET LOCAL enable_seqscan = off",
    "SET LOCAL enable_bitmapscan = off",
    "SET LOCAL max_parallel_workers_per_gather = 0",
    "SET LOCAL jit = off",
)


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise MissingExtraError("psycopg", "postgres", feature="PgVectorStore") from exc
    return psycopg


class _VectorParam(bytes):
    """A vector in pgvector's binary format, sent as a binary parameter: formatting and
    parsing 384 floats as text cost ~0.3 ms a vector on the machine of the figures."""


class _HalfParam(bytes):
    """A halfvec in pgvector's binary format."""


def _vector_param(vector: NDArray[np.float32]) -> _VectorParam:
    # header: dimensions and an unused int16, then big-endian float32s (vector_recv)
    return _VectorParam(struct.pack(">HH", len(vector), 0) + vector.astype(">f4").tobytes())


def _half_param(vector: NDArray[np.float32]) -> _HalfParam:
    """``vector`` scaled to length 1 and rounded to half precision (round to nearest, as
    :func:`_half_error` assumes; no component can overflow)."""
    import numpy as np

    wide = vector.astype(np.float64)
    unit = wide / float(np.linalg.norm(wide))
    return _HalfParam(struct.pack(">HH", len(vector), 0) + unit.astype(">f2").tobytes())


async def _register_params(conn: Any) -> None:
    """Teach ``conn`` to send :class:`_VectorParam` and :class:`_HalfParam` (the types' OIDs
    are the database's own: pgvector is an extension)."""
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    cur = await conn.execute("SELECT to_regtype('vector')::oid, to_regtype('halfvec')::oid")
    row = await cur.fetchone()
    for cls, oid in zip((_VectorParam, _HalfParam), row, strict=True):
        if oid is None:  # pgvector before 0.7: no halfvec, and no half layout either
            continue
        dumper = type(
            f"{cls.__name__}Dumper",
            (Dumper,),
            {"format": Format.BINARY, "oid": int(oid), "dump": lambda self, obj: bytes(obj)},
        )
        conn.adapters.register_dumper(cls, dumper)


class PgVectorStore(_PgLayout):
    """A vector store in a PostgreSQL table with pgvector (HNSW index).

    Implements ``VectorStore``, ``BulkVectorStore``, ``CountableStore``, ``ListableStore``,
    ``EmbedderRecordStore`` (in the registry table) and ``GuardedStore`` (``upsert_batch_if``
    checks and writes under a transaction-scoped advisory lock on the table and filter, so
    guarded writers in any process take turns).

    Args:
        dsn_or_connection: a libpq connection string (the store opens and closes its own
            connection, and opens another when the server closed it), or an open
            ``psycopg.AsyncConnection`` (the caller keeps and closes it).
        table: the table name (a plain identifier).
        dimensions: the vector length; must match what the table was created with.
        metric: ``"cosine"`` (score = cosine similarity) or ``"l2"`` (score = ``1 / (1 + d)``
            for the Euclidean distance ``d``); must match what the table was created with.
        hnsw_m: HNSW ``m`` (links per node), used when the index is created.
        hnsw_ef_construction: HNSW ``ef_construction``, used when the index is created.
        exact_sessions: search a session exactly (the default: a scan of its entries' half
            vectors, the best rescored from the float ones; see the module notes); False uses
            HNSW with an iterative scan instead (approximate; for sessions so large that
            scanning them costs more, roughly beyond 50k entries).

    Raises:
        ConfigurationError: a bad table name, dimensions or metric (also when they differ from
            those the table was created with, on first use), or a malformed connection string
            (the message leaves its password out).
        MissingExtraError: psycopg is not installed (``pip install "goagent-py[postgres]"``).
    """

    def __init__(
        self,
        dsn_or_connection: str | psycopg.AsyncConnection[Any],
        *,
        table: str = "memories",
        dimensions: int,
        metric: Metric = "cosine",
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 64,
        exact_sessions: bool = True,
    ) -> None:
        self._psycopg = _psycopg()
        validate_identifier(table)
        if table == _REGISTRY:
            raise ConfigurationError(
                f"invalid table name {table!r}: it is the store's registry table; use another "
                "table name"
            )
        self._name = table
        try:
            self._dims = check_dimensions(dimensions)
            check_dimensions(hnsw_m)
            check_dimensions(hnsw_ef_construction)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        self._metric = check_metric(metric)
        self._op, self._opclass = _OPERATORS[self._metric]
        self._m = hnsw_m
        self._ef = hnsw_ef_construction
        self._exact_sessions = exact_sessions
        self._layout = _PLAIN  # what the table has, set on first use (_ensure_indexes)
        if isinstance(dsn_or_connection, str):
            check_dsn(dsn_or_connection, "PgVectorStore")
            self._dsn: str | None = dsn_or_connection
            self._conn: Any = None
        else:
            self._dsn = None
            self._conn = dsn_or_connection
        self._ready = False
        self._closed = False
        self._lock = asyncio.Lock()

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
            f"PgVectorStore(table={self._name!r}, dimensions={self._dims}, metric={self._metric!r})"
        )

    def _sql(self, template: str) -> Any:
        sql = self._psycopg.sql
        ident = sql.Identifier
        return sql.SQL(template).format(
            t=ident(self._name),
            hnsw=ident(_index_name(self._name, "hnsw_idx")),
            sess=ident(_index_name(self._name, "session_idx")),
            cover=ident(_index_name(self._name, "session_cover_idx")),
            side=ident(_index_name(self._name, "half")),
            side_idx=ident(_index_name(self._name, "half_cover_idx")),
            sync=ident(_index_name(self._name, "half_sync")),
            trunc=ident(_index_name(self._name, "half_truncate")),
            meta=ident(_index_name(self._name, "metadata_idx")),
            reg=ident(_REGISTRY),
        )

    async def _connection(self) -> Any:
        if self._closed:
            raise MemoryStoreError(f"{self!r} is closed")
        if self._conn is not None and self._conn.closed and self._dsn is not None:
            # The server ended it (a restart, a failover, an idle-connection reaper): the call
            # that met that failed; this one opens another instead of failing for good.
            self._conn = None
        if self._conn is None:
            self._conn = await self._psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
            if self._ready:  # the table is there; the new connection needs the vector types
                await _register_params(self._conn)
        if not self._ready:
            built = await self._migrate(self._conn)
            self._ready = True
            if built and self._conn.autocommit:
                # A side table just filled has no page marked all-visible yet, and until
                # autovacuum comes by, the index-only scan also reads the table's rows.
                await self._conn.execute(self._sql("VACUUM (ANALYZE) {side}"))
        return self._conn

    async def _migrate(self, conn: Any) -> bool:
        """Create or check the table and its indexes; True if it built the side table."""
        async with conn.transaction():
            # Stores opening the same table at once take turns: the first builds, the others
            # then find it built (instead of racing to create the same objects).
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"goagent_vector_tables:{self._name}",),
            )
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            await conn.execute(
                self._sql(
                    "CREATE TABLE IF NOT EXISTS {reg} (name TEXT PRIMARY KEY, "
                    "schema_version INTEGER NOT NULL, dimensions INTEGER NOT NULL, "
                    "metric TEXT NOT NULL)"
                )
            )
            await self._add_embedder_column(conn)
            cur = await conn.execute(
                self._sql("SELECT schema_version, dimensions, metric FROM {reg} WHERE name = %s"),
                (self._name,),
            )
            row = await cur.fetchone()
            if row is not None:
                check_registered(
                    f"table {self._name!r}",
                    row,
                    dimensions=self._dims,
                    metric=self._metric,
                    schema_version=SCHEMA_VERSION,
                )
            else:
                await conn.execute(
                    self._sql(
                        "CREATE TABLE IF NOT EXISTS {t} (id TEXT PRIMARY KEY, session TEXT, "
                        f"embedding vector({self._dims}) NOT NULL, text TEXT NOT NULL "
                        "DEFAULT '', message TEXT NOT NULL, metadata JSONB NOT NULL DEFAULT "
                        "'{{}}', created_at TIMESTAMPTZ NOT NULL DEFAULT now())"
                    )
                )
                await conn.execute(
                    self._sql(
                        "INSERT INTO {reg} (name, schema_version, dimensions, metric) "
                        "VALUES (%s, %s, %s, %s)"
                    ),
                    (self._name, SCHEMA_VERSION, self._dims, self._metric),
                )
            await _register_params(conn)  # in the transaction: it must not leave one open
            return await self._ensure_indexes(conn)

    async def _add_embedder_column(self, conn: Any) -> None:
        """Add the registry's ``embedder`` column (see ``EmbedderRecordStore``) to a database
        made before it existed: NULL, so long-term memory adopts its tables as they are.

        Looked up first: ``ALTER TABLE`` locks the registry (other stores opening their
        tables) even when the column is there. Two stores adding it at once take turns on an
        advisory lock of the registry (the table lock above is per table).
        """
        query = (
            "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = %s AND column_name = 'embedder'"
        )
        cur = await conn.execute(query, (_REGISTRY,))
        if await cur.fetchone() is not None:
            return
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (_REGISTRY + ":columns",)
        )
        await conn.execute(self._sql("ALTER TABLE {reg} ADD COLUMN IF NOT EXISTS embedder TEXT"))

    async def embedder_record(self) -> str | None:
        """Which embedder made the vectors, as recorded in the registry (see
        ``EmbedderRecordStore``); None for a table made before the record."""

        async def read(conn: Any) -> str | None:
            cur = await conn.execute(
                self._sql("SELECT embedder FROM {reg} WHERE name = %s"), (self._name,)
            )
            row = await cur.fetchone()
            return None if row is None or row[0] is None else str(row[0])

        return cast("str | None", await self._with_conn(read))

    async def replace_embedder_record(self, expected: str | None, record: str) -> bool:
        """Record ``record`` if the record is still ``expected`` (one ``UPDATE``: atomic
        against every other writer of the database); whether it did."""

        async def swap(conn: Any) -> bool:
            async with conn.transaction():
                cur = await conn.execute(
                    self._sql(
                        "UPDATE {reg} SET embedder = %s WHERE name = %s "
                        "AND embedder IS NOT DISTINCT FROM %s::text"
                    ),
                    (record, self._name, expected),
                )
                return bool(cur.rowcount == 1)

        return cast(bool, await self._with_conn(swap))

    async def _with_conn(self, work: Any) -> Any:
        """Run ``work(conn)`` under the lock; database errors become MemoryStoreError."""
        async with self._lock:
            try:
                conn = await self._connection()
                return await work(conn)
            except (ValueError, ConfigurationError, MemoryStoreError):
                raise
            except self._psycopg.Error as exc:
                # A malformed connection string is quoted in the error: its password too.
                text = redact(str(exc), secrets_from_dsn(self._dsn or ""))
                raise MemoryStoreError(f"{self!r}: {text}") from exc

    async def aclose(self) -> None:
        """Close the connection if the store opened it (a passed-in connection stays open)."""
        async with self._lock:
            self._closed = True
            if self._dsn is not None and self._conn is not None:
                await self._conn.close()
            self._conn = None

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
            (e.id, e.session, _vector_param(e.vector), e.text, e.message, e.metadata)
            for e in serialize_entries(entries, self._dims, self._metric)
        ]

    async def upsert(self, id: str, vector: Vector, message: Message) -> None:
        """Insert or replace entry ``id``.

        Raises:
            ConfigurationError: a bad vector, id or metadata, or an id and session longer
                together than the covering session index has room for (2704 bytes less the
                vector's: 1,880 bytes at 384 dimensions); nothing is written.
            MemoryStoreError: the database failed.
        """
        await self.upsert_batch([UpsertEntry(id, vector, message)])

    async def upsert_batch(self, entries: Sequence[UpsertEntry]) -> None:
        """Insert or replace all ``entries`` in one transaction; the last of duplicate ids wins.

        Raises:
            ConfigurationError: as :meth:`upsert`, for any entry; nothing is written.
            MemoryStoreError: the database failed.
        """
        rows = self._prepare(entries)
        if not rows:
            return
        query = self._sql(_UPSERT)

        async def write(conn: Any) -> None:
            self._check_key_room(rows)
            async with conn.transaction(), conn.cursor() as cur:
                await cur.executemany(query, rows)

        await self._with_conn(write)

    def _version_sql(self, filter: Mapping[str, Any]) -> tuple[Any, list[Any]]:
        conds, params = self._filter_sql(check_filter(filter))
        where = f"WHERE {' AND '.join(conds)}" if conds else ""
        return self._sql(f"SELECT id, message FROM {{t}} {where}"), params

    async def version(self, filter: Mapping[str, Any]) -> str:
        """The version token of the entries matching ``filter`` (see ``GuardedStore``).

        Raises:
            InvalidInputError: a bad filter.
        """
        query, params = self._version_sql(filter)

        async def read(conn: Any) -> str:
            cur = await conn.execute(query, params)
            return entries_version(await cur.fetchall())

        result: str = await self._with_conn(read)
        return result

    async def upsert_batch_if(
        self, entries: Sequence[UpsertEntry], *, filter: Mapping[str, Any], version: str
    ) -> bool:
        """Write all ``entries`` in one transaction if the entries matching ``filter`` still
        have ``version``; else write nothing and return False.

        The transaction first takes an advisory lock on the table and the filter, so two
        guarded writers of the same entries (in any process) take turns, and the second
        reads what the first committed.
        """
        rows = self._prepare(entries)
        query, params = self._version_sql(filter)
        key = json.dumps([self._name, check_filter(filter)], sort_keys=True, default=str)
        insert = self._sql(_UPSERT)

        async def write(conn: Any) -> bool:
            self._check_key_room(rows)
            async with conn.transaction(), conn.cursor() as cur:
                await cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
                await cur.execute(query, params)
                if entries_version(await cur.fetchall()) != version:
                    return False
                if rows:
                    await cur.executemany(insert, rows)
                return True

        done: bool = await self._with_conn(write)
        return done

    def _check_key_room(self, rows: list[tuple[Any, ...]]) -> None:
        """Refuse, before writing, an entry whose id and session overflow a covering index row
        (the database would fail the whole batch)."""
        if self._layout == _PLAIN:
            return
        room = _BTREE_MAX_ROW - _ROW_OVERHEAD - _vector_bytes(self._layout, self._dims)
        for id, session, *_ in rows:
            used = len(id.encode()) + len((session or "").encode())
            if used > room:
                raise ConfigurationError(
                    f"entry {id!r}: its id and session take {used} bytes; with "
                    f"{self._dims}-dimensional vectors table {self._name!r} has room for {room}"
                )

    async def delete(self, id: str) -> None:
        """Remove entry ``id`` (no error if it does not exist)."""
        await self.delete_batch([id])

    async def delete_batch(self, ids: Sequence[str]) -> None:
        """Remove all ``ids`` in one statement (missing ones are ignored)."""
        if not ids:
            return
        query = self._sql("DELETE FROM {t} WHERE id = ANY(%s)")
        ids = list(ids)

        async def delete(conn: Any) -> None:
            await conn.execute(query, (ids,))

        await self._with_conn(delete)

    async def count(self, filter: Mapping[str, Any] | None = None) -> int:
        """How many entries the table holds, or how many match ``filter``.

        Raises:
            InvalidInputError: a bad filter.
        """
        conds, params = self._filter_sql(check_filter(filter))
        where = f"WHERE {' AND '.join(conds)}" if conds else ""
        query = self._sql(f"SELECT count(*) FROM {{t}} {where}")

        async def count(conn: Any) -> int:
            cur = await conn.execute(query, params)
            row = await cur.fetchone()
            return int(row[0])

        result: int = await self._with_conn(count)
        return result

    async def entries(self, filter: Mapping[str, Any] | None = None) -> list[ScoredMessage]:
        """Every entry matching ``filter``, by id, with score 0.

        Raises:
            InvalidInputError: a bad filter.
            MemoryStoreError: the database failed, or a stored row is corrupted.
        """
        conds, params = self._filter_sql(check_filter(filter))
        where = f"WHERE {' AND '.join(conds)}" if conds else ""
        query = self._sql(f"SELECT id, message FROM {{t}} {where} ORDER BY id")

        async def rows(conn: Any) -> list[tuple[str, str]]:
            cur = await conn.execute(query, params)
            return list(await cur.fetchall())

        found: list[tuple[str, str]] = await self._with_conn(rows)
        return [ScoredMessage(self._load(id, data), 0.0, id) for id, data in found]

    # -- search --------------------------------------------------------------------------------

    async def search(
        self, vector: Vector, options: SearchOptions | None = None
    ) -> list[ScoredMessage]:
        """The entries nearest ``vector`` under the store's metric, best first.

        Raises:
            ConfigurationError: a bad vector.
            InvalidInputError: a bad filter.
            MemoryStoreError: the database failed, or a stored row is corrupted.
        """
        options = options or SearchOptions()
        filter = check_filter(options.filter)
        query = as_vector(vector, self._dims, what="query vector", metric=self._metric)
        exact = self._exact_sessions and split_session(dict(filter)) is not None
        conds, filter_params = self._filter_sql(filter)

        async def run(conn: Any) -> list[tuple[str, str, float]]:
            if not exact:
                return await self._approximate(conn, query, conds, filter_params, options)
            if self._layout == _HALF and len(conds) == 1:  # the session and nothing else
                found = await self._half_scan(conn, query, filter_params[0], options.top_k)
                if found is not None:
                    return found
            return await self._exact_scan(conn, query, conds, filter_params, options)

        rows: list[tuple[str, str, float]] = await self._with_conn(run)
        threshold = options.score_threshold
        out = []
        for id, data, distance in rows:
            score = score_of(self._metric, float(distance))
            if threshold is not None and score < threshold:
                continue
            out.append(ScoredMessage(self._load(id, data), score, id))
        return out

    def _bounded(
        self, literal: _VectorParam, conds: list[str], params: list[Any], options: SearchOptions
    ) -> tuple[str, list[Any]]:
        """The WHERE clause and its parameters, with the score threshold as a distance bound."""
        conds, params = list(conds), [literal, *params]
        if options.score_threshold is not None:
            conds.append(f"embedding {self._op} %b <= %s")
            params += [literal, max_distance(self._metric, options.score_threshold)]
        return (f"WHERE {' AND '.join(conds)}" if conds else ""), params

    async def _approximate(
        self,
        conn: Any,
        query: NDArray[np.float32],
        conds: list[str],
        params: list[Any],
        options: SearchOptions,
    ) -> list[tuple[str, str, float]]:
        """HNSW (unfiltered, or filtered with an iterative scan)."""
        where, params = self._bounded(_vector_param(query), conds, params, options)
        sql = self._sql(
            f"SELECT id, message, embedding {self._op} %b AS distance FROM {{t}} "
            f"{where} ORDER BY distance, id LIMIT %s"
        )
        async with conn.transaction():
            if conds or options.score_threshold is not None:
                # Without it, HNSW returns ef_search candidates and the filter may leave
                # fewer than top_k of them.
                await conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
            cur = await conn.execute(sql, [*params, options.top_k])
            return list(await cur.fetchall())

    async def _exact_scan(
        self,
        conn: Any,
        query: NDArray[np.float32],
        conds: list[str],
        params: list[Any],
        options: SearchOptions,
    ) -> list[tuple[str, str, float]]:
        """Score every entry of the session from the float vectors (from the covering index
        of the l2 layout, from the table otherwise)."""
        where, params = self._bounded(_vector_param(query), conds, params, options)
        # OFFSET 0 keeps the distance out of reach of the HNSW index: the session's entries
        # are read by the session index and all of them are scored.
        sql = self._sql(
            "WITH top AS MATERIALIZED (SELECT id, distance FROM (SELECT id, embedding "
            f"{self._op} %b AS distance FROM {{t}} {where} OFFSET 0) AS s "
            "ORDER BY distance, id LIMIT %s) SELECT top.id, t.message, top.distance "
            "FROM top JOIN {t} AS t USING (id) ORDER BY top.distance, top.id"
        )
        return await self._pipelined(conn, sql, [*params, options.top_k])

    async def _half_scan(
        self, conn: Any, query: NDArray[np.float32], session: str, top_k: int
    ) -> list[tuple[str, str, float]] | None:
        """The exact top ``top_k`` of a session through the half vectors, or None when the
        error bound cannot rule out an entry outside the candidates (rare).

        Candidates: the best ``n`` by half-precision distance ``1 - dot`` (an index-only scan
        of the covering index; the vectors are unit length, so the dot product stands for
        the cosine and costs a third of pgvector's cosine, which also computes both norms),
        rescored from the float vectors. Any other entry's half distance is at least the
        candidates' largest, ``a``, so its float distance is at least ``a - error``: when the
        k-th rescored distance is below that, the top k are exact. The score threshold is
        applied by the caller (the order is the same).
        """
        sql = self._sql(
            "WITH c AS MATERIALIZED (SELECT id, half <#> %b AS approx FROM {side} "
            "WHERE session = %s ORDER BY approx LIMIT %s) "
            "SELECT t.id, t.message, t.embedding <=> %b AS distance, "
            "(SELECT max(approx) FROM c), (SELECT count(*) FROM c) "
            "FROM c JOIN {t} AS t USING (id) ORDER BY distance, t.id LIMIT %s"
        )
        unit, literal = _half_param(query), _vector_param(query)
        error = _half_error(self._dims)
        n = max(4 * top_k, 64)
        for _ in range(2):
            rows = await self._pipelined(conn, sql, [unit, session, n, literal, top_k])
            if not rows:
                return []
            _, _, last, widest, count = rows[-1]
            # count < n: every entry of the session is a candidate.
            if count < n or (len(rows) == top_k and float(last) < 1 + float(widest) - error):
                return [(id, data, distance) for id, data, distance, _, _ in rows]
            n *= 8
        return None

    async def _pipelined(self, conn: Any, sql: Any, params: list[Any]) -> list[Any]:
        """``sql`` in a transaction under ``_EXACT_SETTINGS``, in one round trip when the
        client library can pipeline (libpq 14+)."""
        if self._psycopg.Pipeline.is_supported():
            async with conn.pipeline(), conn.transaction():
                for setting in _EXACT_SETTINGS:
                    await conn.execute(setting)
                cur = await conn.execute(sql, params)
            return list(await cur.fetchall())
        async with conn.transaction():
            for setting in _EXACT_SETTINGS:
                await conn.execute(setting)
            cur = await conn.execute(sql, params)
            return list(await cur.fetchall())

    @staticmethod
    def _filter_sql(filter: dict[str, Any]) -> tuple[list[str], list[Any]]:
        """WHERE conditions for a checked filter: the session column, then JSONB containment."""
        conds: list[str] = []
        params: list[Any] = []
        session = split_session(filter)
        if session is not None:
            conds.append("session = %s")
            params.append(session)
        if filter:
            conds.append("metadata @> %s::jsonb")
            params.append(json.dumps(filter))
        return conds, params

    def _load(self, id: str, data: str) -> Message:
        try:
            (message,) = messages_from_json(data)
        except Exception as exc:
            raise MemoryStoreError(
                f"entry {id!r} in table {self._name!r} is corrupted: {exc}"
            ) from exc
        return message
