"""A decision's claim is fenced against a clear, as an append is (approve14; docs/sessions.md
"A conversation cleared under a run"): a conversation cleared after the decider read it and
filled again with the same waiting message (a restore, an import) does not take the stale
decision. Real SQLite files; another storage object on the file plays the other process."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from goagent_py import Agent, Approve, ConversationClearedError, ToolCall, tool
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import InMemoryStorage, SQLiteStorage
from goagent_py.messages import Message
from goagent_py.session import Session
from goagent_py.testing import ScriptedProvider, tool_call_response


def _pay(ran: list[int]) -> Any:
    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        ran.append(amount)
        return "paid"

    return pay


class _ClearedUnderTheClaim:
    """A storage whose next claim finds the conversation cleared and refilled by another
    task (another context: another reader) after this one read it."""

    def __init__(self, inner: Any, other: Callable[[], Any]) -> None:
        self.inner = inner
        self.other = other  # another storage object on the same record (another process)
        self.refill: list[Message] | None = None
        self.refill_at_load = 0  # refill before this load instead of before the claim
        self.loads = 0

    @property
    def _fence(self) -> Any:  # the inner storage's read fence (what a resume reads back)
        return self.inner._fence

    async def load(self) -> list[Message]:
        self.loads += 1
        if self.refill_at_load == self.loads:
            await self._elsewhere()
        return list(await self.inner.load())

    async def _elsewhere(self) -> None:
        refill, self.refill = self.refill, None
        assert refill is not None

        async def elsewhere() -> None:
            other = self.other()
            await other.clear()
            await other.append(refill)

        await asyncio.create_task(elsewhere())  # a context of its own

    async def append(self, messages: list[Message]) -> None:
        await self.inner.append(messages)

    async def clear(self) -> None:
        await self.inner.clear()

    async def update_where(
        self, match: Callable[[Message], bool], update: Callable[[Message], Message]
    ) -> Message | None:
        if self.refill is not None and not self.refill_at_load:
            await self._elsewhere()
        found: Message | None = await self.inner.update_where(match, update)
        return found


class _Record:
    """Storage objects on one record, as separate processes hold them; closed at the end."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self.made: list[Any] = []

    def __call__(self) -> Any:
        storage = self._make()
        self.made.append(storage)
        return storage

    async def aclose(self) -> None:
        for storage in self.made:
            close = getattr(storage, "aclose", None)
            if close is not None:
                await close()


@pytest.fixture(params=["sqlite", "memory", pytest.param("postgres", marks=pytest.mark.slow)])
async def record(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[_Record]:
    if request.param == "sqlite":
        made = _Record(lambda: SQLiteStorage(tmp_path / "c.db", session_id="s"))
    elif request.param == "memory":
        shared = InMemoryStorage()
        made = _Record(lambda: shared)
    else:
        pytest.importorskip("psycopg_pool")
        from goagent_py.memory.storage import PostgresStorage

        dsn = request.getfixturevalue("pg_dsn")
        table = f"t_{uuid.uuid4().hex[:12]}"
        made = _Record(lambda: PostgresStorage(dsn, table=table, session_id="s"))
    try:
        yield made
    finally:
        await made.aclose()


async def _waiting(record: _Record, ran: list[int]) -> tuple[list[Message], str]:
    first = Agent(
        provider=ScriptedProvider(tool_call_response(ToolCall("c1", "pay", {"amount": 9}))),
        tools=[_pay(ran)],
        short_term_memory=ShortTermMemory(storage=record()),
    )
    result = await first.run("pay 9")
    (call,) = result.pending
    return list(await record().load()), call.token


def _later(record: _Record, ran: list[int]) -> tuple[Agent, _ClearedUnderTheClaim]:
    storage = _ClearedUnderTheClaim(record(), record)
    agent = Agent(
        provider=ScriptedProvider("done"),
        tools=[_pay(ran)],
        short_term_memory=ShortTermMemory(storage=storage),
    )
    return agent, storage


async def test_a_resume_does_not_settle_a_wait_cleared_and_refilled_after_its_read(
    record: _Record,
) -> None:
    ran: list[int] = []
    stored, token = await _waiting(record, ran)
    later, storage = _later(record, ran)
    storage.refill = stored
    with pytest.raises(ConversationClearedError):
        await later.resume({"c1": Approve(token=token)})
    assert ran == []
    # The refilled conversation still waits: nothing of the stale decision was written.
    assert await record().load() == stored


@pytest.mark.parametrize("cleared", ["before the claim", "before the whole record's read"])
async def test_a_session_resume_does_not_settle_a_wait_cleared_and_refilled_after_its_read(
    record: _Record, cleared: str
) -> None:
    # The resume reads the whole record after the history its decisions are based on (for
    # reused ids): that read must not move the claim's fence to the refilled conversation.
    ran: list[int] = []
    stored, token = await _waiting(record, ran)
    later, storage = _later(record, ran)
    session = Session(later)
    await session.load()
    storage.refill = stored
    if cleared != "before the claim":
        storage.refill_at_load = storage.loads + 2  # the history's read, then the record's
    with pytest.raises(ConversationClearedError):
        await session.resume({"c1": Approve(token=token)})
    assert ran == []
    assert await record().load() == stored
