"""SentenceTransformerEmbedder's one-text paths (ONNX Runtime, torch): encode()'s vectors,
threads of their own.

The reference vectors come from sentence-transformers' own ``encode``, so a path that drifted
from it (pooling, normalisation, truncation, tokenisation, a shape fixed by the export) fails.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from goagent_py.errors import ConfigurationError
from goagent_py.messages import TextBlock
from goagent_py.providers import _st_onnx
from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder

ROOT = Path(__file__).resolve().parents[2]


def texts() -> list[str]:
    """About 300 real texts of every length: lines of the architecture document, a few joined
    past the model's 256-token limit, and some odd ones."""
    lines = [
        line.strip()
        for line in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    out = lines[:280]
    out += [" ".join(lines[i : i + 40]) for i in range(0, 200, 40)]  # truncated at 256 tokens
    out += ["a", "sqlite-vec", "Ünïcödé — 日本語のテキスト", "  padded query  ", "x" * 3000]
    return out


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    model = SentenceTransformerEmbedder(onnx_cache=False)  # exported from torch in this process
    asyncio.run(model.load())
    return model


def reference(embedder: SentenceTransformerEmbedder, items: list[str]) -> np.ndarray:
    model = embedder._sentence_transformer()
    rows = model.encode(
        items, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    return np.asarray(rows, dtype=np.float32)


@pytest.mark.slow
@pytest.mark.needs_extra("local")
async def test_one_text_vectors_are_encodes_vectors(embedder: SentenceTransformerEmbedder) -> None:
    items = texts()
    assert len(items) >= 250
    assert embedder.query_path == "onnxruntime"  # onnx and onnxruntime are in extra local
    got = np.stack([await embedder.embed([TextBlock(t)]) for t in items])
    want = reference(embedder, items)
    assert got.dtype == np.float32
    assert got.shape == (len(items), 384)
    cosines = (got * want).sum(axis=1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert float(cosines.min()) >= 0.9999
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
@pytest.mark.needs_extra("local")
async def test_batch_rows_equal_one_text_vectors(embedder: SentenceTransformerEmbedder) -> None:
    items = texts()[::5]  # mixed lengths: the batch pads, one text does not
    batch = await embedder.embed_batch([[TextBlock(t)] for t in items])
    single = np.stack([await embedder.embed([TextBlock(t)]) for t in items])
    np.testing.assert_allclose(batch, single, atol=1e-5)


@pytest.mark.slow
@pytest.mark.needs_extra("local")
async def test_concurrent_queries_each_get_their_own_vector(
    embedder: SentenceTransformerEmbedder,
) -> None:
    items = texts()[:24]
    together = await asyncio.gather(*(embedder.embed([TextBlock(t)]) for t in items))
    np.testing.assert_allclose(np.stack(together), reference(embedder, items), atol=1e-5)


@pytest.mark.slow
@pytest.mark.needs_extra("local")
def test_query_threads_apply_to_the_query_worker_only(
    embedder: SentenceTransformerEmbedder,
) -> None:
    import torch

    def fresh_thread_threads() -> int:
        seen: list[int] = []
        worker = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
        worker.start()
        worker.join()
        return seen[0]

    process = fresh_thread_threads()
    assert embedder._query_pool is not None
    assert embedder._query_pool.submit(torch.get_num_threads).result() == 1
    assert torch.get_num_threads() == process  # this thread, and any new one, unchanged
    other = SentenceTransformerEmbedder(query_threads=None, onnx_cache=False)
    other._load()
    assert other._query_pool is not None
    assert other._query_pool.submit(torch.get_num_threads).result() == process
    assert fresh_thread_threads() == process


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "2"])
def test_bad_query_threads_are_refused(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="query_threads"):
        SentenceTransformerEmbedder(query_threads=value)


@pytest.mark.slow
@pytest.mark.needs_extra("local")
def test_the_torch_path_gives_encodes_vectors_too(embedder: SentenceTransformerEmbedder) -> None:
    items = texts()[::3]
    run = _st_onnx.torch_path(embedder._sentence_transformer(), True)
    got = np.concatenate([run([t]) for t in items])
    cosines = (got * reference(embedder, items)).sum(axis=1)
    assert float(cosines.min()) >= 0.9999


@pytest.mark.slow
@pytest.mark.needs_extra("local")
async def test_without_onnx_runtime_one_text_runs_on_torch(
    monkeypatch: pytest.MonkeyPatch, embedder: SentenceTransformerEmbedder
) -> None:
    monkeypatch.setattr(_st_onnx, "onnx_path", lambda model, normalize, threads: None)
    plain = SentenceTransformerEmbedder(onnx_cache=False)
    assert plain.query_path is None
    await plain.load()
    assert plain.query_path == "torch"
    items = texts()[:10]
    got = np.stack([await plain.embed([TextBlock(t)]) for t in items])
    np.testing.assert_allclose(got, reference(embedder, items), atol=1e-5)


@pytest.mark.slow
@pytest.mark.needs_extra("local")
async def test_onnx_false_keeps_one_text_on_torch(embedder: SentenceTransformerEmbedder) -> None:
    plain = SentenceTransformerEmbedder(onnx=False)
    await plain.load()
    assert plain.query_path == "torch"
    items = texts()[-8:]
    got = np.stack([await plain.embed([TextBlock(t)]) for t in items])
    np.testing.assert_allclose(got, reference(embedder, items), atol=1e-5)


class _FakeModel:
    def encode(self, texts: list[str], **kwargs: Any) -> np.ndarray:
        return np.array([[0.6, 0.8, 0.0]], dtype=np.float32)


WANT = np.array([[0.6, 0.8, 0.0]] * len(_st_onnx.PROBES), dtype=np.float32)


@pytest.mark.parametrize(
    ("vector", "same"),
    [
        ([[0.6, 0.8, 0.0]], True),
        ([[0.6, 0.8, 0.001]], True),  # float noise
        ([[0.8, 0.6, 0.0]], False),  # another pooling or a prompt: another vector
        ([[1.2, 1.6, 0.0]], False),  # same direction, not normalised
        ([[0.6, 0.8]], False),  # truncated dimensions
    ],
)
def test_a_path_is_used_only_where_it_gives_encodes_vector(
    vector: list[list[float]], same: bool
) -> None:
    def run(texts: list[str]) -> np.ndarray:
        return np.array(vector, dtype=np.float32)

    assert _st_onnx.matches(run, WANT) is same


def test_a_failing_path_is_not_used() -> None:
    def broken(texts: list[str]) -> np.ndarray:
        raise AttributeError("no preprocess or tokenize here")

    assert _st_onnx.matches(broken, WANT) is False


def test_no_path_matching_encode_means_encode(monkeypatch: pytest.MonkeyPatch) -> None:
    def wrong(texts: list[str]) -> np.ndarray:
        return np.array([[0.8, 0.6, 0.0]], dtype=np.float32)

    exported = _st_onnx.Exported(wrong, b"", ["input_ids"])
    monkeypatch.setattr(_st_onnx, "onnx_path", lambda model, normalize, threads: exported)
    monkeypatch.setattr(_st_onnx, "torch_path", lambda model, normalize: wrong)
    chosen = _st_onnx.one_text_path(_FakeModel(), True, 1)
    assert (chosen.name, chosen.run, chosen.exported) == ("encode", None, None)
