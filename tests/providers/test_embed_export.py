"""The local embedder's ONNX export kept on disk and run alone, without torch (issue 36).

The first load exports from torch, in a child process, and stores the export with ``encode``'s
probe vectors; then it, and every later load, runs the stored export with ONNX Runtime and
``tokenizers`` only, after checking it against those stored vectors. Anything missing or
different means the export again; when no export can be stored, the torch load in-process.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_embed_fast_path import texts

from goagent_py.messages import TextBlock
from goagent_py.providers import _st_export
from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.needs_extra("local")]


def encode_reference(embedder: SentenceTransformerEmbedder, items: list[str]) -> np.ndarray:
    model = embedder._sentence_transformer()
    rows = model.encode(
        items, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    return np.asarray(rows, dtype=np.float32)


def min_cosine(got: np.ndarray, want: np.ndarray) -> float:
    norms = np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1)
    return float(((got * want).sum(axis=1) / norms).min())


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SentenceTransformerEmbedder]:
    """A cache folder after one first load, and the embedder of that load (its reference
    vectors load torch in this process)."""
    cache = tmp_path_factory.mktemp("export")
    first = SentenceTransformerEmbedder(onnx_cache=cache)
    asyncio.run(first.load())
    return cache, first


def test_the_first_load_exports_in_a_child_process_and_runs_the_export_alone(
    exported: tuple[Path, SentenceTransformerEmbedder],
) -> None:
    cache, first = exported
    assert first.query_path == "onnxruntime"
    [folder] = [p for p in cache.iterdir() if not p.name.startswith(".")]
    assert first.onnx_export == folder  # stored by the child, then loaded alone here
    assert first._model is None  # no SentenceTransformer in this process
    assert {p.name for p in folder.iterdir()} == {"model.onnx", "tokenizer.json", "meta.json"}
    meta = json.loads((folder / "meta.json").read_text())
    assert sorted(meta["inputs"]) == ["attention_mask", "input_ids", "token_type_ids"]
    # encode's own vectors of the probe texts, the reference of every later load
    want = encode_reference(first, meta["probes"])
    np.testing.assert_allclose(np.asarray(meta["reference"]), want, atol=1e-6)
    assert [p.name for p in cache.iterdir()] == [folder.name]  # no staging folder left


async def test_without_the_export_process_the_first_load_runs_torch_here_and_stores_the_export(
    exported: tuple[Path, SentenceTransformerEmbedder],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, first = exported
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    embedder = SentenceTransformerEmbedder(onnx_cache=tmp_path / "cache")
    await embedder.load()
    assert "could not start the embedder's export process" in caplog.text
    assert embedder.onnx_export is None  # this process loaded torch to export
    assert embedder._model is not None
    assert embedder.query_path == "onnxruntime"
    [folder] = list((tmp_path / "cache").iterdir())
    meta = json.loads((folder / "meta.json").read_text())
    np.testing.assert_allclose(
        np.asarray(meta["reference"]), encode_reference(first, meta["probes"]), atol=1e-6
    )


async def test_the_stored_export_gives_encodes_vectors_one_text_and_batches(
    exported: tuple[Path, SentenceTransformerEmbedder],
) -> None:
    cache, first = exported
    alone = SentenceTransformerEmbedder(onnx_cache=cache)
    await alone.load()
    assert alone.onnx_export is not None
    assert alone.query_path == "onnxruntime"
    assert alone._model is None  # no SentenceTransformer was built
    items = texts()[::2]  # every length, and ~140 texts (the torch reference is slow)
    want = encode_reference(first, items)
    one = np.stack([await alone.embed([TextBlock(t)]) for t in items])
    assert one.dtype == np.float32
    assert min_cosine(one, want) >= 0.9999
    np.testing.assert_allclose(np.linalg.norm(one, axis=1), 1.0, atol=1e-5)
    small = items[:64]  # up to 64 texts: the stored export; more: torch's encode
    batch = await alone.embed_batch([[TextBlock(t)] for t in small])
    assert alone._model is None
    assert batch.shape == (len(small), 384)
    assert min_cosine(batch, want[:64]) >= 0.9999
    np.testing.assert_allclose(batch, one[:64], atol=1e-5)
    assert alone.dimensions == 384
    large = await alone.embed_batch([[TextBlock(t)] for t in items])
    assert alone._model is not None  # a folder's worth of chunks: encode on torch's threads
    assert min_cosine(large, want) >= 0.9999


PROCESS = """
import asyncio, json, sys
import numpy as np
from goagent_py.messages import TextBlock
from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder

items = json.loads(sys.argv[2])
embedder = SentenceTransformerEmbedder(onnx_cache=sys.argv[1])

async def main():
    await embedder.load()
    one = [(await embedder.embed([TextBlock(t)])).tolist() for t in items]
    batch = (await embedder.embed_batch([[TextBlock(t)] for t in items])).tolist()
    return one, batch

one, batch = asyncio.run(main())
heavy = sorted(m for m in ("torch", "transformers", "sentence_transformers", "onnx")
               if m in sys.modules)
print(json.dumps({"export": str(embedder.onnx_export), "heavy": heavy, "one": one,
                  "batch": batch, "path": embedder.query_path}))
