"""Which failed tool calls the engine retries in a durable run (review9f).

A tool says whether trying again is safe with a :class:`TransientError` marker on its error,
as in a plain run's ``tool_retry``: a tool that sent an order and then lost the answer raises a
connection error marked not transient, and must not send it twice. The activity ignored the
marker: a connection error was retried whatever the tool said, and an error marked transient
was never retried. And a slow but alive tool past ``DurableAgent(tool_timeout=...)``, the
activity's start-to-close timeout, was run again by the engine. Real Temporal dev server, an
in-process worker.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from goagent_py import Agent
from goagent_py.durable import DurableAgent, ProviderRegistry, create_worker
from goagent_py.messages import Role, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.resilience import TransientMarker
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tools import tool

pytestmark = pytest.mark.slow


class AnswerLostError(TransientMarker, ConnectionError):
    """The order went out; the connection dropped before its confirmation came back."""

    transient = False


class BackendBusyError(TransientMarker, Exception):
    transient = True


def _plan(name: str) -> Any:
    def plan(request: CompletionRequest) -> CompletionResponse | str:
        found = [m for m in request.messages if m.role == Role.TOOL]
        if not found:
            return tool_call_response(ToolCall("c1", name, {}))
        return f"error={found[0].is_error}: {found[0].text}"

    return plan


async def _run(temporal: WorkflowEnvironment, name: str, tool_: Any) -> str:
    plan = _plan(name)
    agent = Agent(provider=FunctionProvider(plan), model="m", name="shop", tools=[tool_])
    durable = DurableAgent(
        agent,
        provider="fn:x",
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
        max_attempts=3,
        retry_interval=0.05,
    )
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    async with create_worker(temporal.client, [durable], registry=registry):
        result = await durable.execute(temporal.client, "go")
    return str(result.text)


async def test_a_connection_error_the_tool_marks_not_transient_is_not_retried(
    temporal: WorkflowEnvironment,
) -> None:
    sent: list[str] = []

    @tool
    def place_order() -> str:
        """Place the order."""
        sent.append("order")
        raise AnswerLostError("connection reset after the order was sent")

    text = await _run(temporal, "place_order", place_order)
    assert sent == ["order"]  # sent once: the tool said a retry is not safe
    assert text.startswith("error=True: Error: tool 'place_order' failed: AnswerLostError")


async def test_an_error_the_tool_marks_transient_is_retried_by_the_engine(
    temporal: WorkflowEnvironment,
) -> None:
    attempts: list[int] = []

    @tool
    def lookup() -> str:
        """Look it up."""
        attempts.append(1)
        if len(attempts) == 1:
            raise BackendBusyError("busy, try again")
        return "found"

    assert await _run(temporal, "lookup", lookup) == "error=False: found"
    assert len(attempts) == 2


async def test_a_slow_but_alive_tool_past_the_durable_tool_timeout_is_not_run_again(
    temporal: WorkflowEnvironment,
) -> None:
    import time

    started: list[float] = []

    @tool
    def slow_report() -> str:
        """Builds a report slowly, heartbeating all along (a sync tool in its thread)."""
        started.append(time.monotonic())
        time.sleep(1.5)
        return "report"

    plan = _plan("slow_report")
    agent = Agent(provider=FunctionProvider(plan), model="m", name="slow", tools=[slow_report])
    durable = DurableAgent(
        agent,
        provider="fn:x",
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
        tool_timeout=0.5,
        heartbeat_timeout=None,
        max_attempts=2,
        retry_interval=0.05,
    )
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    async with create_worker(temporal.client, [durable], registry=registry):
        result = await durable.execute(temporal.client, "go")
    # Given up on before the activity's own timeout, as the agent's tool_timeout gives up: the
    # model reads the timeout, and the tool ran once (the engine would have run it again).
    assert result.text == "error=True: Error: tool 'slow_report' timed out after 0.5s"
    assert len(started) == 1
