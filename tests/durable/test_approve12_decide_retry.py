"""A retried ``durable.decide`` (approve12): the same decision sent again (same call, same
token, same verdict: a request retried after its first attempt went through, a second click)
succeeds and changes nothing; a different decision for a call decided already is still refused.
Real Temporal dev server, SQLite memory; the validator on its own for the clock. docs/approvals.md
("In durable runs")."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from refund_clerk import (  # tests/durable/refund_clerk.py
    clerk,
    next_wait,
    numbered_refunds,
)
from refund_waits import refund_tool  # tests/refund_waits.py
from temporalio.testing import WorkflowEnvironment

from goagent_py import ApprovalConflictError, Approve, Deny
from goagent_py.durable import create_worker
from goagent_py.durable._client import result_of
from goagent_py.durable._wire import decision_to_data


@pytest.mark.slow
async def test_the_same_decision_sent_again_succeeds_and_changes_nothing(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    db = tmp_path / "chat.db"
    ran: list[str] = []

    durable, registry = clerk(numbered_refunds(), [refund_tool(ran)], db=db)
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "refund both", session_id="s1")
        await next_wait(durable, handle, 0)
        (first,) = await durable.pending(handle)
        decision = {first.id: Approve(token=first.token)}
        assert await durable.decide(handle, decision) == []
        assert await durable.decide(handle, decision) == []  # retried at once
        await next_wait(durable, handle, 1)
        (second,) = await durable.pending(handle)
        assert second.id == first.id
        assert second.token != first.token

        # Retried after the run went on: still the same decision, still nothing to do (the
        # answer is the first attempt's); the call that waits now under the id is not decided.
        assert await durable.decide(handle, decision) == []
        assert [p.token for p in await durable.pending(handle)] == [second.token]
        # A different decision for the call decided already is refused.
        with pytest.raises(ApprovalConflictError, match="already decided"):
            await durable.decide(handle, {first.id: Deny("no", token=first.token)})

        answer = {second.id: Deny("not twice", token=second.token)}
        assert await durable.decide(handle, answer) == []
        assert await durable.decide(handle, answer) in ([], [second.id])  # if it still waits
        with pytest.raises(ApprovalConflictError, match="already decided"):
            await durable.decide(handle, {second.id: Approve(token=second.token)})
        result = await asyncio.wait_for(result_of(handle), timeout=300)
        # Retried once the run has finished: answered as the first attempt was.
        assert await durable.decide(handle, answer) == []

    assert ran == ["A-1"]
    assert result.text == "done: refunded A-1 | Error: tool 'refund' was not run: not twice"


def _waiting_flow(monkeypatch: pytest.MonkeyPatch, at: list[float]) -> Any:
    from goagent_py.durable import _workflow

    monkeypatch.setattr(_workflow.workflow, "now", lambda: datetime.fromtimestamp(at[0], tz=UTC))
    flow = _workflow.AgentWorkflow()
    flow._token = "t1"
    flow._given = {"t1": {}}
    flow._waiting = {
        i: {
            "id": i,
            "name": "refund",
            "arguments": {"order": i},
            "kind": "approval",
            "deadline": 2000.0,
            "token": "t1",
        }
        for i in ("a", "b")
    }
    return flow


def test_a_decision_sent_again_while_its_wait_goes_on_changes_nothing_even_after_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    at = [1000.0]
    flow = _waiting_flow(monkeypatch, at)
    approve = {"a": decision_to_data(Approve(token="t1"))}
    flow._refusal(approve)
    assert flow.decide(approve) == {"waiting": ["b"]}
    assert flow._decided_at == 1000.0

    at[0] = 3000.0  # past the deadline: the first attempt was in time
    flow._refusal(approve)
    assert flow.decide(approve) == {"waiting": ["b"]}
    assert flow._decided_at == 1000.0  # the decision was taken when it first came
    by_id = {"a": decision_to_data(Approve())}  # the same, by id alone (not reused)
    flow._refusal(by_id)
    with pytest.raises(ApprovalConflictError, match="already decided"):
        flow._refusal({"a": decision_to_data(Approve(arguments={"order": "z"}, token="t1"))})
    with pytest.raises(ApprovalConflictError, match="already decided"):
        flow._refusal({"a": decision_to_data(Deny("no"))})


def test_a_decision_that_comes_with_an_abort_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # An abort signal and a decide update handled in one workflow activation: the wait had
    # not closed yet, so the validator took the approval and the abort's closing kept it (a
    # call ran although the abort denies every waiting call).
    from goagent_py import NotPendingError

    flow = _waiting_flow(monkeypatch, [1000.0])
    flow.abort("stop it")
    with pytest.raises(NotPendingError, match="aborted"):
        flow._refusal({"a": decision_to_data(Approve(token="t1"))})
