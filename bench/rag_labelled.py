"""Retrieval quality of vector, keyword and hybrid search on a labelled set of real documentation.

Run it:

    python bench/rag_labelled.py [--store sqlite|memory|both] [--tune] [--no-latency]

The corpus is the documentation shipped in installed packages (see
``bench/rag_labelled/build_corpus.py``: 25 files, about 700 KiB, extracted into a temporary
folder); the questions are ``bench/rag_labelled/questions.jsonl`` (question, kind, source,
answer). A result is a hit when it comes from the question's source and its text contains the
answer phrase, so labels survive chunking changes.

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
_spec = importlib.util.spec_from_file_location("build_corpus", _HERE / "rag_labelled" / "build_corpus.py")
assert _spec is not None and _spec.loader is not None
corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)

from goagent_py.rag import Document, Pipeline, load_directory  # noqa: E402
from goagent_py.rag.pipeline import fuse  # noqa: E402

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
        relevant = {
            r.id for r in [*v, *k] if r.source == q["source"] and answer in _norm(r.text)
        }
        out.append(
            Legs(q, [(r.id, r.score) for r in v], [(r.id, r.score) for r in k], relevant)
        )
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


def rankers(**fusion: Any) -> dict[str, Callable[[Legs], list[str]]]:
    depth = fusion.pop("depth", 20)

    def hybrid(leg: Legs) -> list[str]:
        return [id for id, _ in fuse(leg.vector[:depth], leg.keyword[:depth], **fusion)]

    return {
        "vector": lambda leg: [id for id, _ in leg.vector],
        "keyword": lambda leg: [id for id, _ in leg.keyword],
        "hybrid": hybrid,
    }


def table(title: str, legs: Sequence[Legs], **fusion: Any) -> None:
    print(f"\n{title} ({len(legs)} questions: " + ", ".join(
        f"{sum(leg.question['kind'] == k for leg in legs)} {k}" for k in KINDS) + ")")
    print(f"{'mode':<8} {'subset':<11} {'r@1':>6} {'r@5':>6} {'MRR':>6}")
    for mode, rank in rankers(**fusion).items():
        for kind in ("all", *KINDS):
            subset = [leg for leg in legs if kind == "all" or leg.question["kind"] == kind]
            m = metrics(subset, rank)
            print(f"{mode:<8} {kind:<11} {m['r@1']:>6.3f} {m['r@5']:>6.3f} {m['mrr']:>6.3f}")


def tune(dev: Sequence[Legs], test: Sequence[Legs]) -> None:
    grid: list[dict[str, Any]] = []
    for depth in (10, 20, 30, 50):
        for k in (0, 5, 10, 20, 30, 60):
            for wk in (0.3, 0.5, 0.7, 1.0, 1.5):
                grid.append({"method": "rrf", "k": k, "keyword_weight": wk, "depth": depth})
        for method in ("minmax", "zscore", "relative"):
            for wk in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7):
                grid.append({"method": method, "keyword_weight": wk, "depth": depth})
    scored = []
    for setting in grid:
        m = metrics(dev, rankers(**dict(setting))["hybrid"])
        scored.append((m["r@1"], m["mrr"], setting))
    scored.sort(key=lambda s: (-s[0], -s[1]))
    print("\nbest fusion settings on dev (r@1, MRR) -> test (r@1, MRR)")
    shown = set()
    for r1, mrr, setting in scored:
        key = setting["method"]
        if sum(1 for s in shown if s[0] == key) >= 4:
            continue
        shown.add((key, str(setting)))
        t = metrics(test, rankers(**dict(setting))["hybrid"])
        print(f"  {r1:.3f} {mrr:.3f} -> {t['r@1']:.3f} {t['mrr']:.3f}  {setting}")


async def latency(pipeline: Pipeline, docs: list[Document], questions: list[Any]) -> None:
    """Hybrid search p50 on about 10k chunks (the corpus repeated under other sources)."""
    count = await pipeline.store.count() if hasattr(pipeline.store, "count") else 0
    copy = 0
    while count < 10_000:
        copy += 1
        copies = [Document(list(d.blocks), f"copy{copy}/{d.source}", metadata=d.metadata) for d in docs]
        report = await pipeline.index(copies)
        count += report.written
    for mode in ("hybrid", "vector", "keyword"):
        times = []
        for q in itertools.islice(itertools.cycle(questions), 200):
            t0 = time.perf_counter()
            await pipeline.search(q["question"], top_k=5, mode=mode)
            times.append(time.perf_counter() - t0)
        times.sort()
        print(f"  {mode:<8} {count} chunks: p50 {statistics.median(times) * 1000:6.2f} ms, "
              f"p90 {times[int(len(times) * 0.9)] * 1000:6.2f} ms")
    t_embed = []
    for q in questions[:100]:
        from goagent_py.messages import TextBlock

        t0 = time.perf_counter()
        await pipeline.embedder.embed([TextBlock(q["question"])])
        t_embed.append(time.perf_counter() - t0)
    print(f"  query embedding alone: p50 {statistics.median(t_embed) * 1000:6.2f} ms")


async def main(args: argparse.Namespace) -> None:
    from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder

    questions = corpus.load_questions()
    embedder = SentenceTransformerEmbedder()
    await embedder.load()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "corpus"
        corpus.build(root)
        problems = corpus.check_questions(root, questions)
        if problems:
            print("label problems:\n  " + "\n  ".join(problems))
        docs = load_directory(root)
        dev_q, test_q = split(questions)
        stores = ("sqlite", "memory") if args.store == "both" else (args.store,)
        for store in stores:
            if store == "sqlite":
                pipeline = Pipeline.sqlite(Path(tmp) / "kb.db", embedder, dimensions=384)
            else:
                pipeline = Pipeline.in_memory(embedder)
            t0 = time.perf_counter()
            report = await pipeline.index(docs)
            print(f"\n== {store}: {report.chunks} chunks from {len(docs)} files, "
                  f"indexed in {time.perf_counter() - t0:.1f} s")
            dev = await collect(pipeline, dev_q)
            test = await collect(pipeline, test_q)
            if args.save_legs:
                import pickle

                Path(f"{args.save_legs}.{store}").write_bytes(pickle.dumps((dev, test)))
            unreachable = [leg.question["question"] for leg in [*dev, *test] if not leg.relevant]
            print(f"{len(unreachable)} questions with no answering chunk in either leg's top {DEPTH}")
            if args.tune:
                tune(dev, test)
            table("dev", dev)
            table("test", test)
            if not args.no_latency:
                print("\nlatency (top_k=5, including the query embedding)")
                await latency(pipeline, docs, questions)
            await pipeline.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", default="sqlite", choices=("sqlite", "memory", "both"))
    parser.add_argument("--tune", action="store_true")
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument("--save-legs", default="", help="pickle the candidate lists to this path")
    asyncio.run(main(parser.parse_args(sys.argv[1:])))