"""


def test_a_new_process_runs_the_export_without_importing_torch(
    exported: tuple[Path, SentenceTransformerEmbedder],
) -> None:
    cache, first = exported
    items = texts()[::7]
    proc = subprocess.run(
        [sys.executable, "-c", PROCESS, str(cache), json.dumps(items)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["heavy"] == []
    assert record["path"] == "onnxruntime"
    assert record["export"].startswith(str(cache))
    want = encode_reference(first, items)
    assert min_cosine(np.asarray(record["one"], dtype=np.float32), want) >= 0.9999
    assert min_cosine(np.asarray(record["batch"], dtype=np.float32), want) >= 0.9999


def test_a_first_start_with_an_empty_cache_never_imports_torch(
    exported: tuple[Path, SentenceTransformerEmbedder], tmp_path: Path
) -> None:
    _, first = exported
    items = texts()[::29]
    proc = subprocess.run(
        [sys.executable, "-c", PROCESS, str(tmp_path / "empty"), json.dumps(items)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["heavy"] == []  # the export was made in a child of that process
    assert record["path"] == "onnxruntime"
    assert record["export"].startswith(str(tmp_path / "empty"))
    want = encode_reference(first, items)
    assert min_cosine(np.asarray(record["one"], dtype=np.float32), want) >= 0.9999


def _copy(cache: Path, to: Path) -> Path:
    import shutil

    shutil.copytree(cache, to)
    [folder] = list(to.iterdir())
    return folder


async def test_an_export_that_fails_the_probe_is_not_used_and_is_written_again(
    exported: tuple[Path, SentenceTransformerEmbedder], tmp_path: Path
) -> None:
    cache, first = exported
    folder = _copy(cache, tmp_path / "cache")
    meta = json.loads((folder / "meta.json").read_text())
    meta["reference"][1] = list(reversed(meta["reference"][1]))  # not this model's vector
    (folder / "meta.json").write_text(json.dumps(meta))
    embedder = SentenceTransformerEmbedder(onnx_cache=tmp_path / "cache")
    await embedder.load()
    assert embedder.onnx_export == folder  # the probe failed: exported again, then run alone
    assert embedder._model is None
    assert embedder.query_path == "onnxruntime"
    items = texts()[:20]
    got = np.stack([await embedder.embed([TextBlock(t)]) for t in items])
    assert min_cosine(got, encode_reference(first, items)) >= 0.9999
    fixed = json.loads((folder / "meta.json").read_text())  # a good export replaced it
    np.testing.assert_allclose(
        np.asarray(fixed["reference"]), encode_reference(first, fixed["probes"]), atol=1e-6
    )


@pytest.mark.parametrize("damage", ["no graph", "truncated graph", "bad meta", "other key"])
async def test_a_damaged_export_is_made_again(
    exported: tuple[Path, SentenceTransformerEmbedder], tmp_path: Path, damage: str
) -> None:
    cache, first = exported
    folder = _copy(cache, tmp_path / "cache")
    if damage == "no graph":
        (folder / "model.onnx").unlink()
    elif damage == "truncated graph":
        graph = (folder / "model.onnx").read_bytes()
        (folder / "model.onnx").write_bytes(graph[: len(graph) // 2])
    elif damage == "bad meta":
        (folder / "meta.json").write_text("{not json")
    else:
        meta = json.loads((folder / "meta.json").read_text())
        meta["key"] = "another-model"
        (folder / "meta.json").write_text(json.dumps(meta))
    embedder = SentenceTransformerEmbedder(onnx_cache=tmp_path / "cache")
    await embedder.load()
    assert embedder.onnx_export == folder  # exported again (in a child), then run alone
    assert embedder._model is None
    got = await embedder.embed([TextBlock("Where is the retry policy configured?")])
    want = encode_reference(first, ["Where is the retry policy configured?"])[0]
    assert float(got @ want) >= 0.9999


async def test_an_unwritable_cache_still_embeds(
    exported: tuple[Path, SentenceTransformerEmbedder], tmp_path: Path
) -> None:
    _, first = exported
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    embedder = SentenceTransformerEmbedder(onnx_cache=blocker / "cache")
    await embedder.load()
    assert embedder.query_path == "onnxruntime"
    assert embedder.onnx_export is None  # the export process stored nothing: torch here
    assert embedder._model is not None
    got = await embedder.embed([TextBlock("sqlite-vec")])
    assert float(got @ encode_reference(first, ["sqlite-vec"])[0]) >= 0.9999


def test_the_key_changes_with_the_model_files(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "modules.json").write_text("[]")
    key = _st_export.export_key(model, True)
    assert key == _st_export.export_key(model, True)
    assert key != _st_export.export_key(model, False)
    (model / "modules.json").write_text("[1]")
    assert key != _st_export.export_key(model, True)


def test_the_cache_folder_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GOAGENT_EMBED_CACHE", str(tmp_path / "here"))
    assert _st_export.default_cache_dir() == tmp_path / "here"
    monkeypatch.delenv("GOAGENT_EMBED_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert _st_export.default_cache_dir() == tmp_path / "xdg" / "goagent-py" / "embedders"
