"""hold17: one conversation, one record, for every run (docs/sessions.md "One run per stored
conversation, whoever opens it"). record16 made a Session's run hold its stored conversation;
a run without a Session (``agent.run``, ``stream``, ``resume``, ``stream_resume``) took no
hold, so two bare runs (or a bare run and a Session's) interleaved their turns in one record,
and a storage of one's own without ``hold_run`` was never held."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Sequence
from pathlib import Path
from typing import Any

import pytest

from goagent_py import (
    AgentEnd,
    Approve,
    Deny,
    Session,
    SessionBusyError,
    tool,
    validate_transcript,
)
from goagent_py.agent import Agent
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage import InMemoryStorage, SQLiteStorage
from goagent_py.messages import Message, Role, ToolCall
from goagent_py.results import StopReason
from goagent_py.testing import ScriptedProvider, tool_call_response


def _shape(messages: list[Message]) -> list[str]:
    return [f"{m.role.value}:{m.text}" if m.role is not Role.TOOL else "tool" for m in messages]


class _Gate:
    """A tool that waits until the test lets it go: the first run is inside it."""

    def __init__(self, *, requires_approval: bool = False) -> None:
        self.running = asyncio.Event()
        self.release = asyncio.Event()
        self.calls = 0

        @tool(requires_approval=requires_approval)
        async def slow() -> str:
            """Wait."""
            self.calls += 1
            self.running.set()
            await self.release.wait()
            return "slow done"

        self.tool = slow


def _slow_agent(storage: Any, gate: _Gate, *more: str) -> Agent[Any, Any]:
    return Agent(
        provider=ScriptedProvider(tool_call_response(("slow", {})), "one", *more),
        tools=[gate.tool],
        short_term_memory=ShortTermMemory(storage),
    )


class _PlainStorage:
    """A storage of one's own, without ``hold_run``: an in-memory list behind the protocol."""

    def __init__(self, inner: InMemoryStorage | None = None) -> None:
        self._inner = inner if inner is not None else InMemoryStorage()

    async def load(self) -> list[Message]:
        return await self._inner.load()

    async def append(self, messages: Sequence[Message]) -> None:
        await self._inner.append(messages)

    async def clear(self) -> None:
        await self._inner.clear()


class _KeyedStorage(_PlainStorage):
    """Two objects over one backend, saying so with ``conversation_key``."""

    def __init__(self, inner: InMemoryStorage, key: str) -> None:
        super().__init__(inner)
        self.conversation_key = ("backend", key)


async def _drain(events: AsyncIterator[Any]) -> None:
    async for _ in events:
        pass


async def _second_is_refused(second: Agent[Any, Any], how: str) -> None:
    attempt: Awaitable[Any]
    if how == "run":
        attempt = second.run("second")  # was: answered, its turn inside the first run's
    elif how == "stream":
        attempt = _drain(second.stream("second"))
    else:
        attempt = Session(second).prompt("second")
    with pytest.raises(SessionBusyError, match="is busy") as caught:
        await attempt
    assert "wait for that run" in str(caught.value)


def _storages(kind: str, tmp_path: Path) -> tuple[Any, Any]:
    if kind == "sqlite":
        return (
            SQLiteStorage(tmp_path / "chat.db", session_id="t"),
            SQLiteStorage(tmp_path / "chat.db", session_id="t"),
        )
    if kind == "memory":
        shared = InMemoryStorage()
        return shared, shared
    if kind == "plain":  # one object of a storage without hold_run
        plain = _PlainStorage()
        return plain, plain
    backend = InMemoryStorage()  # two objects of one conversation, told by conversation_key
    return _KeyedStorage(backend, "t"), _KeyedStorage(backend, "t")


