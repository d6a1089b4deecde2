"""Each source has its own manifest record, whatever its name.

The manifest keeps two kinds of record in one key space: a source's chunk ids under the
source's name, and the ids a run is about to write under ``"\\x1fpending\\x1f" + source``. A
file name may start with that marker (Linux allows any byte but ``/`` and NUL), and the file's
record then *was* the other file's pending record: ``sources()`` listed one file for two, and
indexing ``a.txt`` took the other file's chunk ids for ids a failed run had left behind and
deleted them. A source's key is now escaped when it could be read as a pending record
(docs/rag.md, the manifest, under "Several processes may index").
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from goagent_py.rag import Pipeline, iter_directory
from goagent_py.testing import FakeEmbedder

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="control bytes in file names")

_MARKED = "\x1fpending\x1fa.txt"


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("the cats sleep all afternoon\n")
    (folder / _MARKED).write_text("the dogs bark at the mail carrier\n")
    return folder


async def _texts(pipeline: Pipeline, query: str) -> list[str]:
    return [r.message.text for r in await pipeline.search(query, top_k=10, mode="vector")]


@pytest.mark.parametrize("order", ["marked first", "marked last"])
async def test_a_file_named_like_a_pending_record_keeps_its_own_chunks(
    tmp_path: Path, order: str
) -> None:
    folder = _folder(tmp_path)
    docs = list(iter_directory(folder))
    docs.sort(key=lambda d: d.source != _MARKED if order == "marked first" else d.source == _MARKED)
    async with Pipeline.in_memory(FakeEmbedder(32)) as pipeline:
        report = await pipeline.index(docs)
        assert sorted(d.written for d in report.documents) == [1, 1]
        assert await pipeline.sources() == sorted(["a.txt", _MARKED])
        texts = await _texts(pipeline, "dogs")
        assert any("dogs bark" in t for t in texts), texts
        assert any("cats sleep" in t for t in texts), texts
        # Indexed again unchanged: nothing is written or deleted.
        again = await pipeline.index(list(iter_directory(folder)))
        assert [(d.written, d.deleted) for d in again.documents] == [(0, 0), (0, 0)]
        # Each removal takes its own file's chunk, and only it.
        assert await pipeline.remove("a.txt") == 1
        assert [t for t in await _texts(pipeline, "dogs") if "dogs bark" in t]
        assert await pipeline.sources() == [_MARKED]
        assert await pipeline.remove(_MARKED) == 1
        assert await _texts(pipeline, "dogs") == []
        assert await pipeline.sources() == []
