"""A served agent whose one tool's host is down, for the tests that check a tool's circuit
breaker is the server's whichever client calls (A2A contexts, MCP sessions, OpenAI-compatible
requests; proto16 moved it here from each of them). Not a test module."""

from __future__ import annotations

import asyncio
from typing import Any

from goagent_py import Agent, tool
from goagent_py.dispatch import CircuitBreakerConfig
from goagent_py.messages import Role
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tools import Tool


class DownHost:
    """``fetch`` (every call fails: the host is down, each counted in ``calls``) and a model
    that calls it on every user message, then answers ``"tool said: <result>"``; each result
    the model read is kept in ``read`` and put on ``answered`` (the run has its tool's
    outcome)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.read: list[str] = []
        self.answered: asyncio.Queue[str] = asyncio.Queue()

        @tool
        async def fetch() -> str:
            """Fetch the page (its host is down)."""
            self.calls.append("fetch")
            raise ConnectionError("the host is down")

        self.fetch: Tool = fetch

    def model(self, request: Any) -> Any:
        """The model (for ``FunctionProvider``)."""
        last = request.messages[-1]
        if last.role is Role.USER:
            return tool_call_response(("fetch", {}))
        self.read.append(last.text)
        self.answered.put_nowait(last.text)
        return "tool said: " + last.text

    def agent(self, **settings: Any) -> Agent:
        """The agent with ``fetch`` behind a breaker that opens after 2 failures (for an hour),
        with ``settings`` besides."""
        return Agent(
            provider=FunctionProvider(self.model),
            model="m",
            tools=[self.fetch],
            circuit_breaker=CircuitBreakerConfig(max_failures=2, reset_timeout=3600),
            **settings,
        )
