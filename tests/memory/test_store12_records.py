"""One conversation, one record, across handles and backends (store12).

Two handles on one conversation (two processes' storages: SQLite on one real file, PostgreSQL
on one set of tables of the real server) driven through random interleavings of load, append
and clear, checked after every step against a model of the record: both backends give the
same answers (docs/sessions.md "A conversation cleared under a run"). And a storage that
reopens a restored file: what was read from the old file fences every write."""

from __future__ import annotations

import os
import random
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from goagent_py.errors import ConversationClearedError, MemoryStoreError
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.messages import user_message

Opener = Callable[[], Any]


@pytest.fixture(params=["sqlite", "postgres"])
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    opened: list[Any] = []
    if request.param == "sqlite":

        def make() -> Any:
            return SQLiteStorage(tmp_path / "chat.db", session_id="s")
    else:
        pytest.importorskip("psycopg_pool", reason='needs the "postgres" extra')
        dsn = request.getfixturevalue("pg_dsn")
        from goagent_py.memory.storage import PostgresStorage

        table = f"t_{uuid.uuid4().hex[:12]}"

        def make() -> Any:
            return PostgresStorage(dsn, session_id="s", table=table, max_size=2)

    def tracked() -> Any:
        storage = make()
        opened.append(storage)
        return storage

    yield tracked
    for storage in opened:
        await storage.aclose()


class _Model:
    """The record as the fence defines it: one list; each handle's last read, as the
    number of clears it had seen (None: never read)."""

    def __init__(self, handles: int) -> None:
        self.record: list[str] = []
        self.clears = 0
        self.read: list[int | None] = [None] * handles

    def load(self, h: int) -> list[str]:
        self.read[h] = self.clears
        return list(self.record)

    def append(self, h: int, texts: list[str]) -> bool:
        if self.read[h] is not None and self.read[h] != self.clears:
            return False
        self.record.extend(texts)
        return True

    def clear(self, h: int) -> None:
        self.record = []
        self.clears += 1
        self.read[h] = self.clears


@pytest.mark.parametrize("seed", range(4))
async def test_random_interleavings_of_two_handles_match_the_model(
    opener: Opener, seed: int
) -> None:
    rng = random.Random(seed)
    handles = [opener(), opener()]
    model = _Model(len(handles))
    for step in range(60):
        h = rng.randrange(len(handles))
        op = rng.choices(["load", "append", "clear"], weights=[4, 5, 1])[0]
        where = f"seed {seed} step {step}: handle {h} {op}"
        if op == "load":
            got = [m.text for m in await handles[h].load()]
            assert got == model.load(h), where
        elif op == "append":
            texts = [f"{step}.{i}" for i in range(rng.randint(1, 3))]
            expected = model.append(h, texts)
            try:
                await handles[h].append([user_message(t) for t in texts])
                stored = True
            except ConversationClearedError:
                stored = False
            assert stored == expected, where
        else:
            await handles[h].clear()
            model.clear(h)
    for h in range(len(handles)):
        assert [m.text for m in await handles[h].load()] == model.load(h)


def _restore(path: Path, backup: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.replace(backup, path)


async def test_a_reopened_storage_refuses_writes_based_on_the_old_file(tmp_path: Path) -> None:
    db, backup = tmp_path / "chat.db", tmp_path / "backup.db"
    storage = SQLiteStorage(db, session_id="s")
    await storage.append([user_message("one")])
    source, target = sqlite3.connect(db), sqlite3.connect(backup)
    source.backup(target)
    target.close()
    source.close()
    await storage.append([user_message("two")])
    assert [m.text for m in await storage.load()] == ["one", "two"]  # read from the old file
    assert await storage.reopen() is False  # nothing was replaced
    _restore(db, backup)
    assert storage.replaced()
    with pytest.raises(MemoryStoreError, match="deleted or replaced"):
        await storage.append([user_message("lost")])
    assert await storage.reopen() is True
    assert not storage.replaced()
    # The read above was of the old file: the restored one does not hold "two".
    with pytest.raises(MemoryStoreError, match="read the conversation from the old one"):
        await storage.append([user_message("three")])
    assert [m.text for m in await storage.load()] == ["one"]
    await storage.append([user_message("three")])
    assert [m.text for m in await storage.load()] == ["one", "three"]
    await storage.aclose()


async def _old_clear(storage: Any) -> None:
    """What a clear by goagent-py before the fence (0.x before store11) did: the session's
    rows deleted, no counter touched."""
    if isinstance(storage, SQLiteStorage):
        conn = sqlite3.connect(storage.path, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("DELETE FROM goagent_messages WHERE session_id = ?", ("s",))
            conn.execute("COMMIT")
        finally:
            conn.close()
        return
    await storage.list_sessions()  # the pool open
    async with storage.pool.connection() as conn:
        await conn.execute(f"DELETE FROM {storage.table} WHERE session_id = %s", ("s",))


async def test_a_clear_by_an_older_goagent_py_fences_the_writers_that_read_before_it(
    opener: Opener,
) -> None:
    run, other = opener(), opener()
    await run.append([user_message("deploy"), user_message("deploying")])
    assert len(await run.load()) == 2
    await _old_clear(other)
    with pytest.raises(ConversationClearedError):
        await run.append([user_message("deployed")])
    assert await other.load() == []  # the clear stands
    assert await run.load() == []
    await run.append([user_message("again")])
    assert [m.text for m in await other.load()] == ["again"]
    # A newer clear after it still counts, and the clearer goes on from its own clear.
    await run.load()
    await other.clear()
    await other.append([user_message("fresh")])
    with pytest.raises(ConversationClearedError):
        await run.append([user_message("late")])
    assert [m.text for m in await other.load()] == ["fresh"]


async def test_a_part_stored_for_a_run_that_read_before_the_clear_is_refused(
    opener: Opener,
) -> None:
    """A durable run stores a big tool result as a part of its conversation, fenced by the
    generation its load read: after the conversation's clear the part is refused, so no row
    of the deleted conversation comes back (its parts are deleted with it, and only then)."""
    from goagent_py._generation import expect_generation, generation_read
    from goagent_py.memory.storage._parts import part_session

    run, other = opener(), opener()
    await run.append([user_message("q")])
    await run.load()
    read = generation_read(run)
    assert read is not None
    name = part_session("s", "goagent.result:x")
    if isinstance(run, SQLiteStorage):
        part = SQLiteStorage(run.path, session_id=name)
    else:
        part = run.for_session(name)
    expect_generation(part, read)
    assert await part.append_once("k", [user_message("big")]) is True  # not cleared yet
    await other.clear()
    expect_generation(part, read)
    with pytest.raises(ConversationClearedError):
        await part.append_once("k2", [user_message("big again")])
    await part.aclose()
