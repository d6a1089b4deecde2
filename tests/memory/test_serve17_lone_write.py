"""serve17 (issue 36): a write alone in its commit (the file's shared writer,
``goagent_py._sqlite``) is its own transaction, without a savepoint inside it; one that
fails stores nothing and raises its own error, and the file's next write goes on."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from goagent_py import _sqlite
from goagent_py._sqlite import write_in_file
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.messages import user_message


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the writers' connections are told, from their opening on."""
    seen: list[str] = []
    connect = _sqlite._Writer._connect

    def traced(self: Any) -> sqlite3.Connection:
        conn = connect(self)
        conn.set_trace_callback(seen.append)
        return conn

    monkeypatch.setattr(_sqlite._Writer, "_connect", traced)
    return seen


def _kinds(statements: list[str]) -> list[str]:
    return [s.split()[0].upper() for s in statements]


async def test_a_lone_append_is_one_transaction_without_a_savepoint(
    tmp_path: Path, statements: list[str]
) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="t")
    await storage.load()
    for text in ("one", "two"):
        statements.clear()
        await storage.append([user_message(text)])
        kinds = [k for k in _kinds(statements) if not k.startswith("PRAGMA")]
        assert kinds == ["BEGIN", "SELECT", "INSERT", "COMMIT"]
    assert [m.text for m in await storage.load()] == ["one", "two"]
    await storage.aclose()


async def test_a_lone_write_that_fails_stores_nothing_and_the_next_goes_on(
    tmp_path: Path, statements: list[str]
) -> None:
    path = str(tmp_path / "chat.db")
    storage = SQLiteStorage(path, session_id="t")
    await storage.append([user_message("kept")])

    def half_then_fail(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO goagent_messages VALUES ('t', 7, '{\"role\":\"user\"}', 0)")
        raise RuntimeError("the disk said no")

    statements.clear()
    with pytest.raises(RuntimeError, match="the disk said no"):
        await write_in_file(path, half_then_fail, busy_timeout=5.0)
    assert "COMMIT" not in _kinds(statements)
    assert "ROLLBACK" in _kinds(statements)
    await storage.append([user_message("after")])
    assert [m.text for m in await storage.load()] == ["kept", "after"]
    await storage.aclose()
