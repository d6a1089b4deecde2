"""Retrieval quality of vector, keyword and hybrid search on a labelled set of real documentation.

Run it:

    python bench/rag_labelled.py [--store sqlite|memory|both] [--tune] [--no-latency]
        [--latency-only] [--embed-cache FILE] [--part-vectors default|on|off]
        [--index-speed N]

The corpus is documentation of pinned package versions, committed in
``bench/rag_labelled/corpus/`` (see ``bench/rag_labelled/build_corpus.py``: 25 files, about
700 KiB, copied into a temporary folder); the questions are
``bench/rag_labelled/questions.jsonl`` (question, kind, source, answer). A result is a hit
when it comes from the question's source and its text contains the answer phrase, so labels
survive chunking changes.

The questions are split 50/50 into dev and test (seed 20, stratified by kind). ``--tune``
searches fusion settings on dev (from the legs' candidate lists, fetched once) and prints the
best ones with their test figures; the default prints recall@1, recall@5 and MRR per mode and
kind on dev and test, with the library's default fusion, and the hybrid search latency on 10k
chunks (the corpus chunks repeated under other sources) with the local embedder.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import itertools
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location(
    "build_corpus", _HERE / "rag_labelled" / "build_corpus.py"
)
assert _spec is not None
assert _spec.loader is not None
corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)

from goagent_py.messages import text_from  # noqa: E402
from goagent_py.rag import DEFAULT_FUSION, Document, Fusion, Pipeline, load_directory  # noqa: E402

KINDS = ("identifier", "paraphrase", "factual")
DEPTH = 50  # candidates fetched per leg for offline tuning
Ranked = list[tuple[str, float]]


def split(questions: list[dict[str, str]], seed: int = 20) -> tuple[list[Any], list[Any]]:
    """50/50 dev/test, stratified by kind, fixed seed."""
    dev, test = [], []
    rng = random.Random(seed)
    for kind in KINDS:
        subset = [q for q in questions if q["kind"] == kind]
        rng.shuffle(subset)
        half = (len(subset) + 1) // 2
        dev += subset[:half]
        test += subset[half:]
    return dev, test


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


@dataclass
class Legs:
    """One question's candidate lists, fetched once, and which chunk ids answer it."""

    question: dict[str, str]
    vector: Ranked
    keyword: Ranked
    relevant: set[str]


async def collect(pipeline: Pipeline, questions: list[dict[str, str]]) -> list[Legs]:
    out = []
    for q in questions:
        v = await pipeline.search(q["question"], top_k=DEPTH, mode="vector")
        k = await pipeline.search(q["question"], top_k=DEPTH, mode="keyword")
        answer = _norm(q["answer"])
        relevant = {r.id for r in [*v, *k] if r.source == q["source"] and answer in _norm(r.text)}
        out.append(Legs(q, [(r.id, r.score) for r in v], [(r.id, r.score) for r in k], relevant))
    return out


def metrics(legs: Sequence[Legs], rank: Callable[[Legs], list[str]]) -> dict[str, float]:
    r1 = r5 = mrr = 0.0
    for leg in legs:
        ids = rank(leg)[:10]
        pos = next((i for i, id in enumerate(ids) if id in leg.relevant), None)
        if pos is not None:
            r1 += pos == 0
            r5 += pos < 5
            mrr += 1.0 / (pos + 1)
    n = len(legs) or 1
    return {"r@1": r1 / n, "r@5": r5 / n, "mrr": mrr / n}


def rankers(fusion: Fusion, depth: int) -> dict[str, Callable[[Legs], list[str]]]:
    """Vector, keyword and hybrid rankings; hybrid fuses each leg's first ``depth`` hits."""

    def hybrid(leg: Legs) -> list[str]:
        q = leg.question["question"]
        return [id for id, _ in fusion.fuse(q, leg.vector[:depth], leg.keyword[:depth])]

    return {
        "vector": lambda leg: [id for id, _ in leg.vector],
        "keyword": lambda leg: [id for id, _ in leg.keyword],
        "hybrid": hybrid,
    }


OLD_RRF = (Fusion("rrf", 1.0, None, 60), 20)  # the default before: RRF k=60, 20 candidates
DEFAULT = (DEFAULT_FUSION, 30)  # the default now (Pipeline(candidates=30))


