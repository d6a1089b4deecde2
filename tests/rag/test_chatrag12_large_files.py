"""A very large file is not read into memory: it is skipped, said why, within a size limit.

``load_file`` read a file whole (its bytes, then its text: twice its size, then chunks); a
2 GB log named ``.txt`` in a notes folder took the whole memory. Files over the limit are
refused before they are read, with what to do (docs/rag.md, "Large files").
"""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path

import pytest

from goagent_py.cli import main as cli
from goagent_py.errors import ConfigurationError, UnreadableDocumentError
from goagent_py.rag import load_directory, load_file
from goagent_py.rag._chunks import prepare
from goagent_py.rag.documents import MAX_FILE_BYTES

ROOT = Path(__file__).resolve().parents[2]
BIG = 40 * 1024 * 1024


def _big_file(path: Path, size: int = BIG) -> Path:
    line = b"log line with some words in it, again and again and again.\n"
    with path.open("wb") as f:
        for _ in range(size // len(line) + 1):
            f.write(line)
    return path


def test_a_folder_with_a_huge_file_is_read_in_bounded_memory(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nThe port is 8080.\n")
    _big_file(folder / "server.txt")
    load_directory(folder, on_skip=lambda p, r: None)  # imports (pypdf...) before the count
    skipped: list[tuple[str, str]] = []
    tracemalloc.start()
    try:
        docs = load_directory(folder, on_skip=lambda p, r: skipped.append((p, r)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [d.source for d in docs] == ["a.md"]
    assert peak < 1024 * 1024, peak  # was 92 MB: the bytes and the text of the file
    [(path, reason)] = skipped
    assert path.endswith("server.txt")
    assert "40.0 MB" in reason
    assert "limit" in reason
    assert "max_bytes" in reason


def test_load_file_refuses_a_file_over_its_limit_and_reads_one_under_it(tmp_path: Path) -> None:
    small = tmp_path / "small.txt"
    small.write_text("x" * 100)
    with pytest.raises(UnreadableDocumentError, match="more than the 50 bytes"):
        load_file(small, max_bytes=50)
    assert load_file(small, max_bytes=100).text == "x" * 100
    assert load_file(small, max_bytes=None).text == "x" * 100
    with pytest.raises(ConfigurationError, match="max_bytes"):
        load_file(small, max_bytes=0)


def test_ordinary_files_keep_their_chunk_ids(tmp_path: Path) -> None:
    # The limit changes no chunk of a file under it: the repository's docs, read with and
    # without it, give the same chunk ids (which hash text, lines and headings).
    def ids(**kwargs: object) -> str:
        h = hashlib.sha256()
        for doc in load_directory(ROOT / "docs", **kwargs):  # type: ignore[arg-type]
            for chunk in prepare(doc, None):
                h.update(chunk.id.encode() + b"\n")
        return h.hexdigest()

    assert ids() == ids(max_bytes=None)
    assert MAX_FILE_BYTES >= 10 * 1024 * 1024


@pytest.mark.needs_extra("vector")
def test_rag_index_skips_a_huge_file_and_says_how_to_index_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from goagent_py.cli import _rag as _cli_rag
    from goagent_py.rag.pipeline import Pipeline
    from goagent_py.testing import FakeEmbedder

    monkeypatch.setattr(
        _cli_rag,
        "_pipeline",
        lambda path: Pipeline.sqlite(path, FakeEmbedder(384), dimensions=384, table="rag"),
    )
    big = tmp_path / "huge.log"
    big.write_text("a log line\n" * 300)  # 3,300 bytes: over a limit of 0.002 MB
    (tmp_path / "a.md").write_text("# A\n\nThe port is 8080.\n")
    db = tmp_path / "rag.db"
    argv = ["rag", "index", str(big), str(tmp_path / "a.md"), "--db", str(db)]
    assert cli.main([*argv, "--root", str(tmp_path), "--max-file-size", "0.002"]) == cli.EXIT_OK
    captured = capsys.readouterr()
    assert "huge.log: 3300 bytes, more than the 2097 bytes limit" in captured.err
    assert "--max-file-size" in captured.err
    assert "1 files skipped" in captured.out
    assert cli.main([*argv, "--root", str(tmp_path), "--max-file-size", "0.01"]) == cli.EXIT_OK
    assert "skipped" not in capsys.readouterr().out
    assert cli.main([*argv, "--max-file-size", "0"]) == cli.EXIT_USAGE
    assert "--max-file-size" in capsys.readouterr().err
