"""The int8 first pass of ``SqliteVecStore(quantization="int8")``: a side table in the file and
its mirror in memory.

Why not sqlite-vec's own ``int8[N]`` or ``bit[N]`` columns: in sqlite-vec 0.1.9 a KNN query over
them is no faster than over ``float[N]`` (100k x 384: int8 94 ms, bit 58 ms, float 68-75 ms; its
distance loops are not vectorised and the scan walks every chunk in SQL), and fetching one
vector back by rowid costs ~120 µs, so rescoring 64 candidates from vec0 would cost 7 ms.

So the store keeps, for table ``memories``, two plain tables::

    memories_vec_q8    pk INTEGER PRIMARY KEY (= memories.pk), session, scale REAL,
                       codes BLOB (int8[D])
    memories_vec_f32   pk INTEGER PRIMARY KEY, embedding BLOB (float32[D], the exact vector)

written in the same transactions as ``memories`` and ``memories_vec``. Two tables, not one: the
codes are read whole into memory, and rows that also held the float vector made that read cover
five times the pages (2.7 s instead of ~0.2 s at 100k). A search loads the codes
into memory once (a quarter of the float bytes: 38 MB at 100k x 384), scans them with SIMD int8
dot products (simsimd, as ``InMemoryVectorStore(quantization="int8")``), and scores its best
``max(4 * top_k, 64)`` candidates exactly from ``memories_vec_f32`` (primary-key lookups).
The mirror follows the store's own writes as they commit, and is reloaded when
``PRAGMA data_version`` shows that another connection changed the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from goagent_py.memory.vector._int8 import Int8Rows, quantize

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "Int8Mirror",
    "build_side_table",
    "encode",
    "fresh_mirror",
    "rescore",
    "side_table_sql",
]


def side_table_sql(codes: str, vectors: str) -> tuple[str, str]:
    """The CREATE TABLE statements of the side tables (quoted identifiers)."""
    return (
        f"CREATE TABLE {codes} (pk INTEGER PRIMARY KEY, session TEXT, scale REAL NOT NULL, "
        "codes BLOB NOT NULL)",
        f"CREATE TABLE {vectors} (pk INTEGER PRIMARY KEY, embedding BLOB NOT NULL)",
    )


def encode(vector: NDArray[np.float32]) -> tuple[float, bytes]:
    """``(scale, codes)`` of ``vector``'s unit vector, as the side table stores them."""
    import numpy as np

    codes, scale = quantize(vector / np.linalg.norm(vector))
    return scale, codes.tobytes()


