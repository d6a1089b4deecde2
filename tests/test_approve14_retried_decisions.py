"""A decision sent again after it went through (a client that lost the answer and retries)
is answered as done, on every path: nothing runs twice, the retry gets the record's outcome;
another verdict for the same wait stays a conflict (approve14; docs/approvals.md "Sending a
decision again"). Real SQLite files."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from goagent_py import (
    Agent,
    ApprovalConflictError,
    Approve,
    Deny,
    ExternalTool,
    NotPendingError,
    ProviderError,
    SessionBusyError,
    StopReason,
    ToolCall,
    ToolOutput,
    tool,
)
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.session import Session
from goagent_py.testing import ScriptedProvider, tool_call_response


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


def _agent(db: Path, ran: list[int], *script: Any) -> Agent:
    return Agent(
        provider=ScriptedProvider(*script),
        tools=[_pay(ran), ExternalTool("locate", "Where the user is.")],
        short_term_memory=ShortTermMemory(storage=SQLiteStorage(db, session_id="s")),
    )


PAY = tool_call_response(ToolCall("c1", "pay", {"amount": 9}))


async def test_an_agent_resume_sent_again_runs_nothing_and_answers_the_outcome(
    tmp_path: Path,
) -> None:
    ran: list[int] = []
    db = tmp_path / "c.db"
    (call,) = (await _agent(db, ran, PAY).run("pay 9")).pending
    first = await _agent(db, ran, "paid it").resume({"c1": Approve(token=call.token)})
    # The client lost that answer and sends the same decision again (another process).
    again = await _agent(db, ran).resume({"c1": Approve(token=call.token)})
    assert ran == [9]
    assert again.text == first.text == "paid it"
    assert again.stop_reason is StopReason.END_TURN
    assert again.pending == []
    assert [m.text for m in again.messages] == [m.text for m in first.messages]
    assert again.iterations == 0


async def test_a_resume_sent_again_with_another_verdict_is_a_conflict(tmp_path: Path) -> None:
    ran: list[int] = []
    db = tmp_path / "c.db"
    (call,) = (await _agent(db, ran, PAY).run("pay 9")).pending
    await _agent(db, ran, "paid it").resume({"c1": Approve(token=call.token)})
    for other in (
        Deny("no", token=call.token),
        Approve({"amount": 10}, token=call.token),
        Approve(always=True, token=call.token),
    ):
        with pytest.raises(ApprovalConflictError, match="already decided"):
            await _agent(db, ran).resume({"c1": other})
    # By id alone a retry cannot be told from a late decision: nothing waits.
    with pytest.raises(NotPendingError):
        await _agent(db, ran).resume({"c1": Approve()})
    assert ran == [9]


async def test_a_retry_after_the_conversation_waits_again_lists_the_wait_now(
    tmp_path: Path,
) -> None:
    ran: list[int] = []
    db = tmp_path / "c.db"
    (call,) = (await _agent(db, ran, PAY).run("pay 9")).pending
    paid_again = tool_call_response(ToolCall("c1", "pay", {"amount": 3}))
    first = await _agent(db, ran, paid_again).resume({"c1": Approve(token=call.token)})
    (now,) = first.pending
    assert now.token != call.token
    again = await _agent(db, ran).resume({"c1": Approve(token=call.token)})
    assert ran == [9]
    assert again.stop_reason is StopReason.DEFERRED
    assert [(p.id, p.token, p.arguments) for p in again.pending] == [
        ("c1", now.token, {"amount": 3})
    ]
    # The wait now is still decided by its own token.
    done = await _agent(db, ran, "ok").resume({"c1": Approve(token=now.token)})
    assert ran == [9, 3]
    assert done.text == "ok"


async def test_an_external_output_sent_again_is_done_and_another_output_a_conflict(
    tmp_path: Path,
) -> None:
    ran: list[int] = []
    db = tmp_path / "c.db"
    where = tool_call_response(ToolCall("w1", "locate", {}))
    (call,) = (await _agent(db, ran, where).run("where am I?")).pending
    first = await _agent(db, ran, "Lisbon").resume({"w1": ToolOutput("38.7N", token=call.token)})
    again = await _agent(db, ran).resume({"w1": ToolOutput("38.7N", token=call.token)})
    assert again.text == first.text == "Lisbon"
    with pytest.raises(ApprovalConflictError, match="already decided"):
        await _agent(db, ran).resume({"w1": ToolOutput("41.1N", token=call.token)})


async def test_a_session_resume_sent_again_is_answered_from_the_record(tmp_path: Path) -> None:
    ran: list[int] = []
    db = tmp_path / "c.db"
    session = Session(_agent(db, ran, PAY, "paid it"))
    (call,) = (await session.prompt("pay 9")).pending
    first = await session.resume({"c1": Approve(token=call.token)})
    again = await session.resume({"c1": Approve(token=call.token)})
    assert ran == [9]
    assert again.text == first.text == "paid it"
    assert session.pending == []
    # Another session on the record (another process) answers the same.
    other = Session(_agent(db, ran))
    assert (await other.resume({"c1": Approve(token=call.token)})).text == "paid it"
    with pytest.raises(ApprovalConflictError):
        await other.resume({"c1": Deny("no", token=call.token)})
    assert ran == [9]


async def test_a_resume_without_memory_sent_again_is_answered(tmp_path: Path) -> None:
    ran: list[int] = []
    agent = Agent(provider=ScriptedProvider(PAY, "paid it"), tools=[_pay(ran)])
    first = await agent.run("pay 9")
    (call,) = first.pending
    history = list(first.messages)
    done = await agent.resume({"c1": Approve(token=call.token)}, history=history)
    # The caller keeps the record: what it holds after the decision is the answer.
    again = await agent.resume({"c1": Approve(token=call.token)}, history=history + done.messages)
    assert ran == [9]
    assert done.text == again.text == "paid it"
    assert again.stop_reason is StopReason.END_TURN


async def test_a_retry_after_the_first_resume_failed_says_no_answer_is_stored(
    tmp_path: Path,
) -> None:
    ran: list[int] = []
    db = tmp_path / "c.db"
    (call,) = (await _agent(db, ran, PAY).run("pay 9")).pending
    with pytest.raises(ProviderError):
        await _agent(db, ran, ProviderError("down", status=503)).resume(
            {"c1": Approve(token=call.token)}
        )
    again = await _agent(db, ran).resume({"c1": Approve(token=call.token)})
    assert ran == [9]  # the batch ran once; its result is stored
    assert again.stop_reason is None
    assert [m.text for m in again.messages] == ["paid 9"]


async def test_a_sub_agents_decision_sent_again_is_answered(tmp_path: Path) -> None:
    ran: list[int] = []
    db = tmp_path / "c.db"

    def lead(*script: Any, inner_script: tuple[Any, ...] = ("sub: paid",)) -> Agent:
        inner = Agent(provider=ScriptedProvider(*inner_script), tools=[_pay(ran)])
        return Agent(
            provider=ScriptedProvider(*script),
            tools=[inner.as_tool(name="payer", description="Pays.")],
            short_term_memory=ShortTermMemory(storage=SQLiteStorage(db, session_id="s")),
        )

    asked = await lead(
        tool_call_response(ToolCall("p1", "payer", {"prompt": "pay"})), inner_script=(PAY,)
    ).run("go")
    (call,) = asked.pending
    assert call.id == "p1/c1"
    first = await lead("lead: done").resume({call.id: Approve(token=call.token)})
    again = await lead().resume({call.id: Approve(token=call.token)})
    assert ran == [9]
    assert again.text == first.text == "lead: done"
    with pytest.raises(ApprovalConflictError):
        await lead().resume({call.id: Deny("no", token=call.token)})


async def test_two_resumes_racing_with_one_decision_run_it_once(tmp_path: Path) -> None:
    ran: list[int] = []
    db = tmp_path / "c.db"
    (call,) = (await _agent(db, ran, PAY).run("pay 9")).pending
    same = {"c1": Approve(token=call.token)}
    results = await asyncio.gather(
        _agent(db, ran, "paid it").resume(same),
        _agent(db, ran, "paid it").resume(same),
        return_exceptions=True,
    )
    assert ran == [9]
    # The other is answered from the record (running nothing) or, when it came while the
    # first held the conversation before its claim, refused by the run hold.
    done = sorted(o.iterations for o in results if not isinstance(o, BaseException))
    refused = [o for o in results if isinstance(o, BaseException)]
    assert all(isinstance(o, SessionBusyError) for o in refused)
    assert done in ([1], [0, 1])  # one ran it; the one answered ran nothing
    # With different verdicts, the first wins and the other is refused.
    (call,) = (await _agent(db, ran, PAY).run("pay 9 again")).pending
    outcomes = await asyncio.gather(
        _agent(db, ran, "paid").resume({"c1": Approve(token=call.token)}),
        _agent(db, ran, "ok").resume({"c1": Deny("no", token=call.token)}),
        return_exceptions=True,
    )
    refused = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(refused) == 1
    # Refused by the claim, or before it by the run hold of the other's resume.
    assert isinstance(refused[0], (ApprovalConflictError, SessionBusyError))
    assert ran in ([9], [9, 9])  # the approval ran once if it won, not at all if it lost
