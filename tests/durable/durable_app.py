"""The agent the durable tests run, in the test process and in worker subprocesses.

Its model is a FunctionProvider with a fixed plan (three model calls, two tool calls); every
model call and tool execution is logged as one line in ``$GOAGENT_LOG`` (append-only), so a
test can count what ran. ``slow_step`` blocks forever the first time it runs in a process with
``$GOAGENT_BLOCK`` set, printing ``BLOCKED`` first, so a test can kill the worker there.

Run as a worker: ``python durable_app.py <temporal address> <task queue> <postgres dsn>`` (an
empty dsn: no short-term memory); ``$GOAGENT_HEARTBEAT``, ``$GOAGENT_RETRY_INTERVAL`` and
``$GOAGENT_STICKY_TIMEOUT`` (seconds) set the recovery settings.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta
from typing import Any

from goagent_py import Agent
from goagent_py.durable import DurableAgent, ProviderRegistry, create_worker
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import PostgresStorage
from goagent_py.messages import Role, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import tool


def log(line: str) -> None:
    path = os.environ.get("GOAGENT_LOG")
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


def plan(request: CompletionRequest) -> CompletionResponse | str:
    done = [m for m in request.messages if m.role == Role.TOOL]
    log(f"model {len(done)}")
    if len(done) == 0:
        return tool_call_response(ToolCall("call-1", "lookup", {"key": "a"}))
    if len(done) == 1:
        return tool_call_response(ToolCall("call-2", "slow_step", {"n": 2}))
    return "done: " + ", ".join(m.text for m in done)


@tool
async def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key.
    """
    ctx = current_tool_context()
    log(f"tool lookup {ctx.idempotency_key if ctx else '-'}")
    return f"value of {key}"


_blocked = False


@tool
async def slow_step(n: int) -> str:
    """A slow step.

    Args:
        n: the step number.
    """
    global _blocked
    ctx = current_tool_context()
    log(f"tool slow_step {ctx.idempotency_key if ctx else '-'}")
    if os.environ.get("GOAGENT_BLOCK") and not _blocked:
        _blocked = True
        print("BLOCKED", flush=True)
        await asyncio.Event().wait()  # until the test kills this process
    return f"step {n} done"


def registry() -> ProviderRegistry:
    return ProviderRegistry({"plan": lambda _: FunctionProvider(plan)})


def durable_agent(dsn: str | None, **settings: Any) -> DurableAgent:
    agent = Agent(
        provider=FunctionProvider(plan),
        model="plan-model",
        name="planner",
        tools=[lookup, slow_step],
    )
    storage = PostgresStorage(dsn, table="durable_messages") if dsn else None
    return DurableAgent(
        agent,
        provider="plan:default",
        short_term_memory=(lambda s: ShortTermMemory(storage.for_session(s))) if storage else None,
        **settings,
    )


async def main(address: str, task_queue: str, dsn: str) -> None:
    from temporalio.client import Client

    client = await Client.connect(address)
    # The recovery settings of docs/scaling-out.md, unless the environment says otherwise.
    durable = durable_agent(
        dsn,
        heartbeat_timeout=float(os.environ.get("GOAGENT_HEARTBEAT", "1.0")),
        retry_interval=float(os.environ.get("GOAGENT_RETRY_INTERVAL", "0.1")),
        task_queue=task_queue,
    )
    sticky = float(os.environ.get("GOAGENT_STICKY_TIMEOUT", "1.0"))
    options = {"sticky_queue_schedule_to_start_timeout": timedelta(seconds=sticky)}
    worker = create_worker(client, [durable], registry=registry(), **options)
    print("READY", flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
