"""Deferred tool calls (issue 35): a call that waits for a person's decision, stored in the
conversation itself, resumed in this process or another one."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from goagent_py import (
    Agent,
    ApprovalConflictError,
    ApprovalError,
    ApprovalExpiredError,
    ApprovalPendingError,
    Approve,
    CompletionResponse,
    ConfigurationError,
    Deny,
    ExternalTool,
    Message,
    NotPendingError,
    ProviderError,
    Role,
    RunContext,
    Session,
    StopReason,
    ToolCall,
    ToolExecutionEnd,
    ToolOutput,
    ToolsPending,
    Usage,
    tool,
    validate_transcript,
)
from goagent_py._metadata_keys import DECISIONS_KEY, PENDING_KEY
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.testing import ScriptedProvider, tool_call_response

ROOT = Path(__file__).resolve().parents[1]


def make_delete(ran: list[dict[str, Any]]) -> Any:
    @tool(requires_approval=True)
    def delete_files(folder: str, count: int) -> str:
        """Delete files.

        Args:
            folder: where.
            count: how many.
        """
        ran.append({"folder": folder, "count": count})
        return f"deleted {count} in {folder}"

    return delete_files


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key.
    """
    return f"value of {key}"


def sqlite_memory(path: Path) -> ShortTermMemory:
    return ShortTermMemory(storage=SQLiteStorage(path, session_id="s"))


def tool_messages(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m.role is Role.TOOL]


async def test_a_call_that_needs_approval_stops_the_run_and_is_stored_waiting(
    tmp_path: Path,
) -> None:
    ran: list[dict[str, Any]] = []
    provider = ScriptedProvider(
        tool_call_response(ToolCall("c1", "delete_files", {"folder": "tmp", "count": "3"}))
    )
    memory = sqlite_memory(tmp_path / "chat.db")
    agent = Agent(provider=provider, tools=[make_delete(ran)], short_term_memory=memory)

    events = [e async for e in agent.stream("clean up")]
    result = events[-1].result  # type: ignore[union-attr]

    assert ran == []  # nothing ran
    assert result.stop_reason is StopReason.DEFERRED
    assert [(p.id, p.name, p.kind) for p in result.pending] == [("c1", "delete_files", "approval")]
    assert result.pending[0].arguments == {"folder": "tmp", "count": 3}  # validated
    assert [type(e) for e in events if isinstance(e, ToolsPending)] == [ToolsPending]
    stored = await memory.transcript()
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT]
    waiting = stored[-1].metadata[PENDING_KEY]
    assert waiting["calls"][0]["arguments"] == {"folder": "tmp", "count": 3}
    # The record is valid while it waits; a request built from it would not be.
    assert validate_transcript(stored) == []
    assert [v.rule for v in validate_transcript(stored, allow_pending=False)] == ["unanswered_call"]


async def test_approve_runs_the_call_and_the_model_reads_its_result(tmp_path: Path) -> None:
    ran: list[dict[str, Any]] = []
    provider = ScriptedProvider(
        tool_call_response(ToolCall("c1", "delete_files", {"folder": "tmp", "count": 3})),
        "Done.",
    )
    memory = sqlite_memory(tmp_path / "chat.db")
    agent = Agent(provider=provider, tools=[make_delete(ran)], short_term_memory=memory)
    (asked,) = (await agent.run("clean up")).pending

    result = await agent.resume({"c1": Approve()})

    assert ran == [{"folder": "tmp", "count": 3}]
    assert result.text == "Done."
    assert result.stop_reason is StopReason.END_TURN
    assert result.pending == []
    sent = provider.requests[-1].messages
    assert [m.role for m in sent] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert sent[-1].tool_call_id == "c1"
    assert "deleted 3 in tmp" in sent[-1].text
    stored = await memory.transcript()
    assert validate_transcript(stored, allow_pending=False) == []
    assert PENDING_KEY not in stored[1].metadata
    # The record names the wait the decision was taken in (a retry is told by it, approve14).
    assert stored[1].metadata[DECISIONS_KEY] == {
        "c1": {"decision": "approve", "token": asked.token}
    }


