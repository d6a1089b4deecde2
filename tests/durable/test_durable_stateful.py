"""The one-record check of tests/test_session_stateful.py, applied to durable runs (issue 28).

One durable session (one ``session_id``, a real SQLite file behind the worker's short-term
memory) is driven by a seeded random sequence of steps: a prompt whose model turns call tools
that succeed, fail or ``terminate``; a steer while a tool runs; an abort in each of its three
modes while a tool runs. After every step: storage holds exactly what the runs' results
reported, in order, and the stored transcript passes the validator.

``GOAGENT_DURABLE_STATEFUL_STEPS`` sets the number of steps (default 30, CI-sized: each step is
a workflow on a real Temporal dev server); ``GOAGENT_DURABLE_STATEFUL_SEED`` the seed.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import uuid
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from goagent_py import Agent, validate_transcript
from goagent_py.durable import (
    ABORT_SIGNAL,
    STATE_QUERY,
    STEER_SIGNAL,
    DurableAgent,
    ProviderRegistry,
    create_worker,
)
from goagent_py.durable._client import result_of
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.messages import Message, Role, StopReason, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, text_response, tool_call_response
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import tool

pytestmark = pytest.mark.slow

STEPS = int(os.environ.get("GOAGENT_DURABLE_STATEFUL_STEPS", "30"))
SEED = int(os.environ.get("GOAGENT_DURABLE_STATEFUL_SEED", "28"))
KINDS = ["prompt", "steer", "abort_now", "abort_after_tools", "abort_after_turn"]
TURNS = ["fast", "fail", "finish", "fast+fail", "text"]


class World:
    """What the worker's tools and model read: the script of model turns, the held tool."""

    def __init__(self) -> None:
        self.script: deque[CompletionResponse] = deque()
        self.ids = itertools.count(1)
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    def turn(self, kind: str) -> CompletionResponse:
        if kind == "text":
            return text_response("an answer")
        names = kind.split("+")
        return tool_call_response(
            *[ToolCall(f"c{next(self.ids)}", name, {"n": 1}) for name in names]
        )

    def plan(self, request: CompletionRequest) -> CompletionResponse:
        return self.script.popleft() if self.script else text_response("ok")


def durable_for(world: World, db: Path) -> tuple[DurableAgent, ProviderRegistry, SQLiteStorage]:
    @tool
    async def fast(n: int) -> str:
        """Answer at once.

        Args:
            n: a number.
        """
        return f"fast {n}"

    @tool
    async def fail(n: int) -> str:
        """Always fail.

        Args:
            n: a number.
        """
        raise ValueError(f"failure {n}")

    @tool
    async def finish(n: int) -> str:
        """End the run.

        Args:
            n: a number.
        """
        ctx = current_tool_context()
        assert ctx is not None
        ctx.terminate()
        return f"finished {n}"

    @tool
    async def hold(n: int) -> str:
        """Wait for the test.

        Args:
            n: a number.
        """
        world.started.set()
        await world.release.wait()
        return f"held {n}"

    storage = SQLiteStorage(db, session_id="one")
    memory = ShortTermMemory(storage)
    agent = Agent(
        provider=FunctionProvider(world.plan),
        model="m",
        name="stateful",
        tools=[fast, fail, finish, hold],
        max_iterations=6,
    )
    durable = DurableAgent(
        agent,
        provider="fn:x",
        short_term_memory=lambda _session: memory,
        heartbeat_timeout=2.0,
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
    )
    return durable, ProviderRegistry({"fn": lambda _: FunctionProvider(world.plan)}), storage


async def step(
    kind: str, rng: random.Random, world: World, durable: DurableAgent, client: Any
) -> Any:
    """One step: a workflow on the session, interrupted as ``kind`` says; returns its result."""
    world.started, world.release = asyncio.Event(), asyncio.Event()
    turns = [world.turn(rng.choice(TURNS)) for _ in range(rng.randint(0, 3))]
    if kind != "prompt":  # a tool that holds, for the steer or abort to land on, after turns
        # that go on (a text answer or a terminate would end the run before it)
        going_on = [world.turn(rng.choice(TURNS[:2])) for _ in range(rng.randint(0, 2))]
        turns = [*going_on, world.turn("hold"), *turns]
    world.script = deque(turns)
    handle = await durable.start(client, f"prompt {rng.random():.6f}", session_id="one")
    if kind == "prompt":
        return await result_of(handle)
    await world.started.wait()
    if kind == "steer":
        await handle.signal(STEER_SIGNAL, "a steer")
    else:
        await handle.signal(ABORT_SIGNAL, args=["stopped", kind.removeprefix("abort_")])
    await handle.query(STATE_QUERY)  # the signal is in once a query sees it
    world.release.set()
    result = await result_of(handle)
    if kind.startswith("abort"):
        assert result.stop_reason == StopReason.ABORTED
        assert result.aborted
    return result


async def test_one_durable_session_keeps_one_valid_record(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    world = World()
    durable, registry, storage = durable_for(world, tmp_path / "chat.db")
    reported: list[Message] = []
    seen: dict[str, int] = {}
    async with create_worker(temporal.client, [durable], registry=registry):
        for n in range(STEPS):
            kind = rng.choice(KINDS)
            seen[kind] = seen.get(kind, 0) + 1
            # A guard, not a measurement: a lost signal fails the test instead of hanging it.
            result = await asyncio.wait_for(step(kind, rng, world, durable, temporal.client), 120)
            reported.extend(result.messages)
            stored = await storage.load()
            assert validate_transcript(stored) == [], f"step {n} ({kind})"
            # One record: storage holds what the results reported, nothing twice or missing.
            assert stored == reported, f"step {n} ({kind})"
            user = [m for m in result.messages if m.role == Role.USER]
            assert user[0].text.startswith("prompt "), f"step {n} ({kind})"
    assert set(seen) == set(KINDS)  # every kind of step ran
    print(f"durable stateful: {STEPS} steps, seed {SEED}, {seen}, 0 violations")
