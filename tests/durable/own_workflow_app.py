"""A user's own Temporal workflow that runs a durable agent's loop inside it
(``DurableAgent.run``), for tests/durable/test_own_workflow.py."""

from __future__ import annotations

import os
from typing import Any

from temporalio import workflow

from goagent_py import Agent
from goagent_py.durable import DurableAgent
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.messages import Role, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tools import tool


def plan(request: CompletionRequest) -> CompletionResponse | str:
    results = [m.text for m in request.messages if m.role == Role.TOOL]
    if not results:
        return tool_call_response(ToolCall("call-1", "double", {"n": 21}))
    return f"twice 21 is {results[0]}"


@tool
async def double(n: int) -> int:
    """Double a number.

    Args:
        n: the number.
    """
    return 2 * n


@tool(requires_approval=True)
async def wire(amount: int) -> str:
    """Send money.

    Args:
        amount: how much.
    """
    return f"sent {amount}"


def wire_plan(request: CompletionRequest) -> CompletionResponse | str:
    if not [m for m in request.messages if m.role == Role.TOOL]:
        return tool_call_response(ToolCall("call-1", "wire", {"amount": 5}))
    return "wired"


DURABLE = DurableAgent(
    Agent(provider=FunctionProvider(plan), model="m", name="doubler", tools=[double]),
    provider="fn:plan",
    task_queue="own-workflow",
)


def _storage(session: str) -> ShortTermMemory:
    # Built on the worker, outside the workflow's sandbox; the test names the file.
    return ShortTermMemory(SQLiteStorage(os.environ["OWN_WORKFLOW_DB"], session_id=session))


CAREFUL = DurableAgent(
    Agent(provider=FunctionProvider(wire_plan), model="m", name="wirer", tools=[wire]),
    provider="fn:wire",
    task_queue="own-workflow",
    short_term_memory=_storage,
)


@workflow.defn
class ReportWorkflow:
    """The user's workflow: a step of its own around the agent's run."""

    @workflow.run
    async def run(self, topic: str) -> dict[str, Any]:
        agent = CAREFUL if topic == "money" else DURABLE
        result = await agent.run(f"about {topic}")
        return {
            "topic": topic,
            "text": result.text,
            "tool_calls": result.tool_calls,
            "stop_reason": result.stop_reason and result.stop_reason.value,
        }


@workflow.defn
class BlankPromptWorkflow:
    """The user's workflow running the agent on a prompt it was given (an empty one is
    refused by ``DurableAgent.run`` with ``InvalidInputError``, reported here as data)."""

    @workflow.run
    async def run(self, prompt: str) -> dict[str, Any]:
        from goagent_py.errors import InvalidInputError

        try:
            result = await DURABLE.run(prompt)
        except InvalidInputError as exc:
            return {"refused": str(exc)}
        return {"text": result.text}
