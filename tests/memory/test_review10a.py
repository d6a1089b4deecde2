"""Review 10a: one session-id rule for every storage that keys conversations by id.

A conversation's id must not be readable as another's part (``_parts``: ``S + "\\x1f" + name``
is a part of ``S``, deleted by ``S``'s clear), must be storable by every backend (PostgreSQL
refuses NUL in text, and its index rows are bounded), and is refused when the storage is made,
not at the first append after a model call.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from goagent_py.errors import ConfigurationError
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
