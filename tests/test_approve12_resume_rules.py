"""What a resume runs when the agent's approval rules changed while the turn waited
(approve12): a call of the batch that waited for nothing then, which the resuming agent's rules
make wait (its tool's ``requires_approval``, the agent's policy, an external tool), was never
shown to a person, so it does not run: the model reads why. docs/approvals.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from goagent_py import Agent, ApprovalExpiredError, Approve, Deny, Role, ToolCall, tool
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.testing import ScriptedProvider, tool_call_response


def _tools(ran: list[str], *, y_waits: Any) -> list[Any]:
    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        ran.append(f"pay {amount}")
        return "paid"

    @tool(requires_approval=y_waits)
    def email(to: str) -> str:
        """Send an email.

        Args:
            to: whom.
        """
        ran.append(f"email {to}")
        return "sent"

    return [pay, email]


def _agent(db: Path, ran: list[str], *script: Any, y_waits: Any = False, **options: Any) -> Agent:
    memory = ShortTermMemory(storage=SQLiteStorage(db, session_id="s"))
    return Agent(
        provider=ScriptedProvider(*script),
        tools=_tools(ran, y_waits=y_waits),
        short_term_memory=memory,
        **options,
    )


BATCH = tool_call_response(
    ToolCall("c1", "pay", {"amount": 5}), ToolCall("c2", "email", {"to": "bob"})
)


async def test_a_call_that_waited_for_nothing_and_now_needs_approval_is_not_run(
    tmp_path: Path,
) -> None:
    ran: list[str] = []
    first = await _agent(tmp_path / "c.db", ran, BATCH).run("pay and tell bob")
    (asked,) = first.pending
    assert asked.id == "c1"
    # Another process resumes, with a deploy that marks email as needing approval.
    later = _agent(tmp_path / "c.db", ran, "done", y_waits=True)
    result = await later.resume({"c1": Approve(token=asked.token)})
    assert ran == ["pay 5"]
    tool_messages = [m for m in result.messages if m.role is Role.TOOL]
    assert [m.tool_call_id for m in tool_messages] == ["c1", "c2"]
    assert tool_messages[1].is_error
    assert "approval" in tool_messages[1].text
    assert result.text == "done"


async def test_a_policy_that_now_picks_a_call_of_the_batch_keeps_it_from_running(
    tmp_path: Path,
) -> None:
    ran: list[str] = []
    first = await _agent(tmp_path / "c.db", ran, BATCH).run("pay and tell bob")
    later = _agent(
        tmp_path / "c.db",
        ran,
        "done",
        requires_approval=lambda call, run: call.name == "email",
    )
    await later.resume({"c1": Approve(token=first.pending[0].token)})
    assert ran == ["pay 5"]


async def test_a_call_that_still_needs_nothing_runs_after_the_approved_one(tmp_path: Path) -> None:
    ran: list[str] = []
    first = await _agent(tmp_path / "c.db", ran, BATCH, "done").run("pay and tell bob")
    again = _agent(tmp_path / "c.db", ran, "done")
    await again.resume({"c1": Approve(token=first.pending[0].token)})
    assert ran == ["pay 5", "email bob"]


async def test_the_parents_deadline_holds_for_a_sub_agents_call_it_lists() -> None:
    # The lead agent's approval_timeout is the deadline of every decision its run asks for;
    # a sub-agent without one of its own listed its call with none, and an approval a day
    # late ran it.
    ran: list[str] = []
    inner = Agent(
        provider=ScriptedProvider(
            tool_call_response(ToolCall("k1", "pay", {"amount": 5})), "paid."
        ),
        tools=_tools(ran, y_waits=False),
    )
    lead = Agent(
        provider=ScriptedProvider(
            tool_call_response(ToolCall("p1", "clerk", {"prompt": "pay"})), "Done."
        ),
        tools=[inner.as_tool(name="clerk", description="Pays.")],
        approval_timeout=0,
    )
    asked = await lead.run("pay 5")
    (call,) = asked.pending
    assert call.id == "p1/k1"
    assert call.deadline is not None
    with pytest.raises(ApprovalExpiredError):
        await lead.resume({call.id: Approve(token=call.token)}, history=asked.messages)
    assert ran == []
    done = await lead.resume({call.id: Deny("too late", token=call.token)}, history=asked.messages)
    assert done.text == "Done."
    assert ran == []
