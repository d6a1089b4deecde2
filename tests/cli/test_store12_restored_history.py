"""The chat and the coding session after their history file is restored from a backup (or
deleted) while they run: at the next turn boundary they go on with the file now at the path,
read the transcript from it and say so (docs/cli.md "Restoring the history from a backup").
Both kept one ``SQLiteStorage`` for their whole life, whose every write after the restore was
refused ("deleted or replaced") until the user started again."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import goagent_py.cli._common as cli_common
import goagent_py.cli._input as cli_input
from goagent_py.cli import main as cli
from goagent_py.coding.repl import build_parser, code_main
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.testing import FunctionProvider, ScriptedProvider


def _backup(path: Path, to: Path) -> None:
    source, target = sqlite3.connect(path), sqlite3.connect(to)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def _restore(path: Path, backup: Path) -> None:
    """``backup`` put in place of ``path`` while the process has it open, the old WAL files
    removed: what restoring a backup does."""
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.replace(backup, path)


async def _texts(db: Path, session: str) -> list[str]:
    async with SQLiteStorage(db, session_id=session) as storage:
        return [m.text for m in await storage.load()]


def _lines(script: list[str | Callable[[], None]]) -> Any:
    """A line source that runs the callables of ``script`` between the lines it gives."""

    def source(*args: Any, **kwargs: Any) -> AsyncIterator[str]:
        async def lines() -> AsyncIterator[str]:
            for item in script:
                if callable(item):
                    item()
                else:
                    yield item

        return lines()

    return source


@pytest.mark.parametrize("deleted", [False, True], ids=["restored", "deleted"])
async def test_the_chat_goes_on_with_a_restored_history_file(
    scripted: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, deleted: bool
) -> None:
    db = tmp_path / "chat.db"
    backup = tmp_path / "backup.db"

    def restore() -> None:
        if deleted:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
        else:
            _restore(db, backup)

    script: list[str | Callable[[], None]] = [
        "one",
        lambda: _backup(db, backup),
        "two",
        restore,
        "three",
    ]

    async def pick(spec: str | None, base_url: str | None = None) -> Any:
        return cli.Picked(ScriptedProvider("hi", "hi", "hi"), "scripted", "m", "test")

    monkeypatch.setattr(cli_common, "pick_provider", pick)
    monkeypatch.setattr(cli, "pick_provider", pick)  # the chat's own name for it (main.py)
    monkeypatch.setattr(cli_input, "line_source", _lines(script))
    monkeypatch.setattr(cli, "_make_embedder", lambda: None)
    args = cli.build_parser().parse_args(["chat", "--no-memory", "--db", str(db), "--session", "t"])
    args.no_memory = False  # history on, long-term memory off (no embedder)
    args.remember = "none"
    out = tmp_path / "out.txt"
    with out.open("w") as stream:
        console = cli.Console(stream, stream, interactive=False)
        code = await cli.run_chat(args, console)
    shown = out.read_text()
    assert code == 0, shown
    assert "deleted or replaced" not in shown
    assert "going on with the file now there" in shown
    kept = [] if deleted else ["one", "hi"]
    assert await _texts(db, "t") == [*kept, "three", "hi"]


async def test_the_coding_session_goes_on_with_a_restored_history_file(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    db = tmp_path / "code.db"
    backup = tmp_path / "backup.db"
    script: list[str | Callable[[], None]] = [
        "one",
        lambda: _backup(db, backup),
        "two",
        lambda: _restore(db, backup),
        "three",
    ]
    pending = list(script)

    async def read_line(prompt: str) -> str | None:
        while pending:
            item = pending.pop(0)
            if callable(item):
                item()
            else:
                return item
        return None

    written: list[str] = []
    ns = build_parser().parse_args(["--root", str(root), "--db", str(db), "--session", "s"])
    code = await code_main(
        ns,
        provider=ScriptedProvider("a1", "a2", "a3"),
        read_line=read_line,
        write=written.append,
    )
    assert code == 0
    shown = "\n".join(written)
    assert "deleted or replaced" not in shown
    assert "going on with the file now there" in shown
    assert await _texts(db, "s") == ["one", "a1", "three", "a3"]


async def test_a_turn_the_history_refused_is_shown_as_not_saved(
    scripted: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A backup restored while a turn runs: the turn's append is refused (it read the old
    file). The chat said nothing of it (a logged warning only), so the user took the turn for
    kept; it says so now, and the next turn goes on with the restored file."""
    db = tmp_path / "chat.db"
    backup = tmp_path / "backup.db"
    calls: list[str] = []

    def answer(request: Any) -> str:
        calls.append(request.messages[-1].text)
        if request.messages[-1].text == "two":
            _restore(db, backup)  # mid-turn, before the turn is stored
        return "hi"

    async def pick(spec: str | None, base_url: str | None = None) -> Any:
        return cli.Picked(FunctionProvider(answer), "scripted", "m", "test")

    monkeypatch.setattr(cli_common, "pick_provider", pick)
    monkeypatch.setattr(cli, "pick_provider", pick)
    script: list[str | Callable[[], None]] = ["one", lambda: _backup(db, backup), "two", "three"]
    monkeypatch.setattr(cli_input, "line_source", _lines(script))
    monkeypatch.setattr(cli, "_make_embedder", lambda: None)
    args = cli.build_parser().parse_args(["chat", "--db", str(db), "--session", "t"])
    args.remember = "none"
    out = tmp_path / "out.txt"
    with out.open("w") as stream:
        console = cli.Console(stream, stream, interactive=False)
        await cli.run_chat(args, console)
    shown = out.read_text()
    assert "not saved" in shown, shown
    assert shown.index("not saved") < shown.index("going on with the file now there")
    assert await _texts(db, "t") == ["one", "hi", "three", "hi"]


