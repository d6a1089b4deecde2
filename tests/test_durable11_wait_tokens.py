"""Wait tokens (durable11): every wait lists its token with its calls (``PendingCall.token``)
and a decision may carry it, so a late decision meant for an earlier wait whose call had the
same id (local models' servers number calls per turn: ``llama-tool-0``) is refused instead of
being taken by the call that waits now; and what an error says to do once a deadline passed.
docs/approvals.md ("Which wait a decision is for")."""

from __future__ import annotations

from pathlib import Path

import pytest
from refund_waits import refund_tool, two_waits_on_one_id  # tests/refund_waits.py

from goagent_py import (
    Agent,
    ApprovalConflictError,
    ApprovalPendingError,
    Approve,
    ConfigurationError,
    Deny,
    Role,
    Session,
    StopReason,
    ToolCall,
)
from goagent_py._metadata_keys import PENDING_KEY
from goagent_py.testing import ScriptedProvider, tool_call_response


async def test_a_late_decision_for_an_earlier_wait_on_a_reused_id_is_refused_by_its_token(
    tmp_path: Path,
) -> None:
    ran: list[str] = []
    agent = two_waits_on_one_id(tmp_path / "c.db", ran, "done")
    first = await agent.run("refund both")
    (asked,) = first.pending
    assert asked.token  # the wait's token is listed with its call
    stored = await agent.options.short_term_memory.messages()  # type: ignore[union-attr]
    assert stored[-1].metadata[PENDING_KEY]["token"] == asked.token

    second = await agent.resume({asked.id: Approve(token=asked.token)})
    assert second.stop_reason is StopReason.DEFERRED
    (now,) = second.pending
    assert now.id == asked.id
    assert now.token
    assert now.token != asked.token
    assert now.arguments == {"order": "A-2"}

    with pytest.raises(ConfigurationError, match=r"must be the str of PendingCall\.token"):
        await agent.resume({asked.id: Approve(token=1)})  # type: ignore[arg-type]
    # The earlier card's decision again (a second click, a retried request): refused, the
    # call that waits now neither runs nor is decided by it.
    # (approve14: the same decision again is answered as done, listing the wait now; another
    # one is refused.)
    again = await agent.resume({asked.id: Approve(token=asked.token)})
    assert [(p.id, p.token) for p in again.pending] == [(now.id, now.token)]
    with pytest.raises(ApprovalConflictError, match="already decided"):
        await agent.resume({asked.id: Deny("no", token=asked.token)})
    assert ran == ["A-1"]
    stored = await agent.options.short_term_memory.messages()  # type: ignore[union-attr]
    assert stored[-1].metadata[PENDING_KEY]["token"] == now.token

    done = await agent.resume({now.id: Approve(token=now.token)})
    assert done.text == "done"
    assert ran == ["A-1", "A-2"]


async def test_a_decision_by_id_alone_still_decides_the_call_that_waits(tmp_path: Path) -> None:
    # By id alone while the id is not reused; a reused one needs the token (approve12).
    ran: list[str] = []
    agent = two_waits_on_one_id(tmp_path / "c.db", ran, "done")
    await agent.run("refund both")
    second = await agent.resume({"llama-tool-0": Approve()})
    with pytest.raises(ApprovalConflictError, match="by id alone"):
        await agent.resume({"llama-tool-0": Deny("not twice")})
    result = await agent.resume({"llama-tool-0": Deny("not twice", token=second.pending[0].token)})
    assert result.text == "done"
    assert ran == ["A-1"]


async def test_a_sub_agents_call_is_decided_with_the_token_its_parent_listed() -> None:
    # The parent lists the sub-agent's call in its own wait, with the parent's token; the
    # sub-agent's own wait has another one, which must not refuse the decision.
    ran: list[str] = []
    inner = Agent(
        provider=ScriptedProvider(
            tool_call_response(ToolCall("k1", "refund", {"order": "A-1"})), "refunded."
        ),
        tools=[refund_tool(ran)],
    )
    lead = Agent(
        provider=ScriptedProvider(
            tool_call_response(ToolCall("p1", "clerk", {"prompt": "refund A-1"})), "Done."
        ),
        tools=[inner.as_tool(name="clerk", description="Refunds.")],
    )
    asked = await lead.run("refund A-1")
    (call,) = asked.pending
    assert call.id == "p1/k1"
    assert call.token
    done = await lead.resume({call.id: Approve(token=call.token)}, history=asked.messages)
    assert done.text == "Done."
    assert ran == ["A-1"]


async def test_continue_after_the_deadline_names_deny_not_approve(tmp_path: Path) -> None:
    # After the deadline only a denial is taken, yet continue_() said
    # "resume({call_id: Approve() or Deny(...)}) goes on" (durable11).
    ran: list[str] = []
    agent = two_waits_on_one_id(tmp_path / "c.db", ran, "done", approval_timeout=0)
    session = Session(agent)
    waiting = await session.prompt("refund both")
    with pytest.raises(ApprovalPendingError) as caught:
        await session.continue_()
    said = str(caught.value)
    assert "Approve()" not in said
    assert "'llama-tool-0': Deny(...)" in said
    assert "deadline passed" in said
    # What it says works.
    result = await session.resume({waiting.pending[0].id: Deny("too late")})
    assert result.stop_reason is StopReason.DEFERRED
    assert ran == []


async def test_a_new_prompt_after_the_deadline_names_deny_not_approve(tmp_path: Path) -> None:
    ran: list[str] = []
    agent = two_waits_on_one_id(tmp_path / "c.db", ran, approval_timeout=0)
    await agent.run("refund both")
    with pytest.raises(ApprovalPendingError) as caught:
        await agent.run("and another thing")
    said = str(caught.value)
    assert "Approve()" not in said
    assert "'llama-tool-0': Deny(...)" in said


async def test_before_the_deadline_the_hint_offers_approve(tmp_path: Path) -> None:
    ran: list[str] = []
    agent = two_waits_on_one_id(tmp_path / "c.db", ran, approval_timeout=3600)
    session = Session(agent)
    await session.prompt("refund both")
    with pytest.raises(ApprovalPendingError, match=r"'llama-tool-0': Approve\(\) or Deny"):
        await session.continue_()
    stored = await agent.options.short_term_memory.messages()  # type: ignore[union-attr]
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT]
