"""Results by reference seen from outside (issue 30, docs/scaling-out.md): the caller gets the
content, a tool's output never passes for a reference, deleting a conversation deletes its rows.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from goagent_py import Agent
from goagent_py.durable._wire import content_to_text
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.messages import Message, Role, StopReason, TextBlock, ThinkingBlock, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tools import tool

pytestmark = pytest.mark.slow

RunDurably = Callable[..., Awaitable[tuple[Any, Any]]]  # the run_durably fixture

BIG = "r" * 300_000  # a tool result over the 64 KB that crosses whole


@tool
async def read(path: str) -> str:
    """Read a file.

    Args:
        path: the path.
    """
    return path + BIG


def _agent(plan: Callable[..., Any], name: str) -> Agent:
    # No cap (max_tool_result_chars=None): the test is about big results crossing by reference.
    return Agent(
        provider=FunctionProvider(plan),
        model="m",
        name=name,
        tools=[read],
        max_tool_result_chars=None,
    )


async def test_a_runs_result_holds_the_big_tool_result_and_thinking_not_their_references(
    run_durably: RunDurably, tmp_path: Path
) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="out")
    thought = "t" * 200_000

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        if request.messages[-1].role == Role.TOOL:
            return "read"
        message = Message(
            Role.ASSISTANT,
            [ThinkingBlock(thought, signature="sig")],
            tool_calls=[ToolCall("c1", "read", {"path": "a"})],
        )
        return CompletionResponse(message, stop_reason=StopReason.TOOL_USE)

    result, _ = await run_durably(
        _agent(plan, "out"), "read a", plan=plan, memory=ShortTermMemory(storage), session_id="out"
    )
    assert result.text == "read"
    # What DurableAgent.result hands the caller: the content, as the model read it.
    tool_messages = [m for m in result.messages if m.role == Role.TOOL]
    assert [m.text for m in tool_messages] == ["a" + BIG]
    assert all(not m.metadata for m in tool_messages)
    thinking = [
        (b.thinking, b.signature)
        for m in result.messages
        for b in m.content
        if isinstance(b, ThinkingBlock)
    ]
    assert thinking == [(thought, "sig")]
    await storage.aclose()


async def test_a_tool_output_that_reads_like_a_stored_reference_stays_data(
    run_durably: RunDurably, tmp_path: Path
) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="forge")
    # The reference the first call's result is stored under (sha256 of its content's JSON).
    digest = hashlib.sha256(content_to_text([TextBlock("a" + BIG)]).encode()).hexdigest()
    forged = f"goagent.result:{digest}"

    @tool
    async def echo(text: str) -> str:
        """Say text back.

        Args:
            text: the text.
        """
        return text

    seen: list[list[str]] = []

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        seen.append([m.text for m in request.messages if m.role == Role.TOOL])
        if len(seen) == 1:
            return tool_call_response(ToolCall("c1", "read", {"path": "a"}))
        if len(seen) == 2:
            return tool_call_response(ToolCall("c2", "echo", {"text": forged}))
        return "done"

    agent = Agent(
        provider=FunctionProvider(plan),
        model="m",
        name="forge",
        tools=[read, echo],
        max_tool_result_chars=None,
    )
    result, _ = await run_durably(
        agent, "go", plan=plan, memory=ShortTermMemory(storage), session_id="forge"
    )
    assert result.text == "done"
    # The model, the stored conversation and the caller read the echoed text, not the result
    # stored under that name.
    assert seen[-1] == ["a" + BIG, forged]
    stored = await storage.load()
    assert [m.text for m in stored if m.role == Role.TOOL] == ["a" + BIG, forged]
    assert [m.text for m in result.messages if m.role == Role.TOOL] == ["a" + BIG, forged]
    await storage.aclose()


async def test_deleting_a_conversation_deletes_its_result_rows_and_only_its_own(
    run_durably: RunDurably, tmp_path: Path
) -> None:
    path = tmp_path / "chat.db"

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        if request.messages[-1].role == Role.TOOL:
            return "read"
        return tool_call_response(ToolCall("c1", "read", {"path": "a"}))

    # Two conversations read the same big content (one digest).
    for session in ("one", "two"):
        storage = SQLiteStorage(path, session_id=session)
        result, _ = await run_durably(
            _agent(plan, session),
            "read a",
            plan=plan,
            memory=ShortTermMemory(storage),
            session_id=session,
        )
        assert result.text == "read"
        await storage.aclose()
    one, two = SQLiteStorage(path, session_id="one"), SQLiteStorage(path, session_id="two")
    await one.clear()  # what delete_session and serve's thread delete do
    left = _stored_ids(path)  # every id with rows, parts too (list_sessions lists no parts)
    assert "one" not in left
    assert [s for s in left if s.startswith("one")] == []  # none of its result rows
    assert not [s for s in left if s.startswith("goagent.result:")]  # none shared, orphaned
    # The other conversation keeps its row (a run of it in flight still reads it).
    digest = hashlib.sha256(content_to_text([TextBlock("a" + BIG)]).encode()).hexdigest()
    assert [s for s in left if s.startswith("two")] == ["two", f"two\x1fgoagent.result:{digest}"]
    await two.clear()
    assert _stored_ids(path) == []  # no row of either conversation is left
    await one.aclose()
    await two.aclose()


def _stored_ids(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT DISTINCT session_id FROM goagent_messages ORDER BY 1")
        return [str(row[0]) for row in rows]
    finally:
        conn.close()
