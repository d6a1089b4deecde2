"""A run its worker dropped unevicted (a worker of yours, Temporal's own ``Worker``, that stopped
while the server had closed the run from outside) is finalized by the garbage collector away from
its workflow's event loop: each frame of its loop is closed on its own there, and none of them
awaits, reports or restores anything (docs/scaling-out.md, "Tracing durable runs"). Before,
``sys.unraisablehook`` printed "aclose(): asynchronous generator is already running", "async
generator ignored GeneratorExit", a context token "created in a different Context" and a
``NotImplementedError`` from the dead workflow loop (durotel17). A real Temporal dev server."""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import uuid
from typing import Any

import pytest
from hanging_tool import ENTERED, hang, plan  # tests/durable/hanging_tool.py
from temporalio.client import WorkflowFailureError

from goagent_py import Agent
from goagent_py.durable import DurableAgent, ProviderRegistry
from goagent_py.memory import ShortTermMemory
from goagent_py.testing import FunctionProvider

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("traced", [False, True], ids=["untraced", "traced"])
@pytest.mark.parametrize("hooked", [False, True], ids=["quiet", "hooked"])
async def test_a_run_dropped_by_your_worker_is_finalized_silently(
    temporal: Any, caplog: pytest.LogCaptureFixture, traced: bool, hooked: bool
) -> None:
    from temporalio.contrib.opentelemetry import create_tracer_provider
    from temporalio.worker import Worker
    from traced_spans import Traced  # tests/traced_spans.py

    from goagent_py import Hooks
    from goagent_py.durable import (
        AgentWorkflow,
        activities_for,
        sandbox_runner,
        telemetry_interceptor,
    )

    spans = Traced(create_tracer_provider())
    label = f"drop-{uuid.uuid4().hex[:6]}"
    ENTERED[label] = asyncio.Event()
    seen: list[str] = []
    hooks = Hooks(on_run_end=lambda result: seen.append("end")) if hooked else None
    agent = Agent(
        provider=FunctionProvider(plan),
        model="m",
        name="dropped",
        tools=[hang],
        hooks=hooks,
    )
    memory = ShortTermMemory()
    durable = DurableAgent(
        agent,
        provider="fn:x",
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
        tool_timeout=600,
        short_term_memory=lambda _session: memory,
    )
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    unraisable: list[Any] = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        with caplog.at_level(logging.DEBUG):
            worker = Worker(
                temporal.client,
                task_queue=durable.task_queue,
                workflows=[AgentWorkflow],
                activities=activities_for([durable], registry),
                workflow_runner=sandbox_runner(),
                interceptors=[telemetry_interceptor(spans.provider)] if traced else [],
            )
            async with worker:
                handle = await durable.start(temporal.client, label)
                await ENTERED[label].wait()  # the tool call is in flight
                await handle.terminate("stop it")
                with pytest.raises(WorkflowFailureError):
                    await handle.result()
            # What dropping the worker does (Temporal's worker outlives the test here): the
            # runs it still holds go to the garbage collector.
            running = worker._workflow_worker._running_workflows
            assert list(running)  # the terminated run: Temporal never evicts it
            running.clear()
            del worker, running
            gc.collect()
    finally:
        sys.unraisablehook = hook
    assert [
        f"{type(u.exc_value).__name__}: {u.exc_value} ({u.object!r:.80})" for u in unraisable
    ] == []
    noisy = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.startswith("goagent_py")
    ]
    assert noisy == []
    assert seen == []  # the dropped run's hooks see nothing: it did not end there
    spans.provider.shutdown()
