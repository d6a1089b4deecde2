"""A compaction never sums up a call that waits for a person (docs/approvals.md, "Short-term
memory windows"; docs/compaction.md): run while the conversation waits, a strategy that sums up
the waiting turn is refused (nothing stored), one that keeps the turn is stored, and either way
the view holds the waiting turn whole and the resume runs the call. Real SQLite file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from goagent_py import Agent, Approve, Message, StopReason, ToolCall, tool
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.compaction import boundary_message
from goagent_py.memory.compactor import Compactor
from goagent_py.memory.short_term import is_boundary
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.provider import CompletionRequest
from goagent_py.session import Session
from goagent_py.testing import FunctionProvider, tool_call_response

SUMMARY = "the user said hi"


async def everything(messages: list[Message]) -> list[Message]:
    """A strategy that sums up every message it is given."""
    return [boundary_message(SUMMARY, "everything")]


async def all_but_the_newest(messages: list[Message]) -> list[Message]:
    """A strategy that keeps only the newest message (the waiting call, without its ask)."""
    return [boundary_message(SUMMARY, "newest"), messages[-1]]


async def all_but_the_last_turn(messages: list[Message]) -> list[Message]:
    """A strategy that keeps the last turn whole."""
    return [boundary_message(SUMMARY, "turn"), *messages[-2:]]


STRATEGIES = {"everything": everything, "newest": all_but_the_newest,
              "turn": all_but_the_last_turn}  # fmt: skip


def _agent(
    db: Path, ran: list[int], seen: list[CompletionRequest], strategy: str
) -> tuple[Agent, Any]:
    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        ran.append(amount)
        return f"paid {amount}"

    def model(request: CompletionRequest) -> Any:
        seen.append(request)
        last = request.messages[-1]
        if last.text == "pay 9":
            return tool_call_response(ToolCall("c1", "pay", {"amount": 9}))
        return "paid it" if last.role == "tool" else "hello"

    memory = ShortTermMemory(storage=SQLiteStorage(db, session_id="s"))
    compactor = Compactor(
        STRATEGIES[strategy], context_window=100_000, memory=memory, fallback=False
    )
    agent = Agent(
        provider=FunctionProvider(model),
        tools=[pay],
        short_term_memory=memory,
        transform_context=compactor,
    )
    return agent, memory


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_compaction_while_a_call_waits_keeps_the_waiting_turn(
    tmp_path: Path, strategy: str
) -> None:
    ran: list[int] = []
    seen: list[CompletionRequest] = []
    agent, memory = _agent(tmp_path / "c.db", ran, seen, strategy)
    session = Session(agent)
    await session.prompt("hi")
    waiting = await session.prompt("pay 9")
    assert waiting.stop_reason is StopReason.DEFERRED
    await session.compact_now()
    view = await memory.messages()
    # The turn that waits, whole, after the summary when one was stored.
    stored = strategy == "turn"
    assert is_boundary(view[0]) is stored
    assert [m.text for m in view[-2:-1]] == ["pay 9"]
    assert view[-1].tool_calls[0].id == "c1"
    (call,) = waiting.pending
    agent2, _ = _agent(tmp_path / "c.db", ran, seen, strategy)
    done = await agent2.resume({"c1": Approve(token=call.token)})
    assert ran == [9]
    assert done.text == "paid it"
    sent = seen[-1].messages
    assert (SUMMARY in sent[0].text) is stored
    assert [m.role for m in sent[-3:]] == ["user", "assistant", "tool"]
    assert sent[-3].text == "pay 9"
