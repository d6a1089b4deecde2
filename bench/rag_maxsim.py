"""Second stages on the fused top 30, with no new model: late interaction (MaxSim) over the
local MiniLM's token vectors, tuned on the dev half of ``bench/rag_labelled``, reported on test.

Run it (embeds every chunk's tokens once; use ``nice`` on a shared machine):

    nice python bench/rag_maxsim.py [--cache FILE] [--work DIR]

It searches the index that ``bench/rag_chat.py`` keeps of the labelled corpus (built on first
use, with the ``rag index`` pipeline: ``Pipeline.sqlite``, the library's defaults). For each
question the default hybrid search (30 candidates per leg)
gives its top 30; each candidate is rescored ``fused + w * maxsim`` where ``maxsim`` is the
mean over the question's tokens of their best cosine with the chunk's tokens (ColBERT's
late interaction on MiniLM's contextual token vectors, which were trained for mean pooling,
not for this). ``w`` is picked on dev; recall@1 / MRR are printed on dev and test for every
``w``, so the pick can be checked, and for MaxSim alone.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np
import rag_chat
import rag_labelled as labelled

from goagent_py.cli import _rag

TOP = 30
WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)


def _tokens(model: Any, texts: list[str]) -> list[np.ndarray]:
    """Each text's token vectors (special tokens and padding left out), unit length."""
    out = model.encode(texts, output_value="token_embeddings", batch_size=16)
    found = []
    for text, vectors in zip(texts, out, strict=True):
        v = np.asarray(vectors, dtype=np.float32)[1:-1]  # [CLS] ... [SEP]
        v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        found.append(v if len(v) else np.zeros((1, v.shape[1] if v.ndim == 2 else 384)))
        del text
    return found


def maxsim(query: np.ndarray, doc: np.ndarray) -> float:
    return float((query @ doc.T).max(axis=1).mean())


async def main(args: argparse.Namespace) -> None:
    questions = labelled.corpus.load_questions()
    cache: dict[str, Any] = {}
    if args.cache and os.path.exists(args.cache):  # noqa: ASYNC240
        with open(args.cache, "rb") as f:  # noqa: ASYNC230
            cache = pickle.load(f)
    db = await rag_chat._labelled_db(Path(args.work))
    pipeline = _rag._pipeline(db)
    model = pipeline.embedder._sentence_transformer()  # type: ignore[attr-defined]
    dev_q, test_q = labelled.split(questions)
    halves: dict[str, list[tuple[dict[str, str], list[Any], set[str]]]] = {}
    for name, qs in (("dev", dev_q), ("test", test_q)):
        legs = await labelled.collect(pipeline, qs)
        rows = []
        for leg in legs:
            top = await pipeline.search(leg.question["question"], top_k=TOP)
            rows.append((leg.question, top, leg.relevant))
        halves[name] = rows
    await pipeline.aclose()
    tokens: dict[str, np.ndarray] = cache.get("tokens", {})
    texts = {r.id: r.text for rows in halves.values() for _, top, _ in rows for r in top}
    missing = [id for id in texts if id not in tokens]
    print(f"{len(texts)} candidate chunks, {len(missing)} to embed token by token", flush=True)
    for start in range(0, len(missing), 64):
        batch = missing[start : start + 64]
        for id, v in zip(batch, _tokens(model, [texts[i] for i in batch]), strict=True):
            tokens[id] = v
    if args.cache:
        with open(args.cache, "wb") as f:  # noqa: ASYNC230
            pickle.dump({"tokens": tokens}, f)
    scored: dict[str, list[tuple[list[tuple[str, float, float]], set[str], str]]] = {}
    for name, rows in halves.items():
        qtok = _tokens(model, [q["question"] for q, _, _ in rows])
        scored[name] = [
            ([(r.id, r.score, maxsim(qv, tokens[r.id])) for r in top], relevant, q["kind"])
            for (q, top, relevant), qv in zip(rows, qtok, strict=True)
        ]

    def recall(rows: Any, w: float | None, kind: str = "all") -> tuple[float, float, int]:
        r1 = mrr = 0.0
        n = 0
        for cands, relevant, k in rows:
            if kind != "all" and k != kind:
                continue
            n += 1
            key = (lambda c: c[2]) if w is None else (lambda c: c[1] + w * c[2])
            ranked = [c[0] for c in sorted(cands, key=key, reverse=True)]
            pos = next((i for i, id in enumerate(ranked) if id in relevant), None)
            if pos is not None:
                r1 += pos == 0
                mrr += 1 / (pos + 1)
        return r1 / max(n, 1), mrr / max(n, 1), n

    print(f"\nfused top {TOP} rescored fused + w * maxsim; recall@1 / MRR (all; per kind)")
    for w in (*WEIGHTS, None):
        label = "maxsim only" if w is None else f"w={w}"
        cells = []
        for name in ("dev", "test"):
            parts = [recall(scored[name], w, kind) for kind in ("all", *labelled.KINDS)]
            cells.append(" ".join(f"{p[0]:.3f}/{p[1]:.3f}" for p in parts))
        print(f"  {label:<12} dev {cells[0]}   test {cells[1]}")
    best = max(WEIGHTS, key=lambda w: recall(scored["dev"], w))
    d, t = recall(scored["dev"], best), recall(scored["test"], best)
    b = recall(scored["test"], 0.0)
    print(
        f"\npicked on dev: w={best} (dev r@1 {d[0]:.3f}); test r@1 {b[0]:.3f} -> {t[0]:.3f}, "
        f"MRR {b[1]:.3f} -> {t[1]:.3f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", default="", help="keep the token vectors in this file")
    parser.add_argument("--work", default="/tmp/rag_chat_bench", help="as bench/rag_chat.py's")
    asyncio.run(main(parser.parse_args(sys.argv[1:])))
