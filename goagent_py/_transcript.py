"""What a run's transcript must look like, and the helpers that keep it so.

A transcript is valid for every provider when each assistant tool call is answered by exactly one
tool result right after it, and no result is orphaned. :func:`repair_transcript` makes any list
of messages so (after an abort or a crash); the rest shape what the model reads and what memory
keeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from goagent_py._metadata_keys import (
    CLAIM_KEY,
    DECISIONS_KEY,
    PENDING_KEY,
    SYNTHETIC_METADATA_KEY,
    UI_ONLY_KEY,
)
from goagent_py._records import message as new_message
from goagent_py.dispatch import error_text
from goagent_py.errors import ToolAbortedError
from goagent_py.messages import ContentBlock, Message, Role, TextBlock, ThinkingBlock, ToolCall
from goagent_py.results import ToolResult

__all__ = [
    "SYNTHETIC_METADATA_KEY",
    "UI_ONLY_KEY",
    "closing_tail",
    "error_result",
    "holding_wait",
    "repair_transcript",
    "strip_thinking",
    "synthetic",
    "tool_message",
    "truncate_content",
    "waiting_at",
]


_KEPT = (SYNTHETIC_METADATA_KEY, UI_ONLY_KEY, PENDING_KEY, DECISIONS_KEY, CLAIM_KEY)


def waiting_at(messages: list[Message]) -> int:
    """The index of the message whose calls wait for decisions: the last message sent to the
    model, when it is an assistant message marked pending; -1 when nothing waits."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.metadata.get(UI_ONLY_KEY):
            continue
        if m.role is Role.ASSISTANT and m.tool_calls and m.metadata.get(PENDING_KEY):
            return i
        return -1
    return -1


def holding_wait(
    view: list[Message], record: list[Message], *, interrupted: bool = False
) -> list[Message]:
    """``view`` (what a window of ``record`` shows the model) holding the turn that waits in
    ``record``: which calls wait is the record's to say, never a window's (approve15). A view
    that shows that waiting message is returned as it is; one that cut it off (a window
    smaller than the turn) becomes the turn itself, from the user message that asked for it
    on (what the run that stopped sent the model, and what its resume sends), after the
    view's messages from before that turn (the same objects as ``record``'s: a view read
    apart from the record keeps only the turn).

    ``interrupted``: also hold a turn the record ends open on (calls without results: a
    process died in the middle of its batch), so the run that reads the view closes them in
    the record (:func:`closing_tail`); ``view`` must then be read with ``record``."""
    at = waiting_at(record)
    if at >= 0:
        wait = record[at].metadata.get(PENDING_KEY)
        seen = waiting_at(view)
        if seen >= 0 and view[seen].metadata.get(PENDING_KEY) == wait:
            return view
    elif interrupted and closing_tail(record):
        if view and view[-1] is record[-1]:
            return view
        at = len(record) - 1
    else:
        return view
    start = at
    while start > 0 and not (
        record[start].role is Role.USER and not record[start].metadata.get(UI_ONLY_KEY)
    ):
        start -= 1
    earlier = {id(m) for m in record[:start]}
    return [m for m in view if id(m) in earlier] + record[start:]


def strip_thinking(messages: list[Message]) -> list[Message]:
    """Copies of ``messages`` without thinking blocks or run metadata (what memory keeps)."""
    out = []
    for m in messages:
        content: list[ContentBlock] = [b for b in m.content if not isinstance(b, ThinkingBlock)]
        meta = {k: v for k, v in m.metadata.items() if k in _KEPT}
        out.append(replace(m, content=content, tool_calls=list(m.tool_calls), metadata=meta))
    return out


def text_length(content: Sequence[ContentBlock]) -> int:
    """The characters of text in ``content`` (what :func:`truncate_content` limits)."""
    return sum([len(b.text) for b in content if isinstance(b, TextBlock)])


def truncate_content(content: list[ContentBlock], limit: int) -> list[ContentBlock]:
    """Cut the text of ``content`` to ``limit`` characters in all, with a visible marker
    (``content`` itself when it is within the limit)."""
    total = text_length(content)
    if total <= limit:
        return content
    out: list[ContentBlock] = []
    left = limit
    for block in content:
        if not isinstance(block, TextBlock):
            out.append(block)
            continue
        if left <= 0:
            continue
        out.append(TextBlock(block.text[:left]))
        left -= len(block.text)
    out.append(
        TextBlock(
            f"\n[truncated: the result had {total} characters; only the first {limit} are shown]"
        )
    )
    return out


def tool_message(result: ToolResult) -> Message:
    """The tool message the model reads for ``result``."""
    return new_message(Role.TOOL, list(result.content), result.call.id, result.error is not None)


def error_result(call: ToolCall, error: BaseException, text: str = "") -> ToolResult:
    return ToolResult(call, [TextBlock(text or error_text(error))], error)


def synthetic(message: Message, kind: str) -> Message:
    """``message`` marked as made by the framework (``kind``: "aborted", "interrupted"...),
    so the record tells an entry the run wrote for a stop from one the model or a tool wrote."""
    message.metadata[SYNTHETIC_METADATA_KEY] = kind
    return message


def repair_transcript(messages: list[Message], reason: str = "interrupted") -> list[Message]:
    """``messages`` with an error result added for every tool call that has none, right after
    its assistant message's results, and results without a call dropped: a transcript every
    provider accepts. Calls that wait for decisions (:func:`waiting_at`) are left open: they are
    waiting, not interrupted."""
    waiting = waiting_at(messages)
    out: list[Message] = []
    i = 0
    while i < len(messages):
        m = messages[i]
        i += 1
        if m.role is Role.TOOL:
            continue  # a result whose call is not right before it: orphaned
        out.append(m)
        if m.role is not Role.ASSISTANT or not m.tool_calls or i - 1 == waiting:
            continue
        results: dict[str, Message] = {}
        while i < len(messages) and messages[i].role is Role.TOOL:
            results.setdefault(messages[i].tool_call_id, messages[i])
            i += 1
        for call in m.tool_calls:
            found = results.get(call.id)
            if found is None:
                error = ToolAbortedError(call.name, reason)
                found = synthetic(tool_message(error_result(call, error)), reason)
            out.append(found)
    return out


def closing_tail(messages: list[Message], reason: str = "interrupted") -> list[Message]:
    """The error results that close the tool calls a stored transcript ends on without their
    results (a crash between the message that made a batch, or the decision on its calls, and
    the batch's results): what to append so the log is valid again. Empty when it ends
    closed, or on calls that wait for decisions. Only the last message is looked at unless it
    could be open, so a transcript that ends on an answer costs nothing."""
    last = messages[-1] if messages else None
    if last is None or not (
        last.role is Role.TOOL or (last.tool_calls and last.role is Role.ASSISTANT)
    ):
        return []
    repaired = repair_transcript(messages, reason)
    if len(repaired) > len(messages) and repaired[: len(messages)] == messages:
        return repaired[len(messages) :]
    return []
