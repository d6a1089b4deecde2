"""Second stages on the fused top 30 that need no model: identifier matches, heading weighting.

Run it (the corpus is embedded once into the cache file; use ``nice`` on a shared machine):

    nice python bench/rag_identifiers.py [--cache FILE] [--store sqlite|memory|both]

For each question of ``bench/rag_labelled`` the default hybrid search (``Pipeline.sqlite`` or
``Pipeline.in_memory`` with the library's defaults and the local MiniLM embedder) gives its top
30; each candidate is rescored ``fused + w * signal`` for each idea:

- ``identifier``: the share of the query's code-shaped names (``Client.stream``, ``--no-deps``,
  ``max_retries``) that the chunk (text or heading path) names verbatim, case and separators
  kept (:func:`identifier_match`; a dotted name found only in pieces counts half);
- ``title+headings``: the share of the query's words in the chunk's context (file name, title,
  heading path: what the pipeline embeds and keyword-indexes the chunk with);
- ``headings``: the same over the heading path alone (the title is the same for every chunk of a
  document, so only headings tell its chunks apart);
- combinations of the identifier signal with either heading signal;
- ``fts5 context`` (SQLite only, a keyword-leg change rather than a second stage): the FTS5 leg
  weighs the context column ``w`` times the text (``bm25(fts, 1.0, w)``), fused as the
  pipeline fuses.

The weights are picked on the dev half (recall@1, then MRR, then the smaller weight) and printed
before the test half is scored with them: nothing is tuned on test. The picks from the SQLite
store are applied unchanged to the in-memory store.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import pickle
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # loaded by path from tests/rag: bench/ is not on the path
    sys.path.append(str(_HERE))
import rag_labelled as labelled  # noqa: E402

from goagent_py.rag import Pipeline, load_directory  # noqa: E402
from goagent_py.rag._chunks import chunk_context, clean_heading  # noqa: E402
from goagent_py.rag.keyword import _STOPWORDS, _WORD, _stem  # noqa: E402
from goagent_py.rag.results import SearchResult  # noqa: E402

# -- the signals (exact matches of the query in a candidate) ---------------------------------

# A whitespace-separated piece of a query, stripped of quotes and sentence punctuation.
_STRIP = "`'\",;:?!(){}<>\u201c\u201d\u2018\u2019"  # and typographic quotes
# Code shapes: snake_case, a dotted name, camelCase / PascalCase inside a word, a flag, an
# all-capitals constant, a word with digits (E1042, GA-1042, v2), a decorator or magic.
_CODE = re.compile(
    r"[^\W_]_[^\W_]|_[^\W_]|[^\W_]\.[^\W_]|[a-z][A-Z]|[A-Z]{2,}[a-z]|^--?[A-Za-z]"
    r"|^[A-Z][A-Z0-9_]{2,}$|[A-Za-z]-?\d|^[@%][A-Za-z]|[^\W_]\[[^\W_]"
)
_PARTS = re.compile(r"[.:/]+")


def _piece(raw: str) -> str:
    piece = raw.strip(_STRIP)
    if piece.endswith("()"):
        piece = piece[:-2]
    piece = piece.rstrip(".").strip(_STRIP)
    # Brackets inside a name are part of it (``openai[realtime]``, ``items[0]``).
    while piece.endswith("]") and piece.count("[") < piece.count("]"):
        piece = piece[:-1]
    while piece.startswith("[") and piece.count("[") > piece.count("]"):
        piece = piece[1:]
    return piece


def query_identifiers(query: str) -> list[str]:
    """The code-shaped names in ``query``, in order, without duplicates.

    ``"What does Client.stream(timeout=...) raise?"`` gives ``["Client.stream"]``
    (a call's parentheses and arguments are split off; ``timeout`` alone is a plain word); a
    query of one bare token is that token (``"textual-dev"``). Plain prose gives ``[]``.
    """
    pieces = [_piece(p) for p in re.split(r"[\s(),=]+", query.strip())]
    pieces = [p for p in pieces if p and any(c.isalnum() for c in p)]
    if len(pieces) == 1 and len(query.split()) == 1:
        return pieces
    found = [p for p in pieces if _CODE.search(p)]
    return list(dict.fromkeys(found))


def _names(text: str, name: str) -> bool:
    """Whether ``text`` holds ``name`` verbatim, not inside a longer name (``--no-deps`` is
    not in ``--no-deps-check``)."""
    pattern = r"(?<![\w-])" + re.escape(name) + r"(?![\w-])"
    return re.search(pattern, text) is not None


def identifier_match(identifiers: Sequence[str], text: str) -> float:
    """The share of ``identifiers`` that ``text`` names verbatim, in [0, 1].

    A dotted name found only in pieces (``OpenBLASController`` here, ``clear_controlling_thread``
    there) counts half the share of its pieces found. 0.0 when there are no identifiers.
    """
    if not identifiers:
        return 0.0
    total = 0.0
    for name in identifiers:
        if _names(text, name):
            total += 1.0
            continue
        parts = [p for p in _PARTS.split(name.lstrip("-@%")) if p]
        if len(parts) > 1:
            total += 0.5 * sum(_names(text, p) for p in parts) / len(parts)
    return total / len(identifiers)


def heading_words(text: str) -> set[str]:
    """The stemmed, lower-cased words of ``text`` (snake and dotted names split into words)."""
    return {_stem(w) for w in _WORD.findall(text.casefold())}


def heading_match(query: str, headings: str) -> float:
    """The share of the query's content words (stemmed, common English words left out) that
    ``headings`` contains, in [0, 1]; 0.0 when the query has none."""
    words = [w for w in _WORD.findall(query.casefold()) if w not in _STOPWORDS]
    terms = {_stem(w) for w in words}
    if not terms:
        return 0.0
    return len(terms & heading_words(headings)) / len(terms)


def heading_path(result: SearchResult) -> str:
    """The chunk's heading path without the document title (the same for all its chunks)."""
    heading = result.metadata.get("heading")
    if not isinstance(heading, str):
        return ""
    path = [clean_heading(h) for h in heading.split(" > ")]
    if path and path[0] == clean_heading(result.title):
        path = path[1:]
    return " > ".join(h for h in path if h)


# -- the benchmark ----------------------------------------------------------------------------

TOP = 30
WEIGHTS = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)