async def test_approve_with_edited_arguments_runs_the_edit() -> None:
    ran: list[dict[str, Any]] = []
    provider = ScriptedProvider(
        tool_call_response(ToolCall("c1", "delete_files", {"folder": "/", "count": 99})),
        "Done.",
    )
    agent = Agent(provider=provider, tools=[make_delete(ran)])
    first = await agent.run("clean up")

    result = await agent.resume(
        {"c1": Approve(arguments={"folder": "tmp", "count": "1"})}, history=first.messages
    )

    assert ran == [{"folder": "tmp", "count": 1}]
    assert "deleted 1 in tmp" in tool_messages(result.messages)[0].text


async def test_deny_sends_the_message_to_the_model_and_runs_nothing() -> None:
    ran: list[dict[str, Any]] = []
    provider = ScriptedProvider(
        tool_call_response(ToolCall("c1", "delete_files", {"folder": "tmp", "count": 3})),
        "Understood, I will not delete anything.",
    )
    agent = Agent(provider=provider, tools=[make_delete(ran)])
    first = await agent.run("clean up")

    result = await agent.resume({"c1": Deny("not today")}, history=first.messages)

    assert ran == []
    answer = provider.requests[-1].messages[-1]
    assert answer.role is Role.TOOL
    assert answer.is_error
    assert "not today" in answer.text
    assert result.text == "Understood, I will not delete anything."


async def test_deny_and_stop_ends_the_run_without_another_model_call() -> None:
    ran: list[dict[str, Any]] = []
    provider = ScriptedProvider(
        tool_call_response(
            ToolCall("c1", "delete_files", {"folder": "tmp", "count": 3}), text="Deleting."
        )
    )
    agent = Agent(provider=provider, tools=[make_delete(ran)])
    first = await agent.run("clean up")

    result = await agent.resume({"c1": Deny("stop it", stop=True)}, history=first.messages)

    assert ran == []
    assert len(provider.requests) == 1
    assert result.text == "Deleting."
    history = first.messages + result.messages
    assert validate_transcript(history, allow_pending=False) == []


async def test_calls_needing_no_decision_run_with_the_decided_ones_in_call_order() -> None:
    ran: list[dict[str, Any]] = []
    provider = ScriptedProvider(
        tool_call_response(
            ToolCall("a", "lookup", {"key": "k"}),
            ToolCall("b", "delete_files", {"folder": "tmp", "count": 1}),
        ),
        "ok",
    )
    agent = Agent(provider=provider, tools=[lookup, make_delete(ran)])
    first = await agent.run("go")
    assert [p.id for p in first.pending] == ["b"]
    assert tool_messages(first.messages) == []  # nothing of the batch ran before the decision

    result = await agent.resume({"b": Approve()}, history=first.messages)

    assert [m.tool_call_id for m in tool_messages(result.messages)] == ["a", "b"]
    assert "value of k" in tool_messages(result.messages)[0].text


async def test_an_external_tool_waits_for_the_clients_output() -> None:
    locate = ExternalTool(
        "get_location",
        "The user's location, from their phone.",
        {"type": "object", "properties": {"precise": {"type": "boolean"}}},
    )
    provider = ScriptedProvider(
        tool_call_response(ToolCall("x", "get_location", {"precise": True})), "You are in Oslo."
    )
    agent = Agent(provider=provider, tools=[locate])
    first = await agent.run("where am I?")
    assert [(p.id, p.kind, p.arguments) for p in first.pending] == [
        ("x", "external", {"precise": True})
    ]

    with pytest.raises(ConfigurationError, match="external tool"):
        await agent.resume({"x": Approve()}, history=first.messages)
    result = await agent.resume({"x": ToolOutput("59.9N 10.7E")}, history=first.messages)

    assert provider.requests[-1].messages[-1].text == "59.9N 10.7E"
    assert result.text == "You are in Oslo."


