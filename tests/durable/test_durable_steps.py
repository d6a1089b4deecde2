"""What a durable run asks of the server (issue 36): one activity per model or tool call.

The session's history is loaded by a local activity (recorded as a marker when the workflow
task completes, without a round trip through the server). Where the worker's storage applies a
keyed append once (PostgreSQL), the run's appends ride on its next model call (the model
activity applies them, by key, before it calls the model) and the last one is a local activity:
a retried model call applies them again, and the keys make that harmless. An append to a
storage without keys stays an activity of its own; a worker without short-term memory is sent
none. On PostgreSQL a run of one tool call is three activities and two local ones, and the
history is stored exactly once all the same. A run started by an older client (its config
without the keys) runs as it ran before, so its history replays.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from goagent_py import Agent
from goagent_py.durable import DurableAgent, ProviderRegistry, create_worker
from goagent_py.durable._client import result_of
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import InMemoryStorage, PostgresStorage, SQLiteStorage
from goagent_py.messages import Role, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tools import tool

pytestmark = pytest.mark.slow

RunDurably = Callable[..., Awaitable[tuple[Any, Any]]]  # the run_durably fixture


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


def plan(request: CompletionRequest) -> CompletionResponse | str:
    last = request.messages[-1]
    if last.role == Role.TOOL:
        return f"the sum is {last.text}"
    return tool_call_response(ToolCall("call-1", "add", {"a": 2, "b": 3}))


def steps_agent() -> Agent:
    return Agent(provider=FunctionProvider(plan), model="m", name="steps", tools=[add])


def durable_with(storage: Any, **settings: Any) -> tuple[DurableAgent, ProviderRegistry]:
    """``storage``: a PostgresStorage (a session each) or a SQLiteStorage (one session)."""
    by_session = getattr(storage, "for_session", lambda _: storage)
    durable = DurableAgent(
        steps_agent(),
        provider="fn:x",
        short_term_memory=lambda s: ShortTermMemory(by_session(s)),
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
        **settings,
    )
    return durable, ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})


async def scheduled(handle: Any) -> tuple[list[str], int]:
    """The activities the run's history scheduled, and its markers (local activities)."""
    return steps_of(await handle.fetch_history())


def steps_of(history: Any) -> tuple[list[str], int]:
    """The activities ``history`` scheduled, and its markers (local activities)."""
    kinds = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    markers = sum(e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED for e in history.events)
    return kinds, markers


def next_task_queues(history: Any) -> list[str]:
    """The task queues of the workflow tasks scheduled right after a retried activity."""
    events = list(history.events)
    retried = {
        e.event_id
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.attempt > 1
    }
    done = {
        e.event_id
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        and e.activity_task_completed_event_attributes.started_event_id in retried
    }
    return [
        e.workflow_task_scheduled_event_attributes.task_queue.name
        for e in events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED and e.event_id - 1 in done
    ]


async def test_on_postgres_a_run_of_one_tool_call_is_three_activities_stored_once(
    temporal: WorkflowEnvironment, pg_dsn: str
) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    async with PostgresStorage(pg_dsn, table="steps_messages", max_size=2) as storage:
        durable, registry = durable_with(storage)
        async with create_worker(temporal.client, [durable], registry=registry):
            handle = await durable.start(temporal.client, "add 2 and 3", session_id=session)
            result = await result_of(handle)
            kinds, markers = await scheduled(handle)
        stored = await storage.for_session(session).load()
    assert result.text == "the sum is 5"
    assert kinds == ["goagent.model.steps", "goagent.tool.steps.add", "goagent.model.steps"]
    # The load and the last append (the answer) as local activities; the prompt and the tool
    # step rode on the model calls.
    assert markers == 2
    assert stored == result.messages
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]


