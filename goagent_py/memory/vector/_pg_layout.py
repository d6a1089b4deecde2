"""PgVectorStore's table layout and its upkeep on open (private to pgvector.py).

Besides the table and its HNSW and metadata indexes, a store keeps a session index in one of
three layouts: under the cosine metric, a side table ``<table>_half`` (each entry's session and
unit vector in half precision, with a covering index ``(session) INCLUDE (id, half)``) kept in
step with the table by two triggers; otherwise a covering index on the table itself
(``(session) INCLUDE (id, embedding)``); or else a plain session index. On open the store
looks up which layout the table has and migrates it to the one it should have.

Here so that pgvector.py keeps the store's connection, writes and searches (and both files stay
within the project's 600 lines); the store inherits :class:`_PgLayout`.
"""

from __future__ import annotations

import hashlib
import logging
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from goagent_py.memory.vector.base import Metric

_log = logging.getLogger("goagent_py.memory.vector")

# btree's largest row (8 kB pages), what its row header and the vector's header take, and the
# room a covering index must leave for an entry's id and session (longer ones are refused).
_BTREE_MAX_ROW = 2704
_ROW_OVERHEAD = 48
_KEY_ROOM = 256
# Session search layouts: half vectors in a side table's covering index, float vectors in the
# table's covering index, or no vectors (a plain session index on the table).
_HALF, _FLOAT, _PLAIN = "half", "float", "plain"
_HALF_INDEX_DEF = "USING btree (session) INCLUDE (id, half)"
_FLOAT_INDEX_DEF = "USING btree (session) INCLUDE (id, embedding)"
_TRIGGERS = ("goagent_half_sync", "goagent_half_truncate")
_SIDE_MARK = "goagent-py PgVectorStore: half-precision session index, kept by triggers"


def _vector_bytes(layout: str, dimensions: int) -> int:
    return 8 + (2 if layout == _HALF else 4) * dimensions


def _fits(layout: str, dimensions: int) -> bool:
    """Whether a covering index of ``layout`` leaves ``_KEY_ROOM`` bytes for id and session."""
    room = _BTREE_MAX_ROW - _ROW_OVERHEAD - _vector_bytes(layout, dimensions)
    return room >= _KEY_ROOM


def _half_error(dimensions: int) -> float:
    """A bound on |(1 - half-precision dot product) - float cosine distance|, as pgvector
    computes them, for vectors stored and queried as unit-length halfvecs.

    Rounding a unit vector's components to half precision moves it by at most
    ``e = u + s * sqrt(d)`` (``u = 2**-11``, the unit roundoff of normal halves; ``s = 2**-25``,
    half the spacing of subnormals), so the dot product of two of them moves by at most
    ``e * (1 + e) + e`` (Cauchy-Schwarz) from their cosine; pgvector sums products in float32,
    which adds up to ``d * 2**-24`` per dot product or norm, in both distances. Margins on top.
    """
    rounding = 2.0**-11 + 2.0**-25 * math.sqrt(dimensions)
    return 2.1 * rounding + 8 * dimensions * 2.0**-24


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


