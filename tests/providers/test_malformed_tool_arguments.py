"""Tool arguments the model wrote as malformed JSON: the model must read that its JSON was bad.

The adapters hand such a call to the agent as ``{"__invalid_arguments__": raw}``
(:data:`goagent_py.messages.INVALID_ARGUMENTS_KEY`). No tool runs on it, whatever its schema: the
model reads an error that quotes its text and asks for one JSON object
(``goagent_py._call_gates.checked_arguments``, on every path that runs a model's call). Before,
it read "``__invalid_arguments__``: Extra inputs are not permitted" (a function tool), and any
other tool ran on that key (review9e).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from goagent_py import Agent, tool
from goagent_py.messages import ContentBlock, TextBlock
from goagent_py.providers.openai import OpenAIProvider
from goagent_py.tools import ToolDefinition

RAW = '{"a": 2, "b":'

Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture
async def client() -> AsyncIterator[Callable[[Handler], httpx.AsyncClient]]:
    clients: list[httpx.AsyncClient] = []

    def make(handler: Handler) -> httpx.AsyncClient:
        c = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        clients.append(c)
        return c

    yield make
    for c in clients:
        await c.aclose()


def scripted(name: str) -> tuple[Handler, list[dict[str, Any]]]:
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": RAW}}
    queue = [
        {"choices": [{"message": {"tool_calls": [call]}, "finish_reason": "tool_calls"}]},
        {"choices": [{"message": {"content": "Sorry."}, "finish_reason": "stop"}]},
    ]
    bodies: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json=queue.pop(0))

    return handle, bodies


class Echo:
    """A tool without a typed signature (as MCP tools are): it runs on what it is given."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition("echo", "Echo.", {"type": "object", "properties": {}})

    async def execute(self, args: dict[str, Any]) -> list[ContentBlock]:
        self.calls.append(args)
        return [TextBlock("ran")]


async def test_a_function_tool_tells_the_model_its_json_arguments_were_malformed(
    client: Callable[[Handler], httpx.AsyncClient],
) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    handler, bodies = scripted("add")
    agent = Agent(
        provider=OpenAIProvider(api_key="k", http_client=client(handler)), model="m", tools=[add]
    )
    await agent.run("2 + ?")
    result = bodies[1]["messages"][-1]["content"]
    assert "JSON" in result
    assert RAW in result
    assert "__invalid_arguments__" not in result


async def test_a_tool_without_a_signature_is_not_run_on_malformed_json(
    client: Callable[[Handler], httpx.AsyncClient],
) -> None:
    echo = Echo()
    handler, bodies = scripted("echo")
    agent = Agent(
        provider=OpenAIProvider(api_key="k", http_client=client(handler)), model="m", tools=[echo]
    )
    await agent.run("echo")
    assert echo.calls == []
    assert "JSON" in bodies[1]["messages"][-1]["content"]


async def test_a_prepare_arguments_repair_sees_the_malformed_call_first(
    client: Callable[[Handler], httpx.AsyncClient],
) -> None:
    from goagent_py.messages import INVALID_ARGUMENTS_KEY

    def repair(call: Any) -> dict[str, Any] | None:
        raw = call.arguments.get(INVALID_ARGUMENTS_KEY)
        return None if raw is None else json.loads(raw + " 3}")

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    handler, bodies = scripted("add")
    agent = Agent(
        provider=OpenAIProvider(api_key="k", http_client=client(handler)),
        model="m",
        tools=[add],
        prepare_arguments=repair,
    )
    await agent.run("2 + 3")
    assert bodies[1]["messages"][-1]["content"] == "5"