async def test_a_model_call_retried_after_it_applied_the_carried_appends_stores_them_once(
    temporal: WorkflowEnvironment, pg_dsn: str
) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    failed: list[int] = []

    def flaky(request: CompletionRequest) -> CompletionResponse | str:
        if request.messages[-1].role == Role.TOOL and not failed:
            failed.append(1)  # the second call, after it applied the tool step: retried
            raise ConnectionError("the model's server went away")
        return plan(request)

    async with PostgresStorage(pg_dsn, table="steps_messages", max_size=2) as storage:
        durable, _ = durable_with(storage, retry_interval=0.1)
        registry = ProviderRegistry({"fn": lambda _: FunctionProvider(flaky)})
        async with create_worker(temporal.client, [durable], registry=registry):
            handle = await durable.start(temporal.client, "add 2 and 3", session_id=session)
            result = await result_of(handle)
            history = await handle.fetch_history()
        stored = await storage.for_session(session).load()
    assert failed == [1]
    assert result.text == "the sum is 5"
    assert stored == result.messages
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    # The retried call sent the run's next workflow task to the agent's own task queue, not to
    # the sticky queue of the worker that ran the last one (which may have died with the
    # attempt before): no wait for the sticky timeout after a crash.
    assert next_task_queues(history) == [durable.task_queue]


