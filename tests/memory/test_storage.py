"""Storages: in-memory copies, and what is SQLite's own (file settings, locks, a killed writer).

The behaviour SQLite shares with PostgreSQL is in test_storage_contract.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from goagent_py.errors import ConfigurationError, MemoryStoreError
from goagent_py.memory.storage import InMemoryStorage, SQLiteStorage, Storage
from goagent_py.memory.storage.sqlite import SCHEMA_VERSION
from goagent_py.messages import (
    DocumentBlock,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    assistant_message,
    user_message,
)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4  # binary, not UTF-8


def rich_turn() -> list[Message]:
    return [
        Message(Role.USER, [TextBlock("look"), ImageBlock(PNG, "image/png")]),
        Message(
            Role.ASSISTANT,
            [ThinkingBlock("hmm", signature="sig"), TextBlock("calling")],
            tool_calls=[ToolCall("c1", "describe", {"size": [1, 2], "deep": {"x": None}})],
        ),
        Message(Role.TOOL, [TextBlock("a cat")], tool_call_id="c1", is_error=True),
        Message(
            Role.USER,
            [DocumentBlock(b"%PDF-1.4\x00\xff", "application/pdf", title="t.pdf")],
            metadata={"k": [1, "v"]},
        ),
        assistant_message("done ✓"),
    ]


# -- in memory -----------------------------------------------------------------------------------


async def test_in_memory_round_trip_and_clear() -> None:
    storage = InMemoryStorage()
    assert isinstance(storage, Storage)
    assert await storage.load() == []
    await storage.append(rich_turn())
    await storage.append([user_message("again")])
    loaded = await storage.load()
    assert loaded == [*rich_turn(), user_message("again")]
    await storage.clear()
    assert await storage.load() == []


async def test_in_memory_makes_defensive_copies() -> None:
    storage = InMemoryStorage()
    msg = Message(Role.ASSISTANT, [TextBlock("a")], tool_calls=[ToolCall("1", "t", {"x": 1})])
    await storage.append([msg])
    msg.content.append(TextBlock("changed"))
    msg.tool_calls[0].arguments["x"] = 2
    loaded = await storage.load()
    assert loaded[0].content == [TextBlock("a")]
    assert loaded[0].tool_calls[0].arguments == {"x": 1}
    loaded[0].content.clear()
    assert (await storage.load())[0].content == [TextBlock("a")]


async def test_in_memory_concurrent_appends_keep_every_turn() -> None:
    storage = InMemoryStorage()
    await asyncio.gather(
        *(storage.append([user_message(f"q{i}"), assistant_message(f"a{i}")]) for i in range(50))
    )
    loaded = await storage.load()
    assert len(loaded) == 100
    for q, a in zip(loaded[::2], loaded[1::2], strict=True):  # turns never interleave
        assert q.text[1:] == a.text[1:]


# -- SQLite --------------------------------------------------------------------------------------


async def test_sqlite_file_settings_and_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    async with SQLiteStorage(path) as storage:
        await storage.append([user_message("x")])
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        rows = conn.execute("SELECT session_id, seq FROM goagent_messages").fetchall()
    conn.close()
    assert rows == [("default", 0)]


async def test_sqlite_append_once_applies_a_key_once_per_session(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    async with (
        SQLiteStorage(path, session_id="a") as storage,
        SQLiteStorage(path, session_id="b") as other,
    ):
        assert await storage.append_once("run-1:persist", [user_message("q"), user_message("r")])
        assert not await storage.append_once("run-1:persist", [user_message("again")])
        assert await other.append_once("run-1:persist", [user_message("same key, other session")])
        assert await storage.append_once("run-1:empty", [])  # a key with nothing to store
        assert not await storage.append_once("run-1:empty", [user_message("late")])
        assert [m.text for m in await storage.load()] == ["q", "r"]
        assert [m.text for m in await other.load()] == ["same key, other session"]
        with pytest.raises(ConfigurationError, match="non-empty string"):
            await storage.append_once("", [user_message("q")])
        await storage.clear()  # the session's keys go with its messages; the other's stay
        assert await storage.append_once("run-1:persist", [user_message("after clear")])
        assert not await other.append_once("run-1:persist", [user_message("x")])
        assert [m.text for m in await storage.load()] == ["after clear"]


async def test_sqlite_append_once_on_a_file_written_before_it(tmp_path: Path) -> None:
    """A file of the same schema version without the keys' table (written by a version before
    append_once, or never given a key) takes keyed appends, and keeps its version: the version
    before reads it as ever."""
    path = tmp_path / "chat.db"
    async with SQLiteStorage(path) as storage:
        await storage.append([user_message("old")])
        await storage.clear()
        await storage.append([user_message("older turn")])
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert "goagent_messages_appends" not in tables  # plain appends and clear made none
    async with SQLiteStorage(path) as storage:
        assert await storage.append_once("k", [user_message("keyed")])
        assert [m.text for m in await storage.load()] == ["older turn", "keyed"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 1
    conn.close()


_KEYED_WRITER = textwrap.dedent(
    """
    import asyncio, sys

    from goagent_py.memory.storage import SQLiteStorage
    from goagent_py.messages import user_message

    async def main(path, name):
        async with SQLiteStorage(path, session_id="s") as storage:
            print("READY", flush=True)
            assert sys.stdin.readline().strip() == "GO"
            for i in range(30):
                await storage.append_once(f"k{i}", [user_message(f"{i} by {name}")])

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


