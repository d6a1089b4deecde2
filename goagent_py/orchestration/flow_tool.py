"""An orchestration as a tool: an agent's model runs a whole pipeline, graph or group.

``flow.as_tool(name=..., description=...)`` is the orchestration counterpart of
:func:`~goagent_py.agent_tool.as_tool`, with the same contract: the flow's usage rolls into the
calling run's ``RunResult.usage``, its events (node starts and ends, and its agents' events)
reach the caller's stream as ``ToolExecutionUpdate``\\ s with ``path = caller path + (name,
node...)``, cancelling the caller cancels it, and a failure is an error result for the model.
"""

from __future__ import annotations

from typing import Any

from goagent_py.agent_tool import _PROMPT_SCHEMA
from goagent_py.errors import ConfigurationError, ToolArgumentsError
from goagent_py.messages import ContentBlock, TextBlock
from goagent_py.orchestration._core import Flow, FlowResult, Scope
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import ToolDefinition, validate_tool_name

__all__ = ["FlowTool"]


class FlowTool:
    """A tool that runs an orchestration on the model's ``prompt`` (made by
    :meth:`Flow.as_tool <goagent_py.orchestration.Flow.as_tool>`)."""

    def __init__(self, flow: Flow, *, name: str, description: str) -> None:
        validate_tool_name(name)
        if not isinstance(description, str) or not description.strip():
            raise ConfigurationError(f"as_tool({name!r}) needs a description for the model")
        self.flow = flow
        self.name = name
        self._definition = ToolDefinition(name, description, dict(_PROMPT_SCHEMA))

    @property
    def definition(self) -> ToolDefinition:
        """The definition shown to the model."""
        return self._definition

    async def execute(self, args: dict[str, Any]) -> list[ContentBlock]:
        """Run the flow on ``args["prompt"]``; its output is the result.

        Raises:
            ToolArgumentsError: no usable prompt.
            OrchestrationError: what the flow failed with (an error result for the model).
        """
        text = args.get("prompt")
        if not isinstance(text, str) or not text.strip():
            raise ToolArgumentsError(self.name, "'prompt' must be a non-empty string")
        ctx = current_tool_context()
        if ctx is None:
            result = await self.flow._invoke(text, Scope((self.name,)))
            return [TextBlock(result.text)]
        scope = Scope((*ctx.path, self.name), ctx.report)
        try:
            result = await self.flow._invoke(text, scope)
        except Exception as exc:
            partial = getattr(exc, "partial", None)
            if isinstance(partial, FlowResult):
                ctx.add_usage(partial.usage)
            raise
        ctx.add_usage(result.usage)
        return [TextBlock(result.text)]

    def __repr__(self) -> str:
        return f"FlowTool({self.name!r})"
