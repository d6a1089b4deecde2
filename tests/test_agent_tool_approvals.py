"""Approvals inside an agent used as a tool (issue 35): a sub-agent's call that waits for a
decision stops the parent run too, and resuming the parent resumes the sub-agent."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from test_approvals import make_delete, sqlite_memory  # tests/test_approvals.py

from goagent_py import (
    Agent,
    Approve,
    Deny,
    NotPendingError,
    Role,
    Session,
    StopReason,
    ToolCall,
    ToolsPending,
    tool,
    validate_transcript,
)
from goagent_py._metadata_keys import DECISIONS_KEY, PENDING_KEY
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.messages import messages_from_json
from goagent_py.testing import ScriptedProvider, tool_call_response

ROOT = Path(__file__).resolve().parents[1]


def make_lookup(seen: list[str]) -> Any:
    @tool
    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: the key.
        """
        seen.append(key)
        return f"value of {key}"

    return lookup


def child_agent(ran: list[dict[str, Any]], *after: Any) -> tuple[Agent, ScriptedProvider]:
    provider = ScriptedProvider(
        tool_call_response(ToolCall("k1", "delete_files", {"folder": "tmp", "count": "3"})),
        *after,
    )
    return Agent(provider=provider, tools=[make_delete(ran)], name="cleaner"), provider


def parent_agent(
    child: Agent, *script: Any, memory: ShortTermMemory | None = None, extra: Any = ()
) -> tuple[Agent, ScriptedProvider]:
    provider = ScriptedProvider(*script)
    helper = child.as_tool(name="cleaner", description="Cleans folders.")
    agent = Agent(provider=provider, tools=[*extra, helper], short_term_memory=memory)
    return agent, provider


def ask_cleaner(text: str = "clean tmp") -> Any:
    return tool_call_response(ToolCall("p1", "cleaner", {"prompt": text}))


async def test_a_sub_agents_waiting_call_stops_the_parent_with_the_call_listed(
    tmp_path: Path,
) -> None:
    ran: list[dict[str, Any]] = []
    child, _ = child_agent(ran)
    memory = sqlite_memory(tmp_path / "chat.db")
    parent, _ = parent_agent(child, ask_cleaner(), memory=memory)

    events = [e async for e in parent.stream("tidy up")]
    result = events[-1].result  # type: ignore[union-attr]

    assert ran == []
    assert result.stop_reason is StopReason.DEFERRED
    [call] = result.pending
    assert (call.id, call.name, call.arguments, call.kind) == (
        "p1/k1",
        "delete_files",
        {"folder": "tmp", "count": 3},  # validated by the child's tool
        "approval",
    )
    assert call.via == ("p1",)
    pending_events = [e for e in events if isinstance(e, ToolsPending)]
    assert [[p.id for p in e.calls] for e in pending_events] == [["p1/k1"]]
    # The parent's record: the call to the sub-agent waits, with no result (valid while it
    # waits, and no request is ever built from it).
    stored = await memory.transcript()
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT]
    assert stored[-1].tool_calls[0].id == "p1"
    assert validate_transcript(stored) == []
    # The sub-agent's conversation, kept in the parent's record, is valid too.
    kept = stored[-1].metadata[PENDING_KEY]["inner"]["p1"]["messages"]
    child_record = messages_from_json(json.dumps(kept))
    assert [m.role for m in child_record] == [Role.USER, Role.ASSISTANT]
    assert validate_transcript(child_record) == []


async def test_approve_resumes_the_sub_agent_and_its_answer_is_the_parents_tool_result(
    tmp_path: Path,
) -> None:
    ran: list[dict[str, Any]] = []
    seen: list[str] = []
    child, child_provider = child_agent(ran, "Deleted 3 files.")
    memory = sqlite_memory(tmp_path / "chat.db")
    parent, provider = parent_agent(
        child,
        tool_call_response(
            ToolCall("p0", "lookup", {"key": "k"}),
            ToolCall("p1", "cleaner", {"prompt": "clean tmp"}),
        ),
        "All tidy.",
        memory=memory,
        extra=[make_lookup(seen)],
    )
    first = await parent.run("tidy up")
    assert [p.id for p in first.pending] == ["p1/k1"]
    assert seen == ["k"]  # the sibling ran before the sub-agent stopped

    result = await parent.resume({"p1/k1": Approve()})

    assert ran == [{"folder": "tmp", "count": 3}]
    assert seen == ["k"]  # not run twice: its result was kept with the wait
    assert result.text == "All tidy."
    assert result.stop_reason is StopReason.END_TURN
    # The sub-agent's model read its tool's result; the parent's model read the sub-agent's answer.
    child_sent = child_provider.requests[-1].messages
    assert [m.role for m in child_sent] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert child_sent[0].text == "clean tmp"
    assert "deleted 3 in tmp" in child_sent[-1].text
    sent = provider.requests[-1].messages
    assert [(m.role, m.tool_call_id) for m in sent[2:]] == [(Role.TOOL, "p0"), (Role.TOOL, "p1")]
    assert sent[2].text == "value of k"
    assert sent[3].text == "Deleted 3 files."
    stored = await memory.transcript()
    assert validate_transcript(stored, allow_pending=False) == []
    assert PENDING_KEY not in stored[1].metadata