@pytest.mark.parametrize("how", ["run", "stream", "session"])
@pytest.mark.parametrize("kind", ["sqlite", "memory", "plain", "keyed"])
async def test_a_bare_run_holds_its_conversation(tmp_path: Path, kind: str, how: str) -> None:
    first_storage, second_storage = _storages(kind, tmp_path)
    gate = _Gate()
    first = _slow_agent(first_storage, gate)
    second = Agent(
        provider=ScriptedProvider("two"), short_term_memory=ShortTermMemory(second_storage)
    )
    task = asyncio.create_task(first.run("first"))
    await gate.running.wait()
    await _second_is_refused(second, how)
    gate.release.set()
    assert (await task).text == "one"
    stored = await first_storage.load()
    assert _shape(stored) == ["user:first", "assistant:", "tool", "assistant:one"]
    # Once the run is over, the other goes on after it.
    assert (await second.run("second")).text == "two"
    stored = await first_storage.load()
    assert _shape(stored)[-2:] == ["user:second", "assistant:two"]
    assert validate_transcript(stored) == []


async def test_a_streamed_bare_run_holds_until_its_end_and_not_past_it(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="t")
    gate = _Gate()
    first = _slow_agent(storage, gate)
    second = Agent(provider=ScriptedProvider("two"), short_term_memory=ShortTermMemory(storage))
    nexts: list[str] = []
    async for event in first.stream("first"):
        if gate.running.is_set() and not gate.release.is_set():
            await _second_is_refused(second, "run")
            gate.release.set()
        if isinstance(event, AgentEnd):
            # The run is over and stored when its end is seen: the next one is not refused.
            nexts.append((await second.run("second")).text)
    assert nexts == ["two"]
    assert _shape(await storage.load()) == [
        "user:first",
        "assistant:",
        "tool",
        "assistant:one",
        "user:second",
        "assistant:two",
    ]


async def test_a_session_run_and_a_bare_run_hold_against_each_other(tmp_path: Path) -> None:
    gate = _Gate()
    session = Session(
        _slow_agent(SQLiteStorage(tmp_path / "chat.db", session_id="t"), gate, "again")
    )
    task = asyncio.create_task(session.prompt("first"))
    await gate.running.wait()
    other = Agent(
        provider=ScriptedProvider("two"),
        short_term_memory=ShortTermMemory(SQLiteStorage(tmp_path / "chat.db", session_id="t")),
    )
    await _second_is_refused(other, "run")
    gate.release.set()
    assert (await task).text == "one"
    # The Session's own run took the hold once (not refused by itself), and its next too.
    assert (await session.prompt("more")).text == "again"


async def test_runs_of_one_agent_one_after_another_are_not_refused(tmp_path: Path) -> None:
    agent = Agent(
        provider=ScriptedProvider("a", "b", "c"),
        short_term_memory=ShortTermMemory(SQLiteStorage(tmp_path / "chat.db", session_id="t")),
    )
    assert [(await agent.run(p)).text for p in ("1", "2", "3")] == ["a", "b", "c"]


@pytest.mark.parametrize("how", ["resume", "stream_resume"])
async def test_a_second_decider_while_the_first_runs_is_refused_and_stores_nothing(
    tmp_path: Path, how: str
) -> None:
    gate = _Gate(requires_approval=True)

    def agent(*replies: Any) -> Agent[Any, Any]:
        return Agent(
            provider=ScriptedProvider(*replies),
            tools=[gate.tool],
            short_term_memory=ShortTermMemory(SQLiteStorage(tmp_path / "chat.db", session_id="s")),
        )

    first = agent(tool_call_response(ToolCall("c1", "slow", {})), "Done.")
    assert (await first.run("go")).stop_reason is StopReason.DEFERRED
    task = asyncio.create_task(first.resume({"c1": Approve()}))
    await gate.running.wait()
    second = agent("Denied.")
    attempt: Awaitable[Any]
    if how == "resume":
        attempt = second.resume({"c1": Deny("no")})
    else:
        attempt = _drain(second.stream_resume({"c1": Deny("no")}))
    with pytest.raises(SessionBusyError, match="is busy"):
        await attempt
    gate.release.set()
    assert (await task).text == "Done."
    assert gate.calls == 1
    stored = await SQLiteStorage(tmp_path / "chat.db", session_id="s").load()
    assert _shape(stored) == ["user:go", "assistant:", "tool", "assistant:Done."]
    assert stored[2].text == "slow done"  # the first decision, not the refused denial
    assert validate_transcript(stored, allow_pending=False) == []


