"""Tool results by reference (issue 30): a big result stays on the workers.

A tool activity whose result is bigger than :data:`RESULT_WHOLE` stores it in the session's
storage, in a part of the session (``memory/storage/_parts``: a session of its own named after
the conversation and the result's digest; one row, a read is one indexed lookup), and returns
one text block, the reference ``goagent.result:<digest>``. The workflow marks the tool message
built around it (metadata :data:`REFS_KEY`, set from the activity's recorded answer, by call id):
only a marked message is a reference, so a tool whose output is that text stays data (a tool
returns content blocks, never message metadata). The workers put the stored content back
wherever the message leaves the workflow: in a model request (the model activity) and in an
append (the stored conversation holds the real content, unmarked); the client does the same
with a run's result. So neither the tool activity's recorded result nor any later request grows
with the result's size, and a run's results together are not bounded by the workflow's history
limit.

A thinking block over that size in a model response is stored the same way by the model
activity (its ``thinking`` is the reference, its signature kept, the message marked with the
digests): the next request of the run needs it back whole, and the workflow holds the reference.

Ownership: a result row belongs to its conversation (the part's name holds the session id), so
deleting the conversation (``clear``, serve's thread delete) deletes its rows, and the same
content in two conversations is two rows, each deleted with its own. Within a conversation the
same content is one row (``append_once`` keyed by the digest).

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

from goagent_py._generation import expect_generation
from goagent_py.errors import CorruptedDataError
from goagent_py.memory.storage._parts import part_session
from goagent_py.messages import ContentBlock, Message, Role, TextBlock, ThinkingBlock

from ._wire import content_to_text

RESULT_WHOLE = 64 * 1024
"""Results up to this many bytes (as JSON) cross whole; bigger ones by reference."""

PREVIEW = 2000
"""Characters of a result by reference that its tool activity returns for the run's events."""

RESULT_REF = "goagent.result:"
"""The text of the one block that stands for a stored result: this prefix, then the sha256
of the result's content (as JSON)."""

REFS_KEY = "goagent.refs"
"""Message metadata: the digests of the stored results the message's content stands for (set
by the workflow on a tool message, by the model activity on an answer with big thinking;
removed when the content is put back)."""

_REF = re.compile(r"goagent\.result:([0-9a-f]{64})")


def reference_text(digest: str) -> str:
    """The text of the block that stands for the result of ``digest``."""
    return f"{RESULT_REF}{digest}"


def digest_of(content: Sequence[ContentBlock]) -> str | None:
    """The digest of a reference block's text, if ``content`` is one (an activity's answer)."""
    if len(content) != 1 or not isinstance(content[0], TextBlock):
        return None
    found = _REF.fullmatch(content[0].text)
    return None if found is None else found.group(1)


def marked(message: Message, digest: str) -> Message:
    """``message`` (a tool message whose content is the reference of ``digest``) marked as one."""
    return replace(message, metadata={**message.metadata, REFS_KEY: [digest]})


def reference_of(message: Message) -> str | None:
    """The digest a tool message's content stands for, or None if it is not a marked
    reference (a tool's own output that reads like one is data)."""
    refs = message.metadata.get(REFS_KEY)
    if message.role is not Role.TOOL or not isinstance(refs, list) or len(refs) != 1:
        return None
    digest = digest_of(message.content)
    return digest if digest is not None and digest == refs[0] else None


def _thinking_refs(message: Message) -> list[str]:
    refs = message.metadata.get(REFS_KEY)
    if message.role is not Role.ASSISTANT or not isinstance(refs, list):
        return []
    return [str(r) for r in refs]


def _unmarked(message: Message, content: list[ContentBlock]) -> Message:
    metadata = {k: v for k, v in message.metadata.items() if k != REFS_KEY}
    return replace(message, content=content, metadata=metadata)


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


async def store_result(
    memory: Any,
    session_id: str,
    content: Sequence[ContentBlock],
    data: str,
    *,
    generation: Any = None,
) -> str | None:
    """Store ``content`` (whose JSON is ``data``) in a part of ``session_id`` (``memory``'s
    session); its digest, or None if ``memory`` cannot hold it (the caller sends it whole).
    ``generation``: the conversation's clear counter the run loaded it at; a part is refused
    (``ConversationClearedError``) once the conversation was cleared since, as its appends are:
    stored after the clear, it would be a row of the deleted conversation that nothing
    deletes."""
    digest = hashlib.sha256(data.encode()).hexdigest()
    found = _apart(memory, part_session(session_id, reference_text(digest)))
    if found is None:
        return None
    storage, owned = found
    try:
        message = Message(Role.TOOL, list(content))
        if generation is not None:
            expect_generation(storage, int(generation))
        append_once = getattr(storage, "append_once", None)
        if append_once is not None:  # one row, however often the result is stored
            await append_once(digest, [message])
        elif not await storage.load():
            await storage.append([message])
    finally:
        if owned:
            await storage.aclose()
    return digest


async def expanded(memory: Any, session_id: str, messages: list[Message]) -> list[Message]:
    """``messages`` with each marked reference replaced by the content stored for
    ``session_id``, unmarked.

    Raises:
        CorruptedDataError: a referenced result is not stored (removed under the run).
    """
    if not any(reference_of(m) or _thinking_refs(m) for m in messages):
        return messages
    out: list[Message] = []
    contents: dict[str, list[ContentBlock]] = {}

    async def content(digest: str) -> list[ContentBlock]:
        if digest not in contents:
            contents[digest] = await _load(memory, session_id, digest)
        return contents[digest]

    for m in messages:
        digest = reference_of(m)
        if digest is not None:
            m = _unmarked(m, list(await content(digest)))
        elif refs := _thinking_refs(m):
            blocks: list[ContentBlock] = []
            for b in m.content:
                found = _REF.fullmatch(b.thinking) if isinstance(b, ThinkingBlock) else None
                if found is None or found.group(1) not in refs:
                    blocks.append(b)
                else:
                    blocks.extend(await content(found.group(1)))
            m = _unmarked(m, blocks)
        out.append(m)
    return out


async def thinking_by_reference(
    memory: Any, session_id: str, message: Message, *, generation: Any = None
) -> Message:
    """``message`` (a model's answer) with each thinking block over :data:`RESULT_WHOLE`
    stored and replaced by its reference (the signature kept, the message marked); unchanged
    where ``memory`` cannot hold it."""
    blocks: list[ContentBlock] = []
    digests: list[str] = []
    for b in message.content:
        if isinstance(b, ThinkingBlock) and len(b.thinking) > RESULT_WHOLE:
            digest = await store_result(
                memory, session_id, [b], content_to_text([b]), generation=generation
            )
            if digest is not None:
                b = ThinkingBlock(thinking=reference_text(digest), signature=b.signature)
                digests.append(digest)
        blocks.append(b)
    if not digests:
        return message
    return replace(message, content=blocks, metadata={**message.metadata, REFS_KEY: digests})


async def _load(memory: Any, session_id: str, digest: str) -> list[ContentBlock]:
    found = _apart(memory, part_session(session_id, reference_text(digest)))
    if found is not None:
        storage, owned = found
        try:
            stored = await storage.load()
        finally:
            if owned:
                await storage.aclose()
        if stored:
            return list(stored[0].content)
    raise CorruptedDataError(  # not retried: a retry reads the same rows
        f"the tool result {digest[:12]}... this run stored is no longer stored (was the "
        "conversation deleted under a running durable run?)"
    )
