"""The set-up the durable approval tests share (approve14 moved it here from each file): a
clerk whose refund tool waits for approval, a model that asks for refunds one call at a time,
the durable agent on a SQLite memory with its provider registry, and a wait for the run's
n-th wait. Not a test module."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from goagent_py import Agent
from goagent_py.durable import DurableAgent, ProviderRegistry
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.messages import Role, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response

Plan = Callable[[CompletionRequest], Awaitable[CompletionResponse | str]]


async def next_wait(durable: DurableAgent, handle: Any, seen: int) -> None:
    """Until the run's ``seen + 1``-th wait for decisions."""
    count = 0
    async for event in durable.events(handle):
        if event["type"] == "pending":
            count += 1
            if count > seen:
                return
    raise AssertionError("the run ended without waiting")


def numbered_refunds(*orders: str, call_id: str = "llama-tool-0") -> Plan:
    """A model that refunds ``orders`` one call at a time, every call with the same id (local
    models' servers number calls per turn), then answers with what the tools said."""
    wanted = orders or ("A-1", "A-2")

    async def plan(request: CompletionRequest) -> CompletionResponse | str:
        results = [m for m in request.messages if m.role is Role.TOOL]
        if len(results) < len(wanted):
            order = wanted[len(results)]
            return tool_call_response(ToolCall(call_id, "refund", {"order": order}))
        return "done: " + " | ".join(m.text for m in results)

    return plan


def one_refund(order: str = "A-1", call_id: str = "c1") -> Plan:
    """A model that refunds one order, then answers "done"."""

    async def plan(request: CompletionRequest) -> CompletionResponse | str:
        if request.messages[-1].role is not Role.TOOL:
            return tool_call_response(ToolCall(call_id, "refund", {"order": order}))
        return "done"

    return plan


def clerk(
    plan: Plan,
    tools: Sequence[Any],
    *,
    db: Path | None = None,
    memory: Callable[[str], Any] | None = None,
    name: str = "clerk",
    **options: Any,
) -> tuple[DurableAgent, ProviderRegistry]:
    """The durable agent of ``plan`` and ``tools`` (its memory: ``memory(session)``, or a
    SQLite file ``db``) on a task queue of its own, and the registry its workers need."""
    if memory is None:
        assert db is not None

        def memory(s: str) -> ShortTermMemory:
            return ShortTermMemory(storage=SQLiteStorage(db, session_id=s))

    durable = DurableAgent(
        Agent(provider=FunctionProvider(plan), model="m", name=name, tools=list(tools)),
        provider="fn:x",
        short_term_memory=memory,
        heartbeat_timeout=5.0,
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
        **options,
    )
    return durable, ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
