"""Conversions between MCP's wire types and goagent-py's content blocks and tool definitions."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from goagent_py.messages import (
    DOCUMENT_MEDIA_TYPES,
    IMAGE_MEDIA_TYPES,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    TextBlock,
)

__all__ = [
    "ERROR_CHARS",
    "blocks_from_result",
    "cap_description",
    "capped",
    "error_text",
    "input_schema",
    "local_name",
]

_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_TRUNCATED = " [description truncated]"


def local_name(prefix: str, remote: str) -> str:
    """The tool's name for the model: prefix + the server's name, with characters some vendors
    refuse (``.``, ``/``, spaces...) replaced by ``_``, at most 64 characters."""
    return _INVALID_NAME_CHARS.sub("_", prefix + remote)[:64]


def cap_description(text: str | None, limit: int) -> str:
    """The server's description, capped at ``limit`` characters with an explicit marker."""
    text = text or ""
    if limit <= 0 or len(text) <= limit:
        return text
    if limit <= 2 * len(_TRUNCATED):
        return text[:limit]
    return text[: limit - len(_TRUNCATED)] + _TRUNCATED


def input_schema(schema: Any) -> dict[str, Any]:
    """A JSON-schema object for the model; a missing or non-object schema becomes an open one."""
    if isinstance(schema, dict) and schema.get("type", "object") == "object":
        out = dict(schema)
        out.setdefault("type", "object")
        out.setdefault("properties", {})
        return out
    return {"type": "object", "properties": {}}


def _b64(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def _block(item: Any) -> ContentBlock:
    kind = getattr(item, "type", "")
    if kind == "text":
        return TextBlock(str(item.text))
    if kind == "image":
        raw = _b64(item.data)
        if raw is not None and item.mime_type in IMAGE_MEDIA_TYPES:
            return ImageBlock(data=raw, media_type=item.mime_type)
        return TextBlock(f"[image of type {item.mime_type} omitted: not a supported image]")
    if kind == "audio":
        return TextBlock(f"[audio of type {item.mime_type} omitted: audio is not supported]")
    if kind == "resource_link":
        return TextBlock(f"[resource link: {item.uri} ({item.name})]")
    if kind == "resource":
        res = item.resource
        text = getattr(res, "text", None)
        if text is not None:
            return TextBlock(f"[resource {res.uri}]\n{text}")
        mime = getattr(res, "mime_type", None) or ""
        raw = _b64(getattr(res, "blob", "") or "")
        if raw is not None and mime in DOCUMENT_MEDIA_TYPES:
            return DocumentBlock(data=raw, media_type=mime, title=str(res.uri))
        if raw is not None and mime in IMAGE_MEDIA_TYPES:
            return ImageBlock(data=raw, media_type=mime)
        return TextBlock(f"[resource {res.uri} of type {mime or 'unknown'} omitted]")
    return TextBlock(f"[content of type {kind or type(item).__name__} omitted]")


def blocks_from_result(result: Any) -> list[ContentBlock]:
    """The content of a ``CallToolResult`` as content blocks (structured content as JSON when
    the server sent no content)."""
    blocks = [_block(item) for item in result.content or []]
    if not blocks and result.structured_content is not None:
        blocks.append(TextBlock(json.dumps(result.structured_content, ensure_ascii=False)))
    return blocks or [TextBlock("(the tool returned no content)")]


ERROR_CHARS = 4000
"""The most characters of a server's error message the model reads (a marker says the rest)."""


def capped(text: str, limit: int = ERROR_CHARS) -> str:
    """``text`` cut at ``limit`` characters, with a marker when it was cut."""
    return text if len(text) <= limit else text[:limit] + " [truncated]"


def error_text(result: Any, limit: int = ERROR_CHARS) -> str:
    """The text of an ``isError`` result, for the error the model reads."""
    parts = [str(item.text) for item in result.content or [] if getattr(item, "type", "") == "text"]
    text = "\n".join(parts).strip() or "the server reported an error without a message"
    return capped(text, limit)
