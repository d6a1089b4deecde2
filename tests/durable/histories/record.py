"""Record the histories the replay tests read (run with the version whose runs they stand for).

    PYTHONPATH=<a checkout of that version> python tests/durable/histories/record.py OUT_DIR

Writes ``tool_results.json.gz`` (a run of two tool calls with 70 KB results, on SQLite) and
``open_tail.json.gz`` (a run whose loaded history ends on a call without its result, on the
default in-memory storage: every append is an activity of its own). Each is a Temporal
``WorkflowHistory`` as gzipped JSON (``WorkflowHistory.from_json`` reads it back).
"""

from __future__ import annotations

import asyncio
import gzip
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from goagent_py import Agent
from goagent_py.durable import DurableAgent, ProviderRegistry, create_worker
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.messages import Message, Role, TextBlock, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tools import tool


@tool
async def read(path: str) -> str:
    """Read a file.

    Args:
        path: the path.
    """
    return path + " " + "x" * 70_000


def plan(request: CompletionRequest) -> CompletionResponse | str:
    done = sum(1 for m in request.messages if m.role == Role.TOOL)
    if done >= 2:
        return "read them"
    return tool_call_response(ToolCall(f"c{done}", "read", {"path": f"f{done}"}))


async def _run(env: WorkflowEnvironment, memory: ShortTermMemory, name: str) -> str:
    agent = Agent(provider=FunctionProvider(plan), model="m", name=name, tools=[read])
    durable = DurableAgent(
        agent,
        provider="fn:x",
        short_term_memory=lambda _session: memory,
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
    )
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    async with create_worker(env.client, [durable], registry=registry):
        handle = await durable.start(env.client, "read two files", session_id=name)
        await handle.result()
        recorded = await handle.fetch_history()
    return recorded.to_json()


async def main(out: Path) -> None:
    temporal = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=temporal)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            storage = SQLiteStorage(Path(tmp) / "chat.db", session_id="tools")
            text = await _run(env, ShortTermMemory(storage), "tools")
            (out / "tool_results.json.gz").write_bytes(gzip.compress(text.encode()))
        memory = ShortTermMemory()
        open_call = ToolCall("c-open", "read", {"path": "gone"})
        await memory.append(
            Message(Role.USER, [TextBlock("read gone")]),
            Message(Role.ASSISTANT, [], tool_calls=[open_call]),
        )
        text = await _run(env, memory, "open")
        (out / "open_tail.json.gz").write_bytes(gzip.compress(text.encode()))
    finally:
        await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
