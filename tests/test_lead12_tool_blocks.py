"""A tool result's blocks must hold what their types say: a ``TextBlock`` whose text is not a
str crashed the run with a bare ``TypeError`` far from the tool; it is the tool's developer's
mistake, named at the call (the dispatcher's check, loop rule 10 in docs/architecture.md)."""

from __future__ import annotations

from typing import Any

import pytest

from goagent_py import Agent, tool
from goagent_py.errors import ConfigurationError
from goagent_py.messages import ImageBlock, TextBlock, ThinkingBlock
from goagent_py.testing import ScriptedProvider, tool_call_response
from goagent_py.tools import ToolDefinition


class _Returns:
    def __init__(self, blocks: list[Any]) -> None:
        self.blocks = blocks
        self.definition = ToolDefinition("shape", "Returns blocks.", {"type": "object"})

    async def execute(self, args: dict[str, Any]) -> list[Any]:
        return self.blocks


@pytest.mark.parametrize(
    "block",
    [TextBlock(12345), ThinkingBlock(None)],  # type: ignore[arg-type]
    ids=["text", "thinking"],
)
async def test_a_block_whose_fields_are_not_their_types_fails_the_run_naming_the_tool(
    block: Any,
) -> None:
    provider = ScriptedProvider(tool_call_response(("shape", {})), "done")
    agent = Agent(provider=provider, model="m", tools=[_Returns([block])])
    with pytest.raises(ConfigurationError, match="tool 'shape' returned"):
        await agent.run("x")


async def test_a_tool_function_returning_such_a_block_is_named_too() -> None:
    @tool
    def number() -> object:
        """Returns a block holding a number."""
        return TextBlock(12345)  # type: ignore[arg-type]

    provider = ScriptedProvider(tool_call_response(("number", {})), "done")
    with pytest.raises(ConfigurationError, match="tool 'number' returned"):
        await Agent(provider=provider, model="m", tools=[number]).run("x")


async def test_good_blocks_still_reach_the_model() -> None:
    provider = ScriptedProvider(tool_call_response(("shape", {})), "done")
    blocks = [TextBlock("ok"), ImageBlock(b"\x89PNG", "image/png")]
    result = await Agent(provider=provider, model="m", tools=[_Returns(blocks)]).run("x")
    assert result.text == "done"
    [tool_message] = [m for m in provider.requests[1].messages if m.role == "tool"]
    assert tool_message.text == "ok"