def table(title: str, legs: Sequence[Legs]) -> None:
    counts = ", ".join(f"{sum(leg.question['kind'] == k for leg in legs)} {k}" for k in KINDS)
    print(f"\n{title} ({len(legs)} questions: {counts}); recall@1 / recall@5 / MRR")
    print(f"{'mode':<14} " + " ".join(f"{k:>20}" for k in ("all", *KINDS)))
    rows = {**rankers(*DEFAULT)}
    rows["hybrid (RRF before)"] = rankers(*OLD_RRF)["hybrid"]
    for mode, rank in rows.items():
        cells = []
        for kind in ("all", *KINDS):
            subset = [leg for leg in legs if kind == "all" or leg.question["kind"] == kind]
            m = metrics(subset, rank)
            cells.append(f"{m['r@1']:.3f} {m['r@5']:.3f} {m['mrr']:.3f}")
        print(f"{mode:<14} " + " ".join(f"{c:>20}" for c in cells))


def misses(title: str, legs: Sequence[Legs]) -> None:
    """Where the default hybrid search misses at rank 1: what limits recall@1."""
    counts: dict[str, int] = {}
    rank = rankers(*DEFAULT)["hybrid"]
    for leg in legs:
        ids = rank(leg)
        if ids and ids[0] in leg.relevant:
            continue
        if not leg.relevant:
            key = "no answering chunk in either leg's top 50"
        else:
            pos = next((n for n, id in enumerate(ids) if id in leg.relevant), None)
            where = (
                "same file"
                if ids and ids[0].split("#")[0] == leg.question["source"]
                else "other file"
            )
            if pos is None:
                key = f"answer only deeper in one leg; {where} on top"
            else:
                key = f"answer at rank {'2-5' if pos < 5 else '6+'}; {where} on top"
        counts[key] = counts.get(key, 0) + 1
    print(f"\n{title}: hybrid misses at rank 1 ({sum(counts.values())} of {len(legs)})")
    for key, n in sorted(counts.items()):
        print(f"  {n:4d}  {key}")


def tune(dev: Sequence[Legs], test: Sequence[Legs]) -> None:
    """Search fusion settings on dev; print the best with their test figures."""
    grid: list[tuple[Fusion, int]] = []
    for depth in (10, 20, 30, 50):
        for k in (0, 10, 30, 60):
            for wk in (0.3, 0.5, 1.0):
                for wi in (None, 1.0, 2.0, 3.0):
                    grid.append((Fusion("rrf", wk, wi, k), depth))
        for method in ("minmax", "zscore", "relative"):
            for wk in (0.05, 0.1, 0.2, 0.3, 0.4, 0.5):
                for wi in (None, 0.5, 0.6, 0.7, 0.8, 0.9):
                    grid.append((Fusion(method, wk, wi), depth))
    scored = []
    for fusion, depth in grid:
        m = metrics(dev, rankers(fusion, depth)["hybrid"])
        scored.append((m["r@1"], m["mrr"], fusion, depth))
    scored.sort(key=lambda s: (-s[0], -s[1]))
    print(f"\nbest of {len(grid)} fusion settings on dev (r@1, MRR) -> test (r@1, MRR)")
    shown: dict[str, int] = {}
    for r1, mrr, fusion, depth in scored:
        if shown.get(fusion.method, 0) >= 3:
            continue
        shown[fusion.method] = shown.get(fusion.method, 0) + 1
        t = metrics(test, rankers(fusion, depth)["hybrid"])
        print(f"  {r1:.3f} {mrr:.3f} -> {t['r@1']:.3f} {t['mrr']:.3f}  {fusion} candidates={depth}")