async def test_a_policy_over_tools_sees_the_run() -> None:
    seen: list[RunContext] = []

    def policy(call: ToolCall, run: RunContext) -> bool:
        seen.append(run)
        return bool(call.arguments["key"] == "secret")

    provider = ScriptedProvider(
        tool_call_response(ToolCall("a", "lookup", {"key": "public"})),
        tool_call_response(ToolCall("b", "lookup", {"key": "secret"})),
    )
    agent = Agent(provider=provider, tools=[lookup], requires_approval=policy)
    result = await agent.run("look", deps={"user": "ann"})

    assert [p.id for p in result.pending] == ["b"]
    assert seen[0].deps == {"user": "ann"}
    assert [t.name for t in seen[0].tools] == ["lookup"]
    assert seen[0].message.tool_calls[0].id == "a"
    assert [m.role for m in seen[1].messages][:3] == [Role.USER, Role.ASSISTANT, Role.TOOL]


async def test_before_tool_call_gets_the_run_context() -> None:
    seen: list[RunContext] = []

    def gate(call: ToolCall, run: RunContext) -> str | None:
        seen.append(run)
        return None if run.deps == "admin" else "admins only"

    provider = ScriptedProvider(tool_call_response(ToolCall("a", "lookup", {"key": "k"})), "ok")
    agent = Agent(provider=provider, tools=[lookup], before_tool_call=gate)
    result = await agent.run("look", deps="guest")

    assert "admins only" in tool_messages(result.messages)[0].text
    (run,) = seen
    assert run.deps == "guest"
    assert [t.name for t in run.tools] == ["lookup"]
    assert [m.role for m in run.messages] == [Role.USER, Role.ASSISTANT]
    assert run.message is run.messages[-1]


# -- bad input ---------------------------------------------------------------------------------


async def deferred(tmp_path: Path, ran: list[dict[str, Any]], *more: Any, **settings: Any) -> Any:
    provider = ScriptedProvider(
        tool_call_response(ToolCall("c1", "delete_files", {"folder": "tmp", "count": 3})), *more
    )
    agent = Agent(
        provider=provider,
        tools=[make_delete(ran)],
        short_term_memory=sqlite_memory(tmp_path / "chat.db"),
        **settings,
    )
    await agent.run("clean up")
    return agent, provider


async def test_a_decision_for_a_call_that_does_not_wait_is_refused(tmp_path: Path) -> None:
    ran: list[dict[str, Any]] = []
    agent, _ = await deferred(tmp_path, ran)
    with pytest.raises(NotPendingError, match=r"'nope'.*\['c1'\]"):
        await agent.resume({"c1": Approve(), "nope": Approve()})
    with pytest.raises(ConfigurationError, match=r"no decision for \['c1'\]"):
        await agent.resume({})
    assert ran == []
    assert PENDING_KEY in (await agent.options.short_term_memory.messages())[-1].metadata  # type: ignore[union-attr]


async def test_resuming_a_finished_run_is_refused_and_runs_nothing_twice(tmp_path: Path) -> None:
    ran: list[dict[str, Any]] = []
    agent, _ = await deferred(tmp_path, ran, "Done.")
    await agent.resume({"c1": Approve()})
    with pytest.raises(NotPendingError, match="nothing in this conversation waits"):
        await agent.resume({"c1": Approve()})
    assert len(ran) == 1


async def test_a_decision_after_the_deadline_is_refused_but_a_denial_is_taken(
    tmp_path: Path,
) -> None:
    ran: list[dict[str, Any]] = []
    agent, _ = await deferred(tmp_path, ran, "ok", approval_timeout=0)
    with pytest.raises(ApprovalExpiredError, match="only Deny"):
        await agent.resume({"c1": Approve()})
    result = await agent.resume({"c1": Deny("too late")})
    assert ran == []
    assert result.text == "ok"


