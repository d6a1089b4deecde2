"""A ``--db`` (or ``GOAGENT_HOME``) whose folder cannot be made: a clear error, never a traceback.

``mkdir`` raised FileExistsError out of ``chat`` and ``rag index`` when a part of the folder is
a file (``--db /etc/passwd/chat.db``); the chat, whose embedded model was loading, then ended in
a C++ ``terminate`` (exit 134).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from goagent_py.cli import _input
from goagent_py.cli import main as cli


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "not-a-folder"
    path.write_text("a file, not a folder\n")
    return path


def test_chat_with_a_db_under_a_file_is_a_database_error_without_a_traceback(
    scripted: None,
    monkeypatch: pytest.MonkeyPatch,
    a_file: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(cli, "_make_embedder", lambda: None)
    db = a_file / "chat.db"
    assert cli.main(["chat", "--db", str(db)]) == cli.EXIT_DATABASE
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"goagent-py: cannot make the folder of {db}" in err
    assert "--db" in err
    assert "GOAGENT_HOME" in err


@pytest.mark.needs_extra("local", "vector")
def test_rag_index_with_a_db_under_a_file_is_a_database_error_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    a_file: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("GOAGENT_HOME", str(tmp_path / "home"))
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n\nSome text.\n")
    db = a_file / "rag.db"
    # The folder is made before the embedding model loads: the error comes first.
    assert cli.main(["rag", "index", str(notes), "--db", str(db)]) == cli.EXIT_DATABASE
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"goagent-py: cannot make the folder of {db}" in err


async def test_a_history_folder_that_cannot_be_made_costs_only_the_history(
    monkeypatch: pytest.MonkeyPatch, a_file: Path
) -> None:
    answers = iter(["hello", EOFError()])

    def fake_input(prompt: str = "") -> str:
        value = next(answers)
        if isinstance(value, BaseException):
            raise value
        return value

    monkeypatch.setattr("builtins.input", fake_input)
    lines: Any = _input._readline_lines("you> ", a_file / "chat_history")
    assert [line async for line in lines] == ["hello"]


@pytest.mark.needs_extra("serve")
def test_serve_with_a_db_under_a_file_is_a_database_error_without_a_traceback(
    scripted: None,
    monkeypatch: pytest.MonkeyPatch,
    a_file: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = a_file / "serve.db"
    assert cli.main(["serve", "--db", str(db), "--port", "0"]) == cli.EXIT_DATABASE
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"goagent-py: cannot make the folder of {db}" in err


def test_code_with_a_db_under_a_file_is_a_database_error_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    a_file: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("GOAGENT_HOME", str(tmp_path / "home"))
    db = a_file / "code.db"
    args = ["code", "--plain", "--root", str(tmp_path), "--provider", "ollama:qwen3"]
    assert cli.main([*args, "--db", str(db)]) == cli.EXIT_DATABASE
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"goagent-py code: cannot create the session store {db}" in err
