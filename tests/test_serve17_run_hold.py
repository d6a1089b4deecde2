"""serve17 (issue 36): a run's hold on its SQLite conversation (docs/sessions.md "One run at a
time") costs no path resolution and no refusal it does not make, and is still the hold of the
file the storage is on after that file is replaced and the storage reopened."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from goagent_py import Agent, Session, SessionBusyError
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage import InMemoryStorage, SQLiteStorage
from goagent_py.testing import ScriptedProvider


def _session(storage: object) -> Session:
    return Session(
        Agent(
            provider=ScriptedProvider(*[f"answer {i}" for i in range(5)]),
            short_term_memory=ShortTermMemory(storage),  # type: ignore[arg-type]
        )
    )


async def test_a_run_on_an_open_file_after_the_first_resolves_no_path_and_builds_no_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="t")
    session = _session(storage)
    await session.load()  # the storage opens its file (as the served app's threads do)
    assert (await session.prompt("one")).text == "answer 0"
    resolved: list[str] = []
    built: list[str] = []
    real_realpath = os.path.realpath
    real_init = SessionBusyError.__init__

    def realpath(path: str, *args: object, **kwargs: object) -> str:
        resolved.append(str(path))
        return real_realpath(path, *args, **kwargs)  # type: ignore[arg-type]

    def init(self: SessionBusyError, *args: object, **kwargs: object) -> None:
        built.append(str(args[0]) if args else "")
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os.path, "realpath", realpath)
    monkeypatch.setattr(SessionBusyError, "__init__", init)
    assert (await session.prompt("two")).text == "answer 1"
    assert (await session.prompt("three")).text == "answer 2"
    assert resolved == []
    assert built == []
    # The hold is as strong as before: another storage of the conversation is refused while
    # a run holds it (the refusal built then), and goes on after.
    other = SQLiteStorage(tmp_path / "chat.db", session_id="t")
    async with storage.hold_run():
        with pytest.raises(SessionBusyError, match=r"conversation 't' of .*chat\.db is busy"):
            async with other.hold_run():
                pass
    assert len(built) == 1
    async with other.hold_run():
        pass
    await storage.aclose()
    await other.aclose()


async def test_an_in_memory_run_builds_no_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    storage = InMemoryStorage()
    session = _session(storage)
    built: list[object] = []
    real_init = SessionBusyError.__init__

    def init(self: SessionBusyError, *args: object, **kwargs: object) -> None:
        built.append(args)
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(SessionBusyError, "__init__", init)
    assert (await session.prompt("one")).text == "answer 0"
    assert built == []
    async with storage.hold_run():
        with pytest.raises(SessionBusyError, match="InMemoryStorage's conversation is busy"):
            async with storage.hold_run():
                pass


def _new_file(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE other (x)")
    conn.close()


@pytest.mark.parametrize("through", ["file", "folder"])
async def test_the_hold_follows_the_file_a_reopened_storage_is_on(
    tmp_path: Path, through: str
) -> None:
    """A storage through a symlink (to the file, or to its folder), reopened onto the file the
    link points at now: its run holds that file's conversation, not the one it held before,
    and a storage of the other file is not refused by it. Back to the first file: held there
    again."""
    first, second = tmp_path / "a" / "chat.db", tmp_path / "b" / "chat.db"
    first.parent.mkdir()
    second.parent.mkdir()
    _new_file(first)
    _new_file(second)
    link = tmp_path / ("chat.db" if through == "file" else "current")
    path = link if through == "file" else link / "chat.db"

    def point_at(target: Path) -> None:
        staged = tmp_path / "staged"
        staged.symlink_to(target if through == "file" else target.parent)
        os.replace(staged, link)

    point_at(first)
    storage = SQLiteStorage(path, session_id="t")
    session = _session(storage)
    on_first = SQLiteStorage(first, session_id="t")
    on_second = SQLiteStorage(second, session_id="t")
    expected = {first: on_first, second: on_second}
    for i, target in enumerate([first, second, first, second]):
        if i:
            point_at(target)
            assert await storage.reopen()
        assert (await session.prompt(f"turn {i}")).text == f"answer {i}"
        async with storage.hold_run():
            with pytest.raises(SessionBusyError):
                async with expected[target].hold_run():
                    pass
            elsewhere = on_second if target == first else on_first
            async with elsewhere.hold_run():  # the other file's conversation is free
                pass
    for each in (storage, on_first, on_second):
        await each.aclose()
