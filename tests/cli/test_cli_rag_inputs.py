"""``goagent-py rag`` on odd paths and files: clear errors and exit codes, never a traceback.

In process on a real SQLite index with the word-hashing ``FakeEmbedder`` (fast).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from goagent_py.cli import _rag as _cli_rag
from goagent_py.cli import main as cli
from goagent_py.rag.pipeline import Pipeline
from goagent_py.testing import FakeEmbedder


@pytest.fixture
def fake_pipeline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def make(path: Path) -> Pipeline:
        return Pipeline.sqlite(path, FakeEmbedder(384), dimensions=384, table="rag")

    monkeypatch.setattr(_cli_rag, "_pipeline", make)
    monkeypatch.setenv("GOAGENT_HOME", str(tmp_path / "home"))


@pytest.mark.needs_extra("vector")
def test_rag_index_with_a_folder_as_db_is_a_database_error_without_a_traceback(
    fake_pipeline: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n\nSome text.\n")
    # was: pysqlite3's OperationalError "unable to open database file" as a traceback, exit 1
    assert cli.main(["rag", "index", str(notes), "--db", str(tmp_path)]) == cli.EXIT_DATABASE
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.startswith("goagent-py:")
    assert str(tmp_path) in err
