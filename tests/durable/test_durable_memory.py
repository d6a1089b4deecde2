"""Memory activities on a real Temporal dev server: they heartbeat, bad stored data is not
retried, and results over the server's own payload limit name what produced them (issue 30)."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from goagent_py import Agent
from goagent_py.durable import DurableAgent, DurableRunError, ProviderRegistry, create_worker
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.messages import Message, Role, ToolCall, assistant_message, user_message
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tools import tool

pytestmark = pytest.mark.slow


def queue() -> str:
    return f"q-{uuid.uuid4().hex[:8]}"


def answer(request: CompletionRequest) -> str:
    return f"seen {len(request.messages)} messages"


def durable_with(
    storage: SQLiteStorage, **settings: object
) -> tuple[DurableAgent, ProviderRegistry]:
    agent = Agent(provider=FunctionProvider(answer), model="m", name="mem")
    durable = DurableAgent(
        agent,
        provider="fn:x",
        short_term_memory=lambda _: ShortTermMemory(storage),
        task_queue=queue(),
        **settings,  # type: ignore[arg-type]
    )
    return durable, ProviderRegistry({"fn": lambda _: FunctionProvider(answer)})


class SlowStorage(SQLiteStorage):
    """A history that takes ``delay`` seconds to load (a big session on a busy database)."""

    def __init__(self, path: Path, delay: float) -> None:
        super().__init__(path, session_id="s")
        self.delay = delay
        self.loads = 0

    async def load(self) -> list[Message]:
        self.loads += 1
        await asyncio.sleep(self.delay)
        return await super().load()


async def test_a_memory_load_slower_than_the_heartbeat_timeout_completes(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    storage = SlowStorage(tmp_path / "history.db", delay=2.0)
    await storage.append([user_message("earlier"), assistant_message("noted")])
    durable, registry = durable_with(storage, heartbeat_timeout=0.5, max_attempts=2)
    async with create_worker(temporal.client, [durable], registry=registry):
        result = await durable.execute(temporal.client, "now", session_id="s")
    assert result.text == "seen 3 messages"
    # The load activity's first attempt kept beating and finished (no retry); the model
    # activity read the history once more, to put the stored messages in place of the
    # workflow's stand-ins (issue 30: history by reference).
    assert storage.loads == 2
    await storage.aclose()


class CountingStorage(SQLiteStorage):
    def __init__(self, path: Path) -> None:
        super().__init__(path, session_id="s")
        self.loads = 0

    async def load(self) -> list[Message]:
        self.loads += 1
        return await super().load()


async def test_a_corrupted_history_row_fails_the_run_without_retrying(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    path = tmp_path / "history.db"
    storage = CountingStorage(path)
    await storage.append([user_message("earlier"), assistant_message("noted")])
    with sqlite3.connect(path) as db:
        db.execute("UPDATE goagent_messages SET message = 'not json' WHERE seq = 1")
    db.close()
    durable, registry = durable_with(storage, max_attempts=5)
    async with create_worker(temporal.client, [durable], registry=registry):
        with pytest.raises(DurableRunError) as info:
            await durable.execute(temporal.client, "now", session_id="s")
    assert storage.loads == 1  # bad data is the same on every attempt: not retried
    assert "seq=1" in str(info.value)
    assert "delete that row or clear the session" in str(info.value)
    await storage.aclose()


async def test_a_result_over_the_servers_limit_names_the_tool_and_is_not_retried(
    temporal: WorkflowEnvironment,
) -> None:
    calls: list[int] = []

    @tool
    async def dump() -> str:
        """Return a lot."""
        calls.append(1)
        return "x" * 3_000_000  # over the dev server's 2 MiB blob size limit

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        results = [m for m in request.messages if m.role == Role.TOOL]
        if not results:
            return tool_call_response(ToolCall("c1", "dump", {}))
        return f"error={results[0].is_error}: {results[0].text}"

    agent = Agent(
        provider=FunctionProvider(plan),
        model="m",
        name="big",
        tools=[dump],
        max_tool_result_chars=None,
    )
    durable = DurableAgent(
        agent, provider="fn:x", payload_limit=8 * 1024 * 1024, max_attempts=3, task_queue=queue()
    )
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    async with create_worker(temporal.client, [durable], registry=registry):
        result = await durable.execute(temporal.client, "go")
    assert result.text.startswith("error=True")
    assert "tool 'dump' result" in result.text
    assert "2097152-byte limit of the Temporal server's blob size limit" in result.text
    assert calls == [1]


async def test_a_model_request_over_the_servers_limit_fails_the_run_naming_it(
    temporal: WorkflowEnvironment,
) -> None:
    # Each tool result is under the server's 2 MiB, the next model request (both) is over it.
    # Sent, the server refused the workflow's task again and again and the run never ended.
    @tool
    async def half() -> str:
        """Return a lot."""
        return "x" * 1_200_000

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        if not any(m.role == Role.TOOL for m in request.messages):
            return tool_call_response(ToolCall("c1", "half", {}), ToolCall("c2", "half", {}))
        return "unreachable"

    agent = Agent(
        provider=FunctionProvider(plan),
        model="m",
        name="req",
        tools=[half],
        max_tool_result_chars=None,
    )
    durable = DurableAgent(
        agent, provider="fn:x", payload_limit=8 * 1024 * 1024, max_attempts=2, task_queue=queue()
    )
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    async with create_worker(temporal.client, [durable], registry=registry):
        with pytest.raises(DurableRunError) as info:
            # The bound only keeps a regression from hanging the suite.
            await asyncio.wait_for(durable.execute(temporal.client, "go"), timeout=120)
    assert "model 'm' request" in str(info.value)
    assert "2097152-byte limit of the Temporal server's blob size limit" in str(info.value)
