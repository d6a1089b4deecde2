"""Durable peer benchmark: pydantic-ai's Temporal integration (pydantic_ai.durable_exec.temporal).

The agent carries the ``TemporalDurability`` capability (its model requests and tool calls run
as activities inside a workflow), the model is pydantic-ai's own ``FunctionModel`` test double,
the client has ``PydanticAIPlugin`` and the worker ``AgentPlugin``, as its documentation shows.
The plain run is the same agent outside a workflow (the capability is then transparent).
Its virtualenv: ``pip install "pydantic-ai-slim[temporal]"``.
"""

from __future__ import annotations

import asyncio
import uuid
import warnings

import _harness as h
from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import AgentPlugin, PydanticAIPlugin, TemporalDurability
from pydantic_ai.messages import (
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

warnings.simplefilter("ignore")


def scripted(messages, info: AgentInfo) -> ModelResponse:
    parts = [p for m in messages for p in m.parts]
    results = [p for p in parts if isinstance(p, ToolReturnPart)]
    steps = h.steps_of(next(str(p.content) for p in parts if isinstance(p, UserPromptPart)))
    if len(results) < steps:
        i = len(results)
        return ModelResponse(
            parts=[ToolCallPart("add", {"a": i, "b": 1}, tool_call_id=f"call_{i}")]
        )
    return ModelResponse(parts=[TextPart(str(results[-1].content))])


agent = Agent(
    FunctionModel(scripted), name="bench", tools=[h.add], capabilities=[TemporalDurability()]
)


@workflow.defn
class BenchWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> str:
        return (await agent.run(prompt)).output


async def setup(address: str):
    client = await Client.connect(address, plugins=[PydanticAIPlugin()])
    queue = f"bench-pydantic-{uuid.uuid4().hex[:8]}"
    h.TASK_QUEUE = queue
    worker = Worker(
        client, task_queue=queue, workflows=[BenchWorkflow], plugins=[AgentPlugin(agent)]
    )
    running = asyncio.create_task(worker.run())

    async def plain(k: int) -> str:
        return (await agent.run(h.prompt(k))).output

    async def durable(k: int) -> str:
        return await client.execute_workflow(
            BenchWorkflow.run,
            h.prompt(k),
            id=f"bench-{uuid.uuid4().hex}",
            task_queue=queue,
            **h.start_options(),
        )

    async def close() -> None:
        await worker.shutdown()
        await running

    return plain, durable, close


if __name__ == "__main__":
    h.main("pydantic-ai", ("pydantic-ai-slim", "temporalio"), setup)
