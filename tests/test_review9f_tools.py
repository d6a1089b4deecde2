"""What a tool function returns that is not yet a value (review9f).

A tool function that returns a coroutine (a sync function calling an async helper, or an async
one that forgot an ``await``) had it written out as ``"<coroutine object ...>"``, a success the
model read, or refused as "must return str, got coroutine"; either way never awaited.
"""

from __future__ import annotations

import asyncio
from typing import Any

from goagent_py import Agent, RetryPolicy, retry_tool, tool, tool_func
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response


async def _lookup(city: str) -> str:
    return f"sunny in {city}"


async def _tool_message(t: Any, args: dict[str, Any]) -> tuple[str, bool]:
    provider = ScriptedProvider(
        tool_call_response((t.definition.name, args)), text_response("done")
    )
    agent = Agent(provider=provider, tools=[t], model="m")
    result = await agent.run("go")
    (message,) = [m for m in result.messages if m.role == "tool"]
    return message.text, message.is_error


async def test_a_sync_tool_returning_a_coroutine_gets_the_awaited_value_to_the_model() -> None:
    @tool
    def weather(city: str) -> str:
        """Weather.

        Args:
            city: the city.
        """
        return _lookup(city)  # type: ignore[return-value]  # an async helper, called

    assert await _tool_message(weather, {"city": "Oslo"}) == ("sunny in Oslo", False)


async def test_a_sync_function_returning_a_coroutine_gets_its_value_to_the_model() -> None:
    t = tool_func("weather", "Weather.", None, lambda args: _lookup("Rome"))
    assert await _tool_message(t, {}) == ("sunny in Rome", False)


async def test_an_async_tool_that_returns_a_coroutine_gets_the_awaited_value() -> None:
    @tool
    async def weather(city: str) -> str:
        """Weather.

        Args:
            city: the city.
        """
        return _lookup(city)  # type: ignore[return-value]  # a forgotten await

    assert await _tool_message(weather, {"city": "Kyiv"}) == ("sunny in Kyiv", False)


async def test_a_tool_wrapped_by_retry_tool_still_waits_for_its_approval() -> None:
    ran: list[str] = []

    def delete(path: str) -> str:
        """Delete a file.

        Args:
            path: the file.
        """
        ran.append(path)
        return "deleted"

    wrapped = retry_tool(tool(delete, requires_approval=True), RetryPolicy(max_attempts=3))
    provider = ScriptedProvider(
        tool_call_response(("delete", {"path": "notes.txt"})), text_response("done")
    )
    result = await Agent(provider=provider, tools=[wrapped], model="m").run("go")
    assert ran == []  # the call waits for a person, as the unwrapped tool's does
    assert [p.call.name for p in result.pending] == ["delete"]


async def test_a_sync_tool_raising_stop_iteration_gets_an_error_result() -> None:
    # ``next()`` on an empty iterator: a Future refuses StopIteration, so the worker's outcome
    # was never delivered and the call waited forever (the bound here only ends a failing test).
    @tool
    def first_order() -> str:
        """The first open order."""
        return str(next(iter([])))

    async with asyncio.timeout(60):
        text, is_error = await _tool_message(first_order, {})
    assert is_error
    assert (
        text == "Error: tool 'first_order' failed: RuntimeError: tool function raised StopIteration"
    )
