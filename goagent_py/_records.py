"""Fast builders of the frozen records the loop makes on every run (issue 36).

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (its
``__setattr__`` refuses), which looks the slot up by name every time; these set the slots through
their descriptors, as ``Usage.__add__`` does. Same objects, same field values: the public
constructors keep their signatures and checks (none of these classes has a ``__post_init__``),
and ``tests/test_records.py`` checks that every builder sets every field.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from goagent_py.messages import ContentBlock, Message, Role, StopReason, TextBlock, ToolCall, Usage
from goagent_py.results import PendingCall, RunResult, ToolResult

__all__ = ["FIELDS", "message", "run_result", "text_block", "text_of", "tool_call", "tool_result"]

_new = object.__new__

# The fields each builder sets, in order (the test compares them with the dataclass's fields).
FIELDS: dict[type, tuple[str, ...]] = {
    Message: ("role", "content", "tool_calls", "tool_call_id", "is_error", "metadata"),
    TextBlock: ("text", "type"),
    ToolCall: ("id", "name", "arguments"),
    ToolResult: ("call", "content", "error", "duration", "started_at", "details", "terminate"),
    RunResult: (
        "text",
        "stop_reason",
        "iterations",
        "usage",
        "tool_calls",
        "tool_time",
        "duration",
        "messages",
        "error",
        "run_id",
        "output",
        "pending",
    ),
}


def _setters(kind: type) -> tuple[Callable[[Any, Any], None], ...]:
    return tuple(kind.__dict__[name].__set__ for name in FIELDS[kind])


_tb_text, _tb_type = _setters(TextBlock)
_tc_id, _tc_name, _tc_arguments = _setters(ToolCall)
_tr = _setters(ToolResult)
_rr = _setters(RunResult)


def text_block(text: str) -> TextBlock:
    """``TextBlock(text)``."""
    out: TextBlock = _new(TextBlock)
    _tb_text(out, text)
    _tb_type(out, "text")
    return out


def message(
    role: Role, content: list[ContentBlock], tool_call_id: str = "", is_error: bool = False
) -> Message:
    """``Message(role, content, tool_call_id=..., is_error=...)`` for a ``Role`` (what its
    ``__post_init__`` makes of a role given as a string), without the default factories."""
    out: Message = _new(Message)
    out.role = role
    out.content = content
    out.tool_calls = []
    out.tool_call_id = tool_call_id
    out.is_error = is_error
    out.metadata = {}
    return out


def text_of(message: Message) -> str:
    """``message.text``; a plain message of no block or one text block without the join's
    generator (the loop reads the text of every answer)."""
    content = message.content
    if type(message) is Message and type(content) is list and len(content) < 2:
        if not content:
            return ""
        b = content[0]
        if type(b) is TextBlock and type(b.text) is str:
            return b.text
    return message.text


def tool_call(id: str, name: str, arguments: dict[str, Any]) -> ToolCall:
    """``ToolCall(id, name, arguments)``."""
    out: ToolCall = _new(ToolCall)
    _tc_id(out, id)
    _tc_name(out, name)
    _tc_arguments(out, arguments)
    return out


def tool_result(
    call: ToolCall,
    content: list[ContentBlock],
    error: BaseException | None,
    duration: float,
    started_at: datetime | None,
) -> ToolResult:
    """``ToolResult(call, content, error, duration, started_at)``."""
    out: ToolResult = _new(ToolResult)
    s_call, s_content, s_error, s_duration, s_started, s_details, s_terminate = _tr
    s_call(out, call)
    s_content(out, content)
    s_error(out, error)
    s_duration(out, duration)
    s_started(out, started_at)
    s_details(out, None)
    s_terminate(out, False)
    return out


def run_result(
    text: str,
    stop_reason: StopReason | None,
    iterations: int,
    usage: Usage,
    tool_calls: int,
    tool_time: float,
    duration: float,
    messages: list[Message],
    error: BaseException | None,
    run_id: str,
    output: Any,
    pending: list[PendingCall],
) -> RunResult[Any]:
    """``RunResult(...)`` with every field given, in order."""
    out: RunResult[Any] = _new(RunResult)
    s = _rr
    s[0](out, text)
    s[1](out, stop_reason)
    s[2](out, iterations)
    s[3](out, usage)
    s[4](out, tool_calls)
    s[5](out, tool_time)
    s[6](out, duration)
    s[7](out, messages)
    s[8](out, error)
    s[9](out, run_id)
    s[10](out, output)
    s[11](out, pending)
    return out
