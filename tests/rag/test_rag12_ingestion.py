"""Ingestion of the files users really have: binary files with a text suffix, text that is not
UTF-8, huge single lines, link loops, files that vanish or fail to parse (docs/rag.md).

The CLI runs in process on a real SQLite index with the word-hashing ``FakeEmbedder``.
"""

from __future__ import annotations

import os
import pickle
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from goagent_py.cli import _rag as _cli_rag
from goagent_py.cli import main as cli
from goagent_py.errors import UnreadableDocumentError
from goagent_py.memory.chunking import RecursiveChunker
from goagent_py.messages import TextBlock
from goagent_py.rag import documents as _documents
from goagent_py.rag import load_directory, load_file
from goagent_py.rag._chunks import line_spans

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4


def _skips(folder: Path, **kwargs: Any) -> tuple[list[str], list[tuple[str, str]]]:
    skipped: list[tuple[str, str]] = []
    docs = load_directory(folder, on_skip=lambda p, r: skipped.append((p, r)), **kwargs)
    return [d.source for d in docs], skipped


# -- binary content -----------------------------------------------------------------------------


def test_load_file_refuses_a_binary_file_named_txt_naming_it(tmp_path: Path) -> None:
    image = tmp_path / "photo.txt"
    image.write_bytes(PNG)
    with pytest.raises(UnreadableDocumentError) as caught:
        load_file(image)
    assert caught.value.path == str(image)
    assert "binary" in caught.value.reason
    assert str(image) in str(caught.value)
    assert isinstance(caught.value, ValueError)
    again = pickle.loads(pickle.dumps(caught.value))
    assert (again.path, again.reason) == (caught.value.path, caught.value.reason)


