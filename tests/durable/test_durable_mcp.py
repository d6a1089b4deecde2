"""MCP servers in durable runs: real servers over stdio, a real Temporal dev server."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shutil
import socket
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from goagent_py import Agent
from goagent_py.durable import (
    AgentWorkflow,
    DurableAgent,
    DurableResult,
    DurableRunError,
    ProviderRegistry,
    create_worker,
    sandbox_runner,
)
from goagent_py.mcp import MCPHttp, MCPStdio
from goagent_py.messages import Role, ToolCall
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import FunctionProvider, tool_call_response

pytest.importorskip("mcp.server.mcpserver", reason="the mcp extra (SDK 2.x) is not installed")
pytestmark = pytest.mark.slow

FIXTURE_SERVER = str(Path(__file__).parent.parent / "mcp" / "fixture_server.py")


def time_server() -> str:
    found = Path(sys.executable).parent / "mcp-server-time"
    command = str(found) if found.exists() else shutil.which("mcp-server-time")
    if command is None:
        pytest.skip("mcp-server-time is not installed (pip install mcp-server-time)")
    return command


def queue() -> str:
    return f"q-{uuid.uuid4().hex[:8]}"


def call_then_report(call: ToolCall, seen: list[list[str]]) -> Any:
    """A model that makes ``call``, then answers with the result (is_error and text)."""

    def plan(request: CompletionRequest) -> CompletionResponse | str:
        seen.append([t.name for t in request.tools])
        results = [m for m in request.messages if m.role == Role.TOOL]
        if not results:
            return tool_call_response(call)
        return json.dumps({"is_error": results[0].is_error, "text": results[0].text})

    return plan


def durable_for(plan: Any, server: MCPStdio | MCPHttp, **settings: Any) -> tuple[DurableAgent, Any]:
    agent = Agent(
        provider=FunctionProvider(plan), model="m", name="clock", mcp_servers=[server], **settings
    )
    durable = DurableAgent(agent, provider="fn:x", task_queue=queue(), max_attempts=2)
    return durable, ProviderRegistry({"fn": lambda _: FunctionProvider(plan)})


def activities_in(history: Any) -> list[tuple[str, int]]:
    """(activity type, attempt) of each activity that started, in order."""
    scheduled: dict[int, str] = {}
    out: list[tuple[str, int]] = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = attrs.activity_type.name
        if event.HasField("activity_task_started_event_attributes"):
            attrs = event.activity_task_started_event_attributes
            out.append((scheduled[attrs.scheduled_event_id], attrs.attempt))
    return out


async def test_mcp_server_time_lists_and_calls_as_activities_and_replays(
    temporal: WorkflowEnvironment,
) -> None:
    seen: list[list[str]] = []
    call = ToolCall("c1", "time_get_current_time", {"timezone": "Europe/Paris"})
    server = MCPStdio(time_server(), ["--local-timezone", "UTC"], name="time", prefix="time_")
    durable, registry = durable_for(call_then_report(call, seen), server)
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "What time is it in Paris?")
        result = DurableResult.from_data(await handle.result())
        second = await durable.execute(temporal.client, "And now?")
    answer = json.loads(result.text)
    assert answer["is_error"] is False
    assert json.loads(answer["text"])["timezone"] == "Europe/Paris"
    assert json.loads(second.text)["is_error"] is False
    # The model saw the server's tools under their prefixed names, on every request.
    assert all({"time_get_current_time", "time_convert_time"} <= set(s) for s in seen)

    history = await handle.fetch_history()
    effects = [a for a in activities_in(history) if "memory" not in a[0]]
    assert effects == [
        ("goagent.mcp.list.clock.time", 1),  # listed once, before the first model call
        ("goagent.model.clock", 1),
        ("goagent.mcp.call.clock.time", 1),
        ("goagent.model.clock", 1),
    ]
    # The listing is in the history: a replay with no MCP server anywhere rebuilds the same
    # tools and the same commands (a nondeterminism error would raise here).
    replayer = Replayer(workflows=[AgentWorkflow], workflow_runner=sandbox_runner())
    await replayer.replay_workflow(history)


async def test_an_mcp_tool_error_is_data_for_the_model_and_not_retried(
    temporal: WorkflowEnvironment,
) -> None:
    seen: list[list[str]] = []
    call = ToolCall("c1", "fixture_fail", {"reason": "the disk is on fire"})
    server = MCPStdio(sys.executable, [FIXTURE_SERVER], name="fixture", prefix="fixture_")
    durable, registry = durable_for(call_then_report(call, seen), server)
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "go")
        result = DurableResult.from_data(await handle.result())
    answer = json.loads(result.text)
    assert answer["is_error"] is True
    assert "the disk is on fire" in answer["text"]
    assert "fixture" in answer["text"]  # the server is named, as in a plain run
    calls = [a for a in activities_in(await handle.fetch_history()) if "mcp.call" in a[0]]
    assert calls == [("goagent.mcp.call.clock.fixture", 1)]  # an isError answer is final


async def test_an_unreachable_mcp_server_fails_the_run_with_a_clear_error(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-such-server")
    server = MCPStdio(missing, name="ghost", connect_timeout=5)
    durable, registry = durable_for(lambda r: "unused", server)
    async with create_worker(temporal.client, [durable], registry=registry):
        with pytest.raises(DurableRunError) as info:
            await durable.execute(temporal.client, "go")
    assert info.value.type == "MCPConnectionError"
    assert "'ghost'" in str(info.value)
    assert "listing its tools failed" in str(info.value)


def fixture_module() -> Any:
    spec = importlib.util.spec_from_file_location("durable_mcp_fixture", FIXTURE_SERVER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_an_http_mcp_server_is_called_as_activities(temporal: WorkflowEnvironment) -> None:
    import uvicorn

    app = fixture_module().build().streamable_http_app()
    # A socket bound and listening before the server starts: the worker can connect at once.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    serving = asyncio.create_task(web.serve(sockets=[sock]))
    seen: list[list[str]] = []
    call = ToolCall("c1", "echo", {"text": "over http"})
    server = MCPHttp(f"http://127.0.0.1:{port}/mcp", name="web", allow=["echo"])
    durable, registry = durable_for(call_then_report(call, seen), server)
    try:
        async with create_worker(temporal.client, [durable], registry=registry):
            handle = await durable.start(temporal.client, "go")
            result = DurableResult.from_data(await handle.result())
    finally:
        web.should_exit = True
        await serving
        sock.close()
    assert json.loads(result.text) == {"is_error": False, "text": "over http"}
    assert seen[0] == ["echo"]  # the allow= filter ran on the worker
    names = [name for name, _ in activities_in(await handle.fetch_history())]
    assert "goagent.mcp.call.clock.web" in names
