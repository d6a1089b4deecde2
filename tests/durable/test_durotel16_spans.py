"""Durable spans name the run's provider by its spec (``gen_ai.provider.name``, not the
workflow's model proxy), and a run that times out ends every span it opened with an error
status, as a terminated one does (docs/scaling-out.md, "Tracing durable runs"). A real Temporal
dev server and Temporal's replay-safe tracer provider."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.trace import StatusCode
from temporalio.client import WorkflowFailureError
from temporalio.contrib.opentelemetry import create_tracer_provider
from traced_spans import Traced, only  # tests/traced_spans.py

from goagent_py import Agent, ConfigurationError
from goagent_py.durable import DurableAgent, ProviderRegistry, create_worker
from goagent_py.provider import CompletionRequest
from goagent_py.testing import FunctionProvider, text_response

pytestmark = pytest.mark.slow

ENTERED: dict[str, asyncio.Event] = {}


async def plan(request: CompletionRequest) -> Any:
    label = request.messages[0].text
    if label in ENTERED:  # a model call that never answers (the worker stopping cancels it)
        ENTERED[label].set()
        await asyncio.Event().wait()
    return text_response("done")


def _durable(**settings: Any) -> tuple[DurableAgent, ProviderRegistry]:
    agent = Agent(provider=FunctionProvider(plan), model="m", name="timed")
    durable = DurableAgent(
        agent, provider="openai:gpt-x", task_queue=f"q-{uuid.uuid4().hex[:8]}", **settings
    )
    # The workers build the spec's provider: here a scripted one under the "openai" prefix.
    return durable, ProviderRegistry({"openai": lambda _model: FunctionProvider(plan)})


async def test_durable_spans_name_the_provider_of_the_spec(temporal: Any) -> None:
    """``gen_ai.provider.name`` read ``_model_proxy``: the class of the workflow's proxy."""
    traced = Traced(create_tracer_provider())
    durable, registry = _durable()
    async with create_worker(
        temporal.client, [durable], registry=registry, tracer_provider=traced.provider
    ):
        result = await durable.execute(
            temporal.client, "hello", execution_timeout=timedelta(minutes=3)
        )
    assert result.text == "done"
    traced.provider.shutdown()
    for name in ("invoke_agent timed", "chat m"):
        assert dict(traced.one(name).attributes or {})["gen_ai.provider.name"] == "openai", name


async def test_a_timed_out_run_ends_every_span_it_opened_with_an_error(temporal: Any) -> None:
    """The run times out while its model call hangs (Temporal cuts the call's timeout to the
    run's; the run's own timeout needs no workflow task, so it is what ends the run). Bounded
    by the run's timeout on the server: nothing waits for the model call to start (a run that
    timed out before it did fails the assertion); the outer guard only turns a hang into a
    failure."""
    label = f"fail-{uuid.uuid4().hex[:6]}"
    ENTERED[label] = asyncio.Event()
    traced = Traced(create_tracer_provider())
    durable, registry = _durable()
    worker = create_worker(
        temporal.client, [durable], registry=registry, tracer_provider=traced.provider
    )
    async with asyncio.timeout(600), worker:
        handle = await durable.start(
            temporal.client, label, execution_timeout=timedelta(seconds=20)
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        assert ENTERED[label].is_set(), failed.value.cause  # not: before its model call
    assert "timed out" in str(failed.value.cause).lower()
    traced.provider.shutdown()
    spans = traced.spans()
    run, chat = only(spans, "invoke_agent timed"), only(spans, "chat m")
    for span in (run, chat):
        assert span.status.status_code is StatusCode.ERROR, span.name
        assert dict(span.attributes or {})["error.type"] == "workflow_timed_out", span.name
    assert chat.end_time is not None
    assert run.end_time is not None
    assert chat.end_time <= run.end_time


def test_a_first_retry_wait_longer_than_the_longest_is_refused_at_construction() -> None:
    """``retry_interval=600`` with the default ``max_retry_delay`` (60 s) was taken, and every
    run then failed on the workers ("Maximum interval cannot be less than initial interval",
    as a MemoryStoreError), or hung where the first activity was a model call: otel15's
    timed-out test that hung."""
    agent = Agent(provider=FunctionProvider(plan), model="m", name="timed")
    with pytest.raises(ConfigurationError, match="max_retry_delay"):
        DurableAgent(agent, provider="openai:gpt-x", retry_interval=600)
    DurableAgent(agent, provider="openai:gpt-x", retry_interval=600, max_retry_delay=600)
