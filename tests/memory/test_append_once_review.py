"""Adversarial checks of SQLiteStorage.append_once (review4): a keyed write that fails keeps
no key, in the shared group commit and on a ``:memory:`` database; a closed storage refuses."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from goagent_py.errors import MemoryStoreError
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.messages import user_message

_TRIGGER = (
    "CREATE TRIGGER refuse BEFORE INSERT ON goagent_messages WHEN NEW.session_id = 'bad'"
    " BEGIN SELECT RAISE(ABORT, 'refused'); END"
)


async def test_a_failed_keyed_write_keeps_no_key_and_spares_its_batch(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    async with (
        SQLiteStorage(path, session_id="bad") as bad,
        SQLiteStorage(path, session_id="good") as good,
    ):
        await good.append([user_message("first")])  # the file and its tables exist
        with sqlite3.connect(path) as conn:
            conn.execute(_TRIGGER)
        conn.close()
        # Both in one group commit where the writer batches them: the failing one is refused,
        # the other stored.
        results = await asyncio.gather(
            bad.append_once("k", [user_message("lost?")]),
            good.append_once("k", [user_message("kept")]),
            return_exceptions=True,
        )
        assert isinstance(results[0], MemoryStoreError), results
        assert results[1] is True
        with sqlite3.connect(path) as conn:
            conn.execute("DROP TRIGGER refuse")
        conn.close()
        # The failed write left no key: the retry stores its messages.
        assert await bad.append_once("k", [user_message("retried")]) is True
        assert [m.text for m in await bad.load()] == ["retried"]
        assert [m.text for m in await good.load()] == ["first", "kept"]


async def test_a_failed_keyed_write_on_a_memory_database_keeps_no_key() -> None:
    async with SQLiteStorage(":memory:", session_id="bad") as storage:
        await storage.append([])  # opens the connection and makes the tables
        await storage.append_once("warm", [])
        await storage._call(lambda conn: conn.execute(_TRIGGER))
        with pytest.raises(MemoryStoreError):
            await storage.append_once("k", [user_message("lost?")])
        await storage._call(lambda conn: conn.execute("DROP TRIGGER refuse"))
        assert await storage.append_once("k", [user_message("retried")]) is True
        assert not await storage.append_once("k", [user_message("again")])
        assert [m.text for m in await storage.load()] == ["retried"]
        await storage.clear()
        assert await storage.append_once("k", [user_message("after clear")]) is True


async def test_append_once_on_a_closed_storage_is_refused(tmp_path: Path) -> None:
    for path in (str(tmp_path / "chat.db"), ":memory:"):
        storage = SQLiteStorage(path, session_id="s")
        await storage.append_once("k", [user_message("q")])
        await storage.aclose()
        with pytest.raises(MemoryStoreError):
            await storage.append_once("k2", [user_message("late")])


async def test_append_once_interleaved_with_plain_appends_keeps_every_message_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chat.db"
    async with SQLiteStorage(path, session_id="s") as a, SQLiteStorage(path, session_id="s") as b:
        jobs = []
        for i in range(20):
            jobs.append(a.append_once(f"k{i}", [user_message(f"keyed {i}")]))
            jobs.append(b.append([user_message(f"plain {i}")]))
            jobs.append(b.append_once(f"k{i}", [user_message(f"dup {i}")]))
        await asyncio.gather(*jobs)
        texts = [m.text for m in await a.load()]
    assert sorted(texts) == sorted(
        [f"keyed {i}" for i in range(20)] + [f"plain {i}" for i in range(20)]
    )
