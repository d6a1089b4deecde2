"""A durable run that reaches a call needing a person waits for the decide update, holding no
worker (issue 35): the record holds the wait, a query lists it, decisions go in through
``durable.decide``, bad ones are refused with clear errors, a deadline applies a default. Real
Temporal dev server, in-process workers, the worker's real short-term memory (SQLite)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from goagent_py import (
    Agent,
    ApprovalConflictError,
    ApprovalExpiredError,
    Approve,
    ConfigurationError,
    Deny,
    ExternalTool,
    NotPendingError,
    ToolOutput,
    validate_transcript,
)
from goagent_py.durable import (
    STATE_QUERY,
    DurableAgent,
    DurableRunError,
    ProviderRegistry,
    create_worker,
)
from goagent_py.durable._client import result_of
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.messages import Message, Role, StopReason, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tools import tool

pytestmark = pytest.mark.slow


class World:
    """What the tools did and what the model saw; the model's plan."""

    def __init__(self, db: Path, calls: list[ToolCall]) -> None:
        self.db = db
        self.calls = calls  # what the model asks for first
        self.ran: list[tuple[str, dict[str, Any]]] = []
        self.seen: list[list[Message]] = []
        self.model_gate: asyncio.Event | None = None  # set: the second model call waits on it

    async def plan(self, request: CompletionRequest) -> CompletionResponse | str:
        self.seen.append(list(request.messages))
        if request.messages[-1].role != Role.TOOL:
            return tool_call_response(*self.calls)
        if self.model_gate is not None:
            await self.model_gate.wait()
        results = [m for m in request.messages if m.role == Role.TOOL]
        return "finished: " + " | ".join(m.text for m in results)


def setup(
    tmp_path: Path, *calls: ToolCall, **settings: Any
) -> tuple[DurableAgent, ProviderRegistry, World]:
    world = World(tmp_path / "chat.db", list(calls))

    @tool(requires_approval=True)
    def refund(order: str, amount: float) -> str:
        """Refund an order.

        Args:
            order: the order id.
            amount: euros.
        """
        world.ran.append(("refund", {"order": order, "amount": amount}))
        return f"refunded {amount:.2f} on {order}"

    @tool(requires_approval=lambda args: args["amount"] > 100)
    def pay(amount: float) -> str:
        """Pay an amount.

        Args:
            amount: euros.
        """
        world.ran.append(("pay", {"amount": amount}))
        return f"paid {amount:.2f}"

    locate = ExternalTool(
        "locate",
        "The user's location, from their phone.",
        {"type": "object", "properties": {}},
    )
    default = settings.pop("approval_default", "deny")
    agent = Agent(
        provider=FunctionProvider(world.plan),
        model="m",
        name="clerk",
        tools=[refund, pay, locate],
        **settings,
    )
    durable = DurableAgent(
        agent,
        provider="fn:x",
        short_term_memory=lambda s: ShortTermMemory(storage=SQLiteStorage(world.db, session_id=s)),
        heartbeat_timeout=5.0,
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
        approval_default=default,
    )
    return durable, ProviderRegistry({"fn": lambda _: FunctionProvider(world.plan)}), world


async def until_waiting(durable: DurableAgent, handle: Any) -> None:
    """Until the run waits for decisions (its event stream says so)."""
    async for event in durable.events(handle):
        if event["type"] == "pending":
            return
    raise AssertionError("the run ended without waiting")


async def stored(world: World, session: str) -> list[Message]:
    async with SQLiteStorage(world.db, session_id=session) as s:
        return await s.load()


REFUND = ToolCall("c1", "refund", {"order": "A-17", "amount": "25"})


async def test_a_durable_run_waits_for_the_decision_and_goes_on_with_it(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    durable, registry, world = setup(tmp_path, REFUND)
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "refund A-17", session_id="s1")
        await until_waiting(durable, handle)
        pending = await durable.pending(handle)
        state = await handle.query(STATE_QUERY)
        described = await handle.describe()
        record = await stored(world, "s1")
        assert world.ran == []  # nothing ran before the decision
        assert await durable.decide(handle, {"c1": Approve()}) == []
        result = await result_of(handle)

    # The query lists the call with its validated arguments (the worker's validation).
    assert [(p.id, p.name, p.arguments, p.kind, p.deadline) for p in pending] == [
        ("c1", "refund", {"order": "A-17", "amount": 25.0}, "approval", None)
    ]
    assert state["status"] == "waiting"
    assert state["pending"] == ["c1"]
    # It holds no worker: no activity runs while it waits.
    assert list(described.raw_description.pending_activities) == []
    # One record: the wait is on the stored assistant message, valid while it waits.
    assert [m.role for m in record] == [Role.USER, Role.ASSISTANT]
    assert record[1].metadata["goagent.pending"]["calls"][0]["arguments"] == {
        "order": "A-17",
        "amount": 25.0,
    }
    assert validate_transcript(record) == []
    assert world.ran == [("refund", {"order": "A-17", "amount": 25.0})]
    assert result.text == "finished: refunded 25.00 on A-17"
    assert result.stop_reason == StopReason.END_TURN
    after = await stored(world, "s1")
    assert "goagent.pending" not in after[1].metadata
    # The record names the wait the decision was taken in (approve14).
    assert after[1].metadata["goagent.decisions"] == {
        "c1": {"decision": "approve", "token": pending[0].token}
    }
    assert [m.role for m in after] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert validate_transcript(after, allow_pending=False) == []
    # The model's second request held the whole conversation (stand-ins put back).
    assert [m.text for m in world.seen[-1]] == ["refund A-17", "", "refunded 25.00 on A-17"]


