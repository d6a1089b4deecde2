"""The one writer per SQLite file (``goagent_py._sqlite.write_in_file``, issue 36): the writes
queued while a commit runs share the next commit, each stays all or nothing, and the
conversations of a file stored through it read back whole."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from goagent_py._sqlite import NOT_HERE, read_here, write_in_file
from goagent_py.errors import MemoryStoreError
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.messages import Message, Role, TextBlock


def _turn(n: int) -> list[Message]:
    return [
        Message(Role.USER, [TextBlock(f"question {n}")]),
        Message(Role.ASSISTANT, [TextBlock(f"answer {n}")]),
    ]


async def _hold_the_writer(path: str) -> tuple[threading.Event, list[str], asyncio.Future[None]]:
    """A write that records the writer's statements and blocks it until released."""
    release = threading.Event()
    statements: list[str] = []
    started = threading.Event()

    def block(conn: sqlite3.Connection) -> None:
        conn.set_trace_callback(statements.append)
        started.set()
        release.wait()

    held = asyncio.ensure_future(write_in_file(path, block, busy_timeout=5.0))
    await asyncio.to_thread(started.wait)
    return release, statements, held


async def test_writes_queued_during_a_commit_share_the_next_one(tmp_path: Path) -> None:
    path = str(tmp_path / "chat.db")
    storages = [SQLiteStorage(path, session_id=f"s{i}") for i in range(20)]
    for storage in storages:
        await storage.__aenter__()
    release, statements, held = await _hold_the_writer(path)
    appends = [asyncio.ensure_future(s.append(_turn(i))) for i, s in enumerate(storages)]
    await asyncio.sleep(0)  # each append runs to its queued write (no thread hop before it)
    release.set()
    await held
    await asyncio.gather(*appends)
    commits = [s for s in statements if s.strip().upper() == "COMMIT"]
    assert len(commits) == 2  # the held write's, then one for all twenty turns
    for i, storage in enumerate(storages):
        assert [m.text for m in await storage.load()] == [f"question {i}", f"answer {i}"]
        await storage.aclose()


async def test_a_failing_write_leaves_the_others_of_its_commit(tmp_path: Path) -> None:
    path = str(tmp_path / "chat.db")
    good = SQLiteStorage(path, session_id="good")
    bad = SQLiteStorage(path, session_id="bad")
    await good.__aenter__()
    await bad.__aenter__()
    release, _, held = await _hold_the_writer(path)

    def half_then_fail(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO goagent_messages VALUES ('bad', 0, '{\"role\":\"user\"}', 0)")
        raise RuntimeError("the disk said no")

    first = asyncio.ensure_future(good.append(_turn(1)))
    failing = asyncio.ensure_future(write_in_file(path, half_then_fail, busy_timeout=5.0))
    second = asyncio.ensure_future(good.append(_turn(2)))
    await asyncio.sleep(0)
    release.set()
    await held
    await first
    with pytest.raises(RuntimeError, match="the disk said no"):
        await failing
    await second
    assert len(await good.load()) == 4
    assert await bad.load() == []  # its half write was rolled back, nothing else
    await good.aclose()
    await bad.aclose()


async def test_a_closed_storage_refuses_writes_and_memory_databases_write_alone(
    tmp_path: Path,
) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="a")
    await storage.append(_turn(1))
    await storage.aclose()
    with pytest.raises(MemoryStoreError, match="is closed"):
        await storage.append(_turn(2))
    async with SQLiteStorage(":memory:", session_id="m") as memory:
        await memory.append(_turn(1))
        await memory.append(_turn(2))
        assert len(await memory.load()) == 4


async def test_a_relative_path_writes_the_file_of_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("one", "two"):
        folder = tmp_path / name
        folder.mkdir()
        monkeypatch.chdir(folder)
        async with SQLiteStorage("chat.db", session_id="s") as storage:
            await storage.append(_turn(len(name)))
    for name in ("one", "two"):
        async with SQLiteStorage(tmp_path / name / "chat.db", session_id="s") as storage:
            assert len(await storage.load()) == 2


async def test_a_storage_read_on_the_loop_meets_a_busy_file_without_waiting(
    tmp_path: Path,
) -> None:
    # Issue 36: reads on the event loop; one that meets a lock must answer NOT_HERE at once
    # (its caller reads in a worker then), never sleep in SQLite's busy handler on the loop:
    # the storage keeps its connection's busy timeout at 0 outside its worker calls, which
    # wait up to its timeout as before.
    path = tmp_path / "chat.db"
    storage = SQLiteStorage(path, session_id="s", timeout=60)
    await storage.append(_turn(0))
    assert len(await storage.load()) == 2  # opened
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # the file's write lock, held by another connection
    # Let go after 10 s at the latest: a read on the loop waiting in the busy handler (60 s
    # here) would then get the lock and return what fn returns instead of NOT_HERE.
    late = threading.Timer(10, lambda: other.execute("ROLLBACK"))
    late.start()
    try:
        got = read_here(storage._file.lock, storage._opened, lambda c: c.execute("BEGIN IMMEDIATE"))
    finally:
        late.cancel()
        late.join()
    assert got is NOT_HERE
    assert not storage._file.lock.locked()
    if other.in_transaction:
        other.execute("ROLLBACK")
    other.close()

    def timeout(c: sqlite3.Connection) -> int:
        return int(c.execute("PRAGMA busy_timeout").fetchone()[0])

    assert await asyncio.to_thread(storage._locked, timeout) == 60000  # a worker call waits
    assert read_here(storage._file.lock, storage._opened, timeout) == 0  # and after it, no wait
    assert len(await storage.load()) == 2
    with storage._file.lock:  # the connection in use by another thread
        assert read_here(storage._file.lock, storage._opened, timeout) is NOT_HERE
    with pytest.raises(sqlite3.OperationalError, match="no such table"):  # other errors raise
        read_here(storage._file.lock, storage._opened, lambda c: c.execute("SELECT * FROM absent"))
    await storage.aclose()
    assert read_here(storage._file.lock, storage._opened, timeout) is NOT_HERE  # closed


async def test_writes_one_after_another_keep_one_writer_thread_and_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 36: an idle writer ended its thread and closed its connection at once, and the
    # next write (at 50 served users, ~0.2 times a turn) paid a new thread and connection.
    from goagent_py import _sqlite

    monkeypatch.setattr(_sqlite, "_LINGER", 60.0)  # however slow the machine, within it
    path = str(tmp_path / "chat.db")
    seen: list[tuple[threading.Thread, sqlite3.Connection]] = []

    def write(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
        seen.append((threading.current_thread(), conn))

    for _ in range(3):
        await write_in_file(path, write, busy_timeout=5.0)
    assert all(thread is seen[0][0] and conn is seen[0][1] for thread, conn in seen)
    monkeypatch.undo()
    writer = _sqlite._writer(path, 5.0)
    with writer._more:  # let it end now
        writer._more.notify_all()
    await asyncio.to_thread(seen[0][0].join)
    assert writer._file.conn is None


def test_exit_does_not_wait_for_an_idle_writer(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "chat.db"
    code = (
        "import asyncio, sys\n"
        "from goagent_py import _sqlite\n"
        "_sqlite._LINGER = 3600.0\n"
        "def write(conn):\n"
        "    conn.execute('CREATE TABLE t (x)')\n"
        "    conn.execute('INSERT INTO t VALUES (7)')\n"
        "asyncio.run(_sqlite.write_in_file(sys.argv[1], write, busy_timeout=5.0))\n"
    )
    # An exit that waited for the idle writer's linger would run into the timeout.
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT x FROM t").fetchall() == [(7,)]
    conn.close()
