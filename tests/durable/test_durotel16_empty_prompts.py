"""Every durable entry that starts a run follows the one prompt rule (``to_messages``): an
empty or whitespace-only prompt is refused with ``InvalidInputError`` before anything is started
or stored, as ``Agent.run`` refuses it (docs/architecture.md, "Running an agent"); a steer or
follow-up signal with empty text is refused and listed, never run."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import own_workflow_app  # tests/durable/own_workflow_app.py
import pytest
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from goagent_py import Agent, InvalidInputError, Role, TextBlock
from goagent_py.durable import (
    FOLLOW_UP_SIGNAL,
    STATE_QUERY,
    STEER_SIGNAL,
    DurableAgent,
    ProviderRegistry,
    activities_for,
    create_worker,
    sandbox_runner,
)
from goagent_py.provider import CompletionRequest
from goagent_py.testing import FunctionProvider

pytestmark = pytest.mark.slow

EMPTY: list[Any] = ["", "   ", "\n\t", [TextBlock(" "), TextBlock("")]]


@pytest.mark.parametrize("how", ["start", "execute"])
@pytest.mark.parametrize("prompt", EMPTY, ids=repr)
async def test_an_empty_prompt_starts_no_durable_run(
    temporal: WorkflowEnvironment, how: str, prompt: Any
) -> None:
    """The client built the content itself: a blank prompt started a workflow, which failed on
    the worker with a DurableRunError (or, from a steer, reached the model)."""
    model = FunctionProvider(lambda _request: "unused")
    durable = DurableAgent(
        Agent(provider=model, name="blank"), provider="fn:x", task_queue="q-blank"
    )
    workflow_id = f"blank-{uuid.uuid4().hex[:8]}"
    entry = durable.start if how == "start" else durable.execute
    with pytest.raises(InvalidInputError, match="empty prompt"):
        # (No worker serves the queue: a run started by mistake ends at its timeout.)
        await entry(
            temporal.client,
            prompt,
            workflow_id=workflow_id,
            execution_timeout=timedelta(seconds=20),
        )
    with pytest.raises(RPCError) as missing:  # nothing was started
        await temporal.client.get_workflow_handle(workflow_id).describe()
    assert missing.value.status is RPCStatusCode.NOT_FOUND


async def test_an_empty_prompt_in_the_users_own_workflow_schedules_nothing(
    temporal: WorkflowEnvironment,
) -> None:
    registry = ProviderRegistry({"fn": lambda _spec: FunctionProvider(own_workflow_app.plan)})
    async with Worker(
        temporal.client,
        task_queue="own-blank",
        workflows=[own_workflow_app.BlankPromptWorkflow],
        activities=activities_for([own_workflow_app.DURABLE], registry),
        workflow_runner=sandbox_runner(),
    ):
        handle = await temporal.client.start_workflow(
            own_workflow_app.BlankPromptWorkflow.run,
            "  ",
            id=f"own-blank-{uuid.uuid4().hex[:8]}",
            task_queue="own-blank",
            execution_timeout=timedelta(seconds=120),
        )
        out = await handle.result()
        history = await handle.fetch_history()
    assert "empty prompt" in out["refused"]
    assert not [e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]


async def test_empty_steer_and_follow_up_signals_are_refused_not_run(
    temporal: WorkflowEnvironment,
) -> None:
    """A blank steer reached the model as a user message; a blank follow-up failed the whole
    workflow after its first prompt was answered."""
    entered, release = asyncio.Event(), asyncio.Event()
    seen: list[list[tuple[str, str]]] = []

    async def plan(request: CompletionRequest) -> str:
        seen.append([(m.role.value, m.text) for m in request.messages])
        if len(seen) == 1:
            entered.set()
            await release.wait()
        return f"answer {len(seen)}"

    durable = DurableAgent(
        Agent(provider=FunctionProvider(plan), name="signals"),
        provider="fn:x",
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
    )
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "First")
        await entered.wait()
        await handle.signal(STEER_SIGNAL, "  ")
        await handle.signal(FOLLOW_UP_SIGNAL, "")
        await handle.signal(FOLLOW_UP_SIGNAL, "Second")
        state = await handle.query(STATE_QUERY)
        release.set()
        result = await durable.result(handle)
    assert state["steering"] == []
    assert state["follow_ups"] == ["Second"]
    assert len(state["refused"]) == 2
    assert all("empty prompt" in r for r in state["refused"])
    users = [[text for role, text in request if role == Role.USER.value] for request in seen]
    assert users == [["First"], ["Second"]]  # no memory: each prompt a run of its own
    assert result.text == "answer 2"
