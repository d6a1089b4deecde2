"""A flow used as a tool by an agent that runs inside it reaches itself: refused with an error
its model reads, as an agent reaching itself through ``as_tool`` is (docs/multi-agent.md)."""

from __future__ import annotations

from goagent_py import Agent
from goagent_py.orchestration import Pipeline
from goagent_py.provider import CompletionRequest
from goagent_py.testing import FunctionProvider, tool_call_response
from goagent_py.tools import Tool, ToolDefinition


async def test_a_flow_whose_agent_calls_the_flow_again_is_refused_not_recursed() -> None:
    holder: dict[str, Tool] = {}

    class Delegate:
        definition = ToolDefinition(
            "team",
            "Asks the team.",
            {"type": "object", "properties": {"prompt": {"type": "string"}}},
        )

        async def execute(self, args: dict[str, object]) -> object:
            return await holder["tool"].execute(args)

    asked = [0]

    def always_delegate(request: CompletionRequest) -> object:
        asked[0] += 1
        if request.messages[-1].role != "user" or asked[0] > 30:
            return "I cannot delegate this."
        return tool_call_response(("team", {"prompt": "again"}))

    provider = FunctionProvider(always_delegate)
    agent = Agent(provider=provider, tools=[Delegate()], max_iterations=3, name="a")
    holder["tool"] = Pipeline([agent]).as_tool(name="team", description="Asks the team.")
    result = await agent.run("go")
    # The root and the flow's run of the agent, each asked twice; the flow's second entry is
    # refused and its model reads why.
    assert len(provider.requests) == 4
    refused = [m for r in provider.requests for m in r.messages if m.role == "tool"]
    assert any("already running" in m.text for m in refused)
    assert result.text == "I cannot delegate this."
