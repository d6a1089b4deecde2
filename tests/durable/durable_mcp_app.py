"""The agent of the durable MCP crash test, in the test process and in worker subprocesses.

Its model is a FunctionProvider with a fixed plan (three model calls, two MCP tool calls on
``durable_mcp_server.py``); every model call is logged as one line in ``$GOAGENT_LOG``, like the
server's tool calls.

Run as a worker: ``python durable_mcp_app.py <temporal address> <task queue>``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from goagent_py import Agent
from goagent_py.durable import DurableAgent, ProviderRegistry, create_worker
from goagent_py.mcp import MCPStdio
from goagent_py.messages import Role, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response

SERVER = str(Path(__file__).parent / "durable_mcp_server.py")


def log(line: str) -> None:
    path = os.environ.get("GOAGENT_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def plan(request: CompletionRequest) -> CompletionResponse | str:
    done = [m for m in request.messages if m.role == Role.TOOL]
    log(f"model {len(done)}")
    if len(done) == 0:
        return tool_call_response(ToolCall("call-1", "crashy_note", {"text": "a"}))
    if len(done) == 1:
        return tool_call_response(ToolCall("call-2", "crashy_slow", {"n": 2}))
    return "done: " + ", ".join(m.text for m in done)


def registry() -> ProviderRegistry:
    return ProviderRegistry({"plan": lambda _: FunctionProvider(plan)})


def durable_agent(task_queue: str) -> DurableAgent:
    # The server's environment is the worker's own setting: it never crosses the workflow.
    env = {k: os.environ[k] for k in ("GOAGENT_LOG", "GOAGENT_BLOCK") if k in os.environ}
    server = MCPStdio(sys.executable, [SERVER], env=env, name="crashy", prefix="crashy_")
    agent = Agent(provider=FunctionProvider(plan), model="m", name="mcpcrash", mcp_servers=[server])
    return DurableAgent(
        agent, provider="plan:default", heartbeat_timeout=2.0, task_queue=task_queue
    )


async def main(address: str, task_queue: str) -> None:
    from temporalio.client import Client

    client = await Client.connect(address)
    worker = create_worker(client, [durable_agent(task_queue)], registry=registry())
    print("READY", flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