class CachedEmbedder:
    """The local embedder, with a cache for indexing: the corpus is embedded once for all runs.

    Queries bypass the cache (``caching = False``), so search latency includes a real query
    embedding.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.dimensions = 384
        self.caching = True
        self._cache: dict[str, Any] = {}

    async def embed(self, blocks: Any) -> Any:
        if not self.caching:
            return await self.inner.embed(blocks)
        return (await self.embed_batch([blocks]))[0]

    async def embed_batch(self, inputs: Any) -> Any:
        import numpy as np

        keys = [text_from(list(blocks)) for blocks in inputs]
        missing = [i for i, key in enumerate(keys) if key not in self._cache]
        if missing:
            vectors = await self.inner.embed_batch([inputs[i] for i in missing])
            for row, i in enumerate(missing):
                self._cache[keys[i]] = vectors[row]
        return np.stack([self._cache[key] for key in keys])


async def latency(pipeline: Pipeline, docs: list[Document], questions: list[Any]) -> None:
    """Hybrid search p50 on about 10k chunks (the corpus repeated under other sources)."""
    embedder = pipeline.embedder
    assert isinstance(embedder, CachedEmbedder)
    embedder.caching = True
    count = await pipeline.store.count() if hasattr(pipeline.store, "count") else 0
    copy = 0
    while count < 10_000:
        copy += 1
        copies = [
            Document(list(d.blocks), f"copy{copy}/{d.source}", metadata=d.metadata) for d in docs
        ]
        report = await pipeline.index(copies)
        count += report.written
    embedder.caching = False
    # Interleaved per query (the machine is shared: medians of the same moments), each part
    # on its own and then the whole search.
    from goagent_py.memory.vector.base import SearchOptions
    from goagent_py.messages import TextBlock

    assert pipeline.keyword_index is not None
    parts: dict[str, list[float]] = {
        k: []
        for k in ("embed", "vector scan", "keyword", "fusion", "hybrid", "vector", "keyword mode")
    }
    for q in itertools.islice(itertools.cycle(questions), 300):
        text = q["question"]
        t0 = time.perf_counter()
        vec = await embedder.inner.embed([TextBlock(text)])
        t1 = time.perf_counter()
        hits = await pipeline.store.search(vec, SearchOptions(top_k=30))
        t2 = time.perf_counter()
        kw = await pipeline.keyword_index.search(text, top_k=30)
        t3 = time.perf_counter()
        DEFAULT_FUSION.fuse(text, [(h.id, h.score) for h in hits], kw)
        t4 = time.perf_counter()
        await pipeline.search(text, top_k=5)
        t5 = time.perf_counter()
        await pipeline.search(text, top_k=5, mode="vector")
        t6 = time.perf_counter()
        await pipeline.search(text, top_k=5, mode="keyword")
        t7 = time.perf_counter()
        times = (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6)
        for key, dt in zip(parts, times, strict=True):
            parts[key].append(dt * 1000)
    print(f"  {count} chunks, 300 queries, top_k=5; p50 / p90 ms")
    for key, values in parts.items():
        values.sort()
        label = {
            "embed": "query embedding alone",
            "vector scan": "vector store search alone",
            "keyword": "keyword index search alone",
            "fusion": "fusion alone",
            "hybrid": "hybrid search (all of it)",
            "vector": "vector search (all of it)",
            "keyword mode": "keyword search (all of it)",
        }[key]
        print(
            f"  {label:<28} {statistics.median(values):7.2f} {values[int(len(values) * 0.9)]:7.2f}"
        )


class TimedEmbedder:
    """The local embedder, timing its ``embed_batch`` calls (the embedder's share of indexing)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.dimensions = 384
        self.seconds = 0.0
        self.texts = 0

    async def embed(self, blocks: Any) -> Any:
        return (await self.embed_batch([blocks]))[0]

    async def embed_batch(self, inputs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await self.inner.embed_batch(inputs)
        finally:
            self.seconds += time.perf_counter() - t0
            self.texts += len(inputs)


async def index_speed(local: Any, docs: list[Document], rounds: int) -> None:
    """Chunks per second with and without part vectors, and the framework's share of it.

    Real embeddings (no cache), the in-memory and the SQLite pipeline, alternated per round.
    """
    print(f"\nindexing {len(docs)} files with the real embedder; medians of {rounds} rounds")
    rows: dict[str, list[tuple[float, float, int, int]]] = {}
    for _ in range(rounds):
        for parts in (False, True):
            for store in ("memory", "sqlite"):
                timed = TimedEmbedder(local)
                with tempfile.TemporaryDirectory() as tmp:
                    if store == "sqlite":
                        pipeline = Pipeline.sqlite(
                            Path(tmp) / "kb.db", timed, dimensions=384, part_vectors=parts
                        )
                    else:
                        pipeline = Pipeline.in_memory(timed, part_vectors=parts)
                    t0 = time.perf_counter()
                    report = await pipeline.index(docs)
                    total = time.perf_counter() - t0
                    await pipeline.aclose()
                key = f"{store}, part vectors {'on' if parts else 'off'}"
                rows.setdefault(key, []).append(
                    (total, total - timed.seconds, report.chunks, timed.texts)
                )
    print(f"  {'':<28} {'chunks/s':>9} {'texts':>6} {'framework s':>12} {'share':>6}")
    for key, values in rows.items():
        total = statistics.median(v[0] for v in values)
        framework = statistics.median(v[1] for v in values)
        chunks, texts = values[0][2], values[0][3]
        print(
            f"  {key:<28} {chunks / total:9.1f} {texts:6d} {framework:12.2f} "
            f"{framework / total:6.1%}"
        )


async def main(args: argparse.Namespace) -> None:
    from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder

    questions = corpus.load_questions()
    local = SentenceTransformerEmbedder()
    await local.load()
    embedder = CachedEmbedder(local)
    if args.embed_cache and os.path.exists(args.embed_cache):  # noqa: ASYNC240
        import pickle

        with open(args.embed_cache, "rb") as f:  # noqa: ASYNC230
            embedder._cache = pickle.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "corpus"
        corpus.build(root)
        problems = corpus.check_questions(root, questions)
        if problems:
            print("label problems:\n  " + "\n  ".join(problems))
        docs = load_directory(root)
        if args.index_speed:
            await index_speed(local, docs[: args.index_speed], rounds=2)
            return
        dev_q, test_q = split(questions)
        stores = ("sqlite", "memory") if args.store == "both" else (args.store,)
        for store in stores:
            options: dict[str, Any] = {}
            if args.part_vectors != "default":
                options["part_vectors"] = args.part_vectors == "on"
            if args.quantization == "int8":
                options["quantization"] = "int8"
            if store == "sqlite":
                pipeline = Pipeline.sqlite(Path(tmp) / "kb.db", embedder, dimensions=384, **options)
            else:
                pipeline = Pipeline.in_memory(embedder, **options)
            embedder.caching = True
            t0 = time.perf_counter()
            report = await pipeline.index(docs)
            embedder.caching = False
            if args.embed_cache:
                import pickle

                with open(args.embed_cache, "wb") as f:  # noqa: ASYNC230
                    pickle.dump(embedder._cache, f)
            print(
                f"\n== {store}: {report.chunks} chunks from {len(docs)} files, "
                f"indexed in {time.perf_counter() - t0:.1f} s"
            )
            if args.latency_only:
                print("\nlatency (including the query embedding)")
                await latency(pipeline, docs, questions)
                await pipeline.aclose()
                continue
            dev = await collect(pipeline, dev_q)
            test = await collect(pipeline, test_q)
            if args.save_legs:
                import pickle

                with open(f"{args.save_legs}.{store}", "wb") as f:  # noqa: ASYNC230
                    pickle.dump((dev, test), f)
            unreachable = [leg.question["question"] for leg in [*dev, *test] if not leg.relevant]
            print(f"{len(unreachable)} questions: no answering chunk in either leg's top {DEPTH}")
            # The offline fusion must be what the pipeline does: compare on dev, from legs
            # fetched at the pipeline's candidate depth (with part vectors a vector leg of 30
            # is not the first 30 of a leg of 50: parts collapse against a different floor).
            differ = 0
            depth = DEFAULT[1]
            for leg in dev:
                q = leg.question["question"]
                got = await pipeline.search(q, top_k=5)
                v = await pipeline.search(q, top_k=depth, mode="vector")
                k = await pipeline.search(q, top_k=depth, mode="keyword")
                fused = DEFAULT[0].fuse(
                    q, [(r.id, r.score) for r in v], [(r.id, r.score) for r in k]
                )
                differ += [r.id for r in got] != [id for id, _ in fused[:5]]
            print(f"pipeline hybrid search vs offline fusion: {differ} of {len(dev)} top-5 differ")
            if args.tune:
                tune(dev, test)
            table("dev", dev)
            table("test", test)
            misses("dev", dev)
            misses("test", test)
            if not args.no_latency:
                print("\nlatency (top_k=5, including the query embedding)")
                await latency(pipeline, docs, questions)
            await pipeline.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", default="sqlite", choices=("sqlite", "memory", "both"))
    parser.add_argument("--tune", action="store_true")
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument("--latency-only", action="store_true")
    parser.add_argument("--embed-cache", default="", help="keep the corpus embeddings in this file")
    parser.add_argument(
        "--part-vectors",
        default="default",
        choices=("default", "on", "off"),
        help="Pipeline(part_vectors=...): the pipeline's default, or on/off",
    )
    parser.add_argument(
        "--index-speed", type=int, default=0, help="time indexing N files for real, then stop"
    )
    parser.add_argument("--save-legs", default="", help="pickle the candidate lists to this path")
    parser.add_argument(
        "--quantization",
        default="none",
        choices=("none", "int8"),
        help="the stores' int8 first pass (Pipeline.sqlite/in_memory(quantization=...))",
    )
    asyncio.run(main(parser.parse_args(sys.argv[1:])))