async def test_the_coding_session_shows_a_turn_the_history_refused(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    db = tmp_path / "code.db"
    backup = tmp_path / "backup.db"

    def answer(request: Any) -> str:
        if request.messages[-1].text == "two":
            _restore(db, backup)
        return "ok"

    pending: list[str | Callable[[], None]] = ["one", lambda: _backup(db, backup), "two"]

    async def read_line(prompt: str) -> str | None:
        while pending:
            item = pending.pop(0)
            if callable(item):
                item()
            else:
                return item
        return None

    written: list[str] = []
    ns = build_parser().parse_args(["--root", str(root), "--db", str(db), "--session", "s"])
    await code_main(
        ns, provider=FunctionProvider(answer), read_line=read_line, write=written.append
    )
    assert any("not saved" in line for line in written), written


async def test_a_restored_file_that_cannot_be_read_is_said_and_the_chat_goes_on(
    scripted: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    db = tmp_path / "chat.db"

    def garbage() -> None:
        for suffix in ("-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        broken = tmp_path / "broken.db"
        broken.write_bytes(b"not a database" * 100)
        os.replace(broken, db)

    async def pick(spec: str | None, base_url: str | None = None) -> Any:
        return cli.Picked(ScriptedProvider("hi", "hi", "hi"), "scripted", "m", "test")

    monkeypatch.setattr(cli_common, "pick_provider", pick)
    monkeypatch.setattr(cli, "pick_provider", pick)
    script: list[str | Callable[[], None]] = ["one", garbage, "two", "/help"]
    monkeypatch.setattr(cli_input, "line_source", _lines(script))
    monkeypatch.setattr(cli, "_make_embedder", lambda: None)
    args = cli.build_parser().parse_args(["chat", "--db", str(db), "--session", "t"])
    args.remember = "none"
    out = tmp_path / "out.txt"
    with out.open("w") as stream:
        console = cli.Console(stream, stream, interactive=False)
        await cli.run_chat(args, console)
    shown = out.read_text()
    assert "the file now there cannot be read" in shown, shown
    assert "/continue" in shown  # /help ran: the chat went on after the note
