"""Durable runs carry what their answer recalled (docs/memory.md, "Corrections of the last
answer"): a real Temporal dev server, a real SQLite conversation on the worker and a real
sqlite-vec memory with the rule decider."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from goagent_py import Agent
from goagent_py.durable import DurableAgent, ProviderRegistry, create_worker
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.deciders import RuleDecider
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.records import RECALLED_KEY
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.memory.write_policies import user_statements
from goagent_py.messages import assistant_message, user_message
from goagent_py.provider import CompletionRequest
from goagent_py.testing import FakeEmbedder, FunctionProvider

pytestmark = [pytest.mark.slow, pytest.mark.needs_extra("vector")]
ALL = ("current", "superseded", "deleted")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[tuple[LongTermMemory, Clock]]:
    from goagent_py.memory.vector.sqlite_vec import SqliteVecStore

    clock = Clock()
    async with SqliteVecStore(tmp_path / "memory.db", table="memories", dimensions=64) as store:
        yield LongTermMemory(FakeEmbedder(64), store, decider=RuleDecider(), clock=clock), clock


def durable_agent(m: LongTermMemory, storage: SQLiteStorage) -> tuple[DurableAgent, Any]:
    """The chat's write policy on a durable agent whose workers keep the conversation."""

    def plan(request: CompletionRequest) -> str:
        return "You live in Lisbon." if "Where" in request.messages[-1].text else "Noted."

    agent = Agent(
        provider=FunctionProvider(plan),
        model="m",
        name="alice",
        long_term_memory=m,
        write_policy=user_statements(about_user=True),
    )
    durable = DurableAgent(
        agent,
        provider="fn:x",
        short_term_memory=lambda _session: ShortTermMemory(storage),
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
    )
    return durable, ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})


# 0: every history message crosses as a stand-in of its own; 70: the closed turns that lead
# the history cross as one range stand-in (issue 30), never the last answer.
@pytest.mark.parametrize("earlier", [0, 70])
async def test_a_durable_answer_names_what_it_recalled_and_a_reply_corrects_it(
    temporal: WorkflowEnvironment,
    tmp_path: Path,
    memory: tuple[LongTermMemory, Clock],
    earlier: int,
) -> None:
    m, clock = memory
    await m.store([user_message("I live in Lisbon.")], session="alice")
    await m.store([user_message("My sister is Meera.")], session="alice")
    clock.now += timedelta(days=7)
    (lisbon,) = [r for r in await m.records(session="alice") if "Lisbon" in r.text]
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="c1")
    for i in range(earlier // 2):
        await storage.append([user_message(f"Tell me a joke {i}."), assistant_message("Ha.")])
    durable, registry = durable_agent(m, storage)
    try:
        async with create_worker(temporal.client, [durable], registry=registry):
            await durable.execute(temporal.client, "Where do I live?", session_id="c1")
            stored = await storage.load()
            assert stored[-1].metadata[RECALLED_KEY][:1] == [lisbon.id]
            await durable.execute(temporal.client, "No wait, Madrid.", session_id="c1")
    finally:
        await storage.aclose()
    states = {r.text: r.state for r in await m.records(session="alice", states=ALL)}
    assert states == {
        "I live in Lisbon.": "deleted",
        "I live in Madrid.": "current",
        "My sister is Meera.": "current",
    }


async def test_a_durable_correction_after_a_question_is_about_the_answers_memory(
    temporal: WorkflowEnvironment, tmp_path: Path, memory: tuple[LongTermMemory, Clock]
) -> None:
    # "I live in Lisbon." then a question answered from the sister's memory: "That's no
    # longer true." is about the answer (the workers' write policy and the turn it records).
    m, clock = memory
    await m.store([user_message("My sister is Meera.")], session="alice")
    clock.now += timedelta(days=7)
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="c1")
    durable, registry = durable_agent(m, storage)
    m.top_k = 1
    try:
        async with create_worker(temporal.client, [durable], registry=registry):
            for said in (
                "I live in Lisbon.",
                "What is my sister called?",
                "That's no longer true.",
            ):
                await durable.execute(temporal.client, said, session_id="c1")
    finally:
        await storage.aclose()
    states = {r.text: r.state for r in await m.records(session="alice", states=ALL)}
    assert states == {"I live in Lisbon.": "current", "My sister is Meera.": "deleted"}
