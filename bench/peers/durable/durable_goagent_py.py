"""Durable peer benchmark: goagent-py's DurableAgent (goagent_py.durable) on a FunctionProvider.

Run by ``bench/peers/durable/compare.py`` with an interpreter that imports goagent_py and temporalio
(``pip install "goagent-py[temporal]"``); see ``_harness.py`` for the protocol.
"""

from __future__ import annotations

import asyncio
import uuid

import _harness as h
from temporalio.client import Client

from goagent_py import Agent
from goagent_py.durable import DurableAgent, ProviderRegistry, create_worker
from goagent_py.messages import Role, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tools import tool

add = tool(h.add)


def scripted(request: CompletionRequest) -> CompletionResponse | str:
    results = [m for m in request.messages if m.role == Role.TOOL]
    steps = h.steps_of(next(m.text for m in request.messages if m.role == Role.USER))
    if len(results) < steps:
        i = len(results)
        return tool_call_response(ToolCall(f"call_{i}", "add", {"a": i, "b": 1}))
    return results[-1].text


async def setup(address: str):  # type: ignore[no-untyped-def]
    client = await Client.connect(address)
    queue = f"bench-goagent-{uuid.uuid4().hex[:8]}"
    h.TASK_QUEUE = queue
    agent = Agent(provider=FunctionProvider(scripted), model="scripted", name="bench", tools=[add])
    durable = DurableAgent(agent, provider="scripted:bench", task_queue=queue)
    registry = ProviderRegistry({"scripted": lambda _: FunctionProvider(scripted)})
    worker = create_worker(client, [durable], registry=registry)
    running = asyncio.create_task(worker.run())

    async def plain(k: int) -> str:
        return (await agent.run(h.prompt(k))).text

    async def durable_run(k: int) -> str:
        return (await durable.execute(client, h.prompt(k), **h.start_options())).text

    async def close() -> None:
        await worker.shutdown()
        await running

    return plain, durable_run, close


if __name__ == "__main__":
    h.main("goagent-py", ("goagent-py", "temporalio"), setup)