async def test_a_denial_and_an_edit_reach_the_model_and_the_tool(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    second = ToolCall("c2", "refund", {"order": "B-2", "amount": 900})
    durable, registry, world = setup(tmp_path, REFUND, second)
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "refund both", session_id="s2")
        await until_waiting(durable, handle)
        # Decisions may come one at a time; the run goes on when every call is decided.
        assert await durable.decide(handle, {"c1": Deny("not this one")}) == ["c2"]
        assert [p.id for p in await durable.pending(handle)] == ["c2"]
        edit = Approve(arguments={"order": "B-2", "amount": "90"})
        assert await durable.decide(handle, {"c2": edit}) == []
        result = await result_of(handle)
    assert world.ran == [("refund", {"order": "B-2", "amount": 90.0})]
    # The model reads the denial as the call's error result, as in a plain run.
    assert result.text == (
        "finished: Error: tool 'refund' was not run: not this one | refunded 90.00 on B-2"
    )


async def test_a_predicate_decides_on_the_worker_which_calls_wait(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    small = ToolCall("c1", "pay", {"amount": 5})
    durable, registry, world = setup(tmp_path, small)
    async with create_worker(temporal.client, [durable], registry=registry):
        result = await durable.execute(temporal.client, "pay 5", session_id="s3")
    assert world.ran == [("pay", {"amount": 5.0})]  # 5 <= 100: no wait
    assert result.text == "finished: paid 5.00"


async def test_decisions_that_cannot_be_applied_are_refused_and_change_nothing(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    second = ToolCall("c2", "refund", {"order": "B-2", "amount": 9})
    durable, registry, world = setup(tmp_path, REFUND, second)
    world.model_gate = asyncio.Event()  # the run stays alive after the batch
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "refund both", session_id="s4")
        await until_waiting(durable, handle)
        with pytest.raises(NotPendingError, match=r"'nope'.*\['c1', 'c2'\]"):
            await durable.decide(handle, {"nope": Approve()})
        with pytest.raises(ConfigurationError, match="waits for approval"):
            await durable.decide(handle, {"c1": ToolOutput("made up")})
        assert await durable.decide(handle, {"c1": Approve()}) == ["c2"]
        # Two deciders of one call: the first wins, the second is told.
        with pytest.raises(ApprovalConflictError, match="'c1' was already decided"):
            await durable.decide(handle, {"c1": Deny("no")})
        assert [p.id for p in await durable.pending(handle)] == ["c2"]
        await durable.decide(handle, {"c2": Approve()})
        async for event in durable.events(handle):  # the batch ran
            if event["type"] == "tool_result" and event["call_id"] == "c2":
                break
        with pytest.raises(ApprovalConflictError):  # decided, and the run went on
            await durable.decide(handle, {"c2": Deny("too late")})
        world.model_gate.set()
        result = await result_of(handle)
    # A decision for a run that finished: nothing waits.
    with pytest.raises(NotPendingError, match="has finished"):
        await durable.decide(handle, {"c1": Approve()})
    assert await durable.pending(handle) == []
    # Nothing ran twice.
    assert world.ran == [
        ("refund", {"order": "A-17", "amount": 25.0}),
        ("refund", {"order": "B-2", "amount": 9.0}),
    ]
    assert result.text == "finished: refunded 25.00 on A-17 | refunded 9.00 on B-2"


async def test_the_deadline_applies_the_default_and_a_late_decision_is_refused(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    durable, registry, world = setup(tmp_path, REFUND)
    world.model_gate = asyncio.Event()  # the run stays alive after the default
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(
            temporal.client, "refund A-17", session_id="s5", approval_timeout=0.5
        )
        # The event stream keeps the wait and the batch after it, however late it is read: on a
        # busy machine the half second may pass before a query could see the call waiting.
        waited: list[dict[str, Any]] = []
        async for event in durable.events(handle):
            if event["type"] == "pending":
                waited = event["calls"]
            if event["type"] == "tool_result":  # the batch ran: the default is in
                break
        (call,) = waited
        assert call["deadline"] is not None
        with pytest.raises(ApprovalExpiredError, match=r"default decision \(deny\)") as caught:
            await durable.decide(handle, {"c1": Approve()})
        world.model_gate.set()
        result = await result_of(handle)
    assert caught.value.call_id == "c1"
    assert caught.value.deadline == call["deadline"]
    assert world.ran == []
    assert "No decision came before the deadline" in result.text
    after = await stored(world, "s5")
    assert after[1].metadata["goagent.decisions"]["c1"]["decision"] == "deny"
    assert validate_transcript(after, allow_pending=False) == []


async def test_an_approve_default_runs_the_call_at_the_deadline(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    durable, registry, world = setup(tmp_path, REFUND, approval_default="approve")
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(
            temporal.client, "refund A-17", session_id="s6", approval_timeout=0.2
        )
        result = await result_of(handle)
    assert world.ran == [("refund", {"order": "A-17", "amount": 25.0})]
    assert result.text == "finished: refunded 25.00 on A-17"


async def test_an_external_tool_waits_for_the_clients_output(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    durable, registry, _world = setup(tmp_path, ToolCall("c1", "locate", {}))
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "where am I?", session_id="s7")
        await until_waiting(durable, handle)
        (call,) = await durable.pending(handle)
        with pytest.raises(ConfigurationError, match="external tool"):
            await durable.decide(handle, {"c1": Approve()})
        await durable.decide(handle, {"c1": ToolOutput("Lisbon")})
        result = await result_of(handle)
    assert call.kind == "external"
    assert result.text == "finished: Lisbon"


async def test_an_abort_while_waiting_denies_the_calls_and_ends_the_run(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    from goagent_py.durable import ABORT_SIGNAL

    durable, registry, world = setup(tmp_path, REFUND)
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "refund A-17", session_id="s8")
        await until_waiting(durable, handle)
        await handle.signal(ABORT_SIGNAL, "never mind")
        result = await result_of(handle)
    assert world.ran == []
    assert len(world.seen) == 1  # no model call after the abort
    after = await stored(world, "s8")
    assert "never mind" in after[2].text
    assert validate_transcript(after, allow_pending=False) == []
    assert result.messages[-1].role == Role.TOOL


async def test_a_new_prompt_on_a_waiting_session_is_refused(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    durable, registry, world = setup(tmp_path, REFUND)
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "refund A-17", session_id="s9")
        await until_waiting(durable, handle)
        with pytest.raises(DurableRunError) as caught:
            await durable.execute(temporal.client, "something else", session_id="s9")
        await durable.decide(handle, {"c1": Deny("no")})
        await result_of(handle)
    assert caught.value.type == "ApprovalPendingError"
    assert len(world.seen) == 2  # the refused prompt never reached the model


def test_approvals_need_a_short_term_memory_on_the_workers() -> None:
    @tool(requires_approval=True)
    def wipe() -> str:
        """Wipe it."""
        return "wiped"

    agent = Agent(provider=FunctionProvider(lambda r: "x"), name="a", tools=[wipe])
    with pytest.raises(ConfigurationError, match="short-term memory"):
        DurableAgent(agent, provider="fn:x")
    with pytest.raises(ConfigurationError, match="approval_default"):
        DurableAgent(agent, provider="fn:x", approval_default="maybe")  # type: ignore[arg-type]


async def test_the_agents_policy_runs_on_the_worker_and_sees_the_assistant_message(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    seen: list[tuple[str, list[str]]] = []

    def policy(call: ToolCall, run: Any) -> bool:
        seen.append((call.name, [c.id for c in run.message.tool_calls]))
        return call.name == "pay"

    small = ToolCall("c1", "pay", {"amount": 5})
    durable, registry, world = setup(tmp_path, small, requires_approval=policy)
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "pay 5", session_id="s10")
        await until_waiting(durable, handle)
        (call,) = await durable.pending(handle)
        await durable.decide(handle, {"c1": Approve()})
        result = await durable.result(handle)
    assert (call.name, call.arguments) == ("pay", {"amount": 5.0})
    assert seen == [("pay", ["c1"])]  # asked once: the decided batch is not asked again
    assert world.ran == [("pay", {"amount": 5.0})]
    assert result.text == "finished: paid 5.00"


async def test_a_plain_resume_and_the_durable_run_cannot_both_go_on_with_one_wait(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    durable, registry, world = setup(tmp_path, REFUND)
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "refund A-17", session_id="s11")
        await until_waiting(durable, handle)
        # Another process resumes the stored conversation first (the same SQLite record).
        memory = ShortTermMemory(storage=SQLiteStorage(world.db, session_id="s11"))
        plain = durable.agent.replace(short_term_memory=memory)
        first = await plain.resume({"c1": Deny("handled by the desk")})
        await durable.decide(handle, {"c1": Approve()})
        with pytest.raises(DurableRunError) as caught:
            await durable.result(handle)
    assert "handled by the desk" in first.text
    assert caught.value.type == "NotPendingError"  # the stored wait was settled already
    assert world.ran == []  # the refund never ran
    record = await stored(world, "s11")
    assert validate_transcript(record, allow_pending=False) == []
