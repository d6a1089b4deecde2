"""Keyword (full-text) indexes for hybrid search: exact words, identifiers and error codes.

Embeddings are good at meaning and bad at exact strings: ``GA-1042`` or ``max_retry_delay`` come
out close to any other code or key. A keyword index finds them. The pipeline fuses its ranking
with the vector ranking (:mod:`goagent_py.rag.fusion`).

Two implementations of :class:`KeywordIndex`:

- :class:`SqliteKeywordIndex`: an SQLite FTS5 table (BM25 ranking) that can live in the same file
  as a ``SqliteVecStore``.
- :class:`InMemoryKeywordIndex`: BM25 over an in-memory inverted index, beside an
  ``InMemoryVectorStore``.

User queries never reach FTS5 as syntax: :func:`fts5_query` turns any text into a quoted-terms
``OR`` expression, so ``NEAR``, ``*``, ``^``, ``AND``, column filters and quotes in a question are
searched for as words, never interpreted.
"""

from __future__ import annotations

import collections
import copy
import json
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from goagent_py.errors import ConfigurationError
from goagent_py.memory.vector._common import check_filter, filter_sql, metadata_matches
from goagent_py.rag._bm25 import Snapshot
from goagent_py.rag._sqlite import SqliteTable, Transaction, validate_identifier

__all__ = [
    "BulkKeywordIndex",
    "InMemoryKeywordIndex",
    "KeywordEntry",
    "KeywordIndex",
    "SqliteKeywordIndex",
    "fts5_query",
    "query_terms",
]

# A term: letters/digits, optionally joined by - _ . : / @ into one identifier (GA-1042,
# max_retry_delay, v2.3.1, app.retry.max).
_TERM = re.compile(r"[^\W_]+(?:[-_.:/@][^\W_]+)*")
_WORD = re.compile(r"[^\W_]+")
_STOPWORDS = frozenset(
    {
        "a", "about", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for",
        "from", "how", "i", "if", "in", "is", "it", "its", "me", "my", "of", "on", "or",
        "should", "so", "that", "the", "their", "them", "then", "there", "these", "this", "to",
        "was", "what", "when", "where", "which", "who", "why", "will", "with", "would", "you",
        "your",
    }
)  # fmt: skip


def query_terms(text: str) -> list[str]:
    """The search terms of ``text``: words and joined identifiers, lower-cased, deduplicated.

    Common English words ("what", "the", "does") are dropped unless nothing else is left.
    """
    terms = list(dict.fromkeys(t.casefold() for t in _TERM.findall(text)))
    kept = [t for t in terms if t not in _STOPWORDS]
    return kept or terms


def fts5_query(text: str) -> str:
    """An FTS5 ``MATCH`` expression that searches ``text`` as plain words, never as syntax.

    Each term becomes a double-quoted string (an FTS5 phrase, so ``"GA-1042"`` matches the
    adjacent tokens ``ga 1042``), joined with ``OR``; BM25 ranks documents that match more, and
    rarer, terms first. Returns "" when ``text`` has no terms.
    """
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in query_terms(text))


def _stem(word: str) -> str:
    """A light English suffix stripper (plurals, -ing, -ed), the same for text and query."""
    if len(word) <= 3 or not word.isalpha():
        return word
    for suffix, replacement in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + replacement
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


_SEPARATOR = re.compile(r"[-_.:/@]")
_MAX_PARTS = 8  # longer joined terms (URLs, paths) add only their shorter runs


def _joined_runs(term: str) -> list[str]:
    """Every run of two or more adjacent parts of a joined term, separators kept.

    ``psutil.win_service_get`` gives ``psutil.win``, ..., ``win_service_get``, ``service_get``
    and the whole: a query naming ``win_service_get`` matches it, as FTS5 matches the phrase
    ``"win_service_get"`` inside the text ``psutil.win_service_get``.
    """
    cuts = [m.start() for m in _SEPARATOR.finditer(term)]
    starts = [0, *(c + 1 for c in cuts)]
    ends = [*cuts, len(term)]
    out = []
    for i in range(len(starts)):
        for j in range(i + 1, min(len(ends), i + _MAX_PARTS)):
            out.append(term[starts[i] : ends[j]])
    return out


def _index_tokens(text: str) -> list[str]:
    """Tokens for the in-memory index: every word, plus every joined identifier (and each run
    of its adjacent parts) as one token."""
    folded = text.casefold()
    tokens = [_stem(w) for w in _WORD.findall(folded)]
    for term in _TERM.findall(folded):
        if not _WORD.fullmatch(term):
            tokens += _joined_runs(term)
    return tokens


