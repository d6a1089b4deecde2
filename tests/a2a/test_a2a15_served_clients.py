"""One server, many A2A clients (docs/a2a.md, "One conversation per client"): each context has
its own conversation, but the served agent's tools and their dispatch (circuit breakers, rate
limits) are the server's, whichever context calls them."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import TaskState
from a2a_helpers import free_socket, serving
from test_a2a_server import send

from goagent_py import Agent, tool
from goagent_py.a2a import a2a_app
from goagent_py.dispatch import CircuitBreakerConfig
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage.in_memory import InMemoryStorage
from goagent_py.messages import Role
from goagent_py.testing import FunctionProvider, tool_call_response

pytestmark = pytest.mark.slow


def _url(sock: Any) -> str:
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


def _task(events: list[Any]) -> Any:
    last = events[-1]
    assert last.HasField("task"), last
    return last.task


def _text(task: Any) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)


async def test_a_tools_circuit_breaker_is_the_servers_whichever_context_calls_it() -> None:
    calls: list[str] = []

    @tool
    async def fetch() -> str:
        """Fetch the page (its host is down)."""
        calls.append("fetch")
        raise ConnectionError("the host is down")

    def model(request: Any) -> Any:
        last = request.messages[-1]
        if last.role is Role.USER:
            return tool_call_response(("fetch", {}))
        return "tool said: " + last.text

    agent = Agent(
        provider=FunctionProvider(model),
        model="m",
        name="h",
        tools=[fetch],
        short_term_memory=ShortTermMemory(InMemoryStorage()),
        circuit_breaker=CircuitBreakerConfig(max_failures=2, reset_timeout=3600),
    )
    sock = free_socket()
    async with serving(a2a_app(agent, url=_url(sock)), sock) as url:
        for context in ("ctx-a", "ctx-b", "ctx-c"):
            task = _task(await send(url, "get it", streaming=False, context_id=context))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
        # Two failures, from two clients, open the tool's one circuit: the third client's
        # call is refused without reaching the host (each client had a breaker of its own).
        assert calls == ["fetch", "fetch"]
        assert "circuit" in _text(task).lower(), _text(task)
