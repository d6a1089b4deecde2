"""Every span a traced durable run opens on a worker ends, with a status that says why, when
that worker stops while the run goes on: the server may close the run later while no worker
holds it (terminated, timed out, cancelled from a client) and no worker would ever end them
(docs/scaling-out.md, "Tracing durable runs"; durotel17). Before, the spans stayed open and
were never exported. A real Temporal dev server."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from hanging_tool import ENTERED, hang, plan  # tests/durable/hanging_tool.py
from temporalio.client import WorkflowFailureError

from goagent_py import Agent
from goagent_py.durable import DurableAgent, ProviderRegistry, create_worker
from goagent_py.testing import FunctionProvider

pytestmark = pytest.mark.slow


def _recorder(traced: Any) -> tuple[list[Any], list[Any]]:
    from opentelemetry.sdk.trace import SpanProcessor

    started: list[Any] = []
    ended: list[Any] = []

    class _Both(SpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            started.append(span)

        def on_end(self, span: Any) -> None:
            ended.append(span)

    traced.provider.add_span_processor(_Both())
    return started, ended


@pytest.mark.parametrize("kind", ["create_worker", "your worker"])
async def test_spans_of_a_run_closed_after_its_worker_stopped_have_ended(
    temporal: Any, kind: str
) -> None:
    from temporalio.contrib.opentelemetry import create_tracer_provider
    from temporalio.worker import Worker
    from traced_spans import Traced  # tests/traced_spans.py

    from goagent_py.durable import (
        AgentWorkflow,
        activities_for,
        sandbox_runner,
        telemetry_interceptor,
    )

    traced = Traced(create_tracer_provider())
    started, ended = _recorder(traced)
    label = f"left-{uuid.uuid4().hex[:6]}"
    ENTERED[label] = asyncio.Event()
    agent = Agent(provider=FunctionProvider(plan), model="m", name="left", tools=[hang])
    durable = DurableAgent(
        agent, provider="fn:x", task_queue=f"q-{uuid.uuid4().hex[:8]}", tool_timeout=600
    )
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    interceptor = telemetry_interceptor(traced.provider)
    if kind == "create_worker":
        worker = create_worker(
            temporal.client, [durable], registry=registry, tracer_provider=traced.provider
        )
    else:
        worker = Worker(
            temporal.client,
            task_queue=durable.task_queue,
            workflows=[AgentWorkflow],
            activities=activities_for([durable], registry),
            workflow_runner=sandbox_runner(),
            interceptors=[interceptor],
        )
    async with worker:
        handle = await durable.start(temporal.client, label)
        await ENTERED[label].wait()  # the tool call is in flight
    if kind == "your worker":
        # Temporal's Worker tells no interceptor that it stopped: the ledger's sweep runs
        # until the event loop ends, and asyncio cancels it then (as asyncio.run does).
        watcher = interceptor.ledger._watcher
        assert watcher is not None
        watcher.cancel()
        await asyncio.wait([watcher])
    # No worker holds the run now: the server closes it.
    await handle.terminate("stop it")
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    names = sorted(s.name for s in started)
    assert "invoke_agent left" in names
    assert "execute_tool hang" in names
    assert sorted(s.name for s in ended) == names  # every span that started has ended
    for span in ended:
        if span.name in ("invoke_agent left", "execute_tool hang"):
            assert span.status.status_code.name == "ERROR", span.name
            assert dict(span.attributes or {})["error.type"] == "worker_stopped", span.name
    traced.provider.shutdown()