@dataclass
class Row:
    """One question: its kind, the candidates' signals, and which ids answer it."""

    kind: str
    ids: list[str]
    signals: dict[str, list[float]]  # "fused", "identifier", "context", "headings"
    relevant: set[str]
    by_context_weight: dict[float, list[str]]  # FTS5 only: the fused top 30 per column weight


CONTEXT_WEIGHTS = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0)


async def context_weighted(pipeline: Pipeline, query: str) -> dict[float, list[str]]:
    """The fused top 30 when FTS5 weighs the context column (title, headings) ``w`` times the
    text (``bm25(fts, 1.0, w)``; the library's index weighs both 1.0)."""
    from goagent_py.rag import DEFAULT_FUSION
    from goagent_py.rag.keyword import SqliteKeywordIndex, fts5_query

    index = pipeline.keyword_index
    if not isinstance(index, SqliteKeywordIndex):
        return {}
    vector = [(r.id, r.score) for r in await pipeline.search(query, top_k=TOP, mode="vector")]
    match = fts5_query(query)
    out = {}
    for w in CONTEXT_WEIGHTS:
        sql = (
            f"SELECT d.id, bm25(rag_keywords_fts, 1.0, {w}) AS rank FROM rag_keywords_fts "
            "JOIN rag_keywords AS d ON d.pk = rag_keywords_fts.rowid "
            "WHERE rag_keywords_fts MATCH ? ORDER BY rank, d.id LIMIT ?"
        )

        def run(conn: Any, sql: str = sql) -> list[tuple[str, float]]:
            return [(id, -float(r)) for id, r in conn.execute(sql, (match, TOP)).fetchall()]

        keyword = await index._run(run) if match else []
        out[w] = [id for id, _ in DEFAULT_FUSION.fuse(query, vector, keyword)[:TOP]]
    return out


async def rows_for(pipeline: Pipeline, questions: list[dict[str, str]]) -> list[Row]:
    legs = await labelled.collect(pipeline, questions)
    out = []
    for leg in legs:
        q = leg.question["question"]
        top = await pipeline.search(q, top_k=TOP)
        names = query_identifiers(q)
        signals: dict[str, list[float]] = {k: [] for k in ("fused", "identifier", "context")}
        signals["headings"] = []
        for r in top:
            context = chunk_context(r.source, r.title, r.metadata.get("heading"))
            headings = heading_path(r)
            signals["fused"].append(r.score)
            signals["identifier"].append(identifier_match(names, r.text + "\n" + headings))
            signals["context"].append(heading_match(q, context))
            signals["headings"].append(heading_match(q, headings))
        alt = await context_weighted(pipeline, q)
        out.append(Row(leg.question["kind"], [r.id for r in top], signals, leg.relevant, alt))
    return out


Weights = dict[str, float]


def score(rows: Sequence[Row], weights: Weights, kind: str = "all") -> tuple[float, float, float]:
    """recall@1, recall@5 and MRR (over the top 30) of ``fused + sum(w * signal)``; with a
    ``"fts5 context"`` weight, of the fused list whose FTS5 leg weighs context that much."""
    r1 = r5 = mrr = 0.0
    n = 0
    for row in rows:
        if kind != "all" and row.kind != kind:
            continue
        n += 1
        if "fts5 context" in weights:
            ranked = row.by_context_weight[weights["fts5 context"]]
        else:
            total = [
                row.signals["fused"][i] + sum(w * row.signals[k][i] for k, w in weights.items())
                for i in range(len(row.ids))
            ]
            order = sorted(range(len(row.ids)), key=lambda i: (-total[i], i))
            ranked = [row.ids[i] for i in order]
        pos = next((p for p, id in enumerate(ranked) if id in row.relevant), None)
        if pos is not None:
            r1 += pos == 0
            r5 += pos < 5
            mrr += 1 / (pos + 1)
    n = max(n, 1)
    return r1 / n, r5 / n, mrr / n


