"""Keyword indexes (SQLite FTS5 and in-memory BM25): escaping, identifiers, filters, updates."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from goagent_py.errors import ConfigurationError
from goagent_py.memory.vector.sqlite_vec import SqliteVecStore
from goagent_py.rag import (
    BulkKeywordIndex,
    InMemoryKeywordIndex,
    KeywordEntry,
    KeywordIndex,
    SqliteKeywordIndex,
    fts5_query,
    query_terms,
)
from goagent_py.rag._sqlite import driver

ENTRIES = [
    KeywordEntry("a", "GA-1042 means the upstream connection was refused.", {"source": "e.md"}),
    KeywordEntry("b", "GA-2077 means the request quota is exhausted.", {"source": "e.md"}),
    KeywordEntry("c", "Set max_retry_delay to cap the wait between retries.", {"source": "c.md"}),
    KeywordEntry("d", "Retries happen after a connection error.", {"source": "c.md", "n": 2}),
    KeywordEntry("e", 'Quotes " and stars * and NEAR(x y) are just text.', {"flag": True}),
]


@pytest.fixture(params=["sqlite", "memory"])
async def index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    if request.param == "sqlite":
        sqlite = SqliteKeywordIndex(tmp_path / "kw.db", table="kw")
        await sqlite.add_batch(ENTRIES)
        yield sqlite
        await sqlite.aclose()
    else:
        memory = InMemoryKeywordIndex()
        await memory.add_batch(ENTRIES)
        yield memory


def test_protocols() -> None:
    for cls in (SqliteKeywordIndex, InMemoryKeywordIndex):
        obj = cls(":memory:") if cls is SqliteKeywordIndex else cls()  # type: ignore[call-arg]
        assert isinstance(obj, KeywordIndex)
        assert isinstance(obj, BulkKeywordIndex)


def test_fts5_query_quotes_every_term() -> None:
    assert fts5_query("What does GA-1042 mean?") == '"ga-1042" OR "mean"'
    assert fts5_query('x" OR 1=1 -- NEAR(a b) text:foo ^bar baz*') == (
        '"x" OR "1" OR "near" OR "b" OR "text:foo" OR "bar" OR "baz"'
    )
    assert fts5_query("?! ...") == ""
    assert query_terms("the of and") == ["the", "of", "and"]  # nothing else: keep them


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '" OR "" = "',
        "NEAR(GA 1042)",
        "text:GA",
        "kw_fts:GA",
        "GA*",
        "^GA",
        "a AND OR NOT b",
        "{text}: GA",
        "'); DROP TABLE kw; --",
        "GA-1042)",
        "\x00",
    ],
)
async def test_user_text_is_never_query_syntax(index: Any, query: str) -> None:
    hits = await index.search(query, top_k=5)  # no syntax error, whatever the text
    assert isinstance(hits, list)
    assert await index.get(["a"])  # the table is still there


async def test_finds_exact_identifiers_first(index: Any) -> None:
    [(first, _), *_] = await index.search("What does GA-2077 mean?", top_k=3)
    assert first == "b"
    [(first, _), *_] = await index.search("what is max_retry_delay", top_k=3)
    assert first == "c"
    hits = await index.search("retries", top_k=5)  # stemming: retry/retries
    assert {id for id, _ in hits} >= {"c", "d"}
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(score > 0 for score in scores)


async def test_special_characters_are_searched_as_text(index: Any) -> None:
    hits = await index.search("NEAR stars", top_k=2)
    assert hits[0][0] == "e"


async def test_filters(index: Any) -> None:
    hits = await index.search("connection", top_k=5, filter={"source": "c.md"})
    assert [id for id, _ in hits] == ["d"]
    assert [id for id, _ in await index.search("connection", top_k=5, filter={"n": 2})] == ["d"]
    assert await index.search("connection", top_k=5, filter={"n": "2"}) == []
    assert [id for id, _ in await index.search("text", top_k=5, filter={"flag": True})] == ["e"]
    assert await index.search("text", top_k=5, filter={"flag": 1}) == []
    with pytest.raises(ValueError, match="filter"):
        await index.search("x", top_k=5, filter={"a.b": 1})
    with pytest.raises(ConfigurationError, match="top_k"):
        await index.search("x", top_k=0)


async def test_replace_delete_get_count(index: Any) -> None:
    await index.add("a", "Completely different words now.", {"source": "x.md"})
    assert await index.search("GA-1042", top_k=5) == []
    assert [id for id, _ in await index.search("different", top_k=5)] == ["a"]
    got = await index.get(["a", "missing"])
    assert list(got) == ["a"]
    assert got["a"].text == "Completely different words now."
    assert got["a"].metadata == {"source": "x.md"}
    await index.delete(["a", "b", "missing"])
    assert await index.count() == 3
    assert await index.search("different quota", top_k=5) == []
    await index.add_batch([])
    await index.delete([])


@pytest.mark.needs_extra("vector")
async def test_sqlite_index_shares_the_vector_store_file(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"
    async with SqliteVecStore(path, table="chunks", dimensions=3) as store:
        from goagent_py.messages import Message, Role, TextBlock

        await store.upsert("x", [1.0, 0.0, 0.0], Message(Role.USER, [TextBlock("hi")]))
        async with SqliteKeywordIndex(path, table="chunks_keywords") as kw:
            await kw.add("x", "hello GA-1042", {})
            assert await kw.search("GA-1042", top_k=1) == [("x", pytest.approx(1e-6, abs=1))]
        assert await store.count() == 1
    conn = driver().connect(str(path))
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert {"chunks", "chunks_vec", "chunks_keywords", "chunks_keywords_fts"} <= tables


async def test_sqlite_index_persists_and_validates(tmp_path: Path) -> None:
    path = tmp_path / "kw.db"
    async with SqliteKeywordIndex(path) as kw:
        await kw.add_batch(ENTRIES)
    async with SqliteKeywordIndex(path) as kw:
        assert await kw.count() == len(ENTRIES)
        with pytest.raises(ConfigurationError, match="JSON"):
            await kw.add("z", "text", {"bad": object()})
        with pytest.raises(ConfigurationError, match="non-empty"):
            await kw.add("", "text", {})
    for bad in ("kw; DROP TABLE x", "1abc", 'a"b', "x" * 64):
        with pytest.raises(ConfigurationError, match="invalid table name"):
            SqliteKeywordIndex(path, table=bad)
    closed = SqliteKeywordIndex(path)
    await closed.aclose()
    from goagent_py.errors import MemoryStoreError

    with pytest.raises(MemoryStoreError, match="closed"):
        await closed.count()


def _reference_bm25(
    index: InMemoryKeywordIndex, query: str, filter: dict[str, Any] | None
) -> list[tuple[str, float]]:
    """The dictionary walk the numpy snapshot replaced, over the index's own postings."""
    import collections
    import math

    from goagent_py.memory.vector._common import metadata_matches
    from goagent_py.rag.keyword import _query_tokens

    n = len(index._entries)
    avgdl = index._total_length / n or 1.0
    k1, b = index._k1, index._b
    scores: dict[str, float] = collections.defaultdict(float)
    for token in _query_tokens(query):
        posting = index._postings.get(token)
        if not posting:
            continue
        df = len(posting)
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        for id in posting:
            tf = index._tf[id][token]
            norm = k1 * (1.0 - b + b * index._lengths[id] / avgdl)
            scores[id] += idf * tf * (k1 + 1.0) / (tf + norm)
    hits = [
        (id, s)
        for id, s in scores.items()
        if not filter or metadata_matches(index._entries[id].metadata, filter)
    ]
    return sorted(hits, key=lambda h: (-h[1], h[0]))