def test_load_directory_skips_binary_files_and_reports_them(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("# Notes\n\nThe port is 8080.\n")
    (tmp_path / "logo.md").write_bytes(PNG)
    sources, skipped = _skips(tmp_path)
    assert sources == ["notes.md"]
    assert [(Path(p).name, "binary" in r) for p, r in skipped] == [("logo.md", True)]


def test_a_skipped_file_is_logged_when_no_on_skip_is_given(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "logo.txt").write_bytes(PNG)
    with caplog.at_level("WARNING", logger="goagent_py.rag"):
        assert load_directory(tmp_path) == []
    assert "logo.txt" in caplog.text
    assert "binary" in caplog.text


def test_a_nul_byte_after_the_first_8_kb_is_still_text(tmp_path: Path) -> None:
    # git's rule: only the first 8 KB are looked at
    path = tmp_path / "log.txt"
    path.write_bytes(b"a line of log\n" * 1000 + b"\x00tail\n")
    assert load_file(path).text.startswith("a line of log")


# -- encodings ---------------------------------------------------------------------------------


def test_a_windows_1252_file_is_read_without_replacement_characters_and_says_so(
    tmp_path: Path,
) -> None:
    path = tmp_path / "menu.txt"
    path.write_bytes("Café crème — 5 €\n".encode("cp1252"))
    doc = load_file(path)
    assert doc.text == "Café crème — 5 €\n"
    assert "\ufffd" not in doc.text
    assert doc.metadata["encoding"] == "cp1252"


def test_bytes_cp1252_leaves_undefined_are_kept_as_latin1(tmp_path: Path) -> None:
    path = tmp_path / "odd.txt"
    path.write_bytes(b"caf\xe9 \x81\n")
    doc = load_file(path)
    assert doc.text == "caf\xe9 \x81\n"
    assert doc.metadata["encoding"] == "latin-1"


def test_utf8_files_carry_no_encoding_key_so_their_chunk_ids_do_not_change(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.md"
    path.write_text("# Été\n\nDéjà vu.\n", encoding="utf-8")
    assert "encoding" not in load_file(path).metadata
    path.write_bytes(b"\xef\xbb\xbf# BOM\n")
    doc = load_file(path)
    assert doc.text == "# BOM\n"  # the byte-order mark is not text
    assert "encoding" not in doc.metadata


def test_a_utf16_file_with_a_bom_is_text_not_binary(tmp_path: Path) -> None:
    path = tmp_path / "windows.txt"
    path.write_bytes("Notes from Windows: naïve\n".encode("utf-16"))
    doc = load_file(path)
    assert doc.text == "Notes from Windows: naïve\n"
    assert doc.metadata["encoding"] == "utf-16"


def test_a_named_encoding_is_strict_and_the_error_says_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "menu.txt"
    path.write_bytes("Café".encode("cp1252"))
    with pytest.raises(UnreadableDocumentError, match=r"not valid utf-8 .*0xe9.*encoding="):
        load_file(path, encoding="utf-8")


# -- links, races, parse failures ------------------------------------------------------------------


def test_a_link_loop_inside_a_folder_is_reported_not_silently_dropped(tmp_path: Path) -> None:
    (tmp_path / "ok.md").write_text("# OK\n")
    (tmp_path / "loop.md").symlink_to(tmp_path / "loop.md")
    (tmp_path / "dangling.md").symlink_to(tmp_path / "gone.md")
    sources, skipped = _skips(tmp_path)
    assert sources == ["ok.md"]
    assert sorted((Path(p).name, r) for p, r in skipped) == [
        ("dangling.md", "no such file (deleted, or a link to nothing)"),
        ("loop.md", "a symbolic link loop"),
    ]


def test_a_file_deleted_between_listing_and_reading_is_skipped_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("a.md", "b.md", "c.md"):
        (tmp_path / name).write_text(f"# {name}\n")
    real = _documents.load_file

    def vanishing(path: Any, **kwargs: Any) -> Any:
        if Path(path).name == "b.md":
            Path(path).unlink()  # another process deletes it after the listing
        return real(path, **kwargs)

    monkeypatch.setattr(_documents, "load_file", vanishing)
    sources, skipped = _skips(tmp_path)
    assert sources == ["a.md", "c.md"]
    assert [Path(p).name for p, _ in skipped] == ["b.md"]


def test_a_pdf_that_does_not_parse_is_refused_by_name_and_skipped_in_a_folder(
    tmp_path: Path,
) -> None:
    pytest.importorskip("pypdf", reason='needs the "pdf" extra')
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.7\nthis is not a PDF body at all\n")
    with pytest.raises(UnreadableDocumentError, match="PDF does not parse") as caught:
        load_file(broken)
    assert caught.value.path == str(broken)
    (tmp_path / "fine.txt").write_text("fine\n")
    sources, skipped = _skips(tmp_path)
    assert sources == ["fine.txt"]
    assert [Path(p).name for p, _ in skipped] == ["broken.pdf"]


# -- huge single lines -------------------------------------------------------------------------


class _CountingText(str):
    """A text that tallies the characters its ``count``/``find`` calls scan."""

    scanned = 0

    def count(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        lo = 0 if start is None else start
        hi = len(self) if end is None else end
        _CountingText.scanned += max(0, hi - lo)
        return super().count(sub, start, end)


def test_line_numbers_of_a_huge_single_line_take_linear_work() -> None:
    # was: text.count("\n", 0, start) per chunk, quadratic (6 MB took minutes to index)
    base = "word " * 40_000  # 200 KB, one line, ~250 chunks
    text = _CountingText(base + "\nlast line\n")
    chunker = RecursiveChunker(max_size=200, overlap=20)
    chunks = chunker.chunk([TextBlock(str(text))])
    _CountingText.scanned = 0
    lines = line_spans(text, chunker, chunks)
    assert _CountingText.scanned <= 4 * len(text)
    assert lines[0] == (1, 1)
    assert lines[-1] == (1, 2)  # its overlap starts on line 1


# -- the CLI -----------------------------------------------------------------------------------


@pytest.fixture
def fake_pipeline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from goagent_py.rag.pipeline import Pipeline
    from goagent_py.testing import FakeEmbedder

    def make(path: Path) -> Pipeline:
        return Pipeline.sqlite(path, FakeEmbedder(384), dimensions=384, table="rag")

    monkeypatch.setattr(_cli_rag, "_pipeline", make)
    monkeypatch.setenv("GOAGENT_HOME", str(tmp_path / "home"))


def _stored_texts(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        out = []
        for table in tables:
            try:
                rows = conn.execute(f'SELECT * FROM "{table}"').fetchall()
            except sqlite3.DatabaseError:
                continue
            out += [repr(v) for row in rows for v in row if isinstance(v, str | bytes)]
    return "\n".join(out)


@pytest.mark.needs_extra("vector")
def test_rag_index_skips_a_binary_txt_and_names_it_in_the_summary(
    fake_pipeline: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n\nThe port is 8080.\n")
    (notes / "dump.txt").write_bytes(PNG)
    db = tmp_path / "rag.db"
    named = tmp_path / "image.md"
    named.write_bytes(PNG)
    code = cli.main(
        ["rag", "index", str(notes), str(named), "--db", str(db), "--root", str(tmp_path)]
    )
    assert code == cli.EXIT_OK
    captured = capsys.readouterr()
    assert "dump.txt: binary content" in captured.err
    assert "image.md: binary content" in captured.err
    assert "2 files skipped" in captured.out
    assert "IHDR" not in _stored_texts(db)


@pytest.mark.needs_extra("vector")
def test_rag_index_says_a_file_is_not_utf8_and_keeps_its_letters(
    fake_pipeline: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    menu = tmp_path / "menu.txt"
    menu.write_bytes("Café crème\n".encode("cp1252"))
    db = tmp_path / "rag.db"
    assert cli.main(["rag", "index", str(menu), "--db", str(db), "--root", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "menu.txt is not UTF-8: read as cp1252" in err
    stored = _stored_texts(db)
    assert "Café crème" in stored or "Caf\\u00e9 cr\\u00e8me" in stored


@pytest.mark.needs_extra("vector")
def test_rag_index_on_a_link_loop_says_it_is_a_loop(
    fake_pipeline: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    code = cli.main(["rag", "index", str(loop), "--db", str(tmp_path / "rag.db")])
    assert code == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert f"cannot index {loop}: a symbolic link loop" in err
    assert "no such file" not in err


@pytest.mark.needs_extra("vector")
def test_rag_index_on_a_missing_path_still_says_no_such_file(
    fake_pipeline: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.md"
    assert cli.main(["rag", "index", str(missing), "--db", str(tmp_path / "r.db")]) == 2
    assert f"no such file or folder: {missing}" in capsys.readouterr().err


# -- HTML -------------------------------------------------------------------------------------


def test_html_without_a_closing_head_tag_keeps_its_body(tmp_path: Path) -> None:
    # was: <head> counted as skipped until </head>, which HTML5 lets pages leave out: all lost
    page = tmp_path / "page.html"
    page.write_text(
        "<html><head><title>Guide</title><meta charset=utf-8>"
        "<script>ignore the passages</script><h1>Install</h1><p>Run make.</p>"
    )
    doc = load_file(page)
    assert doc.title == "Guide"
    assert doc.text == "# Install\n\nRun make."


def test_html_head_text_and_scripts_stay_out_of_the_text(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text(
        "<html><head><title>T</title><style>p{}</style><script>var a='</p>evil';</script>"
        "</head><body><p>kept</p><script>alert(1)</script><noscript>ns</noscript></body>"
    )
    assert load_file(page).text == "kept"


@pytest.mark.needs_extra("vector")
def test_rag_index_says_which_files_hold_no_text(
    fake_pipeline: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pypdf = pytest.importorskip("pypdf", reason='needs the "pdf" extra')
    writer = pypdf.PdfWriter()
    writer.add_blank_page(width=200, height=200)  # a scan: pages, no text layer
    with (tmp_path / "scan.pdf").open("wb") as out:
        writer.write(out)
    (tmp_path / "empty.md").write_text("\n\n")
    (tmp_path / "a.md").write_text("# A\n\ntext\n")
    db = tmp_path / "rag.db"
    assert cli.main(["rag", "index", str(tmp_path), "--db", str(db), "--root", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "scan.pdf holds no text to index (a scanned PDF?" in err
    assert "empty.md holds no text to index\n" in err
    assert "a.md holds" not in err


def test_load_file_refuses_a_fifo_instead_of_reading_it(tmp_path: Path) -> None:
    fifo = tmp_path / "notes.txt"
    os.mkfifo(fifo)
    written = threading.Event()

    def writer() -> None:
        with fifo.open("wb") as out:  # blocks until a reader opens the pipe
            out.write(b"from a pipe\n")
        written.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        with pytest.raises(UnreadableDocumentError, match="not a regular file"):
            load_file(fifo)
    finally:
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # let the writer finish
        written.wait()
        os.close(reader)
        thread.join()
