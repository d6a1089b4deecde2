"""Wait tokens in durable runs (durable11): the pending query lists each wait's token, a
decision may carry it, and a late decision meant for an earlier wait whose call had the same
id (local models' servers number calls per turn) is refused instead of being taken by the call
that waits now. Real Temporal dev server, SQLite memory. docs/approvals.md."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any, ClassVar

import pytest
from refund_clerk import (  # tests/durable/refund_clerk.py
    clerk,
    next_wait,
    numbered_refunds,
    one_refund,
)
from refund_waits import refund_tool  # tests/refund_waits.py
from temporalio.testing import WorkflowEnvironment

from goagent_py import (
    Agent,
    ApprovalConflictError,
    ApprovalExpiredError,
    Approve,
    Deny,
    NotPendingError,
    validate_transcript,
)
from goagent_py.durable import DurableAgent, DurableRunError, ProviderRegistry, create_worker
from goagent_py.durable._client import result_of
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.messages import Role, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tools import tool


@pytest.mark.slow
async def test_a_late_decision_for_an_earlier_wait_is_refused_not_taken_by_the_call_now(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    db = tmp_path / "chat.db"
    ran: list[str] = []

    durable, registry = clerk(numbered_refunds(), [refund_tool(ran)], db=db)
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "refund both", session_id="s1")
        await next_wait(durable, handle, 0)
        (first,) = await durable.pending(handle)
        assert first.token
        assert await durable.decide(handle, {first.id: Approve(token=first.token)}) == []
        await next_wait(durable, handle, 1)
        (second,) = await durable.pending(handle)
        assert second.id == first.id
        assert second.arguments == {"order": "A-2"}
        assert second.token
        assert second.token != first.token

        # A different decision for the first card's call (the same one sent again changes
        # nothing, approve12).
        with pytest.raises(ApprovalConflictError, match="already decided") as late:
            await durable.decide(handle, {first.id: Deny("no", token=first.token)})
        assert second.token in str(late.value)
        # By id alone it cannot be told from a late one: refused, saying what to send.
        with pytest.raises(ApprovalConflictError, match=r"Approve\(token=call.token\)"):
            await durable.decide(handle, {first.id: Approve()})
        with pytest.raises(NotPendingError, match="no-such-wait"):
            await durable.decide(handle, {first.id: Approve(token="no-such-wait")})
        assert [p.token for p in await durable.pending(handle)] == [second.token]
        assert ran == ["A-1"]

        assert await durable.decide(handle, {second.id: Deny("no", token=second.token)}) == []
        result = await asyncio.wait_for(result_of(handle), timeout=300)

    assert ran == ["A-1"]
    assert result.text == "done: refunded A-1 | Error: tool 'refund' was not run: no"


def test_a_decision_with_the_token_of_an_expired_wait_is_refused_as_expired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The earlier wait's call expired (its default applied); a decision naming that wait is
    # refused as expired even though a later call of the same id waits now.
    from datetime import UTC, datetime

    from goagent_py.durable import _workflow

    monkeypatch.setattr(_workflow.workflow, "now", lambda: datetime(2026, 1, 1, tzinfo=UTC))
    flow = _workflow.AgentWorkflow()
    flow._settled = {"llama-tool-0"}
    flow._expired = {"llama-tool-0": (1.0, "deny")}
    flow._past = {"t1": ({"llama-tool-0"}, {"llama-tool-0": (1.0, "deny")})}
    flow._token = "t2"
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
    with pytest.raises(ApprovalExpiredError) as caught:
        flow._refusal({"llama-tool-0": {"decision": "approve", "token": "t1"}})
    assert caught.value.applied == "deny"
    flow._refusal({"llama-tool-0": {"decision": "approve", "token": "t2"}})  # the wait now


class _ClaimedFirst(ShortTermMemory):
    """The workers' memory, where another process (a plain ``agent.resume`` on the same
    SQLite file) claims the wait with the same decision between the durable run's load and
    its claim: the interleaving, made deterministic."""

    def __init__(self, db: Path, session: str, other: ShortTermMemory) -> None:
        super().__init__(storage=SQLiteStorage(db, session_id=session))
        self._other = other

    async def update_where(self, match: Any, update: Any) -> Any:
        from goagent_py.approvals import pending_of, settled, waits_under

        stored = await self._other.messages()
        token = pending_of(stored[-1])[0]
        if token:
            await self._other.update_where(
                waits_under(token), lambda m: settled(m, token, {"c1": Approve()})
            )
        return await super().update_where(match, update)


@pytest.mark.slow
async def test_a_claim_that_another_decider_won_with_the_same_decision_is_not_taken_as_its_own(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    # The settle activity, finding the wait settled, looked for a message with the same
    # decisions and call ids and took it as its own earlier (retried) claim: another
    # decider's Approve() was taken as the durable run's, and both went on to run the call.
    db = tmp_path / "chat.db"
    ran: list[str] = []

    other = ShortTermMemory(storage=SQLiteStorage(db, session_id="s1"))
    durable, registry = clerk(
        one_refund(), [refund_tool(ran)], memory=lambda s: _ClaimedFirst(db, s, other)
    )
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "refund A-1", session_id="s1")
        await next_wait(durable, handle, 0)
        (call,) = await durable.pending(handle)
        await durable.decide(handle, {call.id: Approve(token=call.token)})
        with pytest.raises(DurableRunError) as caught:
            await asyncio.wait_for(result_of(handle), timeout=300)

    assert caught.value.type == "ApprovalConflictError"
    assert ran == []  # the other decider holds the claim: the durable run ran nothing


class _ReplyLost(ShortTermMemory):
    """The workers' memory on PostgreSQL whose first claim commits and then loses its
    connection before the activity can answer (the retry finds the wait settled)."""

    lost: ClassVar[list[bool]] = []

    async def update_where(self, match: Any, update: Any) -> Any:
        found = await super().update_where(match, update)
        if not _ReplyLost.lost:
            _ReplyLost.lost.append(True)
            raise ConnectionError("server closed the connection unexpectedly")
        return found


@pytest.mark.slow
async def test_a_claim_whose_reply_was_lost_after_it_committed_is_taken_on_its_retry(
    temporal: WorkflowEnvironment, pg_dsn: str
) -> None:
    # The claim's own id (goagent.claim) lets the retry know the settled wait as its own: the
    # run goes on, the approved call runs once, on PostgreSQL.
    from goagent_py.memory.storage import PostgresStorage

    ran: list[str] = []
    _ReplyLost.lost.clear()

    session = f"s-{uuid.uuid4().hex[:8]}"
    async with PostgresStorage(pg_dsn, table="durable11_messages", session_id=session) as pg:
        durable, registry = clerk(
            one_refund(),
            [refund_tool(ran)],
            memory=lambda s: _ReplyLost(storage=pg.for_session(s)),
            retry_interval=0.1,
        )
        async with create_worker(temporal.client, [durable], registry=registry):
            handle = await durable.start(temporal.client, "refund A-1", session_id=session)
            await next_wait(durable, handle, 0)
            (call,) = await durable.pending(handle)
            await durable.decide(handle, {call.id: Approve(token=call.token)})
            result = await asyncio.wait_for(result_of(handle), timeout=300)
        record = await pg.load()

    assert _ReplyLost.lost == [True]
    assert result.text == "done"
    assert ran == ["A-1"]
    (decided,) = [m for m in record if "goagent.decisions" in m.metadata]
    assert decided.metadata["goagent.claim"].endswith(f":claim:{call.token}")
    assert validate_transcript(record, allow_pending=False) == []


@pytest.mark.slow
async def test_a_call_the_workers_definition_makes_wait_does_not_run_unasked(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    # Which tools are checked for approval came from the app's definition of the agent (the
    # run's settings): a deploy whose workers mark a tool requires_approval, with an app (or a
    # run started before it) that does not, ran the tool's calls without asking anyone.
    ran: list[str] = []
    seen: list[str] = []

    async def plan(request: CompletionRequest) -> CompletionResponse | str:
        if request.messages[-1].role is not Role.TOOL:
            return tool_call_response(ToolCall("c1", "refund", {"order": "A-1"}))
        seen.append(request.messages[-1].text)
        return "done"

    def make_refund(requires_approval: bool) -> Any:
        @tool(requires_approval=requires_approval)
        def refund(order: str) -> str:
            """Refund an order.

            Args:
                order: the order id.
            """
            ran.append(order)
            return f"refunded {order}"

        return refund

    queue = f"q-{uuid.uuid4().hex[:8]}"

    def durable_with(requires_approval: bool) -> DurableAgent:
        agent = Agent(
            provider=FunctionProvider(plan),
            model="m",
            name="clerk",
            tools=[make_refund(requires_approval)],
        )
        return DurableAgent(
            agent,
            provider="fn:x",
            short_term_memory=lambda s: ShortTermMemory(
                storage=SQLiteStorage(tmp_path / "chat.db", session_id=s)
            ),
            heartbeat_timeout=5.0,
            task_queue=queue,
        )

    app, workers = durable_with(False), durable_with(True)
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    async with create_worker(temporal.client, [workers], registry=registry):
        result = await app.execute(temporal.client, "refund A-1")

    assert ran == []
    assert result.text == "done"
    assert len(seen) == 1
    assert "requires a person's approval on the worker" in seen[0]


@pytest.mark.slow
async def test_a_run_cancelled_while_it_waits_for_a_decision_closes_the_wait(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    # Temporal's cancellation of a run that waited for a person left the wait in the
    # session's record: no durable run could go on with that session (every new prompt failed
    # with ApprovalPendingError, and decide said the run had finished).
    from temporalio.client import WorkflowFailureError

    db = tmp_path / "chat.db"
    ran: list[str] = []

    async def plan(request: CompletionRequest) -> CompletionResponse | str:
        last = request.messages[-1]
        if last.role is Role.USER and last.text == "refund A-1":
            return tool_call_response(ToolCall("c1", "refund", {"order": "A-1"}))
        return f"answered: {last.text}"

    durable, registry = clerk(plan, [refund_tool(ran)], db=db)
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "refund A-1", session_id="s1")
        await next_wait(durable, handle, 0)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        async with SQLiteStorage(db, session_id="s1") as storage:
            record = await storage.load()
        assert validate_transcript(record, allow_pending=False) == []
        assert "cancelled" in record[-1].text or "cancelled" in record[-2].text
        after = await durable.execute(temporal.client, "hello again", session_id="s1")

    assert ran == []
    assert after.text == "answered: hello again"


@pytest.mark.slow
async def test_an_unasked_call_in_a_decided_batch_does_not_run_either(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    # The resumed batch marked every call of the waiting message as checked, so a call beside
    # the one a person approved, whose tool only the workers' definition makes wait, ran.
    ran: list[str] = []

    async def plan(request: CompletionRequest) -> CompletionResponse | str:
        if request.messages[-1].role is not Role.TOOL:
            return tool_call_response(
                ToolCall("c1", "refund", {"order": "A-1"}),
                ToolCall("c2", "wipe", {"target": "disk"}),
            )
        return "done"

    refund = refund_tool(ran)

    def make_wipe(requires_approval: bool) -> Any:
        @tool(requires_approval=requires_approval)
        def wipe(target: str) -> str:
            """Wipe something.

            Args:
                target: what.
            """
            ran.append(target)
            return f"wiped {target}"

        return wipe

    queue = f"q-{uuid.uuid4().hex[:8]}"

    def durable_with(requires_approval: bool) -> DurableAgent:
        agent = Agent(
            provider=FunctionProvider(plan),
            model="m",
            name="clerk",
            tools=[refund, make_wipe(requires_approval)],
        )
        return DurableAgent(
            agent,
            provider="fn:x",
            short_term_memory=lambda s: ShortTermMemory(
                storage=SQLiteStorage(tmp_path / "chat.db", session_id=s)
            ),
            heartbeat_timeout=5.0,
            task_queue=queue,
        )

    app, workers = durable_with(False), durable_with(True)
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    async with create_worker(temporal.client, [workers], registry=registry):
        handle = await app.start(temporal.client, "refund and wipe", session_id="s1")
        await next_wait(app, handle, 0)
        (call,) = await app.pending(handle)
        assert call.id == "c1"
        await app.decide(handle, {"c1": Approve(token=call.token)})
        result = await asyncio.wait_for(result_of(handle), timeout=300)

    assert ran == ["A-1"]
    (wiped,) = [m for m in result.messages if m.tool_call_id == "c2"]
    assert "requires a person's approval on the worker" in wiped.text