async def test_a_run_takes_its_deadline_clock_and_wait_token_from_its_owner(
    tmp_path: Path,
) -> None:
    """A durable workflow gives the run a replay-safe clock and token maker (Run.clock,
    Run.new_token) and checks decisions against its own time (start_resume(now=...))."""
    ran: list[dict[str, Any]] = []
    provider = ScriptedProvider(
        tool_call_response(ToolCall("c1", "delete_files", {"folder": "x", "count": 1})), "ok"
    )
    agent = Agent(
        provider=provider,
        tools=[make_delete(ran)],
        short_term_memory=sqlite_memory(tmp_path / "c.db"),
        approval_timeout=10,
    )
    run = await agent.start_run("clean up", streaming=False)
    run.clock = lambda: 1000.0
    run.new_token = lambda: "token-1"
    async for _ in run.events():
        pass
    assert run.result is not None
    assert run.result.pending[0].deadline == 1010.0
    stored = await agent.options.short_term_memory.messages()  # type: ignore[union-attr]
    assert stored[-1].metadata[PENDING_KEY]["token"] == "token-1"
    with pytest.raises(ApprovalExpiredError):  # checked against the owner's time
        await agent.start_resume({"c1": Approve()}, streaming=False, now=1010.0)
    resumed = await agent.start_resume({"c1": Approve()}, streaming=False, now=1009.0)
    async for _ in resumed.events():
        pass
    assert ran == [{"folder": "x", "count": 1}]


async def test_a_new_prompt_while_calls_wait_is_refused_before_any_model_call(
    tmp_path: Path,
) -> None:
    ran: list[dict[str, Any]] = []
    agent, provider = await deferred(tmp_path, ran, "never sent")
    with pytest.raises(ApprovalPendingError, match="resume it"):
        await agent.run("something else")
    assert len(provider.requests) == 1
    stored = await agent.options.short_term_memory.messages()  # type: ignore[union-attr]
    assert len(stored) == 2  # the refused prompt left nothing behind


class _UnheldStorage:
    """A storage whose run hold does not reach the other decider (one of one's own without
    ``hold_run``, each decider with its own object, as two processes would be): both deciders
    run at once, and the claim's compare-and-set on the record decides. With a storage that
    holds (SQLite, PostgreSQL, in memory) the second decider is refused with SessionBusyError
    before it reads (tests/test_hold17_bare_runs.py)."""

    def __init__(self, inner: SQLiteStorage) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "hold_run":
            raise AttributeError(name)
        return getattr(self._inner, name)


class _TogetherMemory(ShortTermMemory):
    """Two deciders that both read the waiting record before either claims it."""

    def __init__(self, storage: SQLiteStorage, barrier: asyncio.Barrier) -> None:
        super().__init__(storage=_UnheldStorage(storage))  # type: ignore[arg-type]
        self.barrier = barrier

    async def messages(self) -> list[Message]:
        found = await super().messages()
        await self.barrier.wait()
        return found


async def test_two_deciders_at_once_first_wins_second_gets_a_conflict(tmp_path: Path) -> None:
    ran: list[dict[str, Any]] = []
    await deferred(tmp_path, ran)
    barrier = asyncio.Barrier(2)
    agents = [
        Agent(
            provider=ScriptedProvider("Done."),
            tools=[make_delete(ran)],
            short_term_memory=_TogetherMemory(
                SQLiteStorage(tmp_path / "chat.db", session_id="s"), barrier
            ),
        )
        for _ in range(2)
    ]

    outcomes = await asyncio.gather(
        agents[0].resume({"c1": Approve()}),
        agents[1].resume({"c1": Deny("no")}),
        return_exceptions=True,
    )

    conflicts = [o for o in outcomes if isinstance(o, ApprovalConflictError)]
    finished = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(conflicts) == 1
    assert len(finished) == 1
    assert len(ran) == (1 if outcomes[0] is finished[0] else 0)
    stored = await sqlite_memory(tmp_path / "chat.db").transcript()
    assert validate_transcript(stored, allow_pending=False) == []
    assert len(tool_messages(stored)) == 1


