"""Fakes and fixtures for the RAG tests: a word-hashing embedder, corpora, both store kinds."""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from goagent_py.errors import NoEmbeddableContentError
from goagent_py.memory.chunking import RecursiveChunker
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.messages import ContentBlock, TextBlock
from goagent_py.rag import InMemoryKeywordIndex, Pipeline

_WORD = re.compile(r"[a-z]+")  # letters only: digits and codes are invisible to it, on purpose


class WordEmbedder:
    """Sums a fixed random vector per lower-case word (letters only), unit length.

    Like a real embedder it is blind to exact codes: "GA-1042" and "GA-2077" embed the same.
    Counts texts embedded so tests can assert that unchanged chunks are not re-embedded.
    """

    def __init__(self, dimensions: int = 32) -> None:
        self.dimensions = dimensions
        # Declared (docs/rag.md): its subclasses here make the same vectors, and an identity
        # derived from the class would tell them apart.
        self.embedder_identity = f"test:words:{dimensions}"
        self.texts: list[str] = []
        self.fail_on: str | None = None

    def _vector(self, blocks: Sequence[ContentBlock]) -> NDArray[np.float32]:
        text = " ".join(b.text for b in blocks if isinstance(b, TextBlock)).strip()
        if not text:
            raise NoEmbeddableContentError("no text")
        if self.fail_on is not None and self.fail_on in text:
            raise RuntimeError(f"embedder failed on {self.fail_on!r}")
        self.texts.append(text)
        total = np.zeros(self.dimensions)
        for word in _WORD.findall(text.lower()) or ["empty"]:
            seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "little")
            total += np.random.default_rng(seed).standard_normal(self.dimensions)
        return (total / (np.linalg.norm(total) or 1.0)).astype(np.float32)

    async def embed(self, blocks: Sequence[ContentBlock]) -> NDArray[np.float32]:
        return self._vector(blocks)


class BatchWordEmbedder(WordEmbedder):
    """The same, with ``embed_batch`` (the path real embedders take)."""

    def __init__(self, dimensions: int = 32) -> None:
        super().__init__(dimensions)
        self.batch_calls = 0

    async def embed_batch(self, inputs: Sequence[Sequence[ContentBlock]]) -> NDArray[np.float32]:
        self.batch_calls += 1
        return np.stack([self._vector(blocks) for blocks in inputs])


CORPUS = {
    "install.md": """# Installing Widget

Widget runs on Linux and macOS. Install it with pip and check the version afterwards.

## Requirements

Python 3.11 or newer is required. A C compiler is not needed.
""",
    "errors.md": """# Error codes

## GA-1042

GA-1042 means the upstream connection was refused. Check the firewall rules.

## GA-2077

GA-2077 means the request quota is exhausted. Wait for the quota window to reset.
""",
    "config.md": """# Configuration

## Retries

The key max_retry_delay caps how long the client waits between retries, in seconds.

## Logging

Set log_level to debug to see every request the client sends.
""",
}


def write_corpus(root: Path, files: dict[str, str] = CORPUS) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "docs")


def small_chunker() -> RecursiveChunker:
    """Small chunks so the corpus has several per document."""
    return RecursiveChunker(max_size=30, overlap=0)


PipelineFactory = Callable[..., Pipeline]


@pytest.fixture(
    params=["in_memory", pytest.param("sqlite_vec", marks=pytest.mark.needs_extra("vector"))]
)
async def make_pipeline(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[PipelineFactory]:
    """Build pipelines on the in-memory store or on sqlite-vec in a real file (same path)."""
    made: list[Pipeline] = []

    def make(embedder: Any = None, **kwargs: Any) -> Pipeline:
        embedder = embedder or BatchWordEmbedder()
        kwargs.setdefault("chunker", small_chunker())
        if request.param == "in_memory":
            kwargs.setdefault("keyword_index", InMemoryKeywordIndex())
            pipeline = Pipeline(embedder, InMemoryVectorStore(), **kwargs)
        else:
            pipeline = Pipeline.sqlite(
                tmp_path / "kb.db", embedder, dimensions=embedder.dimensions, **kwargs
            )
        made.append(pipeline)
        return pipeline

    make.kind = request.param  # type: ignore[attr-defined]
    yield make
    for pipeline in made:
        await pipeline.aclose()
