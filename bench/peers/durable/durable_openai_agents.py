"""Durable peer benchmark: openai-agents on Temporal (``temporalio.contrib.openai_agents``).

``OpenAIAgentsPlugin`` runs the model call as an activity on the worker (its ``model_provider``
gives a custom ``Model``, the SDK's documented seam for a test model); the tool is a Temporal
activity made a tool with ``workflow.activity_as_tool``, as the integration's guide shows (a
plain ``function_tool`` would run inside the workflow, not durably). The plain run is the same
agent with ``function_tool(add)`` and the same model, outside a workflow.
Its virtualenv: ``pip install openai-agents "temporalio[openai-agents]"``.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import _harness as h
from agents import (
    Agent,
    ModelResponse,
    Runner,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.models.interface import Model, ModelProvider
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.contrib.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
from temporalio.contrib.openai_agents import workflow as oa_workflow
from temporalio.worker import Worker

set_tracing_disabled(True)


class ScriptedModel(Model):
    async def get_response(
        self,
        system_instructions,
        input,
        model_settings,
        tools,
        output_schema,
        handoffs,
        tracing,
        **kwargs,
    ):
        items = input if isinstance(input, list) else [{"role": "user", "content": input}]
        results = [
            i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        first = next(i for i in items if isinstance(i, dict) and i.get("role") == "user")
        content = first["content"]
        text = content if isinstance(content, str) else content[0]["text"]
        steps = h.steps_of(text)
        if len(results) < steps:
            i = len(results)
            item = ResponseFunctionToolCall(
                id=f"fc_{i}",
                call_id=f"call_{i}",
                type="function_call",
                name="add",
                arguments=f'{{"a":{i},"b":1}}',
            )
        else:
            item = ResponseOutputMessage(
                id="msg_1",
                type="message",
                role="assistant",
                status="completed",
                content=[
                    ResponseOutputText(
                        text=str(results[-1]["output"]),
                        type="output_text",
                        annotations=[],
                        logprobs=[],
                    )
                ],
            )
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


class ScriptedProvider(ModelProvider):
    def get_model(self, model_name):
        return ScriptedModel()


@activity.defn
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@workflow.defn
class BenchWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> str:
        agent = Agent(
            name="bench",
            model="scripted",
            tools=[
                oa_workflow.activity_as_tool(add, start_to_close_timeout=timedelta(seconds=300))
            ],
        )
        return str((await Runner.run(agent, prompt)).final_output)


async def setup(address: str):
    plugin = OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(start_to_close_timeout=timedelta(seconds=300)),
        model_provider=ScriptedProvider(),
    )
    client = await Client.connect(address, plugins=[plugin])
    queue = f"bench-openai-{uuid.uuid4().hex[:8]}"
    h.TASK_QUEUE = queue
    worker = Worker(client, task_queue=queue, workflows=[BenchWorkflow], activities=[add])
    running = asyncio.create_task(worker.run())
    plain_agent = Agent(name="bench", model=ScriptedModel(), tools=[function_tool(h.add)])

    async def plain(k: int) -> str:
        return str((await Runner.run(plain_agent, h.prompt(k))).final_output)

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
    h.main("openai-agents", ("openai-agents", "temporalio-openai-agents", "temporalio"), setup)
