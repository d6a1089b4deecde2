"""Review 10a: one session-id rule for every storage that keys conversations by id.

A conversation's id must not be readable as another's part (``_parts``: ``S + "\\x1f" + name``
is a part of ``S``, deleted by ``S``'s clear), must be storable by every backend (PostgreSQL
refuses NUL in text, and its index rows are bounded), and is refused when the storage is made,
not at the first append after a model call.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from goagent_py.errors import ConfigurationError, MemoryStoreError
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.memory.storage._parts import part_session
from goagent_py.messages import user_message

BAD_IDS = {
    "separator": "a\x1fb",
    "nul": "a\x00b",
    "too-long": "x" * 5000,
    "lone-surrogate": "a\ud800b",
}


@pytest.mark.parametrize("name", sorted(BAD_IDS))
def test_sqlite_storage_refuses_a_session_id_no_storage_can_keep(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigurationError, match="session_id"):
        SQLiteStorage(tmp_path / "c.db", session_id=BAD_IDS[name])


async def test_clearing_a_session_never_deletes_another_conversation(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    # Before the fix "a\x1fb" was accepted and was cleared with "a"; now it cannot be made,
    # while the part ids the durable side makes still work and go with their session.
    with pytest.raises(ConfigurationError):
        SQLiteStorage(path, session_id="a\x1fb")
    async with (
        SQLiteStorage(path, session_id="a") as a,
        SQLiteStorage(path, session_id=part_session("a", "big")) as part,
        SQLiteStorage(path, session_id="a b") as neighbour,
    ):
        await part.append([user_message("part")])
        await neighbour.append([user_message("other conversation")])
        await a.append([user_message("a")])
        await a.clear()
        assert await part.load() == []
        assert [m.text for m in await neighbour.load()] == ["other conversation"]


async def test_odd_but_valid_session_ids_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    for session_id in ("a/b", "é✓ 𝄞", "x" * 1000, "serve:u:t", "\t"):
        async with SQLiteStorage(path, session_id=session_id) as storage:
            await storage.append([user_message(session_id)])
            assert [m.text for m in await storage.load()] == [session_id]


def _remove_database(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        (path.parent / (path.name + suffix)).unlink(missing_ok=True)


async def test_a_deleted_database_file_fails_the_next_append_instead_of_losing_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.db"
    async with SQLiteStorage(path, session_id="a") as storage:
        await storage.append([user_message("one")])
        _remove_database(path)
        # Before: the append "succeeded" into the unlinked file and the turn was gone.
        with pytest.raises(MemoryStoreError, match="deleted or replaced"):
            await storage.append([user_message("two")])
        with pytest.raises(MemoryStoreError, match="deleted or replaced"):
            await storage.load()


async def test_a_replaced_database_file_is_not_written_through_the_old_one(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    other = tmp_path / "restored.db"
    async with SQLiteStorage(other, session_id="a") as restored:
        await restored.append([user_message("from the backup")])
    async with SQLiteStorage(path, session_id="a") as storage:
        await storage.append([user_message("one")])
        for suffix in ("", "-wal", "-shm"):  # a backup restored over the file
            source = tmp_path / ("restored.db" + suffix)
            if source.exists():
                source.replace(tmp_path / ("c.db" + suffix))
            else:
                (tmp_path / ("c.db" + suffix)).unlink(missing_ok=True)
        with pytest.raises(MemoryStoreError, match="deleted or replaced"):
            await storage.append([user_message("two")])
    async with SQLiteStorage(path, session_id="a") as reopened:
        assert [m.text for m in await reopened.load()] == ["from the backup"]


async def test_a_storage_opened_after_the_file_was_deleted_writes_the_new_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.db"
    async with SQLiteStorage(path, session_id="a") as old:
        await old.append([user_message("one")])
    _remove_database(path)
    # The process's shared writer may still hold a connection to the deleted file.
    async with SQLiteStorage(path, session_id="a") as new:
        await new.append([user_message("after the delete")])
    async with SQLiteStorage(path, session_id="a") as reader:
        assert [m.text for m in await reader.load()] == ["after the delete"]
