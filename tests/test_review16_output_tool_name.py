"""The output tool's name belongs to the output (docs/typed-output.md, "Modes: how the answer is
asked for").

A typed run in tool mode offers the model a ``final_result`` tool. A tool of the agent's own, or
one an MCP server offers, may already carry that name: the request then held two tools named
``final_result`` (which OpenAI and Anthropic reject with a 400 on every call), and a call meant
for the user's tool was taken for the answer. Now the agent refuses its own tool of that name
when the output would need it (at build, or when the run asks for a typed output), saying what
to rename; a server's tool of that name is left out of a typed run's request, like any server
tool that clashes with a name taken (docs/mcp.md, "Name clashes").
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from goagent_py import Agent, tool
from goagent_py.errors import ConfigurationError
from goagent_py.testing import ScriptedProvider, tool_call_response


class City(BaseModel):
    name: str
    population: int


@tool
def final_result(note: str) -> str:
    """The user's own tool that happens to have the output tool's name."""
    return f"noted {note}"


def test_a_typed_agent_refuses_its_own_tool_named_like_the_output_tool() -> None:
    with pytest.raises(ConfigurationError, match=r"final_result.*rename"):
        Agent(provider=ScriptedProvider(), output_type=City, tools=[final_result])


async def test_a_typed_run_of_an_agent_with_such_a_tool_is_refused_before_the_model_is_asked() -> (
    None
):
    provider = ScriptedProvider(tool_call_response(("final_result", {"note": "x"})), "done")
    agent = Agent(provider=provider, tools=[final_result])
    with pytest.raises(ConfigurationError, match=r"final_result.*rename"):
        await agent.run("q", output_type=City)
    assert provider.calls == 0
    # An untyped run keeps the tool, which runs.
    result = await agent.run("q")
    assert result.output == "done"
    assert "noted x" in provider.requests[1].messages[-1].text


def test_native_and_prompted_modes_keep_a_tool_of_that_name() -> None:
    for mode in ("native", "prompted"):
        provider = ScriptedProvider('{"name": "Lisbon", "population": 545000}')
        agent = Agent(provider=provider, output_type=City, output_mode=mode, tools=[final_result])
        assert agent.run_sync("q").output == City(name="Lisbon", population=545000)
        assert [t.name for t in provider.requests[0].tools] == ["final_result"]


@pytest.mark.needs_extra("mcp")
async def test_a_server_tool_named_like_the_output_tool_is_left_out_of_a_typed_run() -> None:
    from mcp.server.mcpserver import MCPServer

    from goagent_py.mcp import MCPInProcess

    server = MCPServer("clash", log_level="WARNING")

    @server.tool()
    def final_result(note: str) -> str:
        """A server tool named like the output tool."""
        return f"server noted {note}"

    @server.tool()
    def lookup(city: str) -> int:
        """The population of a city."""
        return 545000

    provider = ScriptedProvider(
        tool_call_response(("lookup", {"city": "Lisbon"})),
        tool_call_response(("final_result", {"name": "Lisbon", "population": 545000})),
    )
    agent = Agent(provider=provider, output_type=City, mcp_servers=[MCPInProcess(server)])
    try:
        result = await agent.run("How many live in Lisbon?")
    finally:
        await agent.aclose()
    assert result.output == City(name="Lisbon", population=545000)
    for request in provider.requests:
        names = [t.name for t in request.tools]
        assert sorted(names) == ["final_result", "lookup"], names
        [output_tool] = [t for t in request.tools if t.name == "final_result"]
        assert output_tool.parameters["required"] == ["name", "population"]
