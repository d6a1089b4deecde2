"""The agent of the durable approval crash test, in the test process and in worker subprocesses.

Its model asks once for ``refund`` (a tool that requires approval), then answers with the tool
results; each model call and each run of the tool is one line in ``$GOAGENT_LOG``
(append-only), so the test counts what ran. The session's record is a SQLite file both worker
processes open.

Run as a worker: ``python durable_approval_app.py <temporal address> <task queue> <sqlite file>``.
With ``$GOAGENT_KILL_AFTER_SETTLE`` set to a path that does not exist yet, the worker creates it
and SIGKILLs itself right after its claim of the decisions committed (before the activity can
report), once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from durable_app import log

from goagent_py import Agent
from goagent_py.durable import DurableAgent, ProviderRegistry, create_worker
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.messages import Role, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import tool


def plan(request: CompletionRequest) -> CompletionResponse | str:
    results = [m for m in request.messages if m.role == Role.TOOL]
    log(f"model {len(results)}")
    if not results:
        return tool_call_response(ToolCall("call-1", "refund", {"order": "A-17", "amount": "25"}))
    return "done: " + results[0].text


@tool(requires_approval=True)
def refund(order: str, amount: float) -> str:
    """Refund an order.

    Args:
        order: the order id.
        amount: euros.
    """
    ctx = current_tool_context()
    log(f"tool refund {ctx.idempotency_key if ctx else '-'}")
    return f"refunded {amount:.2f} on {order}"


class _DiesAfterClaim(ShortTermMemory):
    """Kills its process once, right after a claim (``update_where``) committed."""

    def __init__(self, db: Path, session: str, flag: Path) -> None:
        super().__init__(storage=SQLiteStorage(db, session_id=session))
        self._flag = flag

    async def update_where(self, match: Any, update: Any) -> Any:
        found = await super().update_where(match, update)
        if found is not None and not self._flag.exists():
            self._flag.write_text("killed")
            os.kill(os.getpid(), signal.SIGKILL)
        return found


def _memory(db: Path, session: str) -> ShortTermMemory:
    flag = os.environ.get("GOAGENT_KILL_AFTER_SETTLE")
    if flag:
        return _DiesAfterClaim(db, session, Path(flag))
    return ShortTermMemory(storage=SQLiteStorage(db, session_id=session))


def durable_agent(db: Path, task_queue: str) -> DurableAgent:
    agent = Agent(provider=FunctionProvider(plan), model="m", name="refunder", tools=[refund])
    return DurableAgent(
        agent,
        provider="plan:default",
        short_term_memory=lambda s: _memory(db, s),
        heartbeat_timeout=1.0,
        retry_interval=0.1,
        task_queue=task_queue,
    )


async def main(address: str, task_queue: str, db: str) -> None:
    from temporalio.client import Client

    client = await Client.connect(address)
    durable = durable_agent(Path(db), task_queue)
    registry = ProviderRegistry({"plan": lambda _: FunctionProvider(plan)})
    worker = create_worker(
        client,
        [durable],
        registry=registry,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )
    print("READY", flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
