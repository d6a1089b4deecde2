"""A file whose name is not valid UTF-8 is skipped and named; the rest of the folder is indexed.

Such a name (``caf\\xe9.md``, written by an old Latin-1 system) reaches Python with a lone
surrogate in it, and the file name goes into every chunk's embedded context: indexing it raised
UnicodeEncodeError and ended the whole folder's indexing at that file. It is now a file that
cannot be read, with the reason and what to do. A library caller's Document whose source holds
a lone surrogate is refused when it is made.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from goagent_py.errors import ConfigurationError, UnreadableDocumentError
from goagent_py.rag import Document, Pipeline, iter_directory, load_directory, load_file
from goagent_py.testing import FakeEmbedder

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="byte file names (Linux)")


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    with open(os.fsencode(folder) + b"/caf\xe9.md", "w") as f:
        f.write("# Cafe\n\nthe espresso is strong\n")
    (folder / "ok.md").write_text("# Ok\n\nthe tea is mild\n")
    return folder


async def test_a_folder_with_a_non_utf8_file_name_indexes_the_rest(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    skipped: list[tuple[str, str]] = []
    async with Pipeline.in_memory(FakeEmbedder(64)) as pipeline:
        report = await pipeline.index(
            iter_directory(folder, on_skip=lambda p, r: skipped.append((p, r)))
        )
    assert [d.source for d in report.documents] == ["ok.md"]
    [(path, reason)] = skipped
    assert path.endswith(".md")
    assert "not valid UTF-8" in reason
    assert "rename" in reason


def test_load_file_refuses_a_non_utf8_name_with_what_to_do(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    name = os.fsdecode(os.fsencode(folder) + b"/caf\xe9.md")
    with pytest.raises(UnreadableDocumentError, match="rename"):
        load_file(name)
    assert [d.source for d in load_directory(folder, on_skip=lambda p, r: None)] == ["ok.md"]


def test_a_document_source_with_a_lone_surrogate_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="surrogate"):
        Document("text", "caf\udce9.md")
