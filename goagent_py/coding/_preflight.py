"""Checks on a call's arguments before anyone is asked about it.

A question about a call the tool would refuse anyway wastes the user's attention and, worse,
trains them to answer yes without reading: a small model sent ``shell`` with
``cwd='greet.py'``, ``timeout=1e15`` and no ``argv``, and the literal placeholder
``{path_to_read_file}`` as a path. :func:`preflight` finds such calls; the approval policy
blocks them with the reason (the model reads it and can correct the call) and asks nothing.
"""

from __future__ import annotations

import re
from typing import Any

from goagent_py.coding._tool import CodingTool, CodingToolError
from goagent_py.errors import ToolArgumentsError
from goagent_py.messages import ToolCall

__all__ = ["find_placeholder", "preflight"]

# Free text, where "{name}" may be exactly what the user wants written (a template).
_FREE_TEXT = frozenset({"content", "new_string", "old_string"})
# A whole value that is a template slot the model copied instead of filling in.
_PLACEHOLDER = re.compile(r"^\s*(\{\{?\s*[A-Za-z_][\w .-]*\}\}?|<[A-Za-z_][\w-]*>)\s*$")


def find_placeholder(value: Any, where: str = "") -> str | None:
    """The first argument (``name`` or ``name[2]``) whose value is a placeholder, or None.

    A file's new text (``content``, ``new_string``, ``old_string``) is not looked at.
    """
    if isinstance(value, str):
        return where if _PLACEHOLDER.match(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            if not where and key in _FREE_TEXT:
                continue
            found = find_placeholder(item, f"{where}.{key}" if where else str(key))
            if found is not None:
                return found
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = find_placeholder(item, f"{where}[{i}]")
            if found is not None:
                return found
    return None


def _value_at(args: dict[str, Any], where: str) -> Any:
    value: Any = args
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", where):
        value = value[int(part[1:-1])] if part.startswith("[") else value[part]
    return value


def preflight(tool: object, call: ToolCall) -> str | None:
    """Why ``call`` is refused before any question, or None when it may be asked about.

    Args:
        tool: the tool the call names (None when the agent has no such tool: the loop answers
            that itself).
        call: the call as the model made it.

    Returns:
        A message for the model: what is wrong and what to give instead.
    """
    args = call.arguments
    where = find_placeholder(args)
    if where is not None:
        return (
            f"{call.name}: refused: argument {where} is the placeholder "
            f"{_value_at(args, where)!r}; put the real value in its place"
        )
    if not isinstance(tool, CodingTool):
        return None
    try:
        tool.validate_arguments(args)
        if tool.check is not None:
            tool.check(args)
    except ToolArgumentsError as exc:
        return f"{call.name}: refused: {exc}"
    except CodingToolError as exc:
        return f"{call.name}: refused: {exc}"
    return None
