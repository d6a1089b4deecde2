"""Durable runs on a real Temporal dev server, with in-process workers."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.testing import WorkflowEnvironment

from goagent_py.durable import DurableAgent, create_worker

import durable_app  # tests/durable/durable_app.py

pytestmark = pytest.mark.slow


def queue() -> str:
    return f"q-{uuid.uuid4().hex[:8]}"


async def test_a_run_completes_with_model_and_tool_activities(
    temporal: WorkflowEnvironment, pg_dsn: str
) -> None:
    durable = durable_app.durable_agent(pg_dsn, task_queue=queue())
    async with create_worker(temporal.client, [durable], registry=durable_app.registry()):
        result = await durable.execute(temporal.client, "go", session_id="s-basic")
    assert result.text == "done: value of a, step 2 done"
    assert result.iterations == 3
    assert result.tool_calls == 2