async def test_deny_reaches_the_sub_agents_model_and_runs_nothing() -> None:
    ran: list[dict[str, Any]] = []
    child, child_provider = child_agent(ran, "I was not allowed to delete.")
    parent, provider = parent_agent(child, ask_cleaner(), "Nothing was deleted.")
    first = await parent.run("tidy up")

    result = await parent.resume({"p1/k1": Deny("not today")}, history=first.messages)

    assert ran == []
    denied = child_provider.requests[-1].messages[-1]
    assert denied.role is Role.TOOL
    assert denied.is_error
    assert "not today" in denied.text
    assert provider.requests[-1].messages[-1].text == "I was not allowed to delete."
    assert result.text == "Nothing was deleted."
    history = [*first.messages, *result.messages]
    assert validate_transcript(history, allow_pending=False) == []


async def test_an_edit_runs_the_sub_agents_call_with_the_new_arguments() -> None:
    ran: list[dict[str, Any]] = []
    child, _ = child_agent(ran, "Deleted one.")
    parent, _ = parent_agent(child, ask_cleaner(), "Done.")
    first = await parent.run("tidy up")

    result = await parent.resume(
        {"p1/k1": Approve(arguments={"folder": "tmp", "count": "1"})}, history=first.messages
    )

    assert ran == [{"folder": "tmp", "count": 1}]
    assert result.text == "Done."


async def test_a_resumed_sub_agent_that_asks_again_stops_the_parent_again() -> None:
    ran: list[dict[str, Any]] = []
    child, _ = child_agent(
        ran,
        tool_call_response(ToolCall("k2", "delete_files", {"folder": "var", "count": 1})),
        "Deleted both.",
    )
    parent, _ = parent_agent(child, ask_cleaner(), "Done.")
    first = await parent.run("tidy up")
    second = await parent.resume({"p1/k1": Approve()}, history=first.messages)

    assert second.stop_reason is StopReason.DEFERRED
    assert [p.id for p in second.pending] == ["p1/k2"]
    assert ran == [{"folder": "tmp", "count": 3}]

    history = [*first.messages, *second.messages]
    third = await parent.resume({"p1/k2": Approve()}, history=history)

    assert ran == [{"folder": "tmp", "count": 3}, {"folder": "var", "count": 1}]
    assert third.text == "Done."


async def test_two_levels_of_sub_agents_route_the_decision_down() -> None:
    ran: list[dict[str, Any]] = []
    child, _ = child_agent(ran, "Deleted.")
    middle_provider = ScriptedProvider(ask_cleaner(), "The cleaner deleted them.")
    middle = Agent(
        provider=middle_provider,
        tools=[child.as_tool(name="cleaner", description="Cleans folders.")],
        name="manager",
    )
    top_provider = ScriptedProvider(
        tool_call_response(ToolCall("t1", "manager", {"prompt": "get tmp cleaned"})), "Done."
    )
    top = Agent(
        provider=top_provider,
        tools=[middle.as_tool(name="manager", description="Manages the cleaner.")],
    )

    first = await top.run("tidy up")
    assert [(p.id, p.via) for p in first.pending] == [("t1/p1/k1", ("t1", "p1"))]

    result = await top.resume({"t1/p1/k1": Approve()}, history=first.messages)

    assert ran == [{"folder": "tmp", "count": 3}]
    assert top_provider.requests[-1].messages[-1].text == "The cleaner deleted them."
    assert result.text == "Done."