IDEAS: dict[str, tuple[str, ...]] = {
    "identifier": ("identifier",),
    "title+headings": ("context",),
    "headings": ("headings",),
    "identifier + title+headings": ("identifier", "context"),
    "identifier + headings": ("identifier", "headings"),
    "fts5 context": ("fts5 context",),  # a keyword-leg change, SQLite only
}


def pick(dev: Sequence[Row], signals: tuple[str, ...]) -> Weights:
    """The weights with the best dev recall@1 (then MRR, then the smallest total weight)."""
    best: tuple[float, float, float] | None = None
    chosen: Weights = {}
    grid = (1.0, *CONTEXT_WEIGHTS) if signals == ("fts5 context",) else WEIGHTS
    for combo in itertools.product(grid, repeat=len(signals)):
        weights = dict(zip(signals, combo, strict=True))
        r1, _, mrr = score(dev, weights)
        key = (r1, mrr, -sum(combo))
        if best is None or key > best:
            best, chosen = key, weights
    return chosen


def cells(rows: Sequence[Row], weights: Weights) -> str:
    parts = []
    for kind in ("all", *labelled.KINDS):
        r1, r5, mrr = score(rows, weights, kind)
        parts.append(f"{r1:.3f}/{r5:.3f}/{mrr:.3f}" if kind == "all" else f"{kind[:5]} {r1:.3f}")
    return "  ".join(parts)


def report(
    name: str, halves: dict[str, list[Row]], picks: dict[str, Weights] | None
) -> dict[str, Weights]:
    dev, test = halves["dev"], halves["test"]
    reach = sum(any(id in row.relevant for id in row.ids) for row in test) / len(test)
    print(f"\n== {name}: recall@1/recall@5/MRR over the fused top {TOP}, then recall@1 per kind")
    print(f"  a perfect reordering of the top {TOP} reaches test recall@1 {reach:.3f}")
    if dev[0].by_context_weight:
        differ = sum(row.by_context_weight[1.0] != row.ids for row in [*dev, *test])
        print(f"  fts5 context weight 1.0 vs the pipeline's own top {TOP}: {differ} differ")
    print(f"  {'baseline (fused)':<30} dev  {cells(dev, {})}")
    print(f"  {'':<30} test {cells(test, {})}")
    chosen: dict[str, Weights] = {}
    for idea, signals in IDEAS.items():
        if idea == "fts5 context" and not dev[0].by_context_weight:
            continue
        if picks is None:
            weights = pick(dev, signals)
            # Written down before the test half is scored with it.
            print(f"  {idea:<30} dev pick {weights}", flush=True)
        else:
            weights = picks[idea]
        chosen[idea] = weights
        print(f"  {idea:<30} dev  {cells(dev, weights)}")
        print(f"  {'':<30} test {cells(test, weights)}")
    return chosen


def dev_grid(dev: Sequence[Row]) -> None:
    print("\n  dev recall@1 / MRR per weight, one signal at a time")
    for idea in ("identifier", "title+headings", "headings"):
        (signal,) = IDEAS[idea]
        row = " ".join(
            "{:.3f}/{:.3f}".format(*(lambda s: (s[0], s[2]))(score(dev, {signal: w})))
            for w in WEIGHTS
        )
        print(f"  {idea:<16} {row}")
    print(f"  {'weights':<16} " + " ".join(f"{w:>11}" for w in WEIGHTS))


async def main(args: argparse.Namespace) -> None:
    from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder

    questions = labelled.corpus.load_questions()
    local = SentenceTransformerEmbedder()
    await local.load()
    embedder = labelled.CachedEmbedder(local)
    if args.cache and os.path.exists(args.cache):  # noqa: ASYNC240
        with open(args.cache, "rb") as f:  # noqa: ASYNC230
            embedder._cache = pickle.load(f)
    dev_q, test_q = labelled.split(questions)
    picks: dict[str, Weights] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "corpus"
        labelled.corpus.build(root)
        docs = load_directory(root)
        stores = ("sqlite", "memory") if args.store == "both" else (args.store,)
        for store in stores:
            make: Callable[[], Pipeline] = (
                (lambda: Pipeline.sqlite(Path(tmp) / "kb.db", embedder, dimensions=384))
                if store == "sqlite"
                else (lambda: Pipeline.in_memory(embedder))
            )
            pipeline = make()
            embedder.caching = True
            await pipeline.index(docs)
            embedder.caching = False
            if args.cache:
                with open(args.cache, "wb") as f:  # noqa: ASYNC230
                    pickle.dump(embedder._cache, f)
            halves = {
                "dev": await rows_for(pipeline, dev_q),
                "test": await rows_for(pipeline, test_q),
            }
            await pipeline.aclose()
            if picks is None:
                dev_grid(halves["dev"])
            picks = report(f"{store} ({len(docs)} files)", halves, picks)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", default="", help="keep the corpus embeddings in this file")
    parser.add_argument("--store", default="both", choices=("sqlite", "memory", "both"))
    asyncio.run(main(parser.parse_args(sys.argv[1:])))
