"""Message content as the GenAI conventions' JSON (input/output messages), for opt-in capture.

Images and documents are described (type, media type, size), never copied: their bytes do not
belong in telemetry. Every string returned here is redacted (``_redact``): a key pasted into a
prompt, passed in a tool's arguments or quoted by a tool's result is content, but never goes to a
span; a tool argument whose schema marks it secret (``writeOnly``, ``format: password``: a
pydantic ``SecretStr``) is recorded as ``[REDACTED]``, whatever its shape. Every value is valid
Unicode (a lone surrogate becomes U+FFFD: exporters encode UTF-8) and bounded: strings are cut,
the cut said in them, so the JSON stays JSON. Everything here is pure and only runs when capture
is on.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from goagent_py._redact import REDACTED, redact
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

MAX_CONTENT_CHARS = 32_768
"""The default bound on one captured attribute (``instrument(max_content_chars=...)``)."""

_MARK = "…[{} more characters]"
_MIN_KEPT = 64  # a string cut shorter than this says nothing: drop older messages instead
_MAX_DEPTH = 32  # nesting of a schema or of arguments walked (a hostile one may be deeper)

Secrets = Mapping[str, Sequence[Any]]
"""Tool name -> the parameter schemas it was offered with that mark a secret."""

_NO_SECRETS: Secrets = MappingProxyType({})


def capture_from_env() -> bool:
    """Whether the environment opts in to content capture (``true``, any case)."""
    return os.environ.get(CAPTURE_ENV, "").strip().lower() == "true"


def clean(text: str) -> str:
    """``text`` as valid Unicode: a lone surrogate (from a tool, a model, a decoding with
    ``surrogateescape``) becomes U+FFFD. Exporters encode attributes as UTF-8, and one that
    cannot drops the attribute with an error for every export."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def cap(text: str, limit: int | None) -> str:
    """``text`` cut to ``limit`` characters, the cut said in the text (``None``: no bound)."""
    if limit is None or len(text) <= limit:
        return text
    keep = max(0, limit - len(_MARK.format(len(text))))
    return text[:keep] + _MARK.format(len(text) - keep)


def text(value: object, limit: int | None) -> str:
    """A captured free-text value (a result, an error message, a reason): made a string if it
    is not one, cleaned, redacted, then bounded (redacted first, so no cut leaves half a key)."""
    return cap(redact(clean(value if isinstance(value, str) else str(value))), limit)


def is_secret(schema: object) -> bool:
    """Whether a JSON schema marks its value secret: ``writeOnly`` or ``format: password``
    (what pydantic makes of ``SecretStr`` / ``SecretBytes``)."""
    if not isinstance(schema, Mapping):
        return False
    return schema.get("writeOnly") is True or schema.get("format") == "password"


def has_secrets(schema: object, root: object = None, depth: int = 0) -> bool:
    """Whether any property of ``schema`` (at any depth, through ``$ref``) is secret."""
    if depth > _MAX_DEPTH or not isinstance(schema, Mapping):
        return False
    root = schema if root is None else root
    if is_secret(schema):
        return True
    return any(has_secrets(sub, root, depth + 1) for sub in _subschemas(schema, root))


# Keywords that never make a value secret or not: two schemas that differ only in these mask
# the same arguments (a tool listing what there is now in an enum, a count in its text).
_NOT_SECRECY = frozenset(
    {"enum", "const", "default", "examples", "description", "title", "minimum", "maximum"}
)


def secrecy_key(schema: object, depth: int = 0) -> str:
    """A canonical text of ``schema`` without the keywords that do not bear on what it marks
    secret: schemas with the same key mask the same arguments, so one of them is enough."""
    return json.dumps(_secrecy(schema, depth), sort_keys=True, default=str)


# Keywords whose value maps names (of properties, of definitions) to schemas: a name there is
# kept whatever it is ("title" may be a property, and a secret one).
_NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})


def _secrecy(schema: object, depth: int) -> object:
    if depth > _MAX_DEPTH:
        return None
    if isinstance(schema, Mapping):
        out: dict[str, object] = {}
        for k, v in schema.items():
            if k in _NAME_MAPS and isinstance(v, Mapping):
                out[str(k)] = {str(n): _secrecy(sub, depth + 1) for n, sub in v.items()}
            elif k not in _NOT_SECRECY:
                out[str(k)] = _secrecy(v, depth + 1)
        return out
    if isinstance(schema, list):
        return [_secrecy(v, depth + 1) for v in schema]
    return schema