def test_sqlite_append_once_across_processes_stores_each_key_once(tmp_path: Path) -> None:
    """Two processes send the same 30 keyed appends at once (a retried durable activity on
    another worker): each key's messages are stored once, by one of them."""
    path = tmp_path / "chat.db"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _KEYED_WRITER, str(path), name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name in ("one", "two")
    ]
    for child in children:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "READY"
    for child in children:
        assert child.stdin is not None
        child.stdin.write("GO\n")
        child.stdin.flush()
    for child in children:
        child.communicate()  # waits, and closes the pipes
        assert child.returncode == 0

    async def stored() -> list[str]:
        async with SQLiteStorage(path, session_id="s") as storage:
            return [m.text for m in await storage.load()]

    texts = asyncio.run(stored())
    assert sorted(int(t.split()[0]) for t in texts) == list(range(30))


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ('{"role": "user", "content": [{"type": "video"}]}', "video"),
        ("not json at all", "corrupted"),
        ('{"role": "user"},{"role": "user"}', "2 messages"),
        (b"\x00\x01 blob", "bytes"),
    ],
)
async def test_sqlite_corrupted_row_names_session_and_row(
    tmp_path: Path, raw: str | bytes, reason: str
) -> None:
    path = tmp_path / "chat.db"
    async with SQLiteStorage(path, session_id="s-7") as storage:
        await storage.append([user_message("fine"), assistant_message("fine too")])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE goagent_messages SET message = ? WHERE seq = 1", (raw,))
    conn.close()
    async with SQLiteStorage(path, session_id="s-7") as storage:
        with pytest.raises(MemoryStoreError) as info:
            await storage.load()
        # Appending still works, and the good row is intact.
        await storage.append([user_message("more")])
    message = str(info.value)
    assert "'s-7'" in message
    assert "seq=1" in message
    assert reason in message
    assert "delete that row or clear the session" in message


async def test_sqlite_rows_valid_only_when_joined_are_refused(tmp_path: Path) -> None:
    # Issue 21 (7): one message split over two rows parsed as valid when the rows were joined.
    path = tmp_path / "chat.db"
    async with SQLiteStorage(path, session_id="s") as storage:
        await storage.append([user_message("one"), user_message("two")])
    with sqlite3.connect(path) as conn:
        first, second = (r[0] for r in conn.execute("SELECT message FROM goagent_messages"))
        cut = second.index(",")  # after the first field of the second message
        conn.execute(
            "UPDATE goagent_messages SET message = ? WHERE seq = 0", (f"{first},{second[:cut]}",)
        )
        conn.execute("UPDATE goagent_messages SET message = ? WHERE seq = 1", (second[cut + 1 :],))
    conn.close()
    async with SQLiteStorage(path, session_id="s") as storage:
        with pytest.raises(MemoryStoreError, match=r"'s'.*seq=0.*corrupted"):
            await storage.load()


