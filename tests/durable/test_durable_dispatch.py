"""Tool calls in durable runs go through the worker's own dispatch chain and tool gates; a
retried long-term store does not duplicate. Real Temporal dev server, in-process workers."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from goagent_py import Agent
from goagent_py.dispatch import DispatchFunc
from goagent_py.durable import MEMORY_ID_KEY, DurableAgent, ProviderRegistry, create_worker
from goagent_py.messages import (
    ContentBlock,
    Message,
    Role,
    ScoredMessage,
    TextBlock,
    ToolCall,
    Usage,
)
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.results import ToolResult
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import tool

pytestmark = pytest.mark.slow


def queue() -> str:
    return f"q-{uuid.uuid4().hex[:8]}"


def durable_for(plan: Any, tools: list[Any], **settings: Any) -> tuple[DurableAgent, Any]:
    durable_settings = {
        k: settings.pop(k) for k in ("long_term_memory", "max_attempts") if k in settings
    }
    agent = Agent(provider=FunctionProvider(plan), model="m", name="ops", tools=tools, **settings)
    durable = DurableAgent(agent, provider="fn:x", task_queue=queue(), **durable_settings)
    return durable, ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})


def results_of(request: CompletionRequest) -> list[Message]:
    return [m for m in request.messages if m.role == Role.TOOL]


async def test_a_gate_on_the_worker_denies_a_call_and_the_denial_ends_the_run(
    temporal: WorkflowEnvironment,
) -> None:
    ran: list[str] = []
    gate_saw: list[str] = []

    @tool
    def wipe(path: str) -> str:
        """Delete a folder.

        Args:
            path: the folder.
        """
        ran.append(path)
        return "wiped"

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        if not results_of(request):
            return tool_call_response(ToolCall("c1", "wipe", {"path": "/"}), text="wiping /")
        return "the model must not be asked again: stop_on_denied ends the run"

    def gate(call: ToolCall, message: Message) -> str | None:
        gate_saw.append(message.text)  # the assistant message that made the call
        return "wiping / is not allowed" if call.arguments["path"] == "/" else None

    durable, registry = durable_for(
        plan, [wipe], before_tool_call=gate, stop_on_denied=True, max_attempts=2
    )
    async with create_worker(temporal.client, [durable], registry=registry):
        result = await durable.execute(temporal.client, "clean up")
    assert ran == []
    assert gate_saw == ["wiping /"]
    assert result.iterations == 1  # the denial ended the run after its batch
    denial = [m for m in result.messages if m.role == Role.TOOL]
    assert [m.is_error for m in denial] == [True]
    assert denial[0].text == "Error: tool 'wipe' was not run: wiping / is not allowed"


async def test_prepare_arguments_repairs_a_call_on_the_worker_before_validation(
    temporal: WorkflowEnvironment,
) -> None:
    ran: list[int] = []

    @tool
    def double(n: int) -> int:
        """Double a number.

        Args:
            n: the number.
        """
        ran.append(n)
        return 2 * n

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        found = results_of(request)
        if not found:  # the model spells the argument wrong; the repair renames it
            return tool_call_response(
                ToolCall("c1", "double", {"number": "21"}), ToolCall("c2", "double", {"n": 1})
            )
        return " | ".join(m.text for m in found)

    def repair(call: ToolCall) -> dict[str, Any] | None:
        if call.id == "c2":
            raise RuntimeError("no repair for this one")
        if "number" in call.arguments:
            return {"n": call.arguments["number"]}
        return None

    durable, registry = durable_for(plan, [double], prepare_arguments=repair)
    async with create_worker(temporal.client, [durable], registry=registry):
        result = await durable.execute(temporal.client, "double 21")
    assert ran == [21]  # repaired, then validated ("21" -> 21); the failed repair never ran
    assert result.text.startswith("42 | Error: ")
    assert "preparing the arguments failed: no repair for this one" in result.text


async def test_after_tool_call_and_middlewares_run_on_the_worker(
    temporal: WorkflowEnvironment,
) -> None:
    @tool
    def secret() -> str:
        """Read the secret."""
        return "hunter2"

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        found = results_of(request)
        if not found:
            return tool_call_response(ToolCall("c1", "secret", {}))
        return f"saw: {found[0].text}"

    def redact(result: ToolResult) -> ToolResult:
        return ToolResult(result.call, [TextBlock("[redacted]")], None, result.duration)

    passed: list[tuple[str, str]] = []

    def audit(next_call: DispatchFunc) -> DispatchFunc:
        async def run(call: ToolCall) -> list[ContentBlock]:
            passed.append((call.id, call.name))
            return await next_call(call)

        return run

    durable, registry = durable_for(
        plan, [secret], after_tool_call=redact, dispatch_middlewares=[audit]
    )
    async with create_worker(temporal.client, [durable], registry=registry):
        result = await durable.execute(temporal.client, "go")
    assert result.text == "saw: [redacted]"
    assert "hunter2" not in str([m.text for m in result.messages])
    assert passed == [("c1", "secret")]  # the agent's middlewares ran on the worker


async def test_the_agents_tool_timeout_applies_in_the_activity_and_is_not_retried(
    temporal: WorkflowEnvironment,
) -> None:
    started: list[str] = []
    never = asyncio.Event()

    @tool
    async def stuck() -> str:
        """Wait for something that never happens."""
        started.append("stuck")
        await never.wait()
        return "unreachable"

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        found = results_of(request)
        if not found:
            return tool_call_response(ToolCall("c1", "stuck", {}))
        return f"error={found[0].is_error}: {found[0].text}"

    durable, registry = durable_for(plan, [stuck], tool_timeout=0.2, max_attempts=3)
    async with create_worker(temporal.client, [durable], registry=registry):
        result = await durable.execute(temporal.client, "go")
    assert result.text == "error=True: Error: tool 'stuck' timed out after 0.2s"
    assert len(started) == 1  # the agent's timeout is final, as in a plain run


class SqliteLongTerm:
    """A long-term memory of one row per message in a SQLite file, keyed by the message's id
    (a fresh id when it has none). Its first store fails after committing, like a connection
    dropped before the answer arrived."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stores = 0
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE memories (id TEXT PRIMARY KEY, session TEXT, text TEXT)")

    async def retrieve(
        self, query: list[ContentBlock], *, top_k: int | None, session: str = ""
    ) -> list[ScoredMessage]:
        return []

    async def store(self, messages: list[Message], *, session: str = "") -> None:
        self.stores += 1
        with sqlite3.connect(self.path) as db:
            for m in messages:
                row = (str(m.metadata.get(MEMORY_ID_KEY) or uuid.uuid4()), session, m.text)
                db.execute(
                    "INSERT INTO memories VALUES (?, ?, ?) "
                    "ON CONFLICT (id) DO UPDATE SET text = excluded.text",
                    row,
                )
        if self.stores == 1:
            raise ConnectionError("connection reset (after the commit)")

    def rows(self) -> list[tuple[str, str]]:
        with sqlite3.connect(self.path) as db:
            return list(db.execute("SELECT id, text FROM memories ORDER BY id"))


