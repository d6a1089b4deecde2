"""Tool results by reference (issue 30): a big result stays on the workers.

A tool activity whose result is bigger than :data:`RESULT_WHOLE` stores it in the session's
storage, under a session of its own named after the result's digest (one row: a read is one
indexed lookup), and returns one text block, the reference ``goagent.result:<digest>``. The
workflow's loop builds its tool message around that block as around any result; the workers
put the stored content back wherever the message leaves the workflow: in a model request
(the model activity) and in an append (the stored conversation holds the real content). So
neither the tool activity's recorded result nor any later request grows with the result's
size, and a run's results together are not bounded by the workflow's history limit.

A thinking block over that size in a model response is stored the same way by the model
activity (its ``thinking`` is the reference, its signature kept): the next request of the
run needs it back whole, and the workflow holds the reference.

A worker whose short-term storage cannot hold a result apart (none, or one without sessions:
``InMemoryStorage``) returns the result whole, as before.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from goagent_py.errors import CorruptedDataError
from goagent_py.messages import ContentBlock, Message, Role, TextBlock, ThinkingBlock

from ._wire import content_to_text

RESULT_WHOLE = 64 * 1024
"""Results up to this many bytes (as JSON) cross whole; bigger ones by reference."""

PREVIEW = 2000
"""Characters of a result by reference that its tool activity returns for the run's events."""

RESULT_REF = "goagent.result:"
"""The text of the one block that stands for a stored result: this prefix, then the sha256
of the result's content (as JSON)."""

_REF = re.compile(r"goagent\.result:([0-9a-f]{64})")


def reference_of(message: Message) -> str | None:
    """The digest a tool message's content stands for, or None if it is not a reference."""
    if message.role is not Role.TOOL or len(message.content) != 1:
        return None
    block = message.content[0]
    if not isinstance(block, TextBlock):
        return None
    found = _REF.fullmatch(block.text)
    return None if found is None else found.group(1)


def _thinking_refs(message: Message) -> bool:
    return message.role is Role.ASSISTANT and any(
        isinstance(b, ThinkingBlock) and _REF.fullmatch(b.thinking) for b in message.content
    )


def _session_of(digest: str) -> str:
    return f"{RESULT_REF}{digest}"


def _apart(memory: Any, session_id: str) -> tuple[Any, bool] | None:
    """A storage of ``session_id`` beside ``memory``'s, and whether the caller closes it; None
    if ``memory`` keeps no storage that has other sessions."""
    storage = getattr(memory, "storage", None)
    if storage is None:
        return None
    for_session = getattr(storage, "for_session", None)
    if for_session is not None:  # PostgresStorage: the same pool
        return for_session(session_id), False
    from goagent_py.memory.storage.sqlite import SQLiteStorage

    if isinstance(storage, SQLiteStorage) and storage.path != ":memory:":
        return SQLiteStorage(os.fspath(storage.path), session_id=session_id), True
    return None


async def store_result(memory: Any, content: Sequence[ContentBlock], data: str) -> str | None:
    """Store ``content`` (whose JSON is ``data``) beside ``memory``'s session; the reference
    text, or None if ``memory`` cannot hold it (the caller sends the content whole)."""
    digest = hashlib.sha256(data.encode()).hexdigest()
    found = _apart(memory, _session_of(digest))
    if found is None:
        return None
    storage, owned = found
    try:
        message = Message(Role.TOOL, list(content))
        append_once = getattr(storage, "append_once", None)
        if append_once is not None:  # one row, however often the result is stored
            await append_once(digest, [message])
        elif not await storage.load():
            await storage.append([message])
    finally:
        if owned:
            await storage.aclose()
    return f"{RESULT_REF}{digest}"


async def expanded(memory: Any, messages: list[Message]) -> list[Message]:
    """``messages`` with each stored result's reference replaced by its content.

    Raises:
        CorruptedDataError: a referenced result is not stored (removed under the run).
    """
    if not any(reference_of(m) or _thinking_refs(m) for m in messages):
        return messages
    out: list[Message] = []
    contents: dict[str, list[ContentBlock]] = {}

    async def content(digest: str) -> list[ContentBlock]:
        if digest not in contents:
            contents[digest] = await _load(memory, digest)
        return contents[digest]

    for m in messages:
        digest = reference_of(m)
        if digest is not None:
            m = replace(m, content=list(await content(digest)))
        elif _thinking_refs(m):
            blocks: list[ContentBlock] = []
            for b in m.content:
                found = _REF.fullmatch(b.thinking) if isinstance(b, ThinkingBlock) else None
                blocks.extend([b] if found is None else await content(found.group(1)))
            m = replace(m, content=blocks)
        out.append(m)
    return out


async def thinking_by_reference(memory: Any, message: Message) -> Message:
    """``message`` (a model's answer) with each thinking block over :data:`RESULT_WHOLE`
    stored and replaced by its reference (the signature kept); unchanged where ``memory``
    cannot hold it."""
    blocks: list[ContentBlock] = []
    changed = False
    for b in message.content:
        if isinstance(b, ThinkingBlock) and len(b.thinking) > RESULT_WHOLE:
            ref = await store_result(memory, [b], content_to_text([b]))
            if ref is not None:
                b = ThinkingBlock(thinking=ref, signature=b.signature)
                changed = True
        blocks.append(b)
    return replace(message, content=blocks) if changed else message


async def _load(memory: Any, digest: str) -> list[ContentBlock]:
    found = _apart(memory, _session_of(digest))
    stored: list[Message] = []
    if found is not None:
        storage, owned = found
        try:
            stored = await storage.load()
        finally:
            if owned:
                await storage.aclose()
    if not stored:
        raise CorruptedDataError(  # not retried: a retry reads the same rows
            f"the tool result {digest[:12]}... this run stored is no longer stored (was the "
            "storage cleared under a running durable run?)"
        )
    return list(stored[0].content)
