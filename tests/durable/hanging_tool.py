"""A durable run that waits for ever inside a tool call, for the tests that close a workflow
from outside while its tool call is in flight (otel15_closed_runs, durotel16_dropped_runs,
durotel17_dropped_runs, durotel17_released_spans).

The model (:func:`plan`) calls ``hang`` with the prompt as its label; ``hang`` sets
``ENTERED[label]`` (an ``asyncio.Event`` the test puts there) and never returns.
"""

from __future__ import annotations

import asyncio
from typing import Any

from goagent_py import ToolCall
from goagent_py.provider import CompletionRequest
from goagent_py.testing import text_response, tool_call_response
from goagent_py.tools import tool

ENTERED: dict[str, asyncio.Event] = {}


@tool
async def hang(label: str) -> str:
    """Wait for ever.

    Args:
        label: which test waits.
    """
    ENTERED[label].set()
    await asyncio.Event().wait()
    return "never"


def plan(request: CompletionRequest) -> Any:
    """The model: call ``hang`` with the prompt as its label, then answer "done"."""
    if len(request.messages) == 1:
        return tool_call_response(ToolCall("c1", "hang", {"label": request.messages[0].text}))
    return text_response("done")