async def test_a_session_waits_and_resumes_and_refuses_a_prompt_meanwhile(
    tmp_path: Path,
) -> None:
    ran: list[dict[str, Any]] = []
    provider = ScriptedProvider(
        tool_call_response(ToolCall("c1", "delete_files", {"folder": "tmp", "count": 3})),
        "Done.",
    )
    memory = sqlite_memory(tmp_path / "chat.db")
    session = Session(Agent(provider=provider, tools=[make_delete(ran)], short_term_memory=memory))
    first = await session.prompt("clean up")
    assert first.stop_reason is StopReason.DEFERRED

    assert [p.id for p in session.pending] == ["c1"]
    again = Session(session.agent)  # a fresh load keeps the calls waiting (no repair)
    await again.load()
    assert PENDING_KEY in again.transcript[-1].metadata
    assert [(p.id, p.arguments) for p in again.pending] == [("c1", {"folder": "tmp", "count": 3})]
    with pytest.raises(ApprovalPendingError):
        await again.prompt("other")

    result = await again.resume({"c1": Approve()})
    assert result.text == "Done."
    assert len(ran) == 1
    assert [m.role for m in again.transcript] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]


async def test_a_session_without_memory_resumes_from_its_own_list() -> None:
    ran: list[dict[str, Any]] = []
    provider = ScriptedProvider(
        tool_call_response(ToolCall("c1", "delete_files", {"folder": "tmp", "count": 3})),
        "Done.",
    )
    session = Session(Agent(provider=provider, tools=[make_delete(ran)]))
    await session.prompt("clean up")
    await session.resume({"c1": Approve()})
    with pytest.raises(NotPendingError):
        await session.resume({"c1": Approve()})
    assert len(ran) == 1
    assert validate_transcript(session.transcript, allow_pending=False) == []


def test_approvals_need_the_tool_trace_in_memory() -> None:
    with pytest.raises(ConfigurationError, match="short_term_trace_tools"):
        Agent(
            provider=ScriptedProvider(),
            tools=[make_delete([])],
            short_term_memory=ShortTermMemory(),
            short_term_trace_tools=False,
        )


# -- another process ---------------------------------------------------------------------------

_RESUME = textwrap.dedent(
    """
    import asyncio, json, sys
    from goagent_py import Agent, Approve, ApprovalError, SessionBusyError, tool
    from goagent_py.memory import ShortTermMemory
    from goagent_py.memory.storage import SQLiteStorage
    from goagent_py.testing import ScriptedProvider

    path, log = sys.argv[1], sys.argv[2]

    @tool(requires_approval=True)
    def delete_files(folder: str, count: int) -> str:
        '''Delete files.

        Args:
            folder: where.
            count: how many.
        '''
        with open(log, "a") as f:
            f.write(json.dumps({"folder": folder, "count": count}) + "\\n")
        return "deleted"

    async def main() -> None:
        memory = ShortTermMemory(storage=SQLiteStorage(path, session_id="s"))
        agent = Agent(provider=ScriptedProvider("Done."), tools=[delete_files],
                      short_term_memory=memory)
        try:
            result = await agent.resume({"c1": Approve()})
        except (ApprovalError, SessionBusyError) as exc:
            print(type(exc).__name__)
            return
        print(result.text)

    asyncio.run(main())
    """
)


def _resume_in_another_process(db: Path, log: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _RESUME, str(db), str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.slow
async def test_a_deferred_call_resumes_in_another_process_from_sqlite(tmp_path: Path) -> None:
    ran: list[dict[str, Any]] = []
    await deferred(tmp_path, ran)
    log = tmp_path / "ran.log"

    child = await asyncio.to_thread(_resume_in_another_process, tmp_path / "chat.db", log)
    out, err = await asyncio.to_thread(child.communicate)

    assert child.returncode == 0, err
    assert out.strip() == "Done."
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        {"folder": "tmp", "count": 3}
    ]
    stored = await sqlite_memory(tmp_path / "chat.db").transcript()
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert validate_transcript(stored, allow_pending=False) == []


