"""Two resumes of one waiting run, racing from two processes (or two agents) on one record:
the decision's claim is atomic in storage, so exactly one runs the approved call and the
other is answered with the outcome, running nothing (approve15; docs/approvals.md "Sending a
decision again"). Real SQLite file and processes, a shared InMemoryStorage, real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from goagent_py import (
    Agent,
    ApprovalConflictError,
    Approve,
    SessionBusyError,
    StopReason,
    ToolCall,
    tool,
)
from goagent_py._metadata_keys import PENDING_KEY
from goagent_py.approvals import settled, waits_under
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import InMemoryStorage, SQLiteStorage
from goagent_py.messages import Message
from goagent_py.testing import ScriptedProvider, tool_call_response

SCRIPT = Path(__file__).with_name("racing_resume_script.py")
PAY = tool_call_response(ToolCall("c1", "pay", {"amount": 9}))


def _pay(ran: list[int]) -> Any:
    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        ran.append(amount)
        return f"paid {amount}"

    return pay


async def test_two_processes_resuming_one_wait_run_the_call_once(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    log = tmp_path / "ran.log"
    ran: list[int] = []
    first = Agent(
        provider=ScriptedProvider(PAY),
        tools=[_pay(ran)],
        short_term_memory=ShortTermMemory(storage=SQLiteStorage(db, session_id="s")),
    )
    (call,) = (await first.run("pay 9")).pending

    def race() -> list[dict[str, Any]]:
        procs = [
            subprocess.Popen(
                [sys.executable, str(SCRIPT), str(db), call.token, str(log)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        try:
            for p in procs:  # both built and waiting before either decides
                assert p.stdout is not None
                assert p.stdout.readline().strip() == "ready"
            for p in procs:
                assert p.stdin is not None
                p.stdin.write("go\n")
                p.stdin.flush()
            outs = []
            for p in procs:
                out, _ = p.communicate(timeout=300)
                outs.append(json.loads(out.strip().splitlines()[-1]))
            return outs
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()

    outcomes = await asyncio.to_thread(race)
    assert len(log.read_text().split()) == 1  # the approved call ran once, in one process
    # The one that came while the other's resume held the conversation before its claim is
    # refused (SessionBusyError: the run hold, docs/sessions.md "One run per stored
    # conversation, whoever opens it"), having taken and run nothing; any other answer is an
    # answer from the record.
    assert all(o.get("error") in (None, "SessionBusyError") for o in outcomes), outcomes
    answered = [o for o in outcomes if "error" not in o]
    winner, *others = sorted(answered, key=lambda o: -o["iterations"])
    assert (winner["iterations"], winner["ran"], winner["text"]) == (1, 1, "paid it")
    # The other ran nothing and answers with the record: the outcome, or nothing yet while
    # the winner still runs (whichever the machine's scheduling gives).
    for loser in others:
        assert (loser["iterations"], loser["ran"]) == (0, 0)
        assert loser["text"] in ("paid it", "")


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.slow)])
async def storages(
    request: pytest.FixtureRequest,
) -> AsyncIterator[Callable[[], Any]]:
    if request.param == "memory":
        shared = InMemoryStorage()
        yield lambda: shared
        return
    pytest.importorskip("psycopg_pool")
    from goagent_py.memory.storage import PostgresStorage

    dsn = request.getfixturevalue("pg_dsn")
    table = f"t_{uuid.uuid4().hex[:12]}"
    made: list[Any] = []

    def new() -> Any:
        made.append(PostgresStorage(dsn, table=table, session_id="s"))
        return made[-1]

    try:
        yield new
    finally:
        for storage in made:
            await storage.aclose()


async def test_two_agents_resuming_one_wait_run_the_call_once(
    storages: Callable[[], Any],
) -> None:
    ran: list[int] = []

    def agent(*script: Any) -> Agent:
        return Agent(
            provider=ScriptedProvider(*script),
            tools=[_pay(ran)],
            short_term_memory=ShortTermMemory(storage=storages()),
        )

    (call,) = (await agent(PAY).run("pay 9")).pending
    same = {"c1": Approve(token=call.token)}
    outcomes = await asyncio.gather(
        agent("paid it").resume(same), agent("paid it").resume(same), return_exceptions=True
    )
    assert ran == [9]
    # Refused while the other's resume held the conversation before its claim (the run hold),
    # or answered from the record once it had claimed: never run twice.
    assert all(isinstance(o, SessionBusyError) for o in outcomes if isinstance(o, BaseException))
    results = [o for o in outcomes if not isinstance(o, BaseException)]
    winner, *others = sorted(results, key=lambda r: -r.iterations)
    assert (winner.iterations, winner.tool_calls, winner.text) == (1, 1, "paid it")
    assert winner.stop_reason is StopReason.END_TURN
    # The other ran nothing and answers with the record: the outcome, or nothing yet while
    # the winner still runs (whichever the event loop's order gives).
    for loser in others:
        assert (loser.iterations, loser.tool_calls) == (0, 0)
        assert (loser.text, loser.stop_reason) in (("paid it", StopReason.END_TURN), ("", None))


def _older(message: Message) -> Message:
    """``message`` waiting as a version before wait tokens recorded it (no token)."""
    pending = {k: v for k, v in message.metadata[PENDING_KEY].items() if k != "token"}
    return replace(message, metadata={**message.metadata, PENDING_KEY: pending})


async def test_a_wait_without_a_token_is_claimed_once(tmp_path: Path) -> None:
    """A conversation an older version left waiting (its record has no token): a second
    resume, whose read came before the first one's claim, must not claim another message of
    the conversation as if it waited (every message without a wait has "no token" too)."""
    db = tmp_path / "c.db"
    ran: list[int] = []

    def agent(*script: Any) -> Agent:
        return Agent(
            provider=ScriptedProvider(*script),
            tools=[_pay(ran)],
            short_term_memory=ShortTermMemory(storage=SQLiteStorage(db, session_id="s")),
        )

    await agent(PAY).run("pay 9")
    async with SQLiteStorage(db, session_id="s") as storage:
        assert await storage.update_where(lambda m: PENDING_KEY in m.metadata, _older)
    late = agent("paid again")
    memory = late.options.short_term_memory
    assert memory is not None
    read_before = await memory.messages()  # the second resume's read, before the first claim
    first = await agent("paid it").resume({"c1": Approve()})
    assert first.text == "paid it"
    with pytest.raises(ApprovalConflictError):
        await late.start_resume({"c1": Approve()}, streaming=False, history=read_before)
    assert ran == [9]
    # The storage's claim finds no wait once it is over: nothing else is stamped decided.
    async with SQLiteStorage(db, session_id="s") as storage:
        before = await storage.load()
        found = await storage.update_where(
            waits_under(""), lambda m: settled(m, "", {"c1": Approve()})
        )
        assert found is None
        assert await storage.load() == before