def _subschemas(schema: Mapping[str, Any], root: object) -> list[object]:
    out: list[object] = []
    ref = schema.get("$ref")
    if isinstance(ref, str):
        out.append(_resolve(ref, root))
    props = schema.get("properties")
    if isinstance(props, Mapping):
        out.extend(props.values())
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), Mapping):
            out.append(schema[key])
    for key in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            out.extend(branches)
    return out


def _resolve(ref: str, root: object) -> object:
    # Local references only ("#/$defs/Account"): what pydantic and hand-written schemas use.
    if not ref.startswith("#/"):
        return None
    node: object = root
    for part in ref[2:].split("/"):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part.replace("~1", "/").replace("~0", "~"))
    return node


def _property(schema: object, key: str, root: object, depth: int = 0) -> list[object]:
    """The schemas that may govern ``key`` of an object matched by ``schema``."""
    if depth > _MAX_DEPTH or not isinstance(schema, Mapping):
        return []
    out: list[object] = []
    ref = schema.get("$ref")
    if isinstance(ref, str):
        out.extend(_property(_resolve(ref, root), key, root, depth + 1))
    props = schema.get("properties")
    if isinstance(props, Mapping) and key in props:
        out.append(props[key])
    elif isinstance(schema.get("additionalProperties"), Mapping):
        out.append(schema["additionalProperties"])
    for combo in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(combo)
        if isinstance(branches, list):
            for branch in branches:
                out.extend(_property(branch, key, root, depth + 1))
    return out


def _items(schema: object, root: object, depth: int = 0) -> list[object]:
    if depth > _MAX_DEPTH or not isinstance(schema, Mapping):
        return []
    out: list[object] = []
    ref = schema.get("$ref")
    if isinstance(ref, str):
        out.extend(_items(_resolve(ref, root), root, depth + 1))
    if isinstance(schema.get("items"), Mapping):
        out.append(schema["items"])
    for combo in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(combo)
        if isinstance(branches, list):
            for branch in branches:
                out.extend(_items(branch, root, depth + 1))
    return out


def masked(value: Any, schemas: list[object], root: object, depth: int = 0) -> Any:
    """``value`` with what ``schemas`` mark secret replaced by ``[REDACTED]``."""
    if depth > _MAX_DEPTH:
        return value
    if any(is_secret(s) or _refers_to_secret(s, root) for s in schemas):
        return REDACTED
    if isinstance(value, Mapping):
        return {
            k: masked(v, _of_key(schemas, str(k), root), root, depth + 1) for k, v in value.items()
        }
    if isinstance(value, list):
        inner = _flat(schemas, lambda s: _items(s, root))
        return [masked(v, inner, root, depth + 1) for v in value]
    return value


def _of_key(schemas: list[object], key: str, root: object) -> list[object]:
    return _flat(schemas, lambda s: _property(s, key, root))


def _refers_to_secret(schema: object, root: object) -> bool:
    ref = schema.get("$ref") if isinstance(schema, Mapping) else None
    return isinstance(ref, str) and is_secret(_resolve(ref, root))


def _flat(schemas: list[object], each: Any) -> list[object]:
    out: list[object] = []
    for schema in schemas:
        out.extend(each(schema))
    return out


def arguments(call: ToolCall, secrets: Secrets) -> Any:
    """A call's arguments as recorded: its tool's secret parameters masked."""
    value: Any = call.arguments
    for schema in secrets.get(call.name, ()):
        value = masked(value, [schema], schema)
    return value


