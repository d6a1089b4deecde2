"""The one rule for what a run may start from: every entry that starts a run (``Agent.run``,
``stream``, ``run_sync``, ``Session``, a durable run and its signals, a flow, an agent or flow
called as a tool, the A2A, MCP and served entries) checks its prompt here, so an empty or
whitespace-only prompt is refused the same way everywhere, before anything is called or
stored (docs/architecture.md, "Running an agent")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from goagent_py._records import message as new_message
from goagent_py._records import text_block
from goagent_py.errors import ConfigurationError, InvalidInputError
from goagent_py.messages import (
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
)

__all__ = ["Prompt", "to_messages"]

_BLOCK_TYPES = (TextBlock, ImageBlock, DocumentBlock, ThinkingBlock)

Prompt = str | Sequence[ContentBlock] | Message | Sequence[Message]
"""What a run takes: text, content blocks (text, images, documents), or whole messages
(user messages; the last one is the prompt, the ones before it enter the conversation first)."""


def to_messages(prompt: Prompt, where: str) -> list[Message]:
    """The user messages a run starts from; a clear error for anything else, an empty prompt
    included (a run on nothing has nothing to answer: docs/architecture.md, "Running an
    agent")."""
    if isinstance(prompt, str):
        if not prompt or prompt.isspace():
            raise _empty(where)
        return [new_message(Role.USER, [text_block(prompt)])]
    if isinstance(prompt, Message):
        prompt = [prompt]
    if not isinstance(prompt, Sequence) or not prompt:
        raise ConfigurationError(
            f"{where} takes a str, content blocks or user messages, got "
            f"{type(prompt).__name__ if not isinstance(prompt, Sequence) else 'an empty list'}"
        )
    if all(isinstance(m, Message) for m in prompt):
        messages = [m for m in prompt if isinstance(m, Message)]
        for m in messages:
            if m.role is not Role.USER:
                raise ConfigurationError(
                    f"{where} takes user messages, got a {m.role} message; the system prompt "
                    "is the agent's system_prompt, and history belongs in short-term memory"
                )
            _check_blocks(m.content, where)
            if _blank(m.content):
                raise _empty(where)
        return messages
    blocks = _check_blocks(prompt, where)
    if _blank(blocks):
        raise _empty(where)
    return [Message(Role.USER, blocks)]


def _blank(blocks: Sequence[ContentBlock]) -> bool:
    """Whether a prompt's blocks say nothing: text only, and all of it whitespace."""
    return all(type(b) is TextBlock and (not b.text or b.text.isspace()) for b in blocks)


def _empty(where: str) -> InvalidInputError:
    return InvalidInputError(
        f"{where} was given an empty prompt, which leaves the model nothing to answer: pass "
        "the text to answer, or continue the conversation without a new prompt with "
        "Session.continue_()"
    )


def _check_blocks(blocks: Sequence[Any], where: str) -> list[ContentBlock]:
    if not blocks:
        raise ConfigurationError(
            f"{where} requires at least one content block, e.g. TextBlock('...')"
        )
    for block in blocks:
        if not isinstance(block, _BLOCK_TYPES):
            raise ConfigurationError(
                f"{where} takes content blocks (TextBlock, ImageBlock, DocumentBlock), "
                f"got {type(block).__name__}"
            )
        # Blocks validate themselves when built; re-check in case one was built around that.
        if isinstance(block, ImageBlock | DocumentBlock):
            type(block).__post_init__(block)  # type: ignore[arg-type]
    return list(blocks)