async def test_sqlite_broken_utf8_names_session_and_row(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    async with SQLiteStorage(path, session_id="s-9") as storage:
        await storage.append([user_message("a"), user_message("b"), user_message("c")])
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE goagent_messages SET message = CAST(? AS TEXT) WHERE seq = 2",
            (b'{"role": "user", "content": [{"type": "text", "text": "\xff\xfe"}]}',),
        )
        (kind,) = conn.execute(
            "SELECT typeof(message) FROM goagent_messages WHERE seq = 2"
        ).fetchone()
    conn.close()
    assert kind == "text"
    async with SQLiteStorage(path, session_id="s-9") as storage:
        with pytest.raises(MemoryStoreError, match=r"'s-9'.*seq=2.*utf-8"):
            await storage.load()


async def test_sqlite_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    storage = SQLiteStorage(path)
    with pytest.raises(MemoryStoreError, match="not a SQLite database or is corrupted"):
        await storage.load()
    await storage.aclose()


async def test_sqlite_unopenable_path(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "missing-dir" / "chat.db")
    with pytest.raises(MemoryStoreError, match="folder exists and is writable"):
        async with storage:
            pass


async def test_sqlite_locked_file_fails_with_advice(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    async with SQLiteStorage(path) as storage:
        await storage.append([user_message("x")])
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        try:
            locked = SQLiteStorage(path, timeout=0)
            with pytest.raises(MemoryStoreError, match="locked by another connection"):
                await locked.append([user_message("y")])
            await locked.aclose()
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert [m.text for m in await storage.load()] == ["x"]


async def test_sqlite_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    storage = SQLiteStorage(path)
    with pytest.raises(MemoryStoreError, match="upgrade goagent-py"):
        await storage.load()
    await storage.aclose()


async def test_sqlite_closed_storage_and_bad_arguments(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db")
    await storage.aclose()
    await storage.aclose()  # idempotent
    with pytest.raises(MemoryStoreError, match="is closed"):
        await storage.load()
    with pytest.raises(ConfigurationError):
        SQLiteStorage(tmp_path / "x.db", session_id="")
    with pytest.raises(ConfigurationError):
        SQLiteStorage(tmp_path / "x.db", timeout=-1)


WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from goagent_py.memory.storage import SQLiteStorage
    from goagent_py.messages import user_message, assistant_message

    async def main() -> None:
        storage = SQLiteStorage(sys.argv[1], session_id="crash")
        i = 0
        while True:
            await storage.append([user_message(f"q{i}"), assistant_message(f"a{i}")])
            print(i, flush=True)  # acknowledged: the append has returned
            i += 1

    asyncio.run(main())
    """
)


def test_sqlite_survives_a_sigkilled_writer(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    acknowledged = -1
    try:
        for line in proc.stdout:
            acknowledged = int(line)
            if acknowledged >= 40:
                break
        os.kill(proc.pid, signal.SIGKILL)  # mid-run: it is appending the next turn now
    finally:
        proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert acknowledged >= 40

    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()

    async def check() -> list[Message]:
        async with SQLiteStorage(path, session_id="crash") as storage:
            loaded = await storage.load()
            await storage.append([user_message("after restart")])
            return loaded

    loaded = asyncio.run(check())
    turns = len(loaded) // 2
    assert len(loaded) % 2 == 0  # no half turn
    assert turns >= acknowledged + 1  # every acknowledged append is there
    assert [m.text for m in loaded] == [t for i in range(turns) for t in (f"q{i}", f"a{i}")]


async def test_sqlite_reads_see_every_change_made_by_another_connection(tmp_path: Path) -> None:
    # Issue 36: a read decodes a row again only when its text or type changed since this
    # storage last read it; what it returns is still exactly what the file holds.
    path = tmp_path / "chat.db"
    async with SQLiteStorage(path, session_id="s") as storage:
        await storage.append([user_message("one"), assistant_message("two")])
        assert [m.text for m in await storage.load()] == ["one", "two"]
        with sqlite3.connect(path) as conn:
            (text,) = conn.execute("SELECT message FROM goagent_messages WHERE seq = 1").fetchone()
            conn.execute(
                "UPDATE goagent_messages SET message = ? WHERE seq = 1",
                (text.replace('"two"', '"TWO"'),),
            )
            conn.execute(
                "INSERT INTO goagent_messages VALUES ('s', 2, ?, 0)",
                (text.replace('"two"', '"three"'),),
            )
        conn.close()
        assert [m.text for m in await storage.load()] == ["one", "TWO", "three"]
        with sqlite3.connect(path) as conn:
            conn.execute("DELETE FROM goagent_messages WHERE seq = 0")
        conn.close()
        assert [m.text for m in await storage.load()] == ["TWO", "three"]
        with sqlite3.connect(path) as conn:  # the same bytes, now a blob: refused, not recalled
            conn.execute("UPDATE goagent_messages SET message = CAST(message AS BLOB)")
        conn.close()
        with pytest.raises(MemoryStoreError, match=r"seq=1.*SQLite blob"):
            await storage.load()


async def test_sqlite_reads_decode_a_row_once_and_hand_out_copies(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    async with SQLiteStorage(path, session_id="s") as storage:
        await storage.append(rich_turn())
        decoded: list[int] = []
        parse = storage._parse

        def counting(rows: list[tuple[int, str, bytes]]) -> list[Message]:
            decoded.extend(seq for seq, _, _ in rows)
            return parse(rows)

        storage._parse = counting  # type: ignore[method-assign]
        first = await storage.load()
        assert first == rich_turn()
        first[0].metadata["changed"] = True  # the holder's copy, not the storage's
        first[1].tool_calls.clear()
        await storage.append([user_message("more")])
        second = await storage.load()
        assert second == [*rich_turn(), user_message("more")]
        assert decoded == [0, 1, 2, 3, 4, 5]  # the second read decoded only the new row


def _mutable_parts(messages: list[Message]) -> list[object]:
    """Every object of ``messages`` its holder can change: the messages, their lists and
    dicts (the blocks and calls are frozen; a call's arguments are not)."""
    out: list[object] = []

    def walk(value: object) -> None:
        if isinstance(value, list):
            out.append(value)
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            out.append(value)
            for item in value.values():
                walk(item)

    for m in messages:
        out.append(m)
        for part in (m.content, m.tool_calls, m.metadata):
            walk(part)
        for call in m.tool_calls:
            walk(call.arguments)
    return out


def _scribble(messages: list[Message], mark: str) -> None:
    """Change every mutable part of ``messages``, in place."""
    for m in messages:
        m.content.append(TextBlock(mark))
        m.metadata[mark] = [mark]
        for key in m.metadata:
            if isinstance(m.metadata[key], list):
                m.metadata[key].append(mark)
        for call in m.tool_calls:
            call.arguments[mark] = mark
            for value in call.arguments.values():
                if isinstance(value, list | dict):
                    value.clear()
        m.tool_calls.append(ToolCall(mark, mark))
        m.role = Role.TOOL
        m.tool_call_id = mark
        m.is_error = not m.is_error


async def test_sqlite_read_copies_stay_independent_both_ways(tmp_path: Path) -> None:
    # Issue 36: a read hands out copies of the storage's decoded rows (plain messages through a
    # cheaper copier picked once per row): what a holder does to its copy changes nothing the
    # storage keeps or hands out later, and what is handed out later changes no earlier copy.
    turn = [user_message("plain"), *rich_turn(), assistant_message("plain too")]
    async with SQLiteStorage(tmp_path / "chat.db", session_id="s") as storage:
        await storage.append(turn)
        first = await storage.load()
        second = await storage.load()
        assert first == second == turn
        assert not {id(p) for p in _mutable_parts(first)} & {id(p) for p in _mutable_parts(second)}
        _scribble(first, "first")
        third = await storage.load()
        assert third == second == turn  # the storage's rows did not change with `first`
        _scribble(third, "third")
        assert second == turn  # nor an earlier copy with a later one
        assert [m.content[-1] for m in first] == [TextBlock("first")] * len(turn)
        assert await storage.load() == turn


async def test_sqlite_an_append_cancelled_before_its_write_begins_stores_nothing(
    tmp_path: Path,
) -> None:
    # The file's writer hands each commit's outcomes back to the event loop itself (issue 36);
    # a caller cancelled while its write waits in the queue takes the write out, and one
    # cancelled after the write began leaves it to commit whole.
    from goagent_py._sqlite import write_in_file

    path = str(tmp_path / "chat.db")
    async with SQLiteStorage(path, session_id="s") as storage:
        began, release = threading.Event(), threading.Event()

        def hold(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO goagent_messages VALUES ('held', 0, ?, 0)",
                ('{"role":"user","content":[]}',),
            )
            began.set()
            release.wait()

        held = asyncio.ensure_future(write_in_file(path, hold, busy_timeout=5.0))
        await asyncio.to_thread(began.wait)
        queued = asyncio.ensure_future(storage.append([user_message("never stored")]))
        await asyncio.sleep(0)  # it runs to its queued write
        queued.cancel()
        held.cancel()  # begun: it commits whole all the same
        release.set()
        for task in (queued, held):
            with pytest.raises(asyncio.CancelledError):
                await task
        await storage.append([user_message("after")])
        assert [m.text for m in await storage.load()] == ["after"]
        async with SQLiteStorage(path, session_id="held") as other:
            assert len(await other.load()) == 1


async def test_sqlite_reads_after_the_first_run_on_the_loop_unless_the_connection_is_busy(
    tmp_path: Path, thread_hops: Callable[[Any], list[str]]
) -> None:
    # Issue 36: a worker-thread hop cost more than the read of a short conversation; the
    # first read opens the file in a worker, later ones read on the loop, and a read that
    # would wait (here: the connection in use by a worker) goes to a worker, never blocks it.
    import goagent_py.memory.storage.sqlite as module

    hops = thread_hops(module)
    async with SQLiteStorage(tmp_path / "chat.db", session_id="s") as storage:
        assert await storage.load() == []
        assert len(hops) == 1  # opened in a worker
        await storage.append([user_message("one"), assistant_message("two")])
        hops.clear()
        assert [m.text for m in await storage.load()] == ["one", "two"]
        assert hops == []  # read on the loop

        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with storage._file.lock:  # a worker's call on the storage's connection
                held.set()
                release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        held.wait()
        reading = asyncio.ensure_future(storage.load())
        for _ in range(3):
            await asyncio.sleep(0)
        assert not reading.done()  # waiting in a worker while the loop runs on
        release.set()
        assert [m.text for m in await reading] == ["one", "two"]
        assert len(hops) == 1
        holder.join()


async def test_sqlite_reads_of_a_long_conversation_or_many_new_rows_leave_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, thread_hops: Callable[[Any], list[str]]
) -> None:
    """The event loop is the application's: a conversation past the on-loop size, or a read
    that finds many rows written elsewhere to decode, is read in a worker, with the same
    messages."""
    import goagent_py.memory.storage.sqlite as module

    hops = thread_hops(module)
    monkeypatch.setattr(module, "_ON_LOOP_ROWS", 8)
    monkeypatch.setattr(module, "_ON_LOOP_DECODES", 4)
    path = tmp_path / "chat.db"
    async with SQLiteStorage(path, session_id="s") as storage:
        assert await storage.load() == []
        async with SQLiteStorage(path, session_id="s") as other:
            await other.append([user_message(f"m{i}") for i in range(6)])  # 6 new rows > 4
        hops.clear()
        assert [m.text for m in await storage.load()] == [f"m{i}" for i in range(6)]
        assert len(hops) == 1  # decoded in a worker
        hops.clear()
        assert len(await storage.load()) == 6
        assert hops == []  # short, nothing new: on the loop
        await storage.append([user_message(f"n{i}") for i in range(4)])
        assert len(await storage.load()) == 10  # read on the loop, 10 rows > 8 now known
        hops.clear()
        assert [m.text for m in await storage.load()][-1] == "n3"
        assert len(hops) == 1  # a long conversation: in a worker


async def test_sqlite_opens_a_new_file_another_process_is_still_setting_up(tmp_path: Path) -> None:
    """Two workers opening one new chat file at once: while the other holds the file's write
    lock in its first transaction, switching the journal to WAL got "database is locked" at
    once (SQLite does not wait in its busy handler there), and the open failed. It waits for
    the lock now, up to the storage's timeout."""
    path = tmp_path / "chat.db"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE setting_up (x)")
    other.execute("BEGIN IMMEDIATE")  # the other process, inside its first transaction
    release = threading.Timer(0.3, lambda: other.execute("COMMIT"))
    release.start()
    try:
        async with SQLiteStorage(path, session_id="s") as storage:
            await storage.append([user_message("hello")])
            assert [m.text for m in await storage.load()] == ["hello"]
    finally:
        release.join()
        other.close()
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
