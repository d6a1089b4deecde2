"""The tool the served and A2A approval tests share (approve14 moved it here from each file): a
``wipe`` that waits for approval and records each target in :data:`RAN` (a test clears it
first), and a model that wipes what the user says, then answers with the tool's result. Not a
test module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from goagent_py import Role, ToolCall, tool
from goagent_py.testing import text_response, tool_call_response

RAN: list[str] = []


@tool(requires_approval=True)
def wipe(target: str) -> str:
    """Wipe something.

    Args:
        target: what.
    """
    RAN.append(target)
    return f"wiped {target}"


def wipes(call_id: str = "") -> Callable[[Any], Any]:
    """A model (for ``FunctionProvider``) that calls ``wipe`` on the user's text (as
    ``call_id`` when given: a local model's server numbers calls per turn) and answers
    ``after: <the result>``."""

    def answer(request: Any) -> Any:
        last = request.messages[-1]
        if last.role is Role.TOOL:
            return text_response(f"after: {last.text}")
        if call_id:
            return tool_call_response(ToolCall(call_id, "wipe", {"target": last.text}))
        return tool_call_response(("wipe", {"target": last.text}))

    return answer
