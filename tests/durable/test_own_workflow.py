"""``DurableAgent.run`` inside a workflow of the user's own, on a real Temporal dev server: the
loop's model and tool calls become the agent's activities on a worker the user builds with
``activities_for``."""

from __future__ import annotations

import uuid
from typing import Any

import own_workflow_app  # tests/durable/own_workflow_app.py
import pytest
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from goagent_py.durable import ProviderRegistry, activities_for, sandbox_runner
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.testing import FunctionProvider

pytestmark = pytest.mark.slow


def worker(temporal: WorkflowEnvironment) -> Worker:
    plans = {"plan": own_workflow_app.plan, "wire": own_workflow_app.wire_plan}
    registry = ProviderRegistry({"fn": lambda spec: FunctionProvider(plans[spec])})
    return Worker(
        temporal.client,
        task_queue=own_workflow_app.DURABLE.task_queue,
        workflows=[own_workflow_app.ReportWorkflow],
        activities=activities_for([own_workflow_app.DURABLE, own_workflow_app.CAREFUL], registry),
        workflow_runner=sandbox_runner(),
    )


async def test_the_loop_runs_inside_the_users_own_workflow(temporal: WorkflowEnvironment) -> None:
    durable = own_workflow_app.DURABLE
    async with worker(temporal):
        handle = await temporal.client.start_workflow(
            own_workflow_app.ReportWorkflow.run,
            "doubling",
            id=f"report-{uuid.uuid4().hex[:8]}",
            task_queue=durable.task_queue,
        )
        out = await handle.result()
        history = await handle.fetch_history()
    assert out == {
        "topic": "doubling",
        "text": "twice 21 is 42",
        "tool_calls": 1,
        "stop_reason": "end_turn",
    }
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    # The model's two calls and the tool's one, each an activity of the agent.
    assert scheduled == [
        "goagent.model.doubler",
        "goagent.tool.doubler.double",
        "goagent.model.doubler",
    ]


async def test_a_call_needing_approval_ends_the_run_deferred_in_the_users_own_workflow(
    temporal: WorkflowEnvironment, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing waits for a decision there (the library's workflow does): the run ends, the
    tool has not run."""
    monkeypatch.setenv("OWN_WORKFLOW_DB", str(tmp_path / "own.db"))
    async with worker(temporal):
        out = await temporal.client.execute_workflow(
            own_workflow_app.ReportWorkflow.run,
            "money",
            id=f"report-{uuid.uuid4().hex[:8]}",
            task_queue=own_workflow_app.DURABLE.task_queue,
        )
    assert out["stop_reason"] == "deferred"
    assert out["text"] != "wired"
    async with SQLiteStorage(str(tmp_path / "own.db"), session_id="default") as storage:
        stored = await storage.load()
    assert stored[-1].tool_calls[0].name == "wire"  # asked for, waiting, not run
    assert not any("sent 5" in m.text for m in stored)
