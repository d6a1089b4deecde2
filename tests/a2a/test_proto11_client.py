"""``A2AAgent(timeout=...)`` bounds a whole send, the remote agent's work included, as its
docstring says (docs/a2a.md): a remote agent that keeps its stream alive with a status note
every moment and never finishes used to hold the call (and the tool, and the run) forever,
since the timeout reached httpx only, where it bounds each read, not the send."""

from __future__ import annotations

import asyncio

import pytest
from a2a.helpers.proto_helpers import new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
from a2a_helpers import free_socket, serving
from starlette.applications import Starlette

from goagent_py.a2a import A2AAgent, A2AError

pytestmark = pytest.mark.slow


class Chatter(AgentExecutor):
    """A remote agent that says "still working" over and over and never finishes."""

    def __init__(self) -> None:
        self.canceled: list[str] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id
        assert context.context_id
        submitted = new_task(
            context.task_id,
            context.context_id,
            TaskState.TASK_STATE_SUBMITTED,
            history=[context.message] if context.message else [],
        )
        await event_queue.enqueue_event(submitted)
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        while True:  # the hostile server's own pace: a note every 50 ms
            await updater.update_status(
                TaskState.TASK_STATE_WORKING,
                message=updater.new_agent_message([new_text_part("still working")]),
            )
            await asyncio.sleep(0.05)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id
        assert context.context_id
        self.canceled.append(context.task_id)
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def _app(url: str, executor: Chatter) -> Starlette:
    card = AgentCard(
        name="chatter",
        description="Never done.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="c", name="c", description="c", tags=["c"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card
    )
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])


async def test_a_remote_agent_that_streams_forever_is_cut_off_at_the_timeout() -> None:
    executor = Chatter()
    sock = free_socket()
    async with serving(_app(f"http://127.0.0.1:{sock.getsockname()[1]}/", executor), sock) as url:
        remote = A2AAgent(url, timeout=1.0)
        notes: list[str] = []
        async with asyncio.timeout(120):  # the test's own guard: was never raised at all
            with pytest.raises(A2AError, match="timeout=1") as failed:
                await remote.send("hello", on_update=notes.append)
    assert notes  # it was streaming all along
    assert "1" in str(failed.value)
    assert len(executor.canceled) == 1  # the remote task is canceled, not left running
