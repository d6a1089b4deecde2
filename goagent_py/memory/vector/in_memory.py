"""An exact in-memory vector store on a numpy float32 matrix.

Search is exact: cosine similarity (``a.b / (|a| |b|)``, no unit-length assumption) or Euclidean
distance, from one matrix product over the candidate rows and a partition for the top k.
Metadata filters are exact equality on every key (AND); the session of long-term memory is one
such key.

A session filter reads only that session's rows: the rows are kept grouped by session (a prefix
sorted by session, where each session is one slice, plus a tail of rows written since), so a
session's search scans its slice in place and the few tail rows it has, instead of gathering
rows scattered over the whole matrix (at 100k rows and a 10% session that gather cost 4 ms, the
scan of the session's 15 MB 0.7 ms). The prefix is rebuilt when the tail outgrows an eighth of
the store (or 1,024 rows), on the next session search.

numpy is imported on first use, so importing this module (e.g. from a package ``__init__``)
stays light.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from goagent_py._deepcopy import deepcopy
from goagent_py.errors import ConfigurationError
from goagent_py.memory.vector._common import (
    FilterValue,
    as_vector,
    check_dimensions,
    check_filter,
    entries_version,
    metadata_matches,
    session_of,
    split_session,
)
from goagent_py.memory.vector._int8 import Int8Rows, Selection, _simsimd, candidate_count
from goagent_py.memory.vector._shared import owned
from goagent_py.memory.vector.base import (
    Metric,
    SearchOptions,
    UpsertEntry,
    Vector,
    check_metric,
    score_of,
)
from goagent_py.messages import Message, ScoredMessage, messages_to_json

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["InMemoryVectorStore"]


class InMemoryVectorStore:
    """An exact vector store held in memory (lost when the process ends).

    Implements :class:`~goagent_py.memory.vector.base.VectorStore`, ``BulkVectorStore``,
    ``CountableStore``, ``ListableStore``, ``GuardedStore`` and ``EmbedderRecordStore`` (within
    one process). Vectors
    and messages are copied in and out, so callers can't change what is stored.

    Args:
        dimensions: the vector length; None takes it from the first upsert.
        metric: ``"cosine"`` (score = cosine similarity) or ``"l2"`` (score = ``1 / (1 + d)``
            for the Euclidean distance ``d``).
        quantization: ``"int8"`` keeps an int8 copy of the rows (a quarter of the float bytes
            more) and searches it first, then scores its best ``max(4 * top_k, 64)`` candidates
            exactly: ~4x faster scans of large stores, the same scores, and the same results
            unless the int8 pass ranks a true top-k entry below that many others (it did not
            on the benchmarks). Cosine metric only; needs the ``simd`` extra (simsimd).

    Raises:
        ConfigurationError: an unknown metric or quantization, or int8 with the l2 metric.
        MissingExtraError: ``quantization="int8"`` without simsimd installed.
    """

    def __init__(
        self,
        *,
        dimensions: int | None = None,
        metric: Metric = "cosine",
        quantization: Literal["int8"] | None = None,
    ) -> None:
        import numpy as np

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
            _simsimd()  # a missing extra fails here, not at the first write
        self._quantization = quantization
        self._int8: Int8Rows | None = None
        self._dims = check_dimensions(dimensions) if dimensions is not None else None
        self._lock = threading.Lock()
        self._ids: list[str] = []
        self._rows: dict[str, int] = {}
        self._messages: list[Message] = []
        self._matrix: NDArray[np.float32] = np.empty((0, self._dims or 0), dtype=np.float32)
        self._norms: NDArray[np.float32] = np.empty(0, dtype=np.float32)
        # Sessions as integer codes per row (-1: none), so a session filter is one comparison.
        self._session_codes: dict[str, int] = {}
        self._sessions: NDArray[np.int32] = np.empty(0, dtype=np.int32)
        # Rows [0, _grouped) are sorted by session code; _slices[code] = (start, end) there.
        self._grouped = 0
        self._slices: dict[int, tuple[int, int]] = {}
        self._embedder: str | None = None  # see EmbedderRecordStore
        if quantization == "int8" and self._dims is not None:
            self._int8 = Int8Rows(self._dims)

    @property
    def dimensions(self) -> int | None:
        """The vector length, or None before the first upsert when it was not given."""
        return self._dims

    @property
    def metric(self) -> Metric:
        """How nearness is measured: ``"cosine"`` or ``"l2"``."""
        return self._metric

    def __repr__(self) -> str:
        return (
            f"InMemoryVectorStore(dimensions={self._dims}, metric={self._metric!r}, "
            f"entries={len(self._ids)})"
        )

    # -- writes --------------------------------------------------------------------------------

    def _prepare(self, entries: Sequence[UpsertEntry]) -> list[tuple[str, Any, Message]]:
        dims = self._dims
        prepared = []
        for entry in entries:
            if not isinstance(entry.id, str) or not entry.id:
                raise ConfigurationError(f"entry id must be a non-empty str, got {entry.id!r}")
            vec = as_vector(
                entry.vector, dims, what=f"vector of entry {entry.id!r}", metric=self._metric
            )
            dims = vec.shape[0]
            session_of(entry.message.metadata)
            try:  # what the persistent stores accept, so switching backends changes nothing
                json.dumps(entry.message.metadata, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise ConfigurationError(
                    f"entry {entry.id!r}: metadata must be JSON data: {exc}"
                ) from exc
            prepared.append((entry.id, vec, deepcopy(entry.message)))
        return prepared

    def _write(self, prepared: list[tuple[str, Any, Message]]) -> None:
        import numpy as np

        if not prepared:
            return
        if self._dims is None:
            self._dims = int(prepared[0][1].shape[0])
            self._matrix = np.empty((0, self._dims), dtype=np.float32)
            if self._quantization == "int8":
                self._int8 = Int8Rows(self._dims)
        for id, vec, message in prepared:
            row = self._rows.get(id)
            if row is None:
                row = len(self._ids)
                self._grow(row + 1)
                self._ids.append(id)
                self._messages.append(message)
                self._rows[id] = row
            else:
                self._messages[row] = message
            self._matrix[row] = vec
            self._norms[row] = np.linalg.norm(vec)
            if self._int8 is not None:
                self._int8.set(row, vec, float(self._norms[row]))
            session = session_of(message.metadata)
            code = (
                -1
                if session is None
                else self._session_codes.setdefault(session, len(self._session_codes))
            )
            if row < self._grouped and self._sessions[row] != code:
                self._grouped = row  # the row moves to another session: the prefix ends here
            self._sessions[row] = code

    def _grow(self, size: int) -> None:
        import numpy as np

        capacity = self._matrix.shape[0]
        if size <= capacity:
            return
        new_capacity = max(size, 2 * capacity, 64)
        matrix = np.empty((new_capacity, self._dims or 0), dtype=np.float32)
        matrix[:capacity] = self._matrix
        norms = np.ones(new_capacity, dtype=np.float32)
        norms[:capacity] = self._norms
        sessions = np.full(new_capacity, -1, dtype=np.int32)
        sessions[:capacity] = self._sessions
        self._matrix, self._norms, self._sessions = matrix, norms, sessions
        if self._int8 is not None:
            self._int8.grow(new_capacity, self._dims or 0)

    def _remove(self, id: str) -> None:
        row = self._rows.pop(id, None)
        if row is None:
            return
        last = len(self._ids) - 1
        if row < self._grouped and self._sessions[last] != self._sessions[row]:
            self._grouped = row  # the hole takes the last row, of another session
        self._grouped = min(self._grouped, last)
        if row != last:  # move the last entry into the hole
            moved = self._ids[last]
            self._ids[row] = moved
            self._messages[row] = self._messages[last]
            self._matrix[row] = self._matrix[last]
            self._norms[row] = self._norms[last]
            self._sessions[row] = self._sessions[last]
            if self._int8 is not None:
                self._int8.move(last, row)
            self._rows[moved] = row
        self._ids.pop()
        self._messages.pop()

    async def upsert(self, id: str, vector: Vector, message: Message) -> None:
        """Insert or replace entry ``id``.

        Raises:
            ConfigurationError: a bad vector (see :func:`as_vector`) or empty id; nothing is
                changed.
        """
        await self.upsert_batch([UpsertEntry(id, vector, message)])

    async def upsert_batch(self, entries: Sequence[UpsertEntry]) -> None:
        """Insert or replace all ``entries`` at once; the last of duplicate ids wins.

        Every entry is checked first, so a bad one leaves the store unchanged.
        """
        with self._lock:
            self._write(self._prepare(entries))

    def _version(self, filter: Mapping[str, FilterValue]) -> str:
        return entries_version(
            [
                (id, messages_to_json([message]))
                for id, message in zip(self._ids, self._messages, strict=True)
                if metadata_matches(message.metadata, filter)
            ]
        )

    async def version(self, filter: Mapping[str, Any]) -> str:
        """The version token of the entries matching ``filter`` (see ``GuardedStore``).

        Raises:
            InvalidInputError: a filter no backend could match exactly.
        """
        checked = check_filter(filter)
        with self._lock:
            return self._version(checked)

    async def upsert_batch_if(
        self, entries: Sequence[UpsertEntry], *, filter: Mapping[str, Any], version: str
    ) -> bool:
        """Write all ``entries`` at once if the entries matching ``filter`` still have
        ``version`` (checked under the store's lock); else write nothing and return False."""
        checked = check_filter(filter)
        prepared = self._prepare(entries)
        with self._lock:
            if self._version(checked) != version:
                return False
            self._write(prepared)
            return True

    async def embedder_record(self) -> str | None:
        """Which embedder made the vectors, as recorded (see ``EmbedderRecordStore``)."""
        with self._lock:
            return self._embedder

    async def replace_embedder_record(self, expected: str | None, record: str) -> bool:
        """Record ``record`` if the record is still ``expected`` (under the store's lock)."""
        with self._lock:
            if self._embedder != expected:
                return False
            self._embedder = record
            return True

    async def delete(self, id: str) -> None:
        """Remove entry ``id`` (no error if it does not exist)."""
        with self._lock:
            self._remove(id)

    async def delete_batch(self, ids: Sequence[str]) -> None:
        """Remove all ``ids`` (missing ones are ignored)."""
        with self._lock:
            for id in ids:
                self._remove(id)

    async def count(self, filter: Mapping[str, Any] | None = None) -> int:
        """How many entries the store holds, or how many match ``filter``.

        Raises:
            InvalidInputError: a filter no backend could match exactly.
        """
        checked = check_filter(filter)
        with self._lock:
            n = len(self._ids)
            if not checked or not n:
                return n
            start, end, extra = self._candidates(checked, n)
            return end - start + int(extra.size)

    async def entries(self, filter: Mapping[str, Any] | None = None) -> list[ScoredMessage]:
        """Every entry matching ``filter``, by id, with score 0 (copies).

        Raises:
            InvalidInputError: a filter no backend could match exactly.
        """
        return [owned(hit) for hit in await self.entries_shared(filter)]

    async def entries_shared(self, filter: Mapping[str, Any] | None = None) -> list[ScoredMessage]:
        """The entries of :meth:`entries` holding the store's own messages, uncopied: for a
        caller that reads them all and copies only those it hands on (long-term memory's
        consolidation; ``goagent_py.memory.vector._shared``). Never change them.

        Raises:
            InvalidInputError: a filter no backend could match exactly.
        """
        checked = check_filter(filter)
        with self._lock:
            found = [
                ScoredMessage(message, 0.0, id)
                for id, message in zip(self._ids, self._messages, strict=True)
                if metadata_matches(message.metadata, checked)
            ]
        return sorted(found, key=lambda s: s.id)

    # -- search --------------------------------------------------------------------------------

    def _group(self, n: int) -> None:
        """Sort the rows by session (stable: a session's rows keep their order) and record each
        session's slice."""
        import numpy as np

        order = np.argsort(self._sessions[:n], kind="stable")
        self._matrix[:n] = self._matrix[order]
        self._norms[:n] = self._norms[order]
        self._sessions[:n] = self._sessions[order]
        if self._int8 is not None:
            self._int8.permute(order)
        positions = order.tolist()
        self._ids = [self._ids[i] for i in positions]
        self._messages = [self._messages[i] for i in positions]
        self._rows = {id: row for row, id in enumerate(self._ids)}
        codes, starts, counts = np.unique(self._sessions[:n], return_index=True, return_counts=True)
        self._slices = {
            int(c): (int(b), int(b + k))
            for c, b, k in zip(codes.tolist(), starts.tolist(), counts.tolist(), strict=True)
        }
        self._grouped = n

    def _session_rows(self, code: int, n: int) -> Selection:
        """Session ``code``'s rows: a slice of the grouped prefix plus the tail rows."""
        import numpy as np

        tail = n - self._grouped
        if tail > max(1024, n // 8):
            self._group(n)
            tail = 0
        start, end = self._slices.get(code, (0, 0))
        end = min(end, self._grouped)
        start = min(start, end)
        extra = (
            np.flatnonzero(self._sessions[self._grouped : n] == code) + self._grouped
            if tail
            else np.empty(0, dtype=np.intp)
        )
        return start, end, extra

    def _candidates(self, filter: dict[str, FilterValue], n: int) -> Selection:
        """The rows matching ``filter``, as ``(start, end, extra)``: rows [start, end) plus the
        rows listed in ``extra``."""
        import numpy as np

        rest = dict(filter)
        session = split_session(rest)
        empty = np.empty(0, dtype=np.intp)
        if session is not None:
            code = self._session_codes.get(session)
            if code is None:
                return 0, 0, empty
            start, end, extra = self._session_rows(code, n)
        else:
            start, end, extra = 0, n, empty
        if not rest:
            return start, end, extra
        messages = self._messages
        rows = range(start, end) if not extra.size else [*range(start, end), *extra.tolist()]
        return (
            0,
            0,
            np.fromiter(
                (i for i in rows if metadata_matches(messages[i].metadata, rest)), dtype=np.intp
            ),
        )

    async def search(
        self, vector: Vector, options: SearchOptions | None = None
    ) -> list[ScoredMessage]:
        """The entries nearest ``vector`` under the store's metric, best first (ties by id);
        each result is a copy (changing it never changes the store).

        Raises:
            ConfigurationError: a bad vector, or a filter no backend could match exactly.
        """
        return [owned(hit) for hit in await self.search_shared(vector, options)]

    async def search_shared(
        self, vector: Vector, options: SearchOptions | None = None
    ) -> list[ScoredMessage]:
        """The hits of :meth:`search` holding the store's own messages, uncopied: for a
        caller that keeps a few of many candidates, reads them and copies only those it
        hands on (``goagent_py.memory.vector._shared``). Never change them: an upsert
        replaces a stored message, so a hit stays what it was when found.

        Raises:
            ConfigurationError: a bad vector, or a filter no backend could match exactly.
        """
        import numpy as np

        options = options or SearchOptions()
        filter = check_filter(options.filter)
        with self._lock:
            query = as_vector(vector, self._dims, what="query vector", metric=self._metric)
            n = len(self._ids)
            if n == 0:
                return []
            start, end, extra = self._candidates(filter, n) if filter else (0, n, None)
            size = end - start + (0 if extra is None else int(extra.size))
            if size == 0:
                return []
            count = candidate_count(options.top_k)
            # einsum, not matmul: numpy's own single-threaded loop is as fast as one BLAS thread,
            # and a multithreaded BLAS matrix-vector product waits for a busy second core (8 ms
            # instead of 0.5 ms at 10k rows when the embedder or the model is running).
            rows: Any  # the row of each score below, or None: rows 0..n-1
            if self._int8 is not None and size > count:
                # The int8 pass picks the candidates; only they are scored exactly below.
                rows = self._int8.candidates(query, (start, end, extra), count)
                norms = self._norms[rows]
                dots = np.einsum("ij,j->i", self._matrix[rows], query)
            else:
                # The slice is read in place: gathering it first would cost more than the scan.
                norms = self._norms[start:end]
                dots = np.einsum("ij,j->i", self._matrix[start:end], query)
                rows = None if (start, end) == (0, n) else np.arange(start, end)
                if extra is not None and extra.size:  # the session's rows in the tail
                    rows = np.concatenate([np.arange(start, end), extra])
                    norms = np.concatenate([norms, self._norms[extra]])
                    dots = np.concatenate([dots, np.einsum("ij,j->i", self._matrix[extra], query)])
            if self._metric == "cosine":
                scores = dots / (norms * np.linalg.norm(query))
                slack = 0.0
            else:
                # -|x - q|^2 = 2 x.q - |x|^2 - |q|^2 ranks by Euclidean distance; float32
                # rounding makes it approximate, so candidates get some slack and are then
                # scored exactly.
                q2 = float(query @ query)
                scores = 2.0 * dots - norms * norms - q2
                slack = 1e-4 * (float(norms.max()) ** 2 + q2)
            k = min(options.top_k, scores.shape[0])
            if k < scores.shape[0]:
                # Every entry tied with the k-th score is a candidate, so ties break by id
                # (deterministically), not by position.
                kth = np.partition(scores, scores.shape[0] - k)[scores.shape[0] - k]
                best = np.flatnonzero(scores >= kth - slack)
            else:
                best = np.arange(scores.shape[0])
            if self._metric == "cosine":
                exact = scores[best]
            else:
                picked = best if rows is None else rows[best]
                exact = np.linalg.norm(self._matrix[picked] - query, axis=1)
            hits = []
            for i, value in zip(best.tolist(), exact.tolist(), strict=True):
                row = int(rows[i]) if rows is not None else i
                if self._metric == "cosine":
                    score = min(1.0, max(-1.0, value))
                else:
                    score = score_of("l2", value)
                hits.append((score, self._ids[row], row))
            hits.sort(key=lambda h: (-h[0], h[1]))
            threshold = options.score_threshold
            return [
                ScoredMessage(self._messages[row], score, id)
                for score, id, row in hits[:k]
                if threshold is None or score >= threshold
            ]
