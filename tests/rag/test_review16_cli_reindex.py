"""Re-indexing a folder removes the files gone from it, and only those (docs/rag.md,
"`rag index`").

``rag index docs/`` took "gone" to mean "not read by this folder's walk": a file of the folder
that the walk does not read (a hidden file, a suffix it does not take) but that was indexed by
naming it (``rag index docs/build.py``) was removed at the next ``rag index docs/``, though it
is still there. A file the walk read and skipped this time (it turned binary, grew past the
size limit) is still removed: its passages are of a version that is gone.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from goagent_py.cli import _rag as _cli_rag
from goagent_py.cli import main as cli
from goagent_py.rag.pipeline import Pipeline
from goagent_py.testing import FakeEmbedder


@pytest.fixture
def fake_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    def make(path: Path) -> Pipeline:
        return Pipeline.sqlite(path, FakeEmbedder(64), dimensions=64, table="rag")

    monkeypatch.setattr(_cli_rag, "_pipeline", make)


async def _index(db: Path, root: Path, *paths: Path) -> str:
    console = cli.Console(io.StringIO(), io.StringIO(), interactive=False)
    args = argparse.Namespace(paths=[str(p) for p in paths], db=str(db), root=str(root))
    assert await _cli_rag.index(args, console) == cli.EXIT_OK
    return console.out.getvalue() + console.err.getvalue()  # type: ignore[attr-defined]


async def _sources(db: Path) -> list[str]:
    async with _cli_rag._pipeline(db) as pipeline:
        return await pipeline.sources()


@pytest.mark.needs_extra("vector")
async def test_files_named_on_the_command_line_stay_when_their_folder_is_indexed_again(
    tmp_path: Path, fake_pipeline: None
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\n\nHow to deploy the service.\n")
    (docs / "build.py").write_text("def build():\n    return 'release'\n")
    (docs / ".draft.md").write_text("# Draft\n\nThe next release notes.\n")
    (docs / "old.md").write_text("# Old\n\nThe previous process.\n")
    db = tmp_path / "rag.db"
    await _index(db, tmp_path, docs, docs / "build.py", docs / ".draft.md")
    assert await _sources(db) == ["docs/.draft.md", "docs/build.py", "docs/guide.md", "docs/old.md"]
    (docs / "old.md").unlink()
    out = await _index(db, tmp_path, docs)
    assert "1 documents removed" in out, out
    assert await _sources(db) == ["docs/.draft.md", "docs/build.py", "docs/guide.md"]


@pytest.mark.needs_extra("vector")
async def test_a_file_the_folder_now_skips_loses_its_old_passages(
    tmp_path: Path, fake_pipeline: None
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\n\nHow to deploy the service.\n")
    (docs / "notes.txt").write_text("the old notes\n")
    db = tmp_path / "rag.db"
    await _index(db, tmp_path, docs)
    (docs / "notes.txt").write_bytes(b"\x00\x01binary now")
    out = await _index(db, tmp_path, docs)
    assert "skipped" in out, out
    assert "notes.txt" in out, out
    assert await _sources(db) == ["docs/guide.md"]
