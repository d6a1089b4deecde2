"""Guardrails in a durable run (issue 35): each of the agent's guardrails runs on a worker, as
the activity ``goagent.guardrail.<agent>`` (its verdict recorded, so a replay does not ask
again); a trip fails the run with ``GuardrailTripped`` and leaves the record valid, as in a
plain run. Real Temporal dev server, in-process workers, the worker's SQLite memory."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from goagent_py import Agent, GuardrailContext, GuardrailTripped, Message, validate_transcript
from goagent_py.durable import DurableAgent, ProviderRegistry, create_worker
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.messages import Role
from goagent_py.provider import CompletionRequest
from goagent_py.testing import FunctionProvider

pytestmark = pytest.mark.slow


def setup(tmp_path: Path) -> tuple[DurableAgent, ProviderRegistry, dict[str, Any]]:
    seen: dict[str, Any] = {"input": [], "output": [], "model": 0}

    def plan(request: CompletionRequest) -> str:
        seen["model"] += 1
        return f"the answer to {request.messages[-1].text}"

    def no_secrets(prompt: list[Message], ctx: GuardrailContext) -> str | None:
        seen["input"].append((prompt[-1].text, ctx.kind, ctx.agent))
        return "the prompt holds an API key" if "sk-" in prompt[-1].text else None

    async def no_swearing(answer: str, ctx: GuardrailContext) -> str | None:
        seen["output"].append((answer, ctx.text))
        return "the answer swears" if "darn" in answer else None

    db = tmp_path / "chat.db"
    agent = Agent(
        provider=FunctionProvider(plan),
        model="m",
        name="guarded",
        input_guardrails=[no_secrets],
        output_guardrails=[no_swearing],
    )
    durable = DurableAgent(
        agent,
        provider="fn:x",
        short_term_memory=lambda s: ShortTermMemory(storage=SQLiteStorage(db, session_id=s)),
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
    )
    seen["db"] = db
    return durable, ProviderRegistry({"fn": lambda _: FunctionProvider(plan)}), seen


async def stored(seen: dict[str, Any], session: str) -> list[Message]:
    async with SQLiteStorage(seen["db"], session_id=session) as s:
        return await s.load()


async def test_guardrails_that_do_not_trip_let_the_durable_run_go_on(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    durable, registry, seen = setup(tmp_path)
    async with create_worker(temporal.client, [durable], registry=registry):
        result = await durable.execute(temporal.client, "hello", session_id="ok")
    assert result.text == "the answer to hello"
    # Each guardrail ran once, on the worker, with what a plain run gives it.
    assert seen["input"] == [("hello", "input", "guarded")]
    assert seen["output"] == [("the answer to hello", "the answer to hello")]


async def test_an_input_guardrail_trips_before_the_model_and_the_record_stays_valid(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    durable, registry, seen = setup(tmp_path)
    async with create_worker(temporal.client, [durable], registry=registry):
        with pytest.raises(GuardrailTripped) as caught:
            await durable.execute(temporal.client, "my key: sk-1", session_id="in")
        # The session goes on: the next prompt runs.
        after = await durable.execute(temporal.client, "hello", session_id="in")
    assert (caught.value.guardrail, caught.value.kind) == ("no_secrets", "input")
    assert caught.value.reason == "the prompt holds an API key"
    assert after.text == "the answer to hello"
    assert seen["model"] == 1  # only the second prompt reached the model
    record = await stored(seen, "in")
    assert [m.role for m in record] == [Role.USER, Role.ASSISTANT, Role.USER, Role.ASSISTANT]
    assert record[1].metadata["goagent.synthetic"] == "guardrail"
    assert validate_transcript(record, allow_pending=False) == []


async def test_an_output_guardrail_trips_on_the_answer_and_the_record_withholds_it(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    durable, registry, seen = setup(tmp_path)
    async with create_worker(temporal.client, [durable], registry=registry):
        with pytest.raises(GuardrailTripped) as caught:
            await durable.execute(temporal.client, "darn", session_id="out")
    assert (caught.value.guardrail, caught.value.kind) == ("no_swearing", "output")
    assert caught.value.reason == "the answer swears"
    record = await stored(seen, "out")
    assert [(m.role, m.text) for m in record] == [
        (Role.USER, "darn"),
        (Role.ASSISTANT, "[The answer was withheld: the answer swears]"),
    ]
    assert record[1].metadata["goagent.synthetic"] == "guardrail"  # as in a plain run (review7a)
    assert validate_transcript(record, allow_pending=False) == []