@pytest.mark.slow
async def test_two_processes_deciding_at_once_run_the_call_once(tmp_path: Path) -> None:
    ran: list[dict[str, Any]] = []
    await deferred(tmp_path, ran)
    log = tmp_path / "ran.log"

    children = [
        await asyncio.to_thread(_resume_in_another_process, tmp_path / "chat.db", log)
        for _ in range(2)
    ]
    outputs = [await asyncio.to_thread(c.communicate) for c in children]

    assert [c.returncode for c in children] == [0, 0], outputs
    said = [out.strip() for out, _ in outputs]
    # The loser came while the winner's resume held the conversation (refused before it read
    # anything), or after it (nothing waits, or a conflict with the decision taken).
    assert said.count("Done.") == 1
    assert {*said} - {"Done."} <= {"SessionBusyError", "ApprovalConflictError", "NotPendingError"}
    assert len(log.read_text().splitlines()) == 1
    assert issubclass(ApprovalConflictError, ApprovalError)


async def test_deny_and_stop_stores_the_results_once_and_not_the_message_again(
    tmp_path: Path,
) -> None:
    ran: list[dict[str, Any]] = []
    agent, provider = await deferred(tmp_path, ran)
    result = await agent.resume({"c1": Deny("no", stop=True)})
    stored = await agent.options.short_term_memory.transcript()  # type: ignore[union-attr]
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert [m.role for m in result.messages] == [Role.TOOL]
    assert len(provider.requests) == 1


async def test_update_where_replaces_the_newest_match_past_a_page_and_none_when_absent(
    tmp_path: Path,
) -> None:
    from dataclasses import replace

    from goagent_py import user_message

    async with SQLiteStorage(tmp_path / "u.db", session_id="s") as storage:
        await storage.append([user_message(f"m{i}") for i in range(70)])

        def is_m3(m: Message) -> bool:
            return m.text == "m3"

        new = await storage.update_where(is_m3, lambda m: replace(m, metadata={"seen": True}))
        missing = await storage.update_where(lambda m: m.text == "nope", lambda m: m)
        stored = await storage.load()

    assert new is not None
    assert new.metadata == {"seen": True}
    assert missing is None
    assert [m.metadata for m in stored if m.text == "m3"] == [{"seen": True}]
    assert len(stored) == 70
    assert [m.text for m in stored] == [f"m{i}" for i in range(70)]


@pytest.mark.needs_extra("postgres")
async def test_two_deciders_on_postgres_first_wins(pg_dsn: str) -> None:
    import uuid

    from goagent_py.memory.storage import PostgresStorage

    table = f"t_{uuid.uuid4().hex[:12]}"
    ran: list[dict[str, Any]] = []
    async with (
        PostgresStorage(pg_dsn, table=table, session_id="s") as first,
        PostgresStorage(pg_dsn, table=table, session_id="s") as second,
    ):
        asking = Agent(
            provider=ScriptedProvider(
                tool_call_response(ToolCall("c1", "delete_files", {"folder": "t", "count": 1}))
            ),
            tools=[make_delete(ran)],
            short_term_memory=ShortTermMemory(storage=first),
        )
        await asking.run("clean up")
        barrier = asyncio.Barrier(2)

        class Together(ShortTermMemory):
            async def messages(self) -> list[Message]:
                found = await super().messages()
                await barrier.wait()
                return found

        deciders = [
            Agent(
                provider=ScriptedProvider("Done."),
                tools=[make_delete(ran)],
                # Without the run hold, so both read before either claims (see _UnheldStorage).
                short_term_memory=Together(storage=_UnheldStorage(storage)),  # type: ignore[arg-type]
            )
            for storage in (first, second)
        ]
        outcomes = await asyncio.gather(
            deciders[0].resume({"c1": Approve()}),
            deciders[1].resume({"c1": Approve()}),
            return_exceptions=True,
        )
        stored = await first.load()

    assert sorted(type(o).__name__ for o in outcomes) == ["ApprovalConflictError", "RunResult"]
    assert len(ran) == 1
    assert validate_transcript(stored, allow_pending=False) == []


# -- a resumed run that fails or is cancelled after its decided batch started (review6a) --------