def _query_tokens(text: str) -> list[str]:
    """Query tokens: a joined identifier matches only itself (as FTS5 matches it as a phrase)."""
    terms = query_terms(text)
    return list(dict.fromkeys(_stem(t) if _WORD.fullmatch(t) else t for t in terms))


@dataclass(slots=True, frozen=True)
class KeywordEntry:
    """One indexed text with its metadata (the chunk's message metadata).

    ``context`` is searched with the text but never returned as part of it: the pipeline puts
    the chunk's document title and heading path there, so a query that names the section (or
    the document) finds a chunk whose own words don't repeat it.
    """

    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    context: str = ""


@runtime_checkable
class KeywordIndex(Protocol):
    """A full-text index of chunk texts, searched by keywords and filtered by metadata.

    The pipeline keeps it in step with the vector store (same ids). ``get`` lets the pipeline
    show a chunk that only the keyword search found.
    """

    async def add(self, id: str, text: str, metadata: Mapping[str, Any]) -> None:
        """Index ``text`` under ``id`` (replacing what ``id`` had)."""
        ...

    async def delete(self, ids: Sequence[str]) -> None:
        """Remove ``ids`` (missing ones are ignored)."""
        ...

    async def search(
        self, query: str, *, top_k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """``(id, score)`` of the best ``top_k`` matches for ``query``, best (highest) first.

        ``query`` is user text, never query syntax. ``filter`` matches metadata exactly (every
        key, like ``SearchOptions.filter``).
        """
        ...

    async def get(self, ids: Sequence[str]) -> dict[str, KeywordEntry]:
        """The entries for ``ids`` that exist."""
        ...


@runtime_checkable
class BulkKeywordIndex(KeywordIndex, Protocol):
    """A keyword index that adds many entries at once (one transaction)."""

    async def add_batch(self, entries: Sequence[KeywordEntry]) -> None:
        """Index all ``entries`` (the last of duplicate ids wins)."""
        ...


def _check_top_k(top_k: int) -> None:
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
        raise ConfigurationError(f"top_k must be a positive int, got {top_k!r}")


class InMemoryKeywordIndex:
    """BM25 (k1=1.2, b=0.75) over an in-memory inverted index.

    Tokens are lower-cased words (lightly stemmed: plurals, -ing, -ed), plus each joined
    identifier (``ga-1042``, ``max_retry_delay``) as one more token, so an exact identifier in
    the query is a rare, high-scoring term.
    Implements :class:`KeywordIndex` and :class:`BulkKeywordIndex`.
    """

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        self._k1 = k1
        self._b = b
        self._lock = threading.Lock()
        self._entries: dict[str, KeywordEntry] = {}
        self._tf: dict[str, collections.Counter[str]] = {}
        self._lengths: dict[str, int] = {}
        self._postings: dict[str, set[str]] = collections.defaultdict(set)
        self._total_length = 0
        self._snapshot: Snapshot | None = None  # arrays for scoring; dropped by every write

    def __repr__(self) -> str:
        return f"InMemoryKeywordIndex(entries={len(self._entries)})"

    def _remove(self, id: str) -> None:
        tf = self._tf.pop(id, None)
        if tf is None:
            return
        self._snapshot = None
        del self._entries[id]
        self._total_length -= self._lengths.pop(id)
        for token in tf:
            posting = self._postings[token]
            posting.discard(id)
            if not posting:
                del self._postings[token]

    def _add(self, entry: KeywordEntry) -> None:
        self._remove(entry.id)
        self._snapshot = None
        tokens = _index_tokens(entry.text)
        # The context's words count as much as the text's (one field; FTS5 weighs its
        # context column the same way, see SqliteKeywordIndex).
        tokens += _index_tokens(entry.context)
        tf = collections.Counter(tokens)
        self._entries[entry.id] = KeywordEntry(
            entry.id, entry.text, copy.deepcopy(entry.metadata), entry.context
        )
        self._tf[entry.id] = tf
        self._lengths[entry.id] = len(tokens)
        self._total_length += len(tokens)
        for token in tf:
            self._postings[token].add(entry.id)

    async def add(self, id: str, text: str, metadata: Mapping[str, Any]) -> None:
        """Index ``text`` under ``id``."""
        await self.add_batch([KeywordEntry(id, text, metadata)])

    async def add_batch(self, entries: Sequence[KeywordEntry]) -> None:
        """Index all ``entries``."""
        with self._lock:
            for entry in entries:
                self._add(entry)

    async def delete(self, ids: Sequence[str]) -> None:
        """Remove ``ids``."""
        with self._lock:
            for id in ids:
                self._remove(id)

    async def count(self) -> int:
        """How many entries the index holds."""
        return len(self._entries)

    async def get(self, ids: Sequence[str]) -> dict[str, KeywordEntry]:
        """The entries for ``ids`` that exist (copies)."""
        with self._lock:
            return {id: copy.deepcopy(self._entries[id]) for id in ids if id in self._entries}

    async def search(
        self, query: str, *, top_k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """BM25 matches for ``query``, best first (ties by id)."""
        import numpy as np

        _check_top_k(top_k)
        checked = check_filter(filter)
        with self._lock:
            n = len(self._entries)
            if n == 0:
                return []
            avgdl = self._total_length / n or 1.0
            snapshot = self._snapshot
            if snapshot is None:
                snapshot = self._snapshot = Snapshot(self._tf, self._lengths, self._postings)
            rows, scores = snapshot.scores(
                _query_tokens(query), k1=self._k1, b=self._b, avgdl=avgdl
            )
            ids = snapshot.ids
            if checked:
                keep = [
                    i
                    for i, row in enumerate(rows.tolist())
                    if metadata_matches(self._entries[ids[row]].metadata, checked)
                ]
                rows, scores = rows[keep], scores[keep]
            if rows.shape[0] > top_k:
                # Every entry tied with the k-th score stays a candidate: ties break by id.
                kth = np.partition(scores, rows.shape[0] - top_k)[rows.shape[0] - top_k]
                best = scores >= kth
                rows, scores = rows[best], scores[best]
            pairs = zip(rows.tolist(), scores.tolist(), strict=True)
            hits = [(ids[row], score) for row, score in pairs]
        hits.sort(key=lambda h: (-h[1], h[0]))
        return hits[:top_k]


class SqliteKeywordIndex(SqliteTable):
    """A keyword index in an SQLite FTS5 table, BM25-ranked; can share a ``SqliteVecStore`` file.

    Layout for ``table="rag_keywords"``: ``rag_keywords`` (pk, id unique, text, metadata JSON,
    context) and ``rag_keywords_fts``, an external-content FTS5 table over its ``text`` and
    ``context`` (``unicode61`` tokenizer with Porter stemming, diacritics folded). A table
    written before the ``context`` column existed is migrated when it is opened (the column is
    added empty and the FTS index rebuilt); entries get their context when they are written
    again (``Pipeline.index`` rewrites every chunk once after the upgrade). Writes are one
    transaction per call; SQLite calls run in a worker thread. Implements
    :class:`KeywordIndex` and :class:`BulkKeywordIndex`.

    Args:
        path: the database file (a ``SqliteVecStore``'s file is fine), or ":memory:".
        table: the table name (a plain identifier); the FTS table is ``<table>_fts``.

    Raises:
        ConfigurationError: a bad table name, or no sqlite3 module here has FTS5.
    """

    def __init__(self, path: str | os.PathLike[str], *, table: str = "rag_keywords") -> None:
        self._table = validate_identifier(table)
        self._fts = validate_identifier(f"{table}_fts")
        self._name = table
        super().__init__(path)

    def __repr__(self) -> str:
        return f"SqliteKeywordIndex({self._path!r}, table={self._name!r})"

    def _migrate(self, conn: Any) -> None:
        with Transaction(conn):
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self._table} (pk INTEGER PRIMARY KEY, "
                "id TEXT NOT NULL UNIQUE, text TEXT NOT NULL, metadata TEXT NOT NULL DEFAULT '{}', "
                "context TEXT NOT NULL DEFAULT '')"
            )
            columns = {row[1] for row in conn.execute(f"PRAGMA table_info({self._table})")}
            fts_exists = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE name = ?", (self._fts.strip('"'),)
            ).fetchone()
            if "context" not in columns:
                # Written by a version without the context column: add it, rebuild the index.
                conn.execute(
                    f"ALTER TABLE {self._table} ADD COLUMN context TEXT NOT NULL DEFAULT ''"
                )
                if fts_exists:
                    conn.execute(f"DROP TABLE {self._fts}")
                    fts_exists = None
            conn.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {self._fts} USING fts5(text, context, "
                f"content={self._table}, content_rowid=pk, "
                "tokenize='porter unicode61 remove_diacritics 2')"
            )
            if not fts_exists:
                conn.execute(f"INSERT INTO {self._fts} ({self._fts}) VALUES ('rebuild')")

    def _delete_ids(self, conn: Any, ids: Sequence[str]) -> None:
        for id in ids:
            row = conn.execute(
                f"SELECT pk, text, context FROM {self._table} WHERE id = ?", (id,)
            ).fetchone()
            if row is None:
                continue
            # External content: FTS5 must be told the old text to remove its tokens.
            conn.execute(
                f"INSERT INTO {self._fts} ({self._fts}, rowid, text, context) "
                "VALUES ('delete', ?, ?, ?)",
                row,
            )
            conn.execute(f"DELETE FROM {self._table} WHERE pk = ?", (row[0],))

    async def add(self, id: str, text: str, metadata: Mapping[str, Any]) -> None:
        """Index ``text`` under ``id`` (one transaction)."""
        await self.add_batch([KeywordEntry(id, text, metadata)])

    async def add_batch(self, entries: Sequence[KeywordEntry]) -> None:
        """Index all ``entries`` in one transaction: all or none.

        Raises:
            ConfigurationError: an empty id, or metadata that is not JSON data; nothing is
                written.
        """
        rows = []
        for e in entries:
            if not isinstance(e.id, str) or not e.id:
                raise ConfigurationError(f"entry id must be a non-empty str, got {e.id!r}")
            try:
                metadata = json.dumps(dict(e.metadata), allow_nan=False)
                rows.append((e.id, e.text, metadata, e.context))
            except (TypeError, ValueError) as exc:
                raise ConfigurationError(
                    f"entry {e.id!r}: metadata must be JSON data: {exc}"
                ) from exc
        if not rows:
            return

        def write(conn: Any) -> None:
            with Transaction(conn):
                self._delete_ids(conn, [row[0] for row in rows])
                for id, text, metadata, context in rows:
                    (pk,) = conn.execute(
                        f"INSERT INTO {self._table} (id, text, metadata, context) "
                        "VALUES (?, ?, ?, ?) RETURNING pk",
                        (id, text, metadata, context),
                    ).fetchone()
                    conn.execute(
                        f"INSERT INTO {self._fts} (rowid, text, context) VALUES (?, ?, ?)",
                        (pk, text, context),
                    )

        await self._run(write)

    async def delete(self, ids: Sequence[str]) -> None:
        """Remove ``ids`` in one transaction."""
        ids = list(ids)
        if not ids:
            return

        def delete(conn: Any) -> None:
            with Transaction(conn):
                self._delete_ids(conn, ids)

        await self._run(delete)

    async def count(self) -> int:
        """How many entries the index holds."""

        def count(conn: Any) -> int:
            return int(conn.execute(f"SELECT count(*) FROM {self._table}").fetchone()[0])

        return await self._run(count)

    async def get(self, ids: Sequence[str]) -> dict[str, KeywordEntry]:
        """The entries for ``ids`` that exist."""
        ids = list(dict.fromkeys(ids))

        def get(conn: Any) -> list[tuple[str, str, str, str]]:
            out = []
            # One query per batch (hybrid search asks for up to `candidates` ids each time);
            # batches stay under SQLite's default limit of host parameters.
            for start in range(0, len(ids), 500):
                batch = ids[start : start + 500]
                marks = ",".join("?" * len(batch))
                out += conn.execute(
                    f"SELECT id, text, metadata, context FROM {self._table} WHERE id IN ({marks})",
                    batch,
                ).fetchall()
            return out

        return {
            id: KeywordEntry(id, text, json.loads(metadata), context)
            for id, text, metadata, context in await self._run(get)
        }

    async def search(
        self, query: str, *, top_k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """BM25 matches for ``query`` (escaped with :func:`fts5_query`), best first.

        Scores are FTS5's ``bm25()`` negated, so higher is better.
        """
        _check_top_k(top_k)
        match = fts5_query(query)
        if not match:
            return []
        conds, params = filter_sql(check_filter(filter), alias="d")
        where = " AND ".join([f"{self._fts} MATCH ?", *conds])
        sql = (
            f"SELECT d.id, bm25({self._fts}) AS rank FROM {self._fts} "
            f"JOIN {self._table} AS d ON d.pk = {self._fts}.rowid "
            f"WHERE {where} ORDER BY rank, d.id LIMIT ?"
        )
        args = [match, *params, top_k]

        def search(conn: Any) -> list[tuple[str, float]]:
            return [(id, -float(rank)) for id, rank in conn.execute(sql, args).fetchall()]

        return await self._run(search)
