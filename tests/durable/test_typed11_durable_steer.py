"""A steer signal is user input: the durable run's input guardrails check it (on a worker, as
the prompt's check) before the model reads it (docs/approvals.md, "Guardrails"). Real
Temporal dev server, in-process worker."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.testing import WorkflowEnvironment

from goagent_py import Agent, GuardrailContext, GuardrailTripped, Message
from goagent_py.durable import (
    STATE_QUERY,
    STEER_SIGNAL,
    DurableAgent,
    ProviderRegistry,
    create_worker,
)
from goagent_py.durable._client import result_of
from goagent_py.messages import ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tools import tool

pytestmark = pytest.mark.slow


async def test_a_steered_key_trips_the_input_guardrail_before_the_model_reads_it(
    temporal: WorkflowEnvironment,
) -> None:
    release, started = asyncio.Event(), asyncio.Event()
    requests: list[list[str]] = []
    checked: list[str] = []

    @tool
    async def hold() -> str:
        """Wait for the test."""
        started.set()
        await release.wait()
        return "held"

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        requests.append([m.text for m in request.messages])
        return tool_call_response(ToolCall("c1", "hold", {})) if len(requests) == 1 else "ok"

    def no_secrets(prompt: list[Message], ctx: GuardrailContext) -> str | None:
        checked.append(prompt[-1].text)
        return "the message holds an API key" if "sk-" in prompt[-1].text else None

    agent = Agent(
        provider=FunctionProvider(plan),
        model="m",
        name="steered",
        tools=[hold],
        input_guardrails=[no_secrets],
    )
    durable = DurableAgent(agent, provider="fn:x", task_queue=f"q-{uuid.uuid4().hex[:8]}")
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "go")
        await started.wait()
        await handle.signal(STEER_SIGNAL, "my key is sk-123")
        await handle.query(STATE_QUERY)  # the signal is in once a query sees it
        release.set()
        with pytest.raises(GuardrailTripped) as caught:
            await result_of(handle)
    assert caught.value.reason == "the message holds an API key"
    assert checked == ["go", "my key is sk-123"]
    assert len(requests) == 1  # the model never read the steered key