async def test_a_retried_long_term_store_upserts_the_same_rows(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    memory = SqliteLongTerm(tmp_path / "memories.db")
    durable, registry = durable_for(
        lambda r: f"answer to {r.messages[-1].text}", [], long_term_memory=memory, max_attempts=3
    )
    async with create_worker(temporal.client, [durable], registry=registry):
        first = await durable.execute(temporal.client, "one")
        rows = memory.rows()
        await durable.execute(temporal.client, "two")
    assert memory.stores == 3  # the first store ran twice (its first attempt failed)
    assert sorted(text for _, text in rows) == ["answer to one", "one"]
    assert {id.rsplit(":", 1)[0] for id, _ in rows} == {f"{first.run_id}:store:1"}
    # Another turn is other rows: the ids are per run and message, not per text.
    assert len(memory.rows()) == 4


async def test_the_same_turn_twice_is_one_set_of_memories_as_in_a_plain_run(
    temporal: WorkflowEnvironment,
) -> None:
    from goagent_py.memory import LongTermMemory
    from goagent_py.memory.vector import InMemoryVectorStore
    from goagent_py.testing import FakeEmbedder

    store = InMemoryVectorStore()
    memory = LongTermMemory(FakeEmbedder(), store)
    durable, registry = durable_for(
        lambda r: f"answer to {r.messages[-1].text}", [], long_term_memory=memory
    )
    async with create_worker(temporal.client, [durable], registry=registry):
        await durable.execute(temporal.client, "my cat is called Miso")
        once = await store.count()
        await durable.execute(temporal.client, "my cat is called Miso")
        again = await store.count()
        await durable.execute(temporal.client, "my dog is called Pepper")
    assert once == 2  # the user's message and the answer
    assert again == once  # LongTermMemory's ids hash the message: the same turn replaces
    assert await store.count() == 4


async def test_what_a_tool_tells_its_context_on_the_worker_reaches_the_run(
    temporal: WorkflowEnvironment,
) -> None:
    @tool
    def final_report() -> str:
        """Write the final report."""
        ctx = current_tool_context()
        assert ctx is not None
        ctx.add_usage(Usage(input_tokens=7, output_tokens=3))  # a sub-agent's tokens
        ctx.terminate()
        return "report written"

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        if not results_of(request):
            return tool_call_response(ToolCall("c1", "final_report", {}))
        return "the model must not be asked again: the tool terminated the run"

    durable, registry = durable_for(plan, [final_report])
    async with create_worker(temporal.client, [durable], registry=registry):
        result = await durable.execute(temporal.client, "go")
    assert result.iterations == 1  # not asked again
    assert [m.text for m in result.messages if m.role == Role.TOOL] == ["report written"]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (7, 3)
