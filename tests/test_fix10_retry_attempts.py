"""A retried tool call: each attempt starts clean (fix10).

What a failed attempt recorded through its context (``set_details``, ``terminate``) must not
reach the result of the attempt that succeeded.
"""

from __future__ import annotations

from typing import Any

from goagent_py import Agent
from goagent_py.events import ToolExecutionEnd
from goagent_py.resilience import RetryPolicy, retry_tool
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import tool


async def _no_wait(seconds: float) -> None:
    return None


POLICY = RetryPolicy(3, initial_delay=0, jitter=0, sleep=_no_wait)


def _flaky() -> Any:
    attempts: list[int] = []

    @tool
    def flaky() -> str:
        """Fails once after recording details and asking to stop; then succeeds."""
        ctx = current_tool_context()
        assert ctx is not None
        attempts.append(1)
        if len(attempts) == 1:
            ctx.set_details({"attempt": 1})
            ctx.terminate()
            raise RuntimeError("transient")
        return "ok"

    return flaky


async def _run(agent_tools: list[Any], **options: Any) -> tuple[list[Any], ScriptedProvider]:
    provider = ScriptedProvider(tool_call_response(("flaky", {})), text_response("done"))
    agent = Agent(provider=provider, tools=agent_tools, **options)
    ends = [e async for e in agent.stream("go") if isinstance(e, ToolExecutionEnd)]
    return ends, provider


async def test_a_retried_calls_result_drops_what_the_failed_attempt_recorded() -> None:
    ends, provider = await _run([_flaky()], tool_retry=POLICY)
    result = ends[0].result
    assert not result.is_error
    assert result.details is None
    assert result.terminate is False
    # Not terminated: the model was asked again with the result.
    assert len(provider.requests) == 2


async def test_a_retry_tool_wrapped_calls_result_drops_what_the_failed_attempt_recorded() -> None:
    ends, provider = await _run([retry_tool(_flaky(), POLICY)])
    result = ends[0].result
    assert not result.is_error
    assert result.details is None
    assert result.terminate is False
    assert len(provider.requests) == 2