def _bounded(value: Any, budget: list[int], depth: int = 0) -> Any:
    """``value`` as JSON data whose strings, in order, share ``budget[0]`` characters; each is
    cleaned and redacted before it is cut (no cut leaves half a key)."""
    if isinstance(value, str):
        value = redact(clean(value))
        room = budget[0]
        if len(value) > room:
            value = cap(value, max(room, len(_MARK.format(len(value)))))
        budget[0] = max(0, room - len(value))
        return value
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth > _MAX_DEPTH:
        # Not str(value): the repr of a deeply nested value recurses as deep as it goes.
        return _bounded(f"[nested deeper than {_MAX_DEPTH} levels]", budget, depth)
    if isinstance(value, Mapping):
        return {
            _bounded(str(k), budget, depth + 1): _bounded(v, budget, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_bounded(v, budget, depth + 1) for v in value]
    return _bounded(str(value), budget, depth)


def dumps(value: Any, limit: int | None = None) -> str:
    """Compact JSON, redacted and bounded; values JSON cannot hold are written with ``str``.

    Strings are cut (the cut said in them) so that the JSON stays JSON; the result is cut as
    text only if the structure alone passes ``limit``.
    """
    if limit is None:
        raw = _json(value)
    else:
        # The strings share the bound with the structure and the escapes around them: what
        # the first try overshoots by comes off the strings' share (twice at most, in practice).
        budget = limit
        for _ in range(4):
            raw = _json(_bounded(value, [budget]))
            over = len(raw) - limit
            if over <= 0 or budget <= 0:
                break
            budget = max(0, budget - over - 16)
    return cap(redact(clean(raw)), limit)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


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


def _tool_call_part(call: ToolCall, secrets: Secrets) -> dict[str, Any]:
    return {
        "type": "tool_call",
        "id": call.id,
        "name": call.name,
        "arguments": arguments(call, secrets),
    }


def message(m: Message, secrets: Secrets = _NO_SECRETS) -> dict[str, Any]:
    """One message in the input-messages schema."""
    if m.role == Role.TOOL:
        response = _response(m.content)
        return {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": m.tool_call_id, "response": response}],
        }
    role = str(m.role)
    calls = [_tool_call_part(c, secrets) for c in m.tool_calls]
    return {"role": role, "parts": parts(m.content) + calls}


def input_messages(
    messages: Sequence[Message], limit: int | None, secrets: Secrets = _NO_SECRETS
) -> str:
    """``gen_ai.input.messages`` as a JSON string: the newest messages first into the bound
    (the older ones were on the earlier calls' spans); older ones that do not fit are left
    out, whole."""
    if limit is None:
        return dumps([message(m, secrets) for m in messages])
    kept: list[Any] = []
    used = 2  # the brackets
    for m in reversed(messages):
        room = limit - used
        if room < _MIN_KEPT and kept:
            break
        one = _bounded(message(m, secrets), [max(room, _MIN_KEPT)])
        size = len(_json(one)) + 1
        if used + size > limit and kept:
            break
        kept.append(one)
        used += size
    kept.reverse()
    return dumps(kept, limit)


def user_input(content: Sequence[ContentBlock], limit: int | None) -> str:
    """``gen_ai.input.messages`` for a run's prompt."""
    return dumps([{"role": "user", "parts": parts(content)}], limit)


def system_instructions(prompt: str, limit: int | None) -> str:
    """``gen_ai.system_instructions`` as a JSON string."""
    return dumps([{"type": "text", "content": prompt}], limit)


def output_message(
    m: Message, stop_reason: StopReason | None, limit: int | None, secrets: Secrets = _NO_SECRETS
) -> str:
    """``gen_ai.output.messages`` for one assistant message."""
    out = message(m, secrets)
    out["role"] = "assistant"
    out["finish_reason"] = finish_reason(stop_reason) if stop_reason else "stop"
    return dumps([out], limit)


def output_text(answer: str, limit: int | None) -> str:
    """``gen_ai.output.messages`` for a final answer's text."""
    part = {"type": "text", "content": answer}
    return dumps([{"role": "assistant", "parts": [part], "finish_reason": "stop"}], limit)


def _response(content: Sequence[ContentBlock]) -> str | list[dict[str, Any]]:
    """What a tool answered, as the model reads it: its text, or its parts with the binary
    ones described (an image a tool returned is in the next model call's input too)."""
    blocks = list(content)
    if all(isinstance(b, TextBlock) for b in blocks):
        return "\n".join(str(b.text) for b in blocks if isinstance(b, TextBlock))
    return parts(blocks)


def tool_result(content: Sequence[ContentBlock], limit: int | None) -> str:
    """``gen_ai.tool.call.result``: the text the model reads (binary parts described)."""
    response = _response(content)
    return text(response, limit) if isinstance(response, str) else dumps(response, limit)


def memory_records(results: Sequence[ScoredMessage], limit: int | None) -> str:
    """``gen_ai.memory.records`` for recalled messages."""
    records = [{"id": r.id, "score": r.score, "content": r.message.text} for r in results]
    return dumps(records, limit)