async def test_appends_a_worker_did_not_apply_are_appended_by_the_workflow(
    temporal: WorkflowEnvironment, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model activity that ignores the appends it carries (a worker of the version before,
    in a rolling deploy) says nothing of them: the workflow appends them itself, in order."""
    from goagent_py.durable._activities import _AgentActivities

    model = _AgentActivities.model

    async def older(self: _AgentActivities, data: dict[str, Any]) -> dict[str, Any]:
        data = {k: v for k, v in data.items() if k != "appends"}
        out = await model(self, data)
        out.pop("appended", None)
        return out

    monkeypatch.setattr(_AgentActivities, "model", older)
    session = f"s-{uuid.uuid4().hex[:8]}"
    async with PostgresStorage(pg_dsn, table="steps_messages", max_size=2) as storage:
        durable, registry = durable_with(storage)
        async with create_worker(temporal.client, [durable], registry=registry):
            handle = await durable.start(temporal.client, "add 2 and 3", session_id=session)
            result = await result_of(handle)
        stored = await storage.for_session(session).load()
    assert result.text == "the sum is 5"
    assert stored == result.messages
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]


async def test_a_worker_without_short_term_memory_is_sent_no_appends(
    run_durably: RunDurably,
) -> None:
    result, history = await run_durably(steps_agent(), "add 2 and 3", plan=plan)
    kinds, markers = steps_of(history)
    assert result.text == "the sum is 5"
    assert kinds == ["goagent.model.steps", "goagent.tool.steps.add", "goagent.model.steps"]
    assert markers == 1  # the load, which says there is nothing to append to


async def test_on_sqlite_a_run_of_one_tool_call_is_three_activities_stored_once(
    run_durably: RunDurably, tmp_path: Path
) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="s")
    memory = ShortTermMemory(storage)
    result, history = await run_durably(
        steps_agent(), "add 2 and 3", plan=plan, memory=memory, session_id="s"
    )
    kinds, markers = steps_of(history)
    assert result.text == "the sum is 5"
    # SQLiteStorage applies a keyed append once (append_once), as PostgresStorage does.
    assert kinds == ["goagent.model.steps", "goagent.tool.steps.add", "goagent.model.steps"]
    assert markers == 2
    assert await storage.load() == result.messages
    await storage.aclose()


async def test_without_keyed_appends_the_appends_stay_activities(
    run_durably: RunDurably,
) -> None:
    """A storage that cannot tell a retried append (no append_once) appends by activity."""
    storage = InMemoryStorage()
    memory = ShortTermMemory(storage)
    result, history = await run_durably(
        steps_agent(), "add 2 and 3", plan=plan, memory=memory, session_id="s"
    )
    kinds, markers = steps_of(history)
    assert result.text == "the sum is 5"
    append = "goagent.memory.append.steps"
    model, add = "goagent.model.steps", "goagent.tool.steps.add"
    assert kinds == [append, model, add, append, model, append]
    assert markers == 1  # the load
    assert await storage.load() == result.messages


async def test_a_run_started_by_an_older_client_runs_memory_as_activities(
    run_durably: RunDurably, tmp_path: Path
) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="s")
    result, history = await run_durably(
        steps_agent(),
        "add 2 and 3",
        plan=plan,
        memory=ShortTermMemory(storage),
        session_id="s",
        # What a client before issue 36 sent.
        without=("local_memory_activities", "carry_appends"),
    )
    kinds, markers = steps_of(history)
    assert result.text == "the sum is 5"
    assert kinds.count("goagent.memory.load.steps") == 1
    assert kinds.count("goagent.memory.append.steps") == 3
    assert markers == 0
    assert await storage.load() == result.messages
    await storage.aclose()


async def test_an_events_stream_opened_after_the_run_ended_gets_every_event(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    # A run's last step and its end can be one workflow task now: a stream's next update may
    # reach a run that has ended; it reads the events it had not seen from the run's state.
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="s")
    durable, registry = durable_with(storage)
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "add 2 and 3", session_id="s")
        result = await result_of(handle)
        events = [event async for event in durable.events(handle)]
    assert [e["type"] for e in events] == [
        "turn_start",
        "message",
        "tool_result",
        "turn_start",
        "message",
    ]
    assert events[-1]["text"] == result.text
    await storage.aclose()


async def test_a_new_worker_has_the_message_codec_built_before_its_first_workflow_task(
    temporal: WorkflowEnvironment,
) -> None:
    """A cold build of the codec inside a workflow task ran past Temporal's 2 s deadlock check
    on a busy machine: the worker builds it when it is created (in a fresh process here)."""
    import asyncio
    import subprocess
    import sys

    script = (
        "import asyncio, sys\n"
        "from temporalio.client import Client\n"
        "from goagent_py import Agent, messages\n"
        "from goagent_py.durable import DurableAgent, create_worker\n"
        "from goagent_py.testing import ScriptedProvider\n"
        "async def main():\n"
        "    client = await Client.connect(sys.argv[1])\n"
        "    before = bool(messages._ADAPTER)\n"
        "    agent = Agent(provider=ScriptedProvider('x'), name='w')\n"
        "    durable = DurableAgent(agent, provider='fn:x')\n"
        "    create_worker(client, [durable])\n"
        "    print(before, bool(messages._ADAPTER))\n"
        "asyncio.run(main())\n"
    )
    target = temporal.client.service_client.config.target_host
    argv = [sys.executable, "-c", script, target]
    done = await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.split() == ["False", "True"], done.stderr


async def test_a_client_asks_the_servers_payload_limit_once_not_once_per_run(
    temporal: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    from temporalio.client import Client

    client = await Client.connect(temporal.client.service_client.config.target_host)
    service = client.workflow_service
    describe = service.describe_namespace
    asked: list[str] = []

    async def counted(request: Any, **kwargs: Any) -> Any:
        asked.append(request.namespace)
        return await describe(request, **kwargs)

    monkeypatch.setattr(service, "describe_namespace", counted)
    agent = Agent(provider=FunctionProvider(plan), model="m", name="steps", tools=[add])
    durable = DurableAgent(agent, provider="fn:x", task_queue=f"q-{uuid.uuid4().hex[:8]}")
    registry = ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})
    async with create_worker(temporal.client, [durable], registry=registry):
        first = await result_of(await durable.start(client, "add 2 and 3"))
        second = await result_of(await durable.start(client, "add 2 and 3"))
    assert first.text == second.text == "the sum is 5"
    assert asked == ["default"]


async def test_a_cancelled_run_stores_its_interrupted_turn_with_the_appends_still_waiting(
    temporal: WorkflowEnvironment, pg_dsn: str
) -> None:
    """Temporal's cancellation of a run in a tool call: the loop closes the open call and
    stores the turn; that append, and any still waiting for a model call, reach the storage."""
    import asyncio

    from temporalio.client import WorkflowFailureError

    from goagent_py.transcript import validate_transcript

    started = asyncio.Event()

    @tool
    async def wait_forever(n: int) -> str:
        """Wait.

        Args:
            n: a number.
        """
        started.set()
        await asyncio.Event().wait()
        return "never"

    def calls_wait(request: CompletionRequest) -> CompletionResponse | str:
        return tool_call_response(ToolCall("call-1", "wait_forever", {"n": 1}))

    session = f"s-{uuid.uuid4().hex[:8]}"
    async with PostgresStorage(pg_dsn, table="steps_messages", max_size=2) as storage:
        agent = Agent(
            provider=FunctionProvider(calls_wait), model="m", name="steps", tools=[wait_forever]
        )
        durable = DurableAgent(
            agent,
            provider="fn:x",
            short_term_memory=lambda s: ShortTermMemory(storage.for_session(s)),
            task_queue=f"q-{uuid.uuid4().hex[:8]}",
        )
        registry = ProviderRegistry({"fn": lambda _: FunctionProvider(calls_wait)})
        async with create_worker(temporal.client, [durable], registry=registry):
            handle = await durable.start(temporal.client, "wait", session_id=session)
            await started.wait()
            await handle.cancel()
            with pytest.raises(WorkflowFailureError):
                await handle.result()
        stored = await storage.for_session(session).load()
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    validate_transcript(stored)


async def test_a_run_cancelled_while_the_workflow_appends_keeps_what_it_was_appending(
    temporal: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that did not apply the carried appends leaves them to the workflow, which
    appends them by local activity; a cancellation that lands in one of those appends hands
    it, and the rest, back to be appended as the run ends: the prompt is not lost."""
    import asyncio

    from temporalio.client import WorkflowFailureError

    from goagent_py.durable._activities import _AgentActivities

    model, append = _AgentActivities.model, _AgentActivities.append
    entered = asyncio.Event()
    blocked: list[int] = []

    async def older(self: _AgentActivities, data: dict[str, Any]) -> dict[str, Any]:
        out = await model(self, {k: v for k, v in data.items() if k != "appends"})
        out.pop("appended", None)
        return out

    async def held_once(self: _AgentActivities, data: dict[str, Any]) -> dict[str, Any]:
        if not blocked:  # the first append (the prompt) waits until the run is cancelled
            blocked.append(1)
            entered.set()
            await asyncio.Event().wait()
        return await append(self, data)

    monkeypatch.setattr(_AgentActivities, "model", older)
    monkeypatch.setattr(_AgentActivities, "append", held_once)
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="s")
    durable, registry = durable_with(storage)
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "add 2 and 3", session_id="s")
        await entered.wait()
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
    stored = await storage.load()
    await storage.aclose()
    assert [m.text for m in stored][:1] == ["add 2 and 3"]
    assert sum(m.text == "add 2 and 3" for m in stored) == 1


