"""sqlite-vec files made before memory records (schema 2) are migrated on open.

``data/memories_schema2.db`` was written by goagent-py before records existed (commit 4adc034:
LongTermMemory on FakeEmbedder(16); alice said "I live in Lisbon." and "My sister is Meera.",
bob "I live in Oslo."; the table ``chunks`` holds one RAG-style entry without a session).
"""

from __future__ import annotations

import shutil
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest

from goagent_py.memory.deciders import RuleDecider
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.messages import TextBlock, user_message
from goagent_py.testing import FakeEmbedder

pytest.importorskip("sqlite_vec", reason='needs the "vector" extra')

from goagent_py.memory.vector.sqlite_vec import SqliteVecStore

OLD = Path(__file__).parent / "data" / "memories_schema2.db"


@pytest.fixture
def old_file(tmp_path: Path) -> Path:
    path = tmp_path / "memory.db"
    shutil.copyfile(OLD, path)
    return path


def dated(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(goagent_vector_tables)")}
        if "records_dated" not in columns:
            return {}
        rows = conn.execute("SELECT name, records_dated FROM goagent_vector_tables").fetchall()
    return {str(n): int(v) for n, v in rows}


async def test_old_memories_become_current_records_dated_by_their_row(old_file: Path) -> None:
    assert dated(old_file) == {}
    async with SqliteVecStore(old_file, table="memories", dimensions=16) as store:
        m = LongTermMemory(FakeEmbedder(16), store)
        records = await m.records(session="alice")
        assert sorted(r.text for r in records) == ["I live in Lisbon.", "My sister is Meera."]
        assert all(r.state == "current" for r in records)
        assert all(isinstance(r.created_at, datetime) for r in records)
        assert all(r.created_at and r.created_at.year == 2026 for r in records)
        found = await m.retrieve([TextBlock("where do I live")], session="alice", top_k=1)
        assert [s.message.text for s in found] == ["I live in Lisbon."]
    assert dated(old_file) == {"memories": 1, "chunks": 0}  # each table when it is opened


async def test_a_migrated_file_is_consolidated_like_a_new_one(old_file: Path) -> None:
    async with SqliteVecStore(old_file, table="memories", dimensions=16) as store:
        m = LongTermMemory(FakeEmbedder(16), store, decider=RuleDecider())
        await m.store([user_message("I moved to Porto last month.")], session="alice")
    async with SqliteVecStore(old_file, table="memories", dimensions=16) as store:
        m = LongTermMemory(FakeEmbedder(16), store)
        current = sorted(r.text for r in await m.records(session="alice"))
        assert current == ["I live in Porto.", "My sister is Meera."]
        (old,) = await m.records(session="alice", states=("superseded",))
        assert old.text == "I live in Lisbon."
        assert [r.text for r in await m.records(session="bob")] == ["I live in Oslo."]


async def test_entries_without_a_session_are_left_as_they_were(old_file: Path) -> None:
    async with SqliteVecStore(old_file, table="chunks", dimensions=16) as store:
        (entry,) = await store.entries()
        assert entry.message.metadata == {"source": "a.md"}
