"""Decisions by id alone on a reused call id (approve12): local models' servers number calls per
turn (``llama-tool-0``), so two waits of one conversation can list a call with the same id. A
decision by id alone for such a call may be a late one for the earlier wait (a second click, a
retried request): a plain run's and a session's resume refuse it as ambiguous, as a durable
run's decide does, and take it with the wait's token. docs/approvals.md ("Which wait a
decision is for")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from refund_waits import refund_tool, two_refunds, two_waits_on_one_id  # tests/refund_waits.py

from goagent_py import (
    Agent,
    ApprovalConflictError,
    Approve,
    Deny,
    Session,
    ToolCall,
)
from goagent_py._metadata_keys import PENDING_KEY
from goagent_py.testing import ScriptedProvider, tool_call_response


def _agent(db: Path, ran: list[str], *tail: Any) -> Agent:
    return two_waits_on_one_id(db, ran, *tail)


async def test_a_plain_resume_by_id_alone_on_a_reused_id_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    ran: list[str] = []
    agent = _agent(tmp_path / "c.db", ran, "done")
    first = await agent.run("refund both")
    await agent.resume({"llama-tool-0": Approve()})  # the first wait's id is not reused yet
    memory = agent.options.short_term_memory
    assert memory is not None
    waiting = (await memory.messages())[-1]
    token = waiting.metadata[PENDING_KEY]["token"]
    assert token != first.pending[0].token

    # The first card's click again, by id alone: it cannot be told from a decision for A-2.
    with pytest.raises(ApprovalConflictError, match="token") as caught:
        await agent.resume({"llama-tool-0": Approve()})
    said = str(caught.value)
    assert "'llama-tool-0'" in said
    assert token in said  # the token to send, if the decision is meant for the call now
    assert ran == ["A-1"]
    stored = await memory.messages()
    assert stored[-1].metadata[PENDING_KEY]["token"] == token  # still waits, untouched
    # A denial by id alone is ambiguous the same way.
    with pytest.raises(ApprovalConflictError):
        await agent.resume({"llama-tool-0": Deny("no")})

    done = await agent.resume({"llama-tool-0": Approve(token=token)})
    assert done.text == "done"
    assert ran == ["A-1", "A-2"]


async def test_a_session_resume_by_id_alone_on_a_reused_id_is_refused(tmp_path: Path) -> None:
    ran: list[str] = []
    session = Session(_agent(tmp_path / "c.db", ran, "done"))
    first = await session.prompt("refund both")
    second = await session.resume({first.pending[0].id: Approve()})
    (now,) = second.pending
    with pytest.raises(ApprovalConflictError, match="token"):
        await session.resume({now.id: Approve()})
    assert ran == ["A-1"]
    assert [p.token for p in session.pending] == [now.token]
    result = await session.resume({now.id: Approve(token=now.token)})
    assert result.text == "done"
    assert ran == ["A-1", "A-2"]


async def test_a_resume_on_history_by_id_alone_on_a_reused_id_is_refused() -> None:
    ran: list[str] = []
    agent = Agent(provider=two_refunds("done"), tools=[refund_tool(ran)])
    first = await agent.run("refund both")
    second = await agent.resume({"llama-tool-0": Approve()}, history=first.messages)
    history = first.messages + second.messages
    with pytest.raises(ApprovalConflictError, match="token"):
        await agent.resume({"llama-tool-0": Approve()}, history=history)
    assert ran == ["A-1"]
    done = await agent.resume(
        {"llama-tool-0": Approve(token=second.pending[0].token)}, history=history
    )
    assert done.text == "done"


async def test_a_sub_agents_reused_id_is_refused_by_id_alone_and_taken_with_the_token() -> None:
    # The sub-agent's model numbers its calls per turn too: the parent lists "p1/k1" in two
    # waits on the same message.
    ran: list[str] = []
    inner = Agent(
        provider=ScriptedProvider(
            tool_call_response(ToolCall("k1", "refund", {"order": "A-1"})),
            tool_call_response(ToolCall("k1", "refund", {"order": "A-2"})),
            "refunded both.",
        ),
        tools=[refund_tool(ran)],
    )
    lead = Agent(
        provider=ScriptedProvider(
            tool_call_response(ToolCall("p1", "clerk", {"prompt": "refund"})), "Done."
        ),
        tools=[inner.as_tool(name="clerk", description="Refunds.")],
    )
    asked = await lead.run("refund A-1 and A-2")
    again = await lead.resume({"p1/k1": Approve()}, history=asked.messages)
    (now,) = again.pending
    assert now.id == "p1/k1"
    assert now.arguments == {"order": "A-2"}
    history = asked.messages + again.messages
    with pytest.raises(ApprovalConflictError, match="token"):
        await lead.resume({"p1/k1": Approve()}, history=history)
    assert ran == ["A-1"]
    done = await lead.resume({"p1/k1": Approve(token=now.token)}, history=history)
    assert done.text == "Done."
    assert ran == ["A-1", "A-2"]