class Int8Mirror:
    """The side table's codes in memory, with each row's primary key and session.

    Not thread-safe: the store uses it under its own lock.

    Args:
        dimensions: the vector length.
        version: the ``PRAGMA data_version`` the rows were read at.
    """

    __slots__ = ("_codes", "_dims", "_pks", "_rows", "_session_codes", "_sessions", "version")

    def __init__(self, dimensions: int, version: int) -> None:
        import numpy as np

        self._dims = dimensions
        self._codes = Int8Rows(dimensions)
        self._pks: NDArray[np.int64] = np.empty(0, dtype=np.int64)
        self._rows: dict[int, int] = {}  # pk -> row
        # Sessions as integer codes per row (-1: none), so a session filter is one comparison.
        self._session_codes: dict[str, int] = {}
        self._sessions: NDArray[np.int32] = np.empty(0, dtype=np.int32)
        self.version = version

    def __len__(self) -> int:
        return len(self._rows)

    @classmethod
    def load(
        cls, rows: Iterable[tuple[int, str | None, float, bytes]], dimensions: int, version: int
    ) -> Int8Mirror:
        """A mirror of ``rows`` (``pk, session, scale, codes`` as the side table holds them)."""
        import numpy as np

        mirror = cls(dimensions, version)
        held = list(rows)
        n = len(held)
        if not n:
            return mirror
        mirror._grow(n)
        pks, sessions, scales, codes = zip(*held, strict=True)
        mirror._pks[:n] = pks
        mirror._rows = {int(pk): row for row, pk in enumerate(pks)}
        table = mirror._session_codes
        mirror._sessions[:n] = [
            -1 if s is None else table.setdefault(s, len(table)) for s in sessions
        ]
        matrix = np.frombuffer(b"".join(codes), dtype=np.int8).reshape(n, dimensions)
        mirror._codes.set_codes(slice(0, n), matrix, np.asarray(scales, dtype=np.float32))
        return mirror

    def set(self, pk: int, session: str | None, scale: float, codes: bytes) -> None:
        """Insert or replace the row of primary key ``pk``."""
        import numpy as np

        row = self._rows.get(pk)
        if row is None:
            row = len(self._rows)
            self._grow(row + 1)
            self._rows[pk] = row
            self._pks[row] = pk
        self._codes.set_codes(row, np.frombuffer(codes, dtype=np.int8), scale)
        if session is None:
            self._sessions[row] = -1
        else:
            self._sessions[row] = self._session_codes.setdefault(session, len(self._session_codes))

    def remove(self, pk: int) -> None:
        """Forget the row of primary key ``pk`` (no error if there is none)."""
        row = self._rows.pop(pk, None)
        if row is None:
            return
        last = len(self._rows)  # the row count before the removal, minus one
        if row != last:  # move the last row into the hole
            moved = int(self._pks[last])
            self._pks[row] = moved
            self._sessions[row] = self._sessions[last]
            self._codes.move(last, row)
            self._rows[moved] = row

    def _grow(self, size: int) -> None:
        import numpy as np

        capacity = self._pks.shape[0]
        if size <= capacity:
            return
        new_capacity = max(size, 2 * capacity, 64)
        pks = np.zeros(new_capacity, dtype=np.int64)
        pks[:capacity] = self._pks
        sessions = np.full(new_capacity, -1, dtype=np.int32)
        sessions[:capacity] = self._sessions
        self._pks, self._sessions = pks, sessions
        self._codes.grow(new_capacity, self._dims)

    def candidates(self, query: NDArray[np.float32], session: str | None, count: int) -> list[int]:
        """The primary keys of the ``count`` rows of best approximate cosine with ``query``
        (all of them when there are no more), among ``session``'s rows when it is given."""
        import numpy as np

        n = len(self._rows)
        rows: Any = None
        if session is not None:
            code = self._session_codes.get(session)
            if code is None:
                return []
            rows = np.flatnonzero(self._sessions[:n] == code)
        size = n if rows is None else int(rows.size)
        if size <= count:
            chosen = np.arange(n) if rows is None else rows
        else:
            chosen = self._codes.candidates(
                query, (0, n, None) if rows is None else (0, 0, rows), count
            )
        return [int(pk) for pk in self._pks[chosen].tolist()]


def build_side_table(conn: Any, vec: str, table: str, codes: str, vectors: str) -> None:
    """Make the side tables of an existing table from the vectors in its vec0 table ``vec``
    and the sessions in ``table`` (quoted names), in the caller's transaction: on any error
    the file is left as it was."""
    import numpy as np

    for sql in side_table_sql(codes, vectors):
        conn.execute(sql)
    sessions = dict(conn.execute(f"SELECT pk, session FROM {table}").fetchall())
    cursor = conn.execute(f"SELECT rowid, embedding FROM {vec}")  # a scan: lookups are slow
    while batch := cursor.fetchmany(1000):
        coded, floats = [], []
        for pk, blob in batch:
            scale, code = encode(np.frombuffer(blob, dtype="<f4"))
            coded.append((pk, sessions.get(pk), scale, code))
            floats.append((pk, blob))
        conn.executemany(
            f"INSERT INTO {codes} (pk, session, scale, codes) VALUES (?, ?, ?, ?)", coded
        )
        conn.executemany(f"INSERT INTO {vectors} (pk, embedding) VALUES (?, ?)", floats)


def fresh_mirror(conn: Any, mirror: Int8Mirror | None, codes: str, dimensions: int) -> Int8Mirror:
    """``mirror``, or a new one read from the codes table ``codes`` (a quoted name) when there
    is none or another connection changed the file since it was read."""
    # Read before the rows: a commit in between makes the next search reload again.
    (version,) = conn.execute("PRAGMA data_version").fetchone()
    if mirror is not None and mirror.version == version:
        return mirror
    rows = conn.execute(f"SELECT pk, session, scale, codes FROM {codes}")
    return Int8Mirror.load(rows, dimensions, int(version))


def rescore(
    conn: Any, vectors: str, table: str, query: bytes, pks: list[int], k: int
) -> list[tuple[str, str, float]]:
    """``(id, message JSON, exact cosine distance)`` of the best ``k`` of the entries ``pks``,
    best first (ties by id): their float32 vectors come from side table ``vectors``."""
    if not pks:
        return []
    return list(
        conn.execute(
            "SELECT t.id, t.message, vec_distance_cosine(q.embedding, ?) AS distance "
            f"FROM {vectors} AS q JOIN {table} AS t ON t.pk = q.pk "
            "WHERE q.pk IN (SELECT value FROM json_each(?)) ORDER BY distance, t.id LIMIT ?",
            (query, json.dumps(pks), k),
        ).fetchall()
    )
