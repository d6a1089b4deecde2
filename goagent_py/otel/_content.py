"""Message content as the GenAI conventions' JSON (input/output messages), for opt-in capture.

Images and documents are described (type, media type, size), never copied: their bytes do not
belong in telemetry. Every string returned here is redacted (``_redact``): a key pasted into a
prompt, passed in a tool's arguments or quoted by a tool's result is content, but never goes to a
span. Everything here is pure and only runs when capture is on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from typing import Any

from goagent_py._redact import redact
from goagent_py.messages import (
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    Role,
    ScoredMessage,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCall,
)
from goagent_py.otel._semconv import finish_reason

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def capture_from_env() -> bool:
    """Whether the environment opts in to content capture (``true``, any case)."""
    return os.environ.get(CAPTURE_ENV, "").strip().lower() == "true"


def dumps(value: Any) -> str:
    """Compact JSON, redacted; values JSON cannot hold are written with ``str``."""
    return redact(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))


def parts(blocks: Iterable[ContentBlock]) -> list[dict[str, Any]]:
    """The convention's message parts for ``blocks`` (binary content described, not copied)."""
    out: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            out.append({"type": "text", "content": block.text})
        elif isinstance(block, ThinkingBlock):
            out.append({"type": "reasoning", "content": block.thinking})
        elif isinstance(block, ImageBlock):
            out.append({"type": "image", "mime_type": block.media_type, "size": len(block.data)})
        elif isinstance(block, DocumentBlock):
            out.append(
                {
                    "type": "document",
                    "mime_type": block.media_type,
                    "title": block.title,
                    "size": len(block.data),
                }
            )
    return out


def _tool_call_part(call: ToolCall) -> dict[str, Any]:
    return {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}


def message(m: Message) -> dict[str, Any]:
    """One message in the input-messages schema."""
    if m.role == Role.TOOL:
        text = "\n".join(b.text for b in m.content if isinstance(b, TextBlock))
        return {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": m.tool_call_id, "response": text}],
        }
    role = str(m.role)
    return {"role": role, "parts": parts(m.content) + [_tool_call_part(c) for c in m.tool_calls]}


def input_messages(messages: Sequence[Message]) -> str:
    """``gen_ai.input.messages`` as a JSON string."""
    return dumps([message(m) for m in messages])


def user_input(content: Sequence[ContentBlock]) -> str:
    """``gen_ai.input.messages`` for a run's prompt."""
    return dumps([{"role": "user", "parts": parts(content)}])


def system_instructions(prompt: str) -> str:
    """``gen_ai.system_instructions`` as a JSON string."""
    return dumps([{"type": "text", "content": prompt}])


def output_message(m: Message, stop_reason: StopReason | None) -> str:
    """``gen_ai.output.messages`` for one assistant message."""
    out = message(m)
    out["role"] = "assistant"
    out["finish_reason"] = finish_reason(stop_reason) if stop_reason else "stop"
    return dumps([out])


def output_text(text: str) -> str:
    """``gen_ai.output.messages`` for a final answer's text."""
    part = {"type": "text", "content": text}
    return dumps([{"role": "assistant", "parts": [part], "finish_reason": "stop"}])


def tool_result(content: Sequence[ContentBlock]) -> str:
    """``gen_ai.tool.call.result``: the text the model reads (binary parts described)."""
    blocks = list(content)
    if all(isinstance(b, TextBlock) for b in blocks):
        return redact("\n".join(b.text for b in blocks if isinstance(b, TextBlock)))
    return dumps(parts(blocks))


def memory_records(results: Sequence[ScoredMessage]) -> str:
    """``gen_ai.memory.records`` for recalled messages."""
    return dumps([{"id": r.id, "score": r.score, "content": r.message.text} for r in results])
