"""record16: one stored conversation, one run at a time, whoever opens it (docs/sessions.md
"One run at a time"). Two Sessions over one record (two storages of one SQLite conversation,
in one process or two, two PostgreSQL storages, one shared in-memory storage) interleaved
their turns; the second is now refused with SessionBusyError and stores nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from goagent_py import Agent, Session, SessionBusyError, tool, validate_transcript
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage import InMemoryStorage, SQLiteStorage
from goagent_py.messages import Message, Role, user_message
from goagent_py.testing import ScriptedProvider, tool_call_response

Storages = Callable[[], AbstractAsyncContextManager[tuple[Any, Any]]]


def _shape(messages: list[Message]) -> list[str]:
    return [f"{m.role.value}:{m.text}" if m.role is not Role.TOOL else "tool" for m in messages]


async def _two_sessions_one_record(first_storage: Any, second_storage: Any) -> list[Message]:
    """The reviewer's reproducer: S1 runs a slow tool, S2 prompts meanwhile."""
    running, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        """Wait."""
        running.set()
        await release.wait()
        return "slow done"

    first = Session(
        Agent(
            provider=ScriptedProvider(tool_call_response(("slow", {})), "one"),
            tools=[slow],
            short_term_memory=ShortTermMemory(first_storage),
        )
    )
    second = Session(
        Agent(
            provider=ScriptedProvider("two", "three"),
            short_term_memory=ShortTermMemory(second_storage),
        )
    )
    task = asyncio.create_task(first.prompt("first"))
    await running.wait()
    with pytest.raises(SessionBusyError, match="is busy: another run") as caught:
        await second.prompt("second")
    assert "wait for that run" in str(caught.value)
    with pytest.raises(SessionBusyError):  # nor a UI message inside the other run's turn
        await second.add_ui_message(user_message("note"))
    await second.load()  # reading is fine, and it closes none of the running calls
    release.set()
    assert (await task).text == "one"
    stored = await first_storage.load()
    assert _shape(stored) == ["user:first", "assistant:", "tool", "assistant:one"]
    assert stored[2].text == "slow done"
    assert not stored[2].is_error
    # Once the run is over, the second Session goes on after it.
    assert (await second.prompt("second")).text == "two"
    stored = await first_storage.load()
    assert _shape(stored)[-2:] == ["user:second", "assistant:two"]
    assert validate_transcript(stored) == []
    return stored


async def test_two_sqlite_storages_of_one_conversation_run_one_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    async with (
        SQLiteStorage(path, session_id="t") as one,
        SQLiteStorage(path, session_id="t") as two,
        SQLiteStorage(path, session_id="other") as other,
    ):
        await _two_sessions_one_record(one, two)
        # Other conversations of the file are not held.
        async with one.hold_run(), other.hold_run():
            pass


async def test_two_sessions_on_one_in_memory_storage_run_one_at_a_time() -> None:
    storage = InMemoryStorage()
    await _two_sessions_one_record(storage, storage)
    async with storage.hold_run(), InMemoryStorage().hold_run():
        pass


@asynccontextmanager
async def _postgres_pair(pg_dsn: str) -> AsyncIterator[tuple[Any, Any]]:
    from goagent_py.memory.storage import PostgresStorage

    table = f"t_{uuid.uuid4().hex[:12]}"
    async with (
        PostgresStorage(pg_dsn, table=table, session_id="t") as one,
        PostgresStorage(pg_dsn, table=table, session_id="t") as two,
    ):
        yield one, two


@pytest.mark.slow
@pytest.mark.needs_extra("postgres")
async def test_two_postgres_storages_of_one_conversation_run_one_at_a_time(pg_dsn: str) -> None:
    async with _postgres_pair(pg_dsn) as (one, two):
        await _two_sessions_one_record(one, two)
        # Released: the next run of either takes it.
        async with two.hold_run():
            pass


_HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from goagent_py import Agent, Session, tool
    from goagent_py.memory.short_term import ShortTermMemory
    from goagent_py.memory.storage import SQLiteStorage
    from goagent_py.testing import ScriptedProvider, tool_call_response

    @tool
    async def slow() -> str:
        \"\"\"Wait forever.\"\"\"
        print("running", flush=True)
        await asyncio.Event().wait()
        return "never"

    async def main() -> None:
        async with SQLiteStorage(sys.argv[1], session_id="t") as storage:
            session = Session(Agent(
                provider=ScriptedProvider(tool_call_response(("slow", {}))),
                tools=[slow],
                short_term_memory=ShortTermMemory(storage),
            ))
            await session.prompt("from the child")

    asyncio.run(main())
    """
)


def test_a_run_in_another_process_holds_the_conversation_until_it_dies(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "running"

        async def second(expect_busy: bool) -> list[Message]:
            async with SQLiteStorage(path, session_id="t") as storage:
                session = Session(
                    Agent(
                        provider=ScriptedProvider("parent answer"),
                        short_term_memory=ShortTermMemory(storage),
                    )
                )
                if expect_busy:
                    with pytest.raises(SessionBusyError, match=f"process {child.pid}"):
                        await session.prompt("from the parent")
                else:
                    await session.prompt("from the parent")
                return await storage.load()

        stored = asyncio.run(second(expect_busy=True))
        assert _shape(stored) == ["user:from the child"]  # nothing of ours
        child.send_signal(signal.SIGKILL)  # a crashed holder: the kernel lets go of its lock
        child.wait()
        stored = asyncio.run(second(expect_busy=False))
        assert _shape(stored)[0] == "user:from the child"
        assert _shape(stored)[-2:] == ["user:from the parent", "assistant:parent answer"]
        assert validate_transcript(stored) == []
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()


async def test_a_conversation_opened_through_a_symlink_is_the_same_conversation(
    tmp_path: Path,
) -> None:
    """A symlink to the database names the same file (SQLite follows it): one hold, and the
    lock file beside the real database (was: beside the link, a lock of its own)."""
    real = tmp_path / "data" / "chat.db"
    real.parent.mkdir()
    link = tmp_path / "link.db"
    link.symlink_to(real)
    stored = await _two_sessions_one_record(
        SQLiteStorage(real, session_id="t"), SQLiteStorage(link, session_id="t")
    )
    assert _shape(stored)[:4] == ["user:first", "assistant:", "tool", "assistant:one"]
    assert (real.parent / "chat.db-runs.lock").exists()
    assert not (tmp_path / "link.db-runs.lock").exists()
