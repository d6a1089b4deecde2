"""goagent-py events as AG-UI events (plain JSON dicts with AG-UI ``type`` names).

The mapping (AG-UI https://docs.ag-ui.com, camelCase fields as the protocol spells them):

=============================  ===============================================================
goagent-py                     AG-UI
=============================  ===============================================================
run begins                     ``RUN_STARTED`` {threadId, runId}
MessageDelta "text"            ``TEXT_MESSAGE_START`` (first delta), ``TEXT_MESSAGE_CONTENT``
MessageEnd                     ``TEXT_MESSAGE_END``, ``THINKING_END``, ``TOOL_CALL_END``
MessageDelta "thinking"        ``THINKING_START`` + ``THINKING_TEXT_MESSAGE_START`` (first),
                               ``THINKING_TEXT_MESSAGE_CONTENT``
MessageDelta "tool_call"       ``TOOL_CALL_START`` (first delta of a call), ``TOOL_CALL_ARGS``
ToolExecutionEnd               ``TOOL_CALL_RESULT`` {toolCallId, content, isError, duration}
MemoryRecall                   ``CUSTOM`` name ``goagent.memory_recall`` {memories: [{text,
                               score}]}
ToolExecutionStart             ``CUSTOM`` name ``goagent.tool_started``
AgentEnd                       ``RUN_FINISHED`` {threadId, runId, result: {stopReason, text}}
an exception                   ``RUN_ERROR`` {message, code}
=============================  ===============================================================

A run ends with exactly one terminal event: a failed run's ``AgentEnd`` comes before its
exception, so ``RUN_FINISHED`` is held until the run's stream is over (:meth:`AguiMapper.finished`)
and a failure sends ``RUN_ERROR`` in its place.

``isError`` and ``duration`` on ``TOOL_CALL_RESULT`` are goagent-py additions (AG-UI clients
ignore unknown fields).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from goagent_py.events import (
    AgentEnd,
    AgentEvent,
    MemoryRecall,
    MessageDelta,
    MessageEnd,
    MessageStart,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from goagent_py.messages import Message, Role, TextBlock

__all__ = ["AguiMapper", "messages_snapshot"]


def _text(blocks: list[Any]) -> str:
    return "".join(b.text for b in blocks if isinstance(b, TextBlock))


def messages_snapshot(messages: list[Message]) -> dict[str, Any]:
    """A ``MESSAGES_SNAPSHOT`` event of a stored conversation (AG-UI message shapes)."""
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        item: dict[str, Any] = {"id": f"m{i}", "role": m.role.value, "content": _text(m.content)}
        if m.role is Role.ASSISTANT and m.tool_calls:
            item["toolCalls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in m.tool_calls
            ]
        if m.role is Role.TOOL:
            item["toolCallId"] = m.tool_call_id
        out.append(item)
    return {"type": "MESSAGES_SNAPSHOT", "messages": out}


class AguiMapper:
    """Turns one run's events into AG-UI event dicts (stateful: open messages and calls)."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self._message_id = ""
        self._text_open = False
        self._thinking_open = False
        self._calls: dict[str, str] = {}  # streamed call id -> name
        self._announced: set[str] = set()
        self._finished: dict[str, Any] | None = None
        self.text = ""

    def started(self) -> dict[str, Any]:
        """The ``RUN_STARTED`` event."""
        return {"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id}

    def error(self, message: str, code: str) -> dict[str, Any]:
        """A ``RUN_ERROR`` event: the terminal event of a failed run."""
        return {"type": "RUN_ERROR", "message": message, "code": code}

    def finished(self) -> dict[str, Any]:
        """The ``RUN_FINISHED`` event: the terminal event of a run whose stream ended without
        an error (its ``AgentEnd`` result, held by :meth:`map`)."""
        if self._finished is not None:
            return self._finished
        return {
            "type": "RUN_FINISHED",
            "threadId": self.thread_id,
            "runId": self.run_id,
            "result": {"stopReason": None, "text": self.text},
        }

    def _new_message(self) -> str:
        if not self._message_id:
            self._message_id = "msg_" + secrets.token_hex(6)
        return self._message_id

    def map(self, event: AgentEvent) -> list[dict[str, Any]]:
        """The AG-UI events for one goagent-py event (often none). Nested agents' events
        (a non-empty ``path``) are left out: the page shows the top-level conversation."""
        if getattr(event, "path", ()):
            return []
        if isinstance(event, MessageStart) and event.role is Role.ASSISTANT:
            self._message_id = ""
            self._new_message()
            return []
        if isinstance(event, MessageDelta):
            return self._delta(event)
        if isinstance(event, MessageEnd) and event.message.role is Role.ASSISTANT:
            return self._end(event)
        if isinstance(event, ToolExecutionStart):
            return [
                {
                    "type": "CUSTOM",
                    "name": "goagent.tool_started",
                    "value": {"toolCallId": event.call.id, "toolCallName": event.call.name},
                }
            ]
        if isinstance(event, ToolExecutionEnd):
            result = event.result
            return [
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": "tool_" + result.call.id,
                    "toolCallId": result.call.id,
                    "role": "tool",
                    "content": _text(result.content),
                    "isError": result.is_error,
                    "duration": round(result.duration, 6),
                }
            ]
        if isinstance(event, MemoryRecall):
            memories = [
                {"text": m.message.text, "score": round(float(m.score), 4), "id": m.id}
                for m in event.memories
            ]
            return [
                {"type": "CUSTOM", "name": "goagent.memory_recall", "value": {"memories": memories}}
            ]
        if isinstance(event, AgentEnd):
            final = event.result
            self._finished = {
                "type": "RUN_FINISHED",
                "threadId": self.thread_id,
                "runId": self.run_id,
                "result": {
                    "stopReason": final.stop_reason.value if final.stop_reason else None,
                    "text": final.text,
                },
            }
        return []

    def _delta(self, event: MessageDelta) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        mid = self._new_message()
        if event.kind == "text":
            if not self._text_open:
                self._text_open = True
                out.append({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
            self.text += event.delta
            out.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": event.delta})
        elif event.kind == "thinking":
            if not self._thinking_open:
                self._thinking_open = True
                out.append({"type": "THINKING_START"})
                out.append({"type": "THINKING_TEXT_MESSAGE_START"})
            out.append({"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": event.delta})
        elif event.call_id:
            if event.call_id not in self._calls:
                self._calls[event.call_id] = event.name
                out.append(self._call_start(event.call_id, event.name))
            out.append(
                {"type": "TOOL_CALL_ARGS", "toolCallId": event.call_id, "delta": event.delta}
            )
        return out

    def _call_start(self, call_id: str, name: str) -> dict[str, Any]:
        self._announced.add(call_id)
        return {
            "type": "TOOL_CALL_START",
            "toolCallId": call_id,
            "toolCallName": name,
            "parentMessageId": self._new_message(),
        }

    def _end(self, event: MessageEnd) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self._thinking_open:
            out += [{"type": "THINKING_TEXT_MESSAGE_END"}, {"type": "THINKING_END"}]
        if self._text_open:
            out.append({"type": "TEXT_MESSAGE_END", "messageId": self._message_id})
        elif not self._calls and event.message.text:
            # Not streamed (a provider without streaming): the whole text at once.
            mid = self._new_message()
            self.text += event.message.text
            out += [
                {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": event.message.text},
                {"type": "TEXT_MESSAGE_END", "messageId": mid},
            ]
        for call in event.message.tool_calls:
            if call.id not in self._announced:
                out.append(self._call_start(call.id, call.name))
                out.append(
                    {
                        "type": "TOOL_CALL_ARGS",
                        "toolCallId": call.id,
                        "delta": json.dumps(call.arguments),
                    }
                )
            out.append({"type": "TOOL_CALL_END", "toolCallId": call.id})
        self._text_open = self._thinking_open = False
        self._calls = {}
        self._message_id = ""
        return out