async def test_a_storage_without_hold_run_is_held_in_process_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class _Unheld(_PlainStorage):
        pass

    storage = _Unheld()
    gate = _Gate()
    first = _slow_agent(storage, gate)
    other_conversation = Agent(
        provider=ScriptedProvider("elsewhere"), short_term_memory=ShortTermMemory(_Unheld())
    )
    with caplog.at_level(logging.WARNING, logger="goagent_py"):
        task = asyncio.create_task(first.run("first"))
        await gate.running.wait()
        # Another object of the same type, without a conversation_key: another conversation.
        assert (await other_conversation.run("hi")).text == "elsewhere"
        gate.release.set()
        await task
    warned = [
        r.getMessage() for r in caplog.records if "_Unheld has no hold_run()" in r.getMessage()
    ]
    assert len(warned) == 1  # once per type
    assert "this process only" in warned[0]


@pytest.mark.slow
@pytest.mark.needs_extra("postgres")
@pytest.mark.parametrize("own_pool", [False, True])
async def test_a_postgres_run_takes_one_connection_of_its_pool(pg_dsn: str, own_pool: bool) -> None:
    """The run's hold kept one pooled connection and each write took another: with a pool of
    one, the first write waited for the pool until its timeout and the run failed. The hold's
    connection now carries the run's calls, committed one by one (a pool of one's own without
    autocommit too: another process sees the run's turn as it is written)."""
    from psycopg_pool import AsyncConnectionPool

    from goagent_py.memory.storage import PostgresStorage

    table = f"t_{uuid.uuid4().hex[:12]}"
    pool: Any = None
    if own_pool:
        pool = AsyncConnectionPool(pg_dsn, min_size=1, max_size=1, open=False, timeout=60)
        await pool.open()
        storage = PostgresStorage(pool, table=table, session_id="t")
    else:
        storage = PostgresStorage(pg_dsn, table=table, session_id="t", max_size=1, timeout=60)
    gate = _Gate()
    try:
        async with PostgresStorage(pg_dsn, table=table, session_id="t") as other:
            # A Session's run stores each step as it goes (checkpoints): through the hold's
            # connection, committed at once, seen from another pool while the run goes on.
            task = asyncio.create_task(Session(_slow_agent(storage, gate)).prompt("first"))
            await gate.running.wait()
            assert _shape(await other.load()) == ["user:first"]
            with pytest.raises(SessionBusyError):  # and still held across pools
                async with other.hold_run():
                    pass
            gate.release.set()
            assert (await task).text == "one"
            assert _shape(await other.load()) == [
                "user:first",
                "assistant:",
                "tool",
                "assistant:one",
            ]
            async with other.hold_run():  # released
                pass
    finally:
        await storage.aclose()
        if pool is not None:
            await pool.close()


async def test_a_retried_resume_while_the_first_runs_is_answered_not_refused(
    tmp_path: Path,
) -> None:
    """A resume sent again with the same decisions (a double click) while the first one runs
    its decided call is a retry, answered from the record as before the hold: nothing run
    twice, nothing written, no SessionBusyError."""
    gate = _Gate(requires_approval=True)

    def agent(*replies: Any) -> Agent[Any, Any]:
        return Agent(
            provider=ScriptedProvider(*replies),
            tools=[gate.tool],
            short_term_memory=ShortTermMemory(SQLiteStorage(tmp_path / "chat.db", session_id="s")),
        )

    (call,) = (await agent(tool_call_response(ToolCall("c1", "slow", {}))).run("go")).pending
    same = {"c1": Approve(token=call.token)}
    task = asyncio.create_task(agent("Done.").resume(same))
    await gate.running.wait()  # claimed, running the call
    again = await agent("never").resume(same)
    assert (again.iterations, again.tool_calls) == (0, 0)
    gate.release.set()
    assert (await task).text == "Done."
    assert gate.calls == 1
    stored = await SQLiteStorage(tmp_path / "chat.db", session_id="s").load()
    assert _shape(stored) == ["user:go", "assistant:", "tool", "assistant:Done."]
