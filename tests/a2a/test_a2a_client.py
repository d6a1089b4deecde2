"""goagent-py's A2A client (``A2AAgent``, its tool) against a sample server written on the
official a2a-sdk's own server classes, over real localhost HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.helpers.proto_helpers import new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    TaskState,
)
from a2a_helpers import free_socket, serving
from starlette.applications import Starlette

from goagent_py import Agent
from goagent_py.a2a import A2AAgent, A2AError
from goagent_py.errors import ConfigurationError
from goagent_py.events import ToolExecutionUpdate
from goagent_py.messages import Role as OurRole
from goagent_py.messages import TextBlock
from goagent_py.testing import ScriptedProvider, tool_call_response

pytestmark = pytest.mark.slow


class Echo(AgentExecutor):
    """The sample agent: says it is working, then answers "echo: <text>" as an artifact; the
    text "fail" makes the task fail, with a status message; "wait" waits until canceled."""

    def __init__(self) -> None:
        self.canceled: list[str] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id
        assert context.context_id
        assert context.message
        if context.current_task is None:
            submitted = new_task(
                context.task_id,
                context.context_id,
                TaskState.TASK_STATE_SUBMITTED,
                history=[context.message],
            )
            await event_queue.enqueue_event(submitted)
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        text = context.get_user_input()
        await updater.start_work(updater.new_agent_message([new_text_part("thinking")]))
        if text == "wait":
            await asyncio.Event().wait()
        if text == "fail":
            await updater.failed(updater.new_agent_message([new_text_part("no can do")]))
            return
        await updater.add_artifact([new_text_part(f"echo: {text}")], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id
        assert context.context_id
        self.canceled.append(context.task_id)
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def sample_app(url: str, *, streaming: bool, executor: Echo | None = None) -> Starlette:
    card = AgentCard(
        name="echo",
        description="Echoes what you send.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="echo", tags=["echo"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=executor or Echo(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")]
    return Starlette(routes=routes)


@pytest.mark.parametrize("streaming", [True, False])
async def test_the_tool_returns_the_remote_answer(streaming: bool) -> None:
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with serving(sample_app(url, streaming=streaming), sock):
        remote = A2AAgent(url)
        card = await remote.card()
        tool = remote.as_tool()
        assert card.name == "echo"
        assert tool.definition.name == "echo"
        assert tool.definition.description.startswith("Echoes what you send.")
        assert await tool.execute({"prompt": "hello"}) == [TextBlock("echo: hello")]


async def test_an_agent_calls_the_remote_agent_and_reads_its_answer() -> None:
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    provider = ScriptedProvider(tool_call_response(("echo", {"prompt": "ping"})), "Done.")
    async with serving(sample_app(url, streaming=True), sock):
        tool = A2AAgent(url).as_tool(name="echo", description="Ask the echo agent.")
        agent = Agent(provider=provider, model="m", tools=[tool])
        updates = [e async for e in agent.stream("ping it") if isinstance(e, ToolExecutionUpdate)]
    [result] = [m for m in provider.requests[1].messages if m.role == OurRole.TOOL]
    assert result.text == "echo: ping"
    assert [u.update for u in updates] == ["working: thinking"]


class Recording:
    """An ASGI app that records each HTTP request's headers, then serves ``app``."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[dict[str, str]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await self.app(scope, receive, send)


@pytest.mark.parametrize("allowed", [False, True])
async def test_headers_go_only_to_the_agents_origin_unless_another_is_allowed(
    allowed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # The card is served at one origin and names an endpoint at another: the API key goes to
    # the card's origin, and to the other only when the caller allowed that origin.
    card_sock, other_sock = free_socket(), free_socket()
    card_url = f"http://127.0.0.1:{card_sock.getsockname()[1]}"
    other_url = f"http://127.0.0.1:{other_sock.getsockname()[1]}"
    card_side = Recording(sample_app(other_url, streaming=False))
    other_side = Recording(sample_app(other_url, streaming=False))
    async with serving(card_side, card_sock), serving(other_side, other_sock):
        remote = A2AAgent(
            card_url,
            headers={"Authorization": "Bearer s3cret"},
            header_origins=[other_url] if allowed else [],
        )
        reply = await remote.as_tool(name="echo").execute({"prompt": "hi"})
    assert reply == [TextBlock("echo: hi")]
    assert card_side.seen
    assert all(h.get("authorization") == "Bearer s3cret" for h in card_side.seen)
    assert other_side.seen
    sent = [h.get("authorization") for h in other_side.seen]
    assert sent == (["Bearer s3cret"] * len(sent) if allowed else [None] * len(sent))
    warned = [r for r in caplog.records if "not sending its headers" in r.getMessage()]
    assert len(warned) == (0 if allowed else 1)


def test_header_origins_must_be_http_origins() -> None:
    with pytest.raises(ConfigurationError, match="header_origins"):
        A2AAgent("http://127.0.0.1:1", header_origins=["ftp://elsewhere"])


async def test_a_failed_remote_task_is_an_error_the_model_reads() -> None:
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    provider = ScriptedProvider(tool_call_response(("echo", {"prompt": "fail"})), "Sorry.")
    async with serving(sample_app(url, streaming=False), sock):
        tool = A2AAgent(url).as_tool(name="echo", description="Ask the echo agent.")
        await Agent(provider=provider, model="m", tools=[tool]).run("try")
    [result] = [m for m in provider.requests[1].messages if m.role == OurRole.TOOL]
    assert result.is_error
    assert "failed: no can do" in result.text


async def test_an_unreachable_agent_is_a_clear_error() -> None:
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()  # nothing listens there now
    with pytest.raises(A2AError, match="could not reach the A2A agent"):
        await A2AAgent(url).card()


def test_the_tool_needs_a_name_before_the_card_is_known() -> None:
    remote: Any = A2AAgent("http://127.0.0.1:1")
    tool = remote.as_tool()
    assert tool.definition.name == "a2a_127_0_0_1_1"
    assert "http://127.0.0.1:1" in tool.definition.description


async def test_a_cancelled_call_cancels_the_remote_task() -> None:
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    echo = Echo()
    working = asyncio.Event()
    async with serving(sample_app(url, streaming=True, executor=echo), sock):
        remote = A2AAgent(url)
        sent = asyncio.create_task(remote.send("wait", on_update=lambda note: working.set()))
        await working.wait()
        sent.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sent
    assert len(echo.canceled) == 1
