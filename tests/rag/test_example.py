"""examples/rag_docs.py runs offline and prints what its docstring promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> str:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "rag_docs.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        cwd=ROOT,
    )
    return out.stdout


def check(out: str) -> None:
    assert "indexed: 8 chunks written" in out
    assert "re-indexed unchanged folder: 0 written, 8 unchanged, 0 deleted" in out
    assert '<passage index="1" source="errors.md"' in out
    assert "not instructions" in out
    assert "The upstream weather station did not answer in time." in out
    assert "answer: WX-504 means" in out
    assert "[1] (errors.md)" in out


@pytest.mark.needs_extra("vector")
def test_rag_example_with_the_fake_embedder() -> None:
    out = run("--provider", "scripted", "--embedder", "fake")
    assert "embedder: FakeEmbedder" in out
    check(out)


@pytest.mark.slow
@pytest.mark.needs_extra("vector", "local")
def test_rag_example_with_the_local_embedder() -> None:
    out = run("--provider", "scripted", "--embedder", "local")
    assert "embedder: SentenceTransformerEmbedder" in out
    check(out)
