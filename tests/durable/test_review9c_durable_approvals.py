"""Review 9c of durable approvals (issue 35): a second wait in one workflow whose call has the
id of a call decided in the first (local models' servers number calls per turn: Ollama's
``ollama-tool-0``, llama.cpp's ``llama-tool-0``). Real Temporal dev server, SQLite memory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from refund_clerk import (  # tests/durable/refund_clerk.py
    clerk,
    next_wait,
    numbered_refunds,
)
from refund_waits import refund_tool  # tests/refund_waits.py
from temporalio.testing import WorkflowEnvironment

from goagent_py import ApprovalExpiredError, Approve, Deny
from goagent_py.durable import create_worker
from goagent_py.durable._client import result_of
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.messages import Role, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import tool_call_response
from goagent_py.tools import tool

pytestmark = pytest.mark.slow


async def test_a_second_wait_whose_call_reuses_a_decided_id_takes_its_decision(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    # The workflow kept every call id decided in earlier waits and refused a decision for any
    # of them as "already decided": the second wait, on a new call with a reused id, could
    # never be decided (only its deadline or an abort ended it).
    db = tmp_path / "chat.db"
    ran: list[str] = []

    durable, registry = clerk(numbered_refunds(), [refund_tool(ran)], db=db)
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "refund both", session_id="s1")
        await next_wait(durable, handle, 0)
        assert await durable.decide(handle, {"llama-tool-0": Approve()}) == []
        await next_wait(durable, handle, 1)
        (second,) = await durable.pending(handle)
        assert second.arguments == {"order": "A-2"}
        # By id alone the decision could be a late one for the first call (durable11): it
        # names the wait with its token.
        assert await durable.decide(handle, {"llama-tool-0": Approve(token=second.token)}) == []
        result = await asyncio.wait_for(result_of(handle), timeout=300)
        async with SQLiteStorage(db, session_id="s1") as storage:
            record = await storage.load()

    assert ran == ["A-1", "A-2"]
    assert result.text == "done: refunded A-1 | refunded A-2"
    assert [m.role for m in record] == [Role.USER, *[Role.ASSISTANT, Role.TOOL] * 2, Role.ASSISTANT]
    assert [m.text for m in record if m.role is Role.TOOL] == ["refunded A-1", "refunded A-2"]
    assert not [m for m in record if "goagent.pending" in m.metadata]


async def test_a_call_that_reuses_the_id_of_one_let_through_is_checked_again(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    # The worker's verdict was cached by call id for the whole run: a payment of 50 (under
    # the predicate's limit) let a later payment of 5000 with the same id run unasked.
    db = tmp_path / "chat.db"
    ran: list[float] = []

    async def plan(request: CompletionRequest) -> CompletionResponse | str:
        results = [m for m in request.messages if m.role is Role.TOOL]
        if len(results) < 2:
            amount = 50 if not results else 5000
            return tool_call_response(ToolCall("ollama-tool-0", "pay", {"amount": amount}))
        return "paid"

    @tool(requires_approval=lambda args: args["amount"] > 100)
    def pay(amount: float) -> str:
        """Pay an amount.

        Args:
            amount: euros.
        """
        ran.append(amount)
        return f"paid {amount:.2f}"

    durable, registry = clerk(plan, [pay], db=db, name="payer")
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "pay twice", session_id="s1")
        await next_wait(durable, handle, 0)
        (waiting,) = await durable.pending(handle)
        assert ran == [50.0]
        assert await durable.decide(handle, {"ollama-tool-0": Deny("too much")}) == []
        result = await asyncio.wait_for(result_of(handle), timeout=300)

    assert waiting.arguments == {"amount": 5000.0}
    assert ran == [50.0]
    assert result.text == "paid"


def test_a_call_of_the_wait_now_is_decided_though_its_id_expired_in_an_earlier_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The same reused id after a deadline: the earlier wait's expiry refused every decision
    # for the new call (ApprovalExpiredError), so it too could only wait for its deadline.
    from datetime import UTC, datetime

    from goagent_py.durable import _workflow

    monkeypatch.setattr(_workflow.workflow, "now", lambda: datetime(2026, 1, 1, tzinfo=UTC))
    flow = _workflow.AgentWorkflow()
    flow._settled = {"llama-tool-0"}
    flow._expired = {"llama-tool-0": (1.0, "deny")}
    flow._waiting = {
        "llama-tool-0": {
            "id": "llama-tool-0",
            "name": "refund",
            "arguments": {"order": "A-2"},
            "kind": "approval",
            "deadline": None,
            "token": "t2",
        }
    }
    flow._token = "t2"
    # accepted: it waits now (named by its wait's token: by id alone it is ambiguous)
    flow._refusal({"llama-tool-0": {"decision": "approve", "token": "t2"}})
    flow._waiting = {}
    with pytest.raises(ApprovalExpiredError):
        flow._refusal({"llama-tool-0": {"decision": "approve"}})
