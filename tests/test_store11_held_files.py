"""Every object that keeps a SQLite connection open between calls follows one rule
(``_sqlite.HeldConnection``): it reads and writes the file at its path, not one deleted or
replaced under it (a backup restored over it), and a relative path names one file whatever
the working folder is later. SQLiteStorage refuses a replaced file (its conversation goes on
from what it read: tests/memory/test_review10a.py); the other stores open the new file."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from goagent_py.memory.storage import SQLiteStorage
from goagent_py.messages import user_message
from goagent_py.rag.manifest import SqliteManifest
from goagent_py.serve._threads import ThreadStore


def _restore(path: Path, backup: Path) -> None:
    """``backup`` (closed, so checkpointed) copied over ``path`` while ``path`` is open, the
    old WAL files removed: what restoring a backup does."""
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.replace(backup, path)


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


async def test_a_rag_manifest_reads_the_file_restored_over_its_own(tmp_path: Path) -> None:
    path, backup = tmp_path / "rag.db", tmp_path / "backup.db"
    async with SqliteManifest(backup) as old:
        await old.set("a.md", ["from the backup"])
    async with SqliteManifest(path) as manifest:
        await manifest.set("a.md", ["live"])
        assert await manifest.get("a.md") == ["live"]
        _restore(path, backup)
        assert await manifest.get("a.md") == ["from the backup"]
        await manifest.set("b.md", ["after the restore"])
    async with SqliteManifest(path) as fresh:
        assert await fresh.sources() == ["a.md", "b.md"]


@pytest.mark.needs_extra("vector")
async def test_a_sqlite_vec_store_reads_and_writes_the_file_restored_over_its_own(
    tmp_path: Path,
) -> None:
    from goagent_py.memory.vector.sqlite_vec import SqliteVecStore

    path, backup = tmp_path / "memory.db", tmp_path / "backup.db"
    vector = np.ones(4, dtype=np.float32)
    async with SqliteVecStore(backup, dimensions=4) as old:
        for n in range(3):
            await old.upsert(f"b{n}", vector, user_message(f"backup {n}"))
    async with SqliteVecStore(path, dimensions=4) as store:
        await store.upsert("live", vector, user_message("live"))
        assert await store.count() == 1
        _restore(path, backup)
        assert await store.count() == 3  # before: 1, read through the replaced file
        await store.upsert("after", vector, user_message("after the restore"))
    async with SqliteVecStore(path, dimensions=4) as fresh:
        assert await fresh.count() == 4  # before: the write was lost with the old file


async def test_the_served_thread_index_follows_a_deleted_database(tmp_path: Path) -> None:
    path = tmp_path / "serve.db"
    store = ThreadStore(str(path))
    try:
        await store.create("ann", "before")
        _remove(path)  # the operator deleted the database to start over
        await store.create("ann", "after")  # written to the new file (the shared writer)
        titles = [t["title"] for t in await store.list("ann")]
        assert titles == ["after"]  # before: ["before"], read from the deleted file
    finally:
        store.close()
    check = sqlite3.connect(path)
    try:
        assert check.execute("SELECT title FROM goagent_serve_threads").fetchall() == [("after",)]
    finally:
        check.close()


async def test_a_relative_storage_path_names_one_file_after_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    async with SQLiteStorage("chat.db", session_id="s") as storage:
        await storage.append([user_message("one")])
        monkeypatch.chdir(tmp_path / "b")  # a tool, a sub-process helper, the app itself
        # Before: refused as "deleted or replaced" (the write resolved the path again).
        await storage.append([user_message("two")])
        assert [m.text for m in await storage.load()] == ["one", "two"]
    assert not (tmp_path / "b" / "chat.db").exists()


async def test_a_relative_thread_index_path_names_one_file_after_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    store = ThreadStore("serve.db")
    try:
        await store.create("ann", "one")
        monkeypatch.chdir(tmp_path / "b")
        await store.create("ann", "two")
        assert sorted(t["title"] for t in await store.list("ann")) == ["one", "two"]
    finally:
        store.close()
    assert not (tmp_path / "b" / "serve.db").exists()


_FORKING = textwrap.dedent(
    """
    import asyncio, os, sys
    from goagent_py.memory.storage import SQLiteStorage
    from goagent_py.messages import user_message

    storage = SQLiteStorage(sys.argv[1], session_id="s")

    async def write(who: str, n: int, close: bool = False) -> None:
        for i in range(n):
            await storage.append([user_message(f"{who} {i}")])
            await storage.load()
        if close:
            await storage.aclose()

    asyncio.run(write("before", 1))  # the parent's connection is open across the fork
    pid = os.fork()
    if pid == 0:
        try:
            asyncio.run(write("child", 30, close=True))
        except BaseException as exc:
            print("child failed:", repr(exc), flush=True)
            os._exit(1)
        os._exit(0)
    asyncio.run(write("parent", 30))
    _, status = os.waitpid(pid, 0)
    print("child exit", os.waitstatus_to_exitcode(status), flush=True)
    """
)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_writes_through_a_connection_of_its_own(tmp_path: Path) -> None:
    """SQLite's rule: no connection carried across fork(). A pre-forking server's workers
    (and their exit) leave the parent's file and connection whole."""
    path = tmp_path / "chat.db"
    done = subprocess.run(
        [sys.executable, "-c", _FORKING, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "child exit 0" in done.stdout, done.stdout
    check = sqlite3.connect(path)
    try:
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        texts = [row[0] for row in check.execute("SELECT message FROM goagent_messages")]
    finally:
        check.close()
    assert len(texts) == 61