async def test_in_memory_bm25_scores_are_the_dictionary_walks_across_writes() -> None:
    import random

    rng = random.Random(7)
    words = [f"w{i}" for i in range(60)] + ["retry", "max_retry_delay", "psutil.cpu_count"]
    index = InMemoryKeywordIndex()

    def entry(i: int) -> KeywordEntry:
        text = " ".join(rng.choice(words) for _ in range(rng.randint(3, 40)))
        return KeywordEntry(f"doc{i:03d}", text, {"team": rng.choice(["red", "blue"])})

    await index.add_batch([entry(i) for i in range(300)])
    await index.add_batch([KeywordEntry("dup-a", "w1 w2", {}), KeywordEntry("dup-b", "w1 w2", {})])
    queries = ["w1 w2", "retry w7 w7", "max_retry_delay", "psutil.cpu_count w3", "nothing", "w5"]
    writes = [  # each drops the snapshot: new entries, replaced ones, deleted ones
        lambda: index.add_batch([entry(1000 + i) for i in range(10)]),
        lambda: index.add_batch([entry(i) for i in range(0, 300, 7)]),
        lambda: index.delete([f"doc{i:03d}" for i in range(3, 300, 11)]),
        lambda: index.add_batch([entry(2000 + i) for i in range(10)]),
    ]
    for write in [None, *writes]:
        if write is not None:
            await write()
        for query in queries:
            for filter in (None, {"team": "red"}):
                for top_k in (1, 5, 400):
                    got = await index.search(query, top_k=top_k, filter=filter)
                    want = _reference_bm25(index, query, filter)[:top_k]
                    assert got == want  # the same ids, order (ties by id) and scores, to the bit
    assert (await index.search("w1 w2", top_k=2))[0][0] == "dup-a"  # a tie breaks by id