async def test_a_resume_whose_next_model_call_fails_keeps_the_approved_calls_result(
    tmp_path: Path,
) -> None:
    # The claim stored the decision on the waiting message; the approved call ran (its side
    # effect happened). A provider error on the next model call must not drop that result: the
    # stored message would be left with an unanswered call that no resume can reach.
    ran: list[dict[str, Any]] = []
    await deferred(tmp_path, ran)
    memory = sqlite_memory(tmp_path / "chat.db")
    agent = Agent(
        provider=ScriptedProvider(ProviderError("overloaded")),
        tools=[make_delete(ran)],
        short_term_memory=memory,
    )

    with pytest.raises(ProviderError):
        await agent.resume({"c1": Approve()})

    assert ran == [{"folder": "tmp", "count": 3}]
    stored = await memory.transcript()
    assert validate_transcript(stored, allow_pending=False) == []
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert stored[-1].tool_call_id == "c1"
    assert "deleted 3 in tmp" in stored[-1].text
    assert not stored[-1].is_error
    # The next run's model reads that the call ran.
    provider = ScriptedProvider("Noted.")
    again = Agent(provider=provider, tools=[make_delete(ran)], short_term_memory=memory)
    await again.run("what happened?")
    assert "deleted 3 in tmp" in provider.requests[0].messages[2].text
    assert ran == [{"folder": "tmp", "count": 3}]


async def test_a_resume_cancelled_while_the_approved_call_runs_stores_the_call_closed(
    tmp_path: Path,
) -> None:
    started = asyncio.Event()

    @tool(requires_approval=True)
    async def deploy(target: str) -> str:
        """Deploy.

        Args:
            target: where.
        """
        started.set()
        await asyncio.sleep(60)
        return "deployed"

    memory = sqlite_memory(tmp_path / "chat.db")
    provider = ScriptedProvider(tool_call_response(ToolCall("c1", "deploy", {"target": "prod"})))
    agent = Agent(provider=provider, tools=[deploy], short_term_memory=memory)
    await agent.run("ship it")
    task = asyncio.create_task(agent.resume({"c1": Approve()}))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    stored = await memory.transcript()
    assert validate_transcript(stored, allow_pending=False) == []
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert stored[-1].tool_call_id == "c1"
    assert stored[-1].is_error


async def test_a_streamed_resume_closed_before_its_batch_ran_stores_every_call_closed(
    tmp_path: Path,
) -> None:
    ran: list[dict[str, Any]] = []
    both = Message(
        Role.ASSISTANT,
        [],
        tool_calls=[
            ToolCall("c1", "delete_files", {"folder": "a", "count": 1}),
            ToolCall("c2", "delete_files", {"folder": "b", "count": 2}),
        ],
    )
    memory = sqlite_memory(tmp_path / "chat.db")
    first = Agent(
        provider=ScriptedProvider(CompletionResponse(both, StopReason.TOOL_USE, Usage())),
        tools=[make_delete(ran)],
        short_term_memory=memory,
    )
    await first.run("clean up")
    agent = Agent(
        provider=ScriptedProvider("Done."), tools=[make_delete(ran)], short_term_memory=memory
    )

    events = agent.stream_resume({"c1": Deny("no"), "c2": Approve()})
    async for event in events:
        if isinstance(event, ToolExecutionEnd):  # the denial's result: c2 has not run yet
            break
    await events.aclose()  # type: ignore[attr-defined]

    assert ran == []
    stored = await memory.transcript()
    assert validate_transcript(stored, allow_pending=False) == []
    assert [(m.role, m.tool_call_id) for m in stored[2:]] == [(Role.TOOL, "c1"), (Role.TOOL, "c2")]


# -- a crash between a decision and its results (review6a) --------------------------------------