async def test_a_decision_for_a_sub_agent_call_that_does_not_wait_is_refused(
    tmp_path: Path,
) -> None:
    ran: list[dict[str, Any]] = []
    child, _ = child_agent(ran, "Deleted.")
    memory = sqlite_memory(tmp_path / "chat.db")
    parent, _ = parent_agent(child, ask_cleaner(), "Done.", memory=memory)
    await parent.run("tidy up")

    with pytest.raises(NotPendingError, match=r"'p1/k9'.*\['p1/k1'\]"):
        await parent.resume({"p1/k9": Approve()})
    with pytest.raises(NotPendingError, match=r"'p1'.*\['p1/k1'\]"):
        await parent.resume({"p1": Approve()})
    assert ran == []
    assert PENDING_KEY in (await memory.messages())[-1].metadata  # still waits

    await parent.resume({"p1/k1": Approve()})
    with pytest.raises(NotPendingError, match="nothing in this conversation waits"):
        await parent.resume({"p1/k1": Approve()})
    assert ran == [{"folder": "tmp", "count": 3}]  # not run twice


async def test_a_sub_agent_with_its_own_memory_resumes_from_it(tmp_path: Path) -> None:
    ran: list[dict[str, Any]] = []
    child_memory = ShortTermMemory(storage=SQLiteStorage(tmp_path / "child.db", session_id="c"))
    child_provider = ScriptedProvider(
        tool_call_response(ToolCall("k1", "delete_files", {"folder": "tmp", "count": 3})),
        "Deleted.",
    )
    child = Agent(provider=child_provider, tools=[make_delete(ran)], short_term_memory=child_memory)
    parent, _ = parent_agent(child, ask_cleaner(), "Done.")
    first = await parent.run("tidy up")
    state = first.messages[-1].metadata[PENDING_KEY]["inner"]["p1"]
    assert state == {"messages": None}  # the child's memory keeps its conversation

    result = await parent.resume({"p1/k1": Approve()}, history=first.messages)

    assert ran == [{"folder": "tmp", "count": 3}]
    assert result.text == "Done."
    stored = await child_memory.transcript()
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert validate_transcript(stored, allow_pending=False) == []


# -- another process ---------------------------------------------------------------------------

_RESUME = textwrap.dedent(
    """
    import asyncio, json, sys
    from goagent_py import Agent, Approve, tool
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
        return f"deleted {count} in {folder}"

    async def main() -> None:
        child = Agent(provider=ScriptedProvider("Deleted 3."), tools=[delete_files])
        memory = ShortTermMemory(storage=SQLiteStorage(path, session_id="s"))
        parent = Agent(
            provider=ScriptedProvider("All tidy."),
            tools=[child.as_tool(name="cleaner", description="Cleans folders.")],
            short_term_memory=memory,
        )
        result = await parent.resume({"p1/k1": Approve()})
        print(json.dumps([result.text, [m.text for m in result.messages]]))

    asyncio.run(main())
    """
)


@pytest.mark.slow
async def test_a_sub_agents_waiting_call_resumes_in_another_process_from_sqlite(
    tmp_path: Path,
) -> None:
    ran: list[dict[str, Any]] = []
    child, _ = child_agent(ran)
    db = tmp_path / "chat.db"
    parent, _ = parent_agent(child, ask_cleaner(), memory=sqlite_memory(db))
    first = await parent.run("tidy up")
    assert [p.id for p in first.pending] == ["p1/k1"]
    log = tmp_path / "ran.log"

    child_process = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", _RESUME, str(db), str(log)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )

    assert child_process.returncode == 0, child_process.stderr
    text, messages = json.loads(child_process.stdout)
    assert text == "All tidy."
    assert messages[0] == "Deleted 3."  # the parent's tool result: the sub-agent's answer
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        {"folder": "tmp", "count": 3}
    ]
    stored = await sqlite_memory(db).transcript()
    assert validate_transcript(stored, allow_pending=False) == []
    assert ran == []


