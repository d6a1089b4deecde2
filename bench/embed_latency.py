"""Query embedding and hybrid search latency with the local embedder, before/after in one run.

Run it:

    python bench/embed_latency.py [--queries 300] [--embed-cache FILE] [--no-search]

Part 1, the query embedding alone (all-MiniLM-L6-v2, CPU), three ways, interleaved query by
query so a shared machine's load hits them alike:

- ``encode, process threads``: what ``SentenceTransformerEmbedder.embed`` did before
  (``asyncio.to_thread`` + ``SentenceTransformer.encode``, torch's process-wide threads);
- ``onnxruntime, 1 thread``: ``embed`` now (the whole model exported to ONNX at load and run by
  ONNX Runtime on the embedder's own worker thread, ``query_threads=1``, the default);
- ``onnxruntime, default threads``: the same with ``query_threads=None``;
- ``torch, 1 thread``: ``embed`` without onnx/onnxruntime (the model's modules under
  ``inference_mode``, one torch thread on the worker).

Part 2, ``Pipeline.search`` on about 10k chunks (the labelled corpus of
``bench/rag_labelled`` repeated under other sources, as ``bench/rag_labelled.py`` does) for
``Pipeline.in_memory``, ``Pipeline.sqlite`` and a sqlite pipeline whose vector store has
``quantization="int8"``: hybrid, vector and keyword modes, each query embedded for real
(the corpus is embedded once, through a cache). Figures are p50 / p90 in ms of wall time,
plus the load average at the start and the end.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import pickle
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from goagent_py.messages import ContentBlock, TextBlock, text_from
from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder
from goagent_py.rag import Document, Pipeline, load_directory

_HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location(
    "build_corpus", _HERE / "rag_labelled" / "build_corpus.py"
)
assert _spec is not None
assert _spec.loader is not None
corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)


class _EncodeEmbedder:
    """The query path before this change: a default-pool thread and ``encode``."""

    def __init__(self, inner: SentenceTransformerEmbedder) -> None:
        self.inner = inner

    async def embed(self, blocks: Sequence[ContentBlock]) -> Any:
        return (await asyncio.to_thread(self.inner._encode, [text_from(list(blocks))]))[0]


class _Corpus:
    """Corpus chunks from a cache (embedded once); queries go to ``query`` (switchable)."""

    def __init__(self, batch: SentenceTransformerEmbedder, cache: dict[str, Any]) -> None:
        self.dimensions = 384
        self.batch = batch
        self.query: Any = batch
        self.cache = cache

    async def embed(self, blocks: Sequence[ContentBlock]) -> Any:
        return await self.query.embed(blocks)

    async def embed_batch(self, inputs: Sequence[Sequence[ContentBlock]]) -> Any:
        keys = [text_from(list(blocks)) for blocks in inputs]
        missing = [i for i, key in enumerate(keys) if key not in self.cache]
        if missing:
            vectors = await self.batch.embed_batch([inputs[i] for i in missing])
            for row, i in enumerate(missing):
                self.cache[keys[i]] = vectors[row]
        return np.stack([self.cache[key] for key in keys])


def _share_model(
    source: SentenceTransformerEmbedder, path: str, threads: int | None
) -> SentenceTransformerEmbedder:
    """Another embedder on ``source``'s loaded model with its own query worker and threads,
    on the one-text ``path`` ("onnxruntime" or "torch")."""
    from goagent_py.providers import _st_onnx

    model = source._sentence_transformer()
    other = SentenceTransformerEmbedder(source.model_path, query_threads=threads)
    other._model = model
    if path == "onnxruntime":
        exported = _st_onnx.onnx_path(model, True, threads)
        assert exported is not None
        other._one_text = exported.run
    else:
        other._one_text = _st_onnx.torch_path(model, True)
    other._query_path = path
    other._query_pool = other._start_query_pool()
    return other


def _row(label: str, values: list[float]) -> str:
    values = sorted(values)
    p90 = values[int(len(values) * 0.9)]
    return f"  {label:<44} {statistics.median(values):7.2f} {p90:7.2f}"


async def _interleaved(
    variants: dict[str, Callable[[str], Awaitable[Any]]], questions: list[str], n: int
) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {label: [] for label in variants}
    for fn in variants.values():  # warm every path once
        await fn(questions[0])
    for i in range(n):
        q = questions[i % len(questions)]
        for label, fn in variants.items():
            t0 = time.perf_counter()
            await fn(q)
            times[label].append((time.perf_counter() - t0) * 1000)
    return times


async def main(args: argparse.Namespace) -> None:
    print(f"load average at start: {os.getloadavg()}")
    import torch

    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} process threads,"
        f" {os.cpu_count()} CPUs"
    )
    questions = [q["question"] for q in corpus.load_questions()]
    new = SentenceTransformerEmbedder()
    await new.load()
    print(f"one-text path: {new.query_path}")
    old = _EncodeEmbedder(new)
    got = np.stack([await new.embed([TextBlock(q)]) for q in questions[:100]])
    want = new._encode(questions[:100])
    print(f"direct vs encode on 100 questions: min cosine {float((got * want).sum(1).min()):.7f}")

    embedders: dict[str, Any] = {
        "encode, process threads (before)": old,
        "onnxruntime, 1 thread (now, the default)": new,
        "onnxruntime, default threads": _share_model(new, "onnxruntime", None),
        "torch, 1 thread (without onnxruntime)": _share_model(new, "torch", 1),
    }
    times = await _interleaved(
        {k: (lambda q, e=e: e.embed([TextBlock(q)])) for k, e in embedders.items()},
        questions,
        args.queries,
    )
    print(f"\nquery embedding alone, {args.queries} queries each; p50 / p90 ms")
    for label, values in times.items():
        print(_row(label, values))
    if args.no_search:
        return

    cache: dict[str, Any] = {}
    if args.embed_cache and os.path.exists(args.embed_cache):  # noqa: ASYNC240
        with open(args.embed_cache, "rb") as f:  # noqa: ASYNC230
            cache = pickle.load(f)
    shared = _Corpus(new, cache)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "corpus"
        corpus.build(root)
        docs = load_directory(root)
        copies = list(docs)
        for copy in range(1, 6):  # 6 x ~1.7k chunks: ~10k
            copies += [
                Document(list(d.blocks), f"copy{copy}/{d.source}", metadata=d.metadata)
                for d in docs
            ]
        from goagent_py.memory.vector.sqlite_vec import SqliteVecStore
        from goagent_py.rag.keyword import SqliteKeywordIndex
        from goagent_py.rag.manifest import SqliteManifest

        db = Path(tmp) / "kb.db"
        pipelines = {
            "in_memory": Pipeline.in_memory(shared),
            "sqlite": Pipeline.sqlite(db, shared, dimensions=384),
        }
        t0 = time.perf_counter()
        for pipeline in pipelines.values():
            await pipeline.index(copies)
        print(f"\nindexed {len(copies)} documents twice in {time.perf_counter() - t0:.1f} s")
        if args.embed_cache:
            with open(args.embed_cache, "wb") as f:  # noqa: ASYNC230
                pickle.dump(cache, f)
        # The same file, its vector store opened with the int8 mirror (simd extra).
        try:
            int8 = Pipeline(
                shared,
                SqliteVecStore(db, table="rag", dimensions=384, quantization="int8"),
                keyword_index=SqliteKeywordIndex(db, table="rag_keywords"),
                manifest=SqliteManifest(db, table="rag_manifest"),
            )
            await int8.search("warm up the int8 mirror", top_k=5)
            pipelines["sqlite, int8 vectors"] = int8
        except Exception as exc:  # the simd extra is missing
            print(f"(no int8 sqlite pipeline: {exc})")
        count = await pipelines["in_memory"].store.count()  # type: ignore[attr-defined]
        for query_embedder in (
            "onnxruntime, 1 thread (now, the default)",
            "torch, 1 thread (without onnxruntime)",
            "encode, process threads (before)",
        ):
            shared.query = embedders[query_embedder]
            variants: dict[str, Callable[[str], Awaitable[Any]]] = {}
            for name, pipeline in pipelines.items():
                for mode in ("hybrid", "vector", "keyword"):
                    variants[f"{name}: {mode}"] = lambda q, p=pipeline, m=mode: p.search(
                        q, top_k=5, mode=m
                    )
            times = await _interleaved(variants, questions, args.queries)
            print(
                f"\nPipeline.search, {count} chunks, top_k=5, query embedding: {query_embedder};"
                " p50 / p90 ms"
            )
            for label, values in times.items():
                print(_row(label, values))
        for pipeline in pipelines.values():
            await pipeline.aclose()
    print(f"\nload average at end: {os.getloadavg()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--embed-cache", default="", help="keep the corpus embeddings in this file")
    parser.add_argument("--no-search", action="store_true", help="the query embedding only")
    asyncio.run(main(parser.parse_args(sys.argv[1:])))