async def test_a_plain_run_after_a_crash_between_a_decision_and_its_result_closes_the_call(
    tmp_path: Path,
) -> None:
    # The claim (the decision, stored) and the batch's results are two writes: a process that
    # dies between them leaves the decided call open and no longer waiting. A plain run on that
    # conversation sent it as is (every vendor refuses a call without its result) and stored
    # its turn after it, for good.
    ran: list[dict[str, Any]] = []
    agent, _ = await deferred(tmp_path, ran)
    await agent.start_resume({"c1": Approve()}, streaming=False)  # claimed; then the "crash"

    provider = ScriptedProvider("Sorry, I could not tell whether that ran.")
    again = Agent(
        provider=provider,
        tools=[make_delete(ran)],
        short_term_memory=sqlite_memory(tmp_path / "chat.db"),
    )
    await again.run("did it work?")

    sent = provider.requests[0].messages
    assert validate_transcript(sent) == []
    assert [(m.role, m.tool_call_id) for m in sent[1:3]] == [
        (Role.ASSISTANT, ""),
        (Role.TOOL, "c1"),
    ]
    assert sent[2].is_error
    stored = await sqlite_memory(tmp_path / "chat.db").transcript()
    assert validate_transcript(stored, allow_pending=False) == []
    assert [m.role for m in stored] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.USER,
        Role.ASSISTANT,
    ]


_CRASH_IN_TOOL = _RESUME.replace(
    '    return "deleted"\n',
    '    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n    return "deleted"\n',
)
assert _CRASH_IN_TOOL != _RESUME


@pytest.mark.slow
async def test_a_process_killed_in_an_approved_call_leaves_a_record_the_next_run_closes(
    tmp_path: Path,
) -> None:
    ran: list[dict[str, Any]] = []
    await deferred(tmp_path, ran)
    log = tmp_path / "ran.log"
    child = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", _CRASH_IN_TOOL, str(tmp_path / "chat.db"), str(log)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert child.returncode == -9, child.stderr
    assert len(log.read_text().splitlines()) == 1  # the call ran; its result was never stored

    provider = ScriptedProvider("Noted.")
    again = Agent(
        provider=provider,
        tools=[make_delete(ran)],
        short_term_memory=sqlite_memory(tmp_path / "chat.db"),
    )
    await again.run("did it work?")

    assert validate_transcript(provider.requests[0].messages) == []
    stored = await sqlite_memory(tmp_path / "chat.db").transcript()
    assert validate_transcript(stored, allow_pending=False) == []
    assert ran == []


async def test_a_session_loaded_before_another_process_crashed_after_a_decision_stays_one_record(
    tmp_path: Path,
) -> None:
    ran: list[dict[str, Any]] = []
    agent, _ = await deferred(tmp_path, ran)
    provider = ScriptedProvider("Noted.")
    session = Session(
        Agent(
            provider=provider,
            tools=[make_delete(ran)],
            short_term_memory=sqlite_memory(tmp_path / "chat.db"),
        )
    )
    await session.load()  # the page open in one process...
    await agent.start_resume({"c1": Approve()}, streaming=False)  # ...another decides, dies

    with pytest.raises(NotPendingError):  # decided already
        await session.resume({"c1": Approve()})
    await session.prompt("did it work?")

    stored = await sqlite_memory(tmp_path / "chat.db").transcript()
    assert validate_transcript(stored, allow_pending=False) == []
    assert validate_transcript(provider.requests[0].messages) == []
    assert session.transcript == stored


async def test_abort_now_while_an_approval_policy_decides_ends_the_run_at_once(
    tmp_path: Path,
) -> None:
    # A policy that asks a remote service which never answers held abort("now") for good.
    started = asyncio.Event()

    async def policy(call: ToolCall, run: RunContext) -> bool:
        started.set()
        await asyncio.Event().wait()
        return True

    ran: list[dict[str, Any]] = []
    memory = sqlite_memory(tmp_path / "chat.db")
    provider = ScriptedProvider(tool_call_response(ToolCall("c1", "lookup", {"key": "k"})))
    session = Session(
        Agent(provider=provider, tools=[lookup], short_term_memory=memory, requires_approval=policy)
    )
    task = asyncio.create_task(session.prompt("look it up"))
    await started.wait()
    session.abort("now")
    result = await asyncio.wait_for(task, 60)  # a hang guard, not a timing

    assert result.stop_reason == "aborted"
    assert ran == []
    stored = await memory.transcript()
    assert validate_transcript(stored, allow_pending=False) == []
    assert [(m.role, m.tool_call_id) for m in stored[1:]] == [
        (Role.ASSISTANT, ""),
        (Role.TOOL, "c1"),
    ]
    assert session.transcript == stored
