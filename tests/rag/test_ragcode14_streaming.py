"""A folder is read one file at a time while it is indexed (bounded memory for any folder).

``load_directory`` (and ``rag index FOLDER``) held every document of a folder in memory at
once: each file is bounded (``max_bytes``), the folder was not. ``iter_directory`` lists the
folder and reads each file when the indexing reaches it; ``Pipeline.index`` advances such an
iterator in a worker thread (a file read never blocks the event loop). The documents, and so
the chunk ids, are the same as ``load_directory``'s.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import io
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from goagent_py.cli import _rag as _cli_rag
from goagent_py.cli import main as cli
from goagent_py.rag import Document, Pipeline, iter_directory, load_directory
from goagent_py.rag.results import IndexProgress
from goagent_py.testing import FakeEmbedder

FILES = 24


def _folder(root: Path) -> Path:
    folder = root / "notes"
    for i in range(FILES):
        sub = folder / f"part{i % 3}"
        sub.mkdir(parents=True, exist_ok=True)
        words = " ".join(f"word{i}-{j}" for j in range(60))
        (sub / f"note{i:02}.md").write_text(f"# Note {i}\n\n{words}\n")
    (folder / "part2" / "zz-binary.txt").write_bytes(b"\0\1\2 not text")
    (folder / ".hidden.md").write_text("# hidden\n")
    return folder


def _live_documents() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is Document)


class _Observer:
    def __init__(self) -> None:
        self.alive: list[int] = []

    def on_index(self, report: Any, seconds: float, error: BaseException | None) -> None:
        self.alive.append(_live_documents())


async def test_a_folder_is_indexed_with_one_document_in_memory_at_a_time(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    watch = _Observer()
    skipped: list[tuple[str, str]] = []
    progress: list[IndexProgress] = []
    async with Pipeline.in_memory(FakeEmbedder(64), observers=[watch]) as pipeline:
        report = await pipeline.index(
            iter_directory(folder, on_skip=lambda p, r: skipped.append((p, r))),
            progress=progress.append,
        )
    assert len(report.documents) == FILES
    assert max(watch.alive) <= 2, watch.alive  # was: every document of the folder
    assert [p.name for p, _ in [(Path(s), r) for s, r in skipped]] == ["zz-binary.txt"]
    # The bar's total: what is done plus the files still to read (the binary one counts
    # until it is reached and skipped).
    assert progress[0].total == FILES + 1
    assert [p.done for p in progress] == list(range(1, FILES + 1))
    assert all(p.total == FILES + 1 for p in progress)


def test_iter_directory_gives_load_directory_s_documents(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    listed = load_directory(folder, source_root=tmp_path, on_skip=lambda p, r: None)
    streamed = list(iter_directory(folder, source_root=tmp_path, on_skip=lambda p, r: None))
    assert [(d.source, d.text, dict(d.metadata)) for d in streamed] == [
        (d.source, d.text, dict(d.metadata)) for d in listed
    ]


async def test_the_chunk_ids_of_a_streamed_folder_are_those_of_a_listed_one(tmp_path: Path) -> None:
    folder = _folder(tmp_path)

    async def ids(documents: Any) -> str:
        async with Pipeline.in_memory(FakeEmbedder(64)) as pipeline:
            await pipeline.index(documents)
            found = await pipeline.search("word3-7", top_k=FILES, mode="keyword")
            return hashlib.sha256("\n".join(sorted(r.id for r in found)).encode()).hexdigest()

    skip = {"on_skip": lambda p, r: None}
    assert await ids(iter_directory(folder, **skip)) == await ids(load_directory(folder, **skip))


def test_a_bad_folder_is_refused_at_the_call_not_at_the_first_document(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError):
        iter_directory(tmp_path / "missing")


async def test_a_lazy_iterator_is_advanced_off_the_event_loop(tmp_path: Path) -> None:
    loop_thread = threading.current_thread()
    read_in: list[threading.Thread] = []

    def documents() -> Iterator[Document]:
        for i in range(3):
            read_in.append(threading.current_thread())  # where the "file read" happens
            yield Document(f"text {i}", f"s{i}")

    async with Pipeline.in_memory(FakeEmbedder(64)) as pipeline:
        report = await pipeline.index(documents())
    assert len(report.documents) == 3
    assert read_in
    assert all(t is not loop_thread for t in read_in)


@pytest.mark.needs_extra("vector")
async def test_rag_index_reads_a_folder_one_document_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _folder(tmp_path)
    watch = _Observer()

    def make(path: Path) -> Pipeline:
        return Pipeline.sqlite(
            path, FakeEmbedder(384), dimensions=384, table="rag", observers=[watch]
        )

    monkeypatch.setattr(_cli_rag, "_pipeline", make)
    console = cli.Console(io.StringIO(), io.StringIO(), interactive=False)
    args = argparse.Namespace(paths=[str(folder)], db=str(tmp_path / "rag.db"), root=str(tmp_path))
    assert await _cli_rag.index(args, console) == cli.EXIT_OK
    out, err = console.out.getvalue(), console.err.getvalue()  # type: ignore[attr-defined]
    assert f"indexed {FILES} documents" in out
    assert "skipped" in err
    assert "binary.txt" in err
    assert max(watch.alive) <= 2, watch.alive