class _PgLayout:
    """The layout methods of :class:`~goagent_py.memory.vector.pgvector.PgVectorStore` (its
    base class): they read the store's settings and set ``_layout``."""

    _psycopg: Any
    _name: str
    _dims: int
    _metric: Metric
    _m: int
    _ef: int
    _opclass: str
    _layout: str

    if TYPE_CHECKING:

        def _sql(self, template: str) -> Any: ...

    async def _ensure_indexes(self, conn: Any) -> bool:
        """Create whichever indexes the table lacks, and the session layout it should have;
        True if it built the side table.

        Looked up by what they index, not by name: tables made before index names were
        shortened (62-63-character table names) got their names truncated by PostgreSQL, so
        at most one index, and for 63 characters none, was made.
        """
        defs = await self._index_defs(conn, self._name)
        if not any("USING hnsw (embedding" in d for d in defs):
            await conn.execute(
                self._sql(
                    "CREATE INDEX IF NOT EXISTS {hnsw} ON {t} USING hnsw "
                    f"(embedding {self._opclass}) WITH (m = {self._m}, "
                    f"ef_construction = {self._ef})"
                )
            )
        if not any("USING gin (metadata" in d for d in defs):
            await conn.execute(
                self._sql(
                    "CREATE INDEX IF NOT EXISTS {meta} ON {t} USING gin (metadata jsonb_path_ops)"
                )
            )
        wanted = [
            layout
            for layout in ((_HALF,) if self._metric == "cosine" else ()) + (_FLOAT,)
            if _fits(layout, self._dims)
        ]
        layout = await self._current_layout(conn)
        if _HALF in wanted and layout != _HALF and await self._side_name_taken(conn):
            _log.warning(
                "%r: a table named %r that is not its side table exists; no half session index",
                self,
                _index_name(self._name, "half"),
            )
            wanted.remove(_HALF)
        if layout not in (*wanted, _PLAIN):
            # A covering index made for vectors too long for it (by a version that did not
            # check): every insert would fail.
            await conn.execute(self._sql("DROP INDEX IF EXISTS {cover}"))
        for candidate in wanted:
            if layout == candidate:
                break
            # A savepoint each: a layout the server cannot make (a pgvector before 0.7 has no
            # halfvec) leaves the table as it was, and the next one is tried.
            try:
                async with conn.transaction():
                    await self._make_layout(conn, candidate)
            except self._psycopg.Error as exc:
                _log.warning("%r: no %s session index (%s)", self, candidate, exc)
                continue
            break
        self._layout = await self._current_layout(conn)
        if self._layout == _HALF:
            # Made again by an older version of the store since (it does not know the side
            # table); of no use to this one.
            await conn.execute(self._sql("DROP INDEX IF EXISTS {cover}"))
        if self._layout != _FLOAT:
            await conn.execute(self._sql("CREATE INDEX IF NOT EXISTS {sess} ON {t} (session)"))
        return layout != _HALF and self._layout == _HALF

    async def _index_defs(self, conn: Any, table: str) -> list[str]:
        cur = await conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() "
            "AND tablename = %s",
            (table,),
        )
        return [str(r[0]) for r in await cur.fetchall()]

    async def _current_layout(self, conn: Any) -> str:
        side = await self._index_defs(conn, _index_name(self._name, "half"))
        if any(d.endswith(_HALF_INDEX_DEF) for d in side):
            cur = await conn.execute(
                "SELECT count(*) FROM pg_trigger WHERE tgname = ANY(%s) AND tgrelid = "
                "(SELECT oid FROM pg_class WHERE relname = %s "
                "AND relnamespace = current_schema()::regnamespace)",
                (list(_TRIGGERS), self._name),
            )
            row = await cur.fetchone()
            if row is not None and int(row[0]) == len(_TRIGGERS):
                return _HALF
        if any(d.endswith(_FLOAT_INDEX_DEF) for d in await self._index_defs(conn, self._name)):
            return _FLOAT
        return _PLAIN

    async def _side_name_taken(self, conn: Any) -> bool:
        """Whether ``<table>_half`` exists without this store's mark (someone else's table:
        building the side table would empty it)."""
        cur = await conn.execute(
            "SELECT obj_description(oid, 'pg_class') FROM pg_class WHERE relname = %s "
            "AND relnamespace = current_schema()::regnamespace",
            (_index_name(self._name, "half"),),
        )
        row = await cur.fetchone()
        return row is not None and row[0] != _SIDE_MARK

    async def _make_layout(self, conn: Any, layout: str) -> None:
        """Build the session index of ``layout``, then drop the ones it replaces."""
        if layout == _FLOAT:
            await conn.execute(
                self._sql(
                    "CREATE INDEX IF NOT EXISTS {cover} ON {t} (session) INCLUDE (id, embedding)"
                )
            )
            # Two indexes on session would only make the planner's choice less predictable.
            await conn.execute(self._sql("DROP INDEX IF EXISTS {sess}"))
            return
        # The side table holds each entry's session and unit vector in half precision, kept
        # in step with the table by triggers (so writers that do not know of it, such as
        # older versions of this store, keep it up to date too). Making it reads the table
        # once and builds one btree; the table itself and its HNSW index are not touched.
        # The triggers take a lock that holds other writers until this transaction ends.
        d = self._dims
        for statement in (
            "CREATE TABLE IF NOT EXISTS {side} (id TEXT PRIMARY KEY, session TEXT, "
            f"half halfvec({d}) NOT NULL)",
            f"COMMENT ON TABLE {{side}} IS '{_SIDE_MARK}'",
            "TRUNCATE {side}",  # left from an earlier table of this name: rebuilt below
            "CREATE OR REPLACE FUNCTION {sync}() RETURNS trigger LANGUAGE plpgsql "
            "SET search_path FROM CURRENT AS $$ BEGIN "
            "IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND OLD.id IS DISTINCT FROM NEW.id) "
            "THEN DELETE FROM {side} WHERE id = OLD.id; END IF; "
            "IF TG_OP <> 'DELETE' THEN INSERT INTO {side} (id, session, half) VALUES "
            f"(NEW.id, NEW.session, l2_normalize(NEW.embedding)::halfvec({d})) "
            "ON CONFLICT (id) DO UPDATE SET session = EXCLUDED.session, half = EXCLUDED.half; "
            "END IF; RETURN NULL; END $$",
            "CREATE OR REPLACE FUNCTION {trunc}() RETURNS trigger LANGUAGE plpgsql "
            "SET search_path FROM CURRENT AS $$ BEGIN TRUNCATE {side}; RETURN NULL; END $$",
            f"DROP TRIGGER IF EXISTS {_TRIGGERS[0]} ON {{t}}",
            f"CREATE TRIGGER {_TRIGGERS[0]} AFTER INSERT OR DELETE OR UPDATE OF id, session, "
            "embedding ON {t} FOR EACH ROW EXECUTE FUNCTION {sync}()",
            f"DROP TRIGGER IF EXISTS {_TRIGGERS[1]} ON {{t}}",
            f"CREATE TRIGGER {_TRIGGERS[1]} AFTER TRUNCATE ON {{t}} "
            "FOR EACH STATEMENT EXECUTE FUNCTION {trunc}()",
            "INSERT INTO {side} (id, session, half) "
            f"SELECT id, session, l2_normalize(embedding)::halfvec({d}) FROM {{t}}",
            "CREATE INDEX IF NOT EXISTS {side_idx} ON {side} (session) INCLUDE (id, half)",
            "DROP INDEX IF EXISTS {cover}",
        ):
            await conn.execute(self._sql(statement))
