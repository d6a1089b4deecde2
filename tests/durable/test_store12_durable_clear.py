"""A durable run whose conversation is cleared by another process while it is in flight
(docs/sessions.md "A conversation cleared under a run"): the clear stands, as under a plain
run. The run's load and its appends are separate activities, so the generation the load read
travels through the workflow to each append (store12)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from goagent_py import Agent, validate_transcript
from goagent_py.durable import DurableRunError
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.messages import Role, ToolCall, assistant_message, user_message
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tools import tool

pytestmark = pytest.mark.slow

RunDurably = Callable[..., Awaitable[tuple[Any, Any]]]  # the run_durably fixture
Opener = Callable[[], Any]  # a new storage of session "s" on the shared store


@pytest.fixture(params=["sqlite", "postgres"])
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    """Storages of one conversation, each its own object (as another process's would be)."""
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


def _agent(plan: Callable[..., Any], opener: Opener) -> Agent:
    @tool
    async def deploy(target: str) -> str:
        """Deploy.

        Args:
            target: where.
        """
        # Another process clears the conversation while this run's tool call is in flight.
        await opener().clear()
        return f"deployed {target}"

    return Agent(provider=FunctionProvider(plan), model="m", name="clr", tools=[deploy])


def _plan(request: CompletionRequest) -> CompletionResponse | str:
    if request.messages[-1].role == Role.TOOL:
        return "done"
    return tool_call_response(ToolCall("c1", "deploy", {"target": "staging"}))


async def _seed(opener: Opener) -> Any:
    history = opener()
    await history.append([user_message("earlier"), assistant_message("noted")])
    return history


async def test_a_durable_runs_appends_after_another_processs_clear_are_refused(
    run_durably: RunDurably, opener: Opener
) -> None:
    """The run's loaded history crosses by reference, so once its conversation is cleared its
    next model call cannot be made: the run fails, naming the clear, and nothing of it lands
    on top of the clear (on main: the tool call and its result, opening the record)."""
    history = await _seed(opener)
    worker_storage = opener()  # one storage object on the worker, for every activity
    with pytest.raises(DurableRunError) as caught:
        await run_durably(
            _agent(_plan, opener),
            "deploy it",
            plan=_plan,
            memory=ShortTermMemory(worker_storage),
            session_id="s",
        )
    stored = await history.load()
    assert [m.text for m in stored] == []  # the clear stands
    assert "ConversationClearedError" in str(caught.value)
    assert "cleared" in caught.value.detail


@pytest.mark.parametrize(
    "without",
    [("run_refs", "carry_appends"), ("run_refs",)],
    ids=["appends-of-their-own", "carried-appends"],
)
async def test_a_durable_run_holding_its_messages_goes_on_and_stores_nothing_after_a_clear(
    run_durably: RunDurably, opener: Opener, without: tuple[str, ...]
) -> None:
    """A run whose messages are all in the workflow (a new conversation, started by a client
    before ``run_refs``) goes on to its answer, as a plain run does, and stores nothing more,
    whether its appends ride on its model calls or go alone."""
    history = opener()
    result, _ = await run_durably(
        _agent(_plan, opener),
        "deploy it",
        plan=_plan,
        memory=ShortTermMemory(opener()),
        session_id="s",
        without=without,
    )
    assert result.text == "done"
    assert await history.load() == []
    # The next run starts the new conversation from what the store holds now.
    result, _ = await run_durably(
        Agent(provider=FunctionProvider(_count), model="m", name="n2"),
        "hello again",
        plan=_count,
        memory=ShortTermMemory(opener()),
        session_id="s",
    )
    assert result.text == "saw 1"
    stored = await history.load()
    assert [m.text for m in stored] == ["hello again", "saw 1"]
    validate_transcript(stored)


def _count(request: CompletionRequest) -> str:
    return f"saw {len(request.messages)}"


async def test_a_big_result_stored_after_the_clear_leaves_no_row_of_the_conversation(
    run_durably: RunDurably, tmp_path: Path
) -> None:
    """A tool's big result is stored beside its conversation (a part, deleted with it); one
    stored after the conversation was cleared came back as a row of the deleted conversation
    that nothing would delete (a privacy clear that kept the tool's output)."""
    import sqlite3

    db = tmp_path / "chat.db"
    seeded = SQLiteStorage(db, session_id="s")
    await seeded.append([user_message("earlier"), assistant_message("noted")])
    await seeded.aclose()

    @tool
    async def dump(target: str) -> str:
        """Dump.

        Args:
            target: what.
        """
        clearer = SQLiteStorage(db, session_id="s")
        await clearer.clear()  # another process, while this call runs
        await clearer.aclose()
        return "secret " * 20_000  # over the 64 KB that crosses whole

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        if request.messages[-1].role == Role.TOOL:
            return "done"
        return tool_call_response(ToolCall("c1", "dump", {"target": "x"}))

    agent = Agent(
        provider=FunctionProvider(plan),
        model="m",
        name="big",
        tools=[dump],
        max_tool_result_chars=None,
    )
    worker = SQLiteStorage(db, session_id="s")
    with pytest.raises(DurableRunError):
        await run_durably(
            agent, "dump it", plan=plan, memory=ShortTermMemory(worker), session_id="s"
        )
    await worker.aclose()
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT session_id FROM goagent_messages").fetchall()
    finally:
        conn.close()
    assert rows == []
