"""pgvector under failure: a connection the server closed, a cancelled write (review7d)."""

from __future__ import annotations

import asyncio
import uuid

import numpy as np
import pytest

from goagent_py.errors import ConfigurationError, MemoryStoreError
from goagent_py.memory.vector.base import SearchOptions
from goagent_py.messages import user_message

psycopg = pytest.importorskip("psycopg", reason='needs the "postgres" extra')

from goagent_py.memory.vector.pgvector import PgVectorStore  # noqa: E402

pytestmark = pytest.mark.slow  # a real PostgreSQL


def _v(*xs: float) -> np.ndarray:
    return np.array(xs, dtype=np.float32)


async def _kill_backend(dsn: str, store: PgVectorStore) -> None:
    cur = await store._conn.execute("SELECT pg_backend_pid()")
    (pid,) = await cur.fetchone()
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as other:
        await other.execute("SELECT pg_terminate_backend(%s)", (pid,))


async def test_a_store_whose_connection_the_server_closed_opens_another(pg_dsn: str) -> None:
    """A restart, a failover or an idle-connection reaper ends the store's connection: the call
    that meets it fails, and the store connects again for the next one (it answered "the
    connection is closed" to every later call, for the life of the process)."""
    table = f"t_{uuid.uuid4().hex[:12]}"
    async with PgVectorStore(pg_dsn, table=table, dimensions=3) as store:
        await store.upsert("a", _v(1, 0, 0), user_message("a"))
        await _kill_backend(pg_dsn, store)
        try:
            await store.upsert("b", _v(0, 1, 0), user_message("b"))
        except MemoryStoreError:
            await store.upsert("b", _v(0, 1, 0), user_message("b"))  # the one that met it
        await store.upsert("c", _v(0, 0, 1), user_message("c"))
        assert await store.count() == 3
        [hit] = await store.search(_v(0, 1, 0.1), SearchOptions(top_k=1))
        assert hit.id == "b"


async def test_a_cancelled_write_stores_nothing_and_the_store_goes_on(pg_dsn: str) -> None:
    table = f"t_{uuid.uuid4().hex[:12]}"
    async with PgVectorStore(pg_dsn, table=table, dimensions=3) as store:
        await store.upsert("a", _v(1, 0, 0), user_message("a"))
        async with await psycopg.AsyncConnection.connect(pg_dsn) as blocker:
            await blocker.execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE')
            task = asyncio.create_task(store.upsert("b", _v(0, 1, 0), user_message("b")))
            async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as look:
                while True:  # the write waits for the lock (seen by the server, not a sleep)
                    cur = await look.execute(
                        "SELECT count(*) FROM pg_locks "
                        "WHERE NOT granted AND relation = %s::regclass",
                        (table,),
                    )
                    if (await cur.fetchone())[0]:
                        break
                    await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await blocker.rollback()
        await store.upsert("c", _v(0, 0, 1), user_message("c"))
        assert sorted(e.id for e in await store.entries()) == ["a", "c"]


def test_a_malformed_connection_string_is_refused_without_its_password() -> None:
    """libpq quotes the malformed part of a connection string, here the password itself: it
    was in the store's error, and PostgresStorage's pool logged it at WARNING on every try."""
    from goagent_py.memory.storage.postgres import PostgresStorage

    password = "hunter2%zzlongsecret"
    dsn = f"postgresql://bob:{password}@127.0.0.1:1/db"
    for make in (
        lambda: PgVectorStore(dsn, table="t", dimensions=3),
        lambda: PostgresStorage(dsn),
    ):
        with pytest.raises(ConfigurationError, match="percent-encoded") as caught:
            make()
        assert password not in str(caught.value)
