"""A PostgreSQL vector store on psycopg 3 (async) and the pgvector extension.

Layout for ``table="memories"`` (created on first use, recorded in ``goagent_vector_tables``)::

    memories  id TEXT PRIMARY KEY, session TEXT, embedding vector(D), text, message (JSON text),
              metadata JSONB, created_at
              + an HNSW index (vector_cosine_ops or vector_l2_ops), a covering session index
                (session) INCLUDE (id, embedding), a GIN index on metadata

Search orders by cosine distance (``<=>``) or Euclidean distance (``<->``), with the session
and metadata filters (``@>``) and the score threshold in the SQL. A search filtered by session
is exact: an index-only scan of the session's entries in the covering index (one session's rows
are contiguous there, while in the table they are spread over every page), which at 100k
entries and a 10% session costs a few ms where HNSW with a filter cost 28 ms or more (its
iterative scan visits the other sessions' nodes too). Other filtered searches use HNSW and
turn on pgvector's iterative index scan, so a selective filter still returns ``top_k`` matches
when there are that many.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from goagent_py.errors import ConfigurationError, MemoryStoreError, MissingExtraError
from goagent_py.memory.vector._common import (
    as_vector,
    check_dimensions,
    check_filter,
    serialize_entries,
    split_session,
    validate_identifier,
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
# metric -> (distance operator, HNSW operator class)
_OPERATORS = {"cosine": ("<=>", "vector_cosine_ops"), "l2": ("<->", "vector_l2_ops")}
_EXACT_SETTINGS = (
    "SET LOCAL enable_seqscan = off",
    "SET LOCAL enable_bitmapscan = off",
    "SET LOCAL max_parallel_workers_per_gather = 0",
)


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise MissingExtraError("psycopg", "postgres", feature="PgVectorStore") from exc
    return psycopg


_MAX_IDENTIFIER = 63  # PostgreSQL's NAMEDATALEN - 1: longer names are silently truncated


def _index_name(table: str, suffix: str) -> str:
    """``<table>_<suffix>``, or when that is too long for PostgreSQL, the table name cut short
    plus a hash of the full name (deterministic, so reopening finds the same index)."""
    name = f"{table}_{suffix}"
    if len(name) <= _MAX_IDENTIFIER:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    keep = _MAX_IDENTIFIER - len(suffix) - len(digest) - 2
    return f"{table[:keep]}_{digest}_{suffix}"


def _literal(vector: NDArray[np.float32]) -> str:
    # repr() of a float32 widened to float round-trips exactly through pgvector's float4 parser.
    return "[" + ",".join(repr(x) for x in vector.tolist()) + "]"


class PgVectorStore:
    """A vector store in a PostgreSQL table with pgvector (HNSW index).

    Implements ``VectorStore``, ``BulkVectorStore`` and ``CountableStore``.

    Args:
        dsn_or_connection: a libpq connection string (the store opens and closes its own
            connection), or an open ``psycopg.AsyncConnection`` (the caller keeps and closes it).
        table: the table name (a plain identifier).
        dimensions: the vector length; must match what the table was created with.
        metric: ``"cosine"`` (score = cosine similarity) or ``"l2"`` (score = ``1 / (1 + d)``
            for the Euclidean distance ``d``); must match what the table was created with.
        hnsw_m: HNSW ``m`` (links per node), used when the index is created.
        hnsw_ef_construction: HNSW ``ef_construction``, used when the index is created.
        exact_sessions: search a session by an exact scan of its entries (the default); False
            uses HNSW with an iterative scan instead (approximate; for sessions so large that
            scanning them costs more, roughly beyond 50k entries).

    Raises:
        ConfigurationError: a bad table name, dimensions or metric (also when they differ from
            those the table was created with, on first use).
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
        if isinstance(dsn_or_connection, str):
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
            meta=ident(_index_name(self._name, "metadata_idx")),
            reg=ident(_REGISTRY),
        )

    async def _connection(self) -> Any:
        if self._closed:
            raise MemoryStoreError(f"{self!r} is closed")
        if self._conn is None:
            self._conn = await self._psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
        if not self._ready:
            await self._migrate(self._conn)
            self._ready = True
        return self._conn

    async def _migrate(self, conn: Any) -> None:
        async with conn.transaction():
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            await conn.execute(
                self._sql(
                    "CREATE TABLE IF NOT EXISTS {reg} (name TEXT PRIMARY KEY, "
                    "schema_version INTEGER NOT NULL, dimensions INTEGER NOT NULL, "
                    "metric TEXT NOT NULL)"
                )
            )
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
            await self._ensure_indexes(conn)

    async def _ensure_indexes(self, conn: Any) -> None:
        """Create whichever of the three indexes the table lacks.

        Looked up by what they index, not by name: tables made before index names were
        shortened (62-63-character table names) got their names truncated by PostgreSQL, so
        at most one index, and for 63 characters none, was made.
        """
        cur = await conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() "
            "AND tablename = %s",
            (self._name,),
        )
        defs = [str(r[0]) for r in await cur.fetchall()]
        if not any("USING hnsw (embedding" in d for d in defs):
            await conn.execute(
                self._sql(
                    "CREATE INDEX IF NOT EXISTS {hnsw} ON {t} USING hnsw "
                    f"(embedding {self._opclass}) WITH (m = {self._m}, "
                    f"ef_construction = {self._ef})"
                )
            )
        if not any("USING btree (session) INCLUDE (id, embedding)" in d for d in defs):
            await conn.execute(
                self._sql(
                    "CREATE INDEX IF NOT EXISTS {cover} ON {t} (session) INCLUDE (id, embedding)"
                )
            )
            # It does what the plain session index of tables made before did; two indexes on
            # session would only make the planner's choice less predictable.
            await conn.execute(self._sql("DROP INDEX IF EXISTS {sess}"))
        if not any("USING gin (metadata" in d for d in defs):
            await conn.execute(
                self._sql(
                    "CREATE INDEX IF NOT EXISTS {meta} ON {t} USING gin (metadata jsonb_path_ops)"
                )
            )

    async def _with_conn(self, work: Any) -> Any:
        """Run ``work(conn)`` under the lock; database errors become MemoryStoreError."""
        async with self._lock:
            try:
                conn = await self._connection()
                return await work(conn)
            except (ValueError, ConfigurationError, MemoryStoreError):
                raise
            except self._psycopg.Error as exc:
                raise MemoryStoreError(f"{self!r}: {exc}") from exc

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
            (e.id, e.session, _literal(e.vector), e.text, e.message, e.metadata)
            for e in serialize_entries(entries, self._dims, self._metric)
        ]

    async def upsert(self, id: str, vector: Vector, message: Message) -> None:
        """Insert or replace entry ``id``.

        Raises:
            ConfigurationError: a bad vector, id or metadata; nothing is written.
            MemoryStoreError: the database failed.
        """
        await self.upsert_batch([UpsertEntry(id, vector, message)])

    async def upsert_batch(self, entries: Sequence[UpsertEntry]) -> None:
        """Insert or replace all ``entries`` in one transaction; the last of duplicate ids wins."""
        rows = self._prepare(entries)
        if not rows:
            return
        query = self._sql(
            "INSERT INTO {t} (id, session, embedding, text, message, metadata) "
            "VALUES (%s, %s, %s::vector, %s, %s, %s::jsonb) ON CONFLICT (id) DO UPDATE SET "
            "session = EXCLUDED.session, embedding = EXCLUDED.embedding, text = EXCLUDED.text, "
            "message = EXCLUDED.message, metadata = EXCLUDED.metadata"
        )

        async def write(conn: Any) -> None:
            async with conn.transaction(), conn.cursor() as cur:
                await cur.executemany(query, rows)

        await self._with_conn(write)

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
            ConfigurationError: a bad filter.
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

    # -- search --------------------------------------------------------------------------------

    async def search(
        self, vector: Vector, options: SearchOptions | None = None
    ) -> list[ScoredMessage]:
        """The entries nearest ``vector`` under the store's metric, best first.

        Raises:
            ConfigurationError: a bad vector or filter.
            MemoryStoreError: the database failed, or a stored row is corrupted.
        """
        options = options or SearchOptions()
        filter = check_filter(options.filter)
        query_vec = _literal(
            as_vector(vector, self._dims, what="query vector", metric=self._metric)
        )
        exact = self._exact_sessions and split_session(dict(filter)) is not None
        conds, filter_params = self._filter_sql(filter)
        params: list[Any] = [query_vec, *filter_params]
        bound = (
            None
            if options.score_threshold is None
            else max_distance(self._metric, options.score_threshold)
        )
        if bound is not None:
            conds.append(f"embedding {self._op} %s::vector <= %s")
            params += [query_vec, bound]
        where = f"WHERE {' AND '.join(conds)}" if conds else ""
        if exact:
            # OFFSET 0 keeps the distance out of reach of the HNSW index: the session's
            # entries are read from the covering index and all of them are scored.
            query = self._sql(
                "WITH top AS MATERIALIZED (SELECT id, distance FROM (SELECT id, embedding "
                f"{self._op} %s::vector AS distance FROM {{t}} {where} OFFSET 0) AS s "
                "ORDER BY distance, id LIMIT %s) SELECT top.id, t.message, top.distance "
                "FROM top JOIN {t} AS t USING (id) ORDER BY top.distance, top.id"
            )
        else:
            query = self._sql(
                f"SELECT id, message, embedding {self._op} %s::vector AS distance FROM {{t}} "
                f"{where} ORDER BY distance, id LIMIT %s"
            )
        params.append(options.top_k)

        async def run(conn: Any) -> list[tuple[str, str, float]]:
            async with conn.transaction():
                if exact:
                    # The planner's estimates are off until the table is analysed (it chose a
                    # sequential scan of every session, 100 ms at 100k); the covering index is
                    # always the way here, and one query is too short for parallel workers.
                    for setting in _EXACT_SETTINGS:
                        await conn.execute(setting)
                elif conds:
                    # Without it, HNSW returns ef_search candidates and the filter may leave
                    # fewer than top_k of them.
                    await conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
                cur = await conn.execute(query, params)
                return list(await cur.fetchall())

        rows: list[tuple[str, str, float]] = await self._with_conn(run)
        threshold = options.score_threshold
        out = []
        for id, data, distance in rows:
            score = score_of(self._metric, float(distance))
            if threshold is not None and score < threshold:
                continue
            out.append(ScoredMessage(self._load(id, data), score, id))
        return out

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
