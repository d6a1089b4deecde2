"""An orchestration as a tool: usage, nested events, failures."""

from __future__ import annotations

from typing import Any

import pytest

from goagent_py import Agent, ConfigurationError, Role, Usage
from goagent_py.agent_tool import unwrap
from goagent_py.events import AgentStart, ToolExecutionUpdate
from goagent_py.orchestration import NodeStart, Pipeline
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response


def agent(name: str, *responses: Any, **settings: Any) -> Agent:
    return Agent(provider=ScriptedProvider(*responses), model="m", name=name, **settings)


async def shout(text: str) -> str:
    return text.upper()


async def test_an_agent_calls_a_pipeline() -> None:
    flow = Pipeline(agent("drafter", text_response("draft", usage=Usage(7, 3))), shout)
    lead = agent(
        "lead",
        tool_call_response(("write", {"prompt": "a poem"}), usage=Usage(1, 1)),
        "done",
        tools=[flow.as_tool(name="write", description="Write and shout.")],
    )

    events = [e async for e in lead.stream("go")]

    nested = [unwrap(e) for e in events if isinstance(e, ToolExecutionUpdate)]
    assert [e.path for e in nested if isinstance(e, NodeStart)] == [
        ("write", "drafter"),
        ("write", "shout"),
    ]
    assert [e.path for e in nested if isinstance(e, AgentStart)] == [("write", "drafter")]
    end = events[-1]
    assert end.result.usage == Usage(8, 4)  # type: ignore[union-attr]
    tool_msg = end.result.messages[2]  # type: ignore[union-attr]
    assert tool_msg.role is Role.TOOL
    assert tool_msg.text == "DRAFT"


async def test_a_failing_flow_is_an_error_result_and_its_usage_still_counts() -> None:
    from goagent_py import ProviderError

    flow = Pipeline(
        agent("a", text_response("ok", usage=Usage(5, 5))), agent("b", ProviderError("down"))
    )
    lead = agent(
        "lead",
        tool_call_response(("write", {"prompt": "x"})),
        "recovered",
        tools=[flow.as_tool(name="write", description="W.")],
    )

    result = await lead.run("go")

    assert result.text == "recovered"
    assert result.messages[2].is_error
    assert "node 'write/b' failed: ProviderError: provider: down" in result.messages[2].text
    assert result.usage == Usage(5, 5)  # spent by the first step before the second failed


def test_flow_tool_misuse() -> None:
    with pytest.raises(ConfigurationError, match="description"):
        Pipeline(shout).as_tool(name="s", description="")
