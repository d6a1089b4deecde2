"""Which call waits comes from the stored record, never from the model's window: a window too
small to hold the waiting assistant message (a last-N window smaller than the turn, a token
budget below it) still resumes, refuses a new prompt, and shows the wait to a Session
(approve15; docs/approvals.md "Short-term memory windows"). Real SQLite files, every window
policy the library ships."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from goagent_py import (
    Agent,
    ApprovalPendingError,
    Approve,
    Message,
    Role,
    StopReason,
    ToolCall,
    tool,
    user_message,
)
from goagent_py.memory import FixedWindow, NoOp, ShortTermMemory, TokenWindow
from goagent_py.memory.policies import Policy
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.session import Session
from goagent_py.testing import ScriptedProvider, tool_call_response

POLICIES: list[Policy] = [NoOp(), FixedWindow(0), FixedWindow(1), FixedWindow(2), TokenWindow(1)]


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


def _agent(db: Path, policy: Policy, ran: list[int], *script: Any) -> Agent:
    return Agent(
        provider=ScriptedProvider(*script),
        tools=[_pay(ran)],
        short_term_memory=ShortTermMemory(storage=SQLiteStorage(db, session_id="s"), policy=policy),
    )


PAY = tool_call_response(ToolCall("c1", "pay", {"amount": 9}))


async def _waiting(db: Path, policy: Policy, ran: list[int]) -> str:
    # An earlier exchange, so a window has something to cut.
    await _agent(db, policy, ran, "hello").run("hi")
    result = await _agent(db, policy, ran, PAY).run("pay 9")
    assert result.stop_reason is StopReason.DEFERRED
    (call,) = result.pending
    return call.token


@pytest.mark.parametrize("policy", POLICIES, ids=repr)
async def test_a_window_smaller_than_the_waiting_turn_still_resumes(
    tmp_path: Path, policy: Policy
) -> None:
    ran: list[int] = []
    db = tmp_path / "c.db"
    token = await _waiting(db, policy, ran)
    agent = _agent(db, policy, ran, "paid it")
    result = await agent.resume({"c1": Approve(token=token)})
    assert ran == [9]
    assert result.text == "paid it"
    # The model is sent the turn that waited with its result: never a tool result whose call
    # is not before it, never a conversation opening on the assistant.
    (request,) = agent.options.provider.requests  # type: ignore[attr-defined]
    sent = request.messages
    assert sent[0].role is Role.USER
    calls = [i for i, m in enumerate(sent) if m.tool_calls and m.tool_calls[0].id == "c1"]
    assert calls
    assert sent[calls[-1] + 1].tool_call_id == "c1"
    assert sent[calls[-1] + 1].text == "paid 9"
    assert any(m.role is Role.USER and m.text == "pay 9" for m in sent)


@pytest.mark.parametrize("policy", POLICIES, ids=repr)
async def test_a_new_prompt_on_a_windowed_wait_is_refused(tmp_path: Path, policy: Policy) -> None:
    ran: list[int] = []
    db = tmp_path / "c.db"
    await _waiting(db, policy, ran)
    agent = _agent(db, policy, ran, "never sent")
    with pytest.raises(ApprovalPendingError):
        await agent.run("something else")
    assert agent.options.provider.requests == []  # type: ignore[attr-defined]
    stored = await SQLiteStorage(db, session_id="s").load()
    assert stored[-1].tool_calls[0].id == "c1"  # nothing appended after the wait


@pytest.mark.parametrize("policy", POLICIES, ids=repr)
async def test_a_session_on_a_windowed_wait_lists_and_resumes_it(
    tmp_path: Path, policy: Policy
) -> None:
    ran: list[int] = []
    db = tmp_path / "c.db"
    token = await _waiting(db, policy, ran)
    session = Session(_agent(db, policy, ran, "paid it"))
    await session.load()
    assert [(p.id, p.token) for p in session.pending] == [("c1", token)]
    result = await session.resume({"c1": Approve(token=token)})
    assert ran == [9]
    assert result.text == "paid it"
    assert session.pending == []


@pytest.mark.parametrize("policy", POLICIES, ids=repr)
async def test_calls_a_crash_left_open_are_closed_under_any_window(
    tmp_path: Path, policy: Policy
) -> None:
    """A process that died in the middle of a batch left its calls without results: the next
    run closes them in the record first ("interrupted"), whatever its window shows, so no
    later request carries a call without its result."""
    db = tmp_path / "c.db"
    async with SQLiteStorage(db, session_id="s") as storage:
        asked = Message(Role.ASSISTANT, [], tool_calls=[ToolCall("c1", "pay", {})])
        await storage.append([user_message("pay 9"), asked])
    ran: list[int] = []
    agent = _agent(db, policy, ran, "hello")
    await agent.run("hi")
    stored = await SQLiteStorage(db, session_id="s").load()
    assert [(m.role, m.tool_call_id) for m in stored] == [
        (Role.USER, ""),
        (Role.ASSISTANT, ""),
        (Role.TOOL, "c1"),
        (Role.USER, ""),
        (Role.ASSISTANT, ""),
    ]
    assert stored[2].is_error
    assert ran == []


class _OwnWindow:
    """A memory of another package whose view shows only what came before the last turn (here:
    nothing): the resume reads the wait from its whole record (``transcript``), not from that
    view."""

    def __init__(self, inner: ShortTermMemory) -> None:
        self.inner = inner
        self.storage = inner.storage

    async def messages(self) -> list[Message]:
        return []

    async def transcript(self) -> list[Message]:
        return await self.inner.transcript()

    async def append(self, *messages: Message) -> None:
        await self.inner.append(*messages)

    async def update_where(self, match: Any, update: Any) -> Message | None:
        return await self.inner.update_where(match, update)


async def test_a_memory_whose_view_cuts_the_wait_resumes_from_its_record(tmp_path: Path) -> None:
    ran: list[int] = []
    db = tmp_path / "c.db"
    token = await _waiting(db, NoOp(), ran)
    memory = _OwnWindow(ShortTermMemory(storage=SQLiteStorage(db, session_id="s")))
    agent = Agent(provider=ScriptedProvider("paid it"), tools=[_pay(ran)], short_term_memory=memory)
    result = await agent.resume({"c1": Approve(token=token)})
    assert ran == [9]
    assert result.text == "paid it"
    (request,) = agent.options.provider.requests  # type: ignore[attr-defined]
    assert [m.role for m in request.messages] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert request.messages[0].text == "pay 9"