@pytest.mark.parametrize("stored", [True, False], ids=["sqlite", "no-memory"])
async def test_a_session_resumes_a_sub_agent_that_asks_twice(tmp_path: Path, stored: bool) -> None:
    ran: list[dict[str, Any]] = []
    child, _ = child_agent(
        ran,
        tool_call_response(ToolCall("k2", "delete_files", {"folder": "var", "count": 1})),
        "Deleted both.",
    )
    memory = sqlite_memory(tmp_path / "chat.db") if stored else None
    parent, provider = parent_agent(child, ask_cleaner(), "Done.", memory=memory)
    session = Session(parent)

    first = await session.prompt("tidy up")
    assert [p.id for p in first.pending] == [p.id for p in session.pending] == ["p1/k1"]
    second = await session.resume({"p1/k1": Approve()})
    assert [p.id for p in second.pending] == [p.id for p in session.pending] == ["p1/k2"]
    if memory is not None:  # the stored message waits again: another process sees it
        other = Session(parent_agent(child, memory=sqlite_memory(tmp_path / "chat.db"))[0])
        await other.load()
        assert [p.id for p in other.pending] == ["p1/k2"]
    third = await session.resume({"p1/k2": Approve()})

    assert ran == [{"folder": "tmp", "count": 3}, {"folder": "var", "count": 1}]
    assert third.text == "Done."
    assert provider.requests[-1].messages[-1].text == "Deleted both."
    assert session.pending == []
    assert validate_transcript(session.transcript, allow_pending=False) == []
    if memory is not None:
        decided = (await memory.transcript())[1].metadata[DECISIONS_KEY]
        assert set(decided) == {"p1/k1", "p1/k2"}  # every decision kept in the record


# -- served: the page's card for a sub-agent's call ---------------------------------------------


async def test_a_served_thread_asks_for_a_sub_agents_call_and_the_decision_resumes_it(
    tmp_path: Path,
) -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("ag_ui")
    import httpx

    from goagent_py.serve import ThreadContext, create_app
    from tests.serve.conftest import check_agui

    ran: list[dict[str, Any]] = []

    def factory(ctx: ThreadContext) -> Agent:
        child, _ = child_agent(ran, "Deleted 3 files.")
        parent, _ = parent_agent(child, ask_cleaner(), "All tidy.", memory=ctx.short_term_memory)
        return parent

    app = create_app(factory, storage_path=str(tmp_path / "serve.db"))
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1234))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        tid = (await client.post("/api/threads", json={})).json()["id"]
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "tidy up"})
        asked = [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:")]
        shown = (await client.get(f"/api/threads/{tid}/messages")).json()["pending"]
        r = await client.post(
            f"/api/threads/{tid}/decisions",
            json={"decisions": {"p1/k1": {"decision": "approve"}}},
        )
        resumed = [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:")]
    await app.aclose()

    check_agui(asked)
    results = [(e["toolCallId"], e["content"]) for e in asked + resumed if "content" in e]
    # The call to the sub-agent: shown waiting, then answered by the resumed run.
    assert results == [("p1", "[waiting for decisions on k1]"), ("p1", "Deleted 3 files.")]
    (interrupt,) = asked[-1]["outcome"]["interrupts"]
    assert interrupt["toolCallId"] == "p1/k1"
    assert interrupt["metadata"]["toolName"] == "delete_files"
    assert [p["id"] for p in shown] == ["p1/k1"]
    assert ran == [{"folder": "tmp", "count": 3}]
    assert resumed[-1]["type"] == "RUN_FINISHED"
    assert resumed[-1]["result"]["text"] == "All tidy."


async def test_always_for_this_thread_covers_a_sub_agents_tool(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("ag_ui")
    import httpx

    from goagent_py.serve import ThreadContext, create_app

    ran: list[dict[str, Any]] = []

    def factory(ctx: ThreadContext) -> Agent:
        child, _ = child_agent(
            ran,
            "Deleted.",
            tool_call_response(ToolCall("k2", "delete_files", {"folder": "var", "count": 1})),
            "Deleted again.",
        )
        helper = child.as_tool(name="cleaner", description="Cleans folders.")
        provider = ScriptedProvider(
            ask_cleaner(),
            "All tidy.",
            tool_call_response(ToolCall("p2", "cleaner", {"prompt": "clean var"})),
            "Tidy again.",
        )
        return Agent(provider=provider, tools=[helper], short_term_memory=ctx.short_term_memory)

    app = create_app(factory, storage_path=str(tmp_path / "serve.db"))
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1234))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        tid = (await client.post("/api/threads", json={})).json()["id"]
        await client.post(f"/api/threads/{tid}/runs", json={"message": "tidy up"})
        await client.post(
            f"/api/threads/{tid}/decisions",
            json={"decisions": {"p1/k1": {"decision": "approve", "always": True}}},
        )
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "and var"})
        second = [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:")]
    await app.aclose()

    assert ran == [{"folder": "tmp", "count": 3}, {"folder": "var", "count": 1}]
    assert second[-1]["type"] == "RUN_FINISHED"
    assert second[-1]["result"]["text"] == "Tidy again."