async def test_a_run_started_beside_its_worker_gets_its_first_workflow_task_in_the_reply(
    temporal: WorkflowEnvironment,
) -> None:
    """Eager start: the first workflow task skips the server's task queues (and the wait of
    its transfer queue) when the starting client runs a worker of the queue; a client without
    one starts the run as before, and the run does not wait for a task timeout."""
    from temporalio.client import Client

    durable, registry = durable_with(InMemoryStorage())
    address = temporal.client.service_client.config.target_host
    elsewhere = await Client.connect(address, namespace=temporal.client.namespace)
    async with create_worker(temporal.client, [durable], registry=registry):
        beside = await durable.start(temporal.client, "add 2 and 3")
        asked_not = await durable.start(temporal.client, "add 2 and 3", request_eager_start=False)
        remote = await durable.start(elsewhere, "add 2 and 3")
        results = [await result_of(h) for h in (beside, asked_not, remote)]
        histories = [await h.fetch_history() for h in (beside, asked_not, remote)]
    assert [r.text for r in results] == ["the sum is 5"] * 3
    eager = [getattr(h, "__temporal_eagerly_started", None) for h in (beside, asked_not, remote)]
    assert eager == [True, False, False]
    timed_out = EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT
    assert [sum(e.event_type == timed_out for e in h.events) for h in histories] == [0, 0, 0]


async def test_a_run_asking_for_eager_start_on_a_server_that_refuses_it_starts_as_usual(
    temporal_path: str,
) -> None:
    """The eager request is a hint: a server with eager start turned off starts the run
    through its task queue, and the run ends as any other, without a task timeout."""
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_path,
        dev_server_extra_args=[
            *("--dynamic-config-value", "system.enableEagerWorkflowStart=false"),
        ],
    )
    try:
        durable, registry = durable_with(InMemoryStorage())
        async with create_worker(env.client, [durable], registry=registry):
            handle = await durable.start(env.client, "add 2 and 3")
            result = await result_of(handle)
            history = await handle.fetch_history()
    finally:
        await env.shutdown()
    assert result.text == "the sum is 5"
    assert getattr(handle, "__temporal_eagerly_started", None) is False
    timed_out = EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT
    assert sum(e.event_type == timed_out for e in history.events) == 0
