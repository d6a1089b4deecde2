"""A durable run on keyed storage (SQLite) that ends while appends still wait for a model call
(review4): whatever ends it (a failed model call after a tool step, the iteration budget, an
output guardrail, an abort) every message is stored exactly once and in order, as a plain run
of the same script stores it. Real Temporal dev server, in-process worker, real SQLite."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment
from test_durable_steps import add  # tests/durable/test_durable_steps.py

from goagent_py import Agent, GoAgentError, GuardrailContext, validate_transcript
from goagent_py.durable import DurableAgent, ProviderRegistry, create_worker
from goagent_py.errors import ProviderError
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.messages import Message, Role, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tools import tool

pytestmark = pytest.mark.slow


def script(ending: str) -> Any:
    def plan(request: CompletionRequest) -> CompletionResponse | str:
        tools_seen = sum(m.role == Role.TOOL for m in request.messages)
        if tools_seen < 2:
            return tool_call_response(ToolCall(f"call-{tools_seen}", "add", {"a": 2, "b": 3}))
        if ending == "model_fails":
            raise ProviderError("bad request", provider="fn", status=400)
        return "darn, the sum is 5"

    return plan


def no_swearing(answer: str, ctx: GuardrailContext) -> str | None:
    return "the answer swears" if "darn" in answer else None


def agent_for(ending: str, **settings: Any) -> Agent:
    if ending == "max_iterations":
        settings["max_iterations"] = 2
    if ending == "guardrail":
        settings["output_guardrails"] = [no_swearing]
    return Agent(
        provider=FunctionProvider(script(ending)), model="m", name="carry", tools=[add], **settings
    )


def shape(messages: list[Message]) -> list[tuple[Role, str, list[str]]]:
    return [(m.role, m.text, [c.id for c in m.tool_calls]) for m in messages]


@pytest.mark.parametrize("ending", ["model_fails", "max_iterations", "guardrail"])
async def test_a_run_that_fails_after_tool_steps_stores_each_message_once_in_order(
    temporal: WorkflowEnvironment, tmp_path: Path, ending: str
) -> None:
    db = tmp_path / "chat.db"
    # What a plain run of the same script stores.
    async with SQLiteStorage(db, session_id="plain") as plain_storage:
        plain = agent_for(ending, short_term_memory=ShortTermMemory(plain_storage))
        with pytest.raises(GoAgentError):
            await plain.run("add 2 and 3 twice")
        expected = await plain_storage.load()

    durable = DurableAgent(
        agent_for(ending),
        provider="fn:x",
        short_term_memory=lambda s: ShortTermMemory(SQLiteStorage(db, session_id=s)),
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
        max_attempts=1,
    )
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(script(ending))})
    async with create_worker(temporal.client, [durable], registry=registry):
        with pytest.raises(Exception):  # noqa: B017, PT011 - the run fails, its kind aside
            await durable.execute(temporal.client, "add 2 and 3 twice", session_id="durable")
        # The session goes on afterwards: a second run sees the whole first one.
    async with SQLiteStorage(db, session_id="durable") as storage:
        stored = await storage.load()
    if ending == "model_fails":
        # A plain run stores no half turn; a durable run stores each step as it ends, as a
        # session's run does: the steps before the failed call, each once.
        assert expected == []
        assert [(m.role, [c.id for c in m.tool_calls]) for m in stored] == [
            (Role.USER, []),
            (Role.ASSISTANT, ["call-0"]),
            (Role.TOOL, []),
            (Role.ASSISTANT, ["call-1"]),
            (Role.TOOL, []),
        ]
    else:
        assert shape(stored) == shape(expected)
    assert validate_transcript(stored, allow_pending=False) == []


async def test_a_reader_sees_a_tool_step_once_the_next_model_call_has_started(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    """What another reader of the session's storage sees mid-run (docs/scaling-out.md): while
    the tool runs, the prompt (carried by the first model call); while the second model call
    runs, the tool step too (carried by it); at the end, the answer."""
    import asyncio

    db = tmp_path / "chat.db"
    in_tool, in_model = asyncio.Event(), asyncio.Event()
    go_tool, go_model = asyncio.Event(), asyncio.Event()

    @tool
    async def lookup(q: str) -> str:
        """Look up.

        Args:
            q: the query.
        """
        in_tool.set()
        await go_tool.wait()
        return "found"

    async def plan(request: CompletionRequest) -> CompletionResponse | str:
        if request.messages[-1].role != Role.TOOL:
            return tool_call_response(ToolCall("call-1", "lookup", {"q": "x"}))
        in_model.set()
        await go_model.wait()
        return "done"

    durable = DurableAgent(
        Agent(provider=FunctionProvider(plan), model="m", name="reader", tools=[lookup]),
        provider="fn:x",
        short_term_memory=lambda s: ShortTermMemory(SQLiteStorage(db, session_id=s)),
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
    )
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})

    async def roles() -> list[Role]:
        async with SQLiteStorage(db, session_id="s") as storage:
            return [m.role for m in await storage.load()]

    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "look it up", session_id="s")
        await in_tool.wait()
        during_tool = await roles()
        go_tool.set()
        await in_model.wait()
        during_model = await roles()
        go_model.set()
        await handle.result()
    assert during_tool == [Role.USER]
    assert during_model == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert await roles() == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
