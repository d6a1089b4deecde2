"""Context filters: what earlier turns the model sees, for ``transform_context``.

A filter takes the messages about to be sent and returns the ones to send; storage is never
touched (short-term memory keeps the whole trace). Made for small models, which copy what they
read: a failed tool call and the confused answer after it, left in the context, come back as
new failed calls and as the same answer, word for word, on later turns::

    agent = Agent(provider=..., transform_context=drop_failed_tool_exchanges)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from goagent_py._recall import RECALL_METADATA_KEY  # the agent's flag on its recalled memories
from goagent_py.messages import Message, Role, TextBlock

__all__ = [
    "current_turn_start",
    "drop_earlier_tool_exchanges",
    "drop_failed_tool_exchanges",
    "inline_memories",
]


def current_turn_start(messages: Sequence[Message]) -> int:
    """The index of the last user message (where the turn being answered starts); 0 if none."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == Role.USER:
            return i
    return 0


def drop_failed_tool_exchanges(messages: Sequence[Message]) -> list[Message]:
    """``messages`` without the failed tool exchanges of earlier turns.

    A failed exchange is an assistant message with tool calls together with its tool results,
    when one of the results is an error; the assistant's text answer that ends the same turn is
    dropped with it (it was written from the error). The turn being answered (from the last
    user message on) is kept whole: the model must read its own errors to correct them.
    """
    return _drop(messages, failed_only=True)


def drop_earlier_tool_exchanges(messages: Sequence[Message]) -> list[Message]:
    """``messages`` without any tool exchange of earlier turns; their text answers stay, except
    the answers of turns whose exchange failed.

    For small models: their chat template renders an earlier call as text (llama-cpp-python's
    ``chatml-function-calling`` writes ``functions.current_time:``), which they copy as the
    answer to the next, unrelated message. The answer that followed a successful call carries
    what it found.
    """
    return _drop(messages, failed_only=False)


def _drop(messages: Sequence[Message], *, failed_only: bool) -> list[Message]:
    """Earlier turns without failed exchanges (and their answers), and without the successful
    ones too unless ``failed_only``; the current turn whole."""
    start = current_turn_start(messages)
    kept: list[Message] = []
    failed_turn = False
    i = 0
    while i < start:
        message = messages[i]
        if message.role == Role.USER:
            failed_turn = False
            kept.append(message)
            i += 1
            continue
        if message.role == Role.ASSISTANT and message.tool_calls:
            end = i + 1
            while end < start and messages[end].role == Role.TOOL:
                end += 1
            if any(m.is_error for m in messages[i + 1 : end]):
                failed_turn = True
            elif failed_only and not failed_turn:
                kept.extend(messages[i:end])
            i = end
            continue
        if not failed_turn:
            kept.append(message)
        i += 1
    kept.extend(messages[start:])
    return kept


def inline_memories(messages: Sequence[Message], memories: Sequence[str]) -> list[Message]:
    """``messages`` with recalled ``memories`` quoted in front of the last user message, and
    the agent's recalled-memories message left out.

    For small models: they ignore a separate block of recalled excerpts but use a fact quoted
    next to the question (``Earlier I told you: "I live in Lisbon."``; SmolLM2-135M used the
    fact in 10 answers of 12 so, in 8 with a "You told me" quote, in 6 as an earlier turn).
    ``memories`` are the texts the agent recalled for this turn (its ``on_long_term_retrieve``
    hook has them).
    """
    kept = [m for m in messages if not m.metadata.get(RECALL_METADATA_KEY)]
    start = current_turn_start(kept)
    if not memories or not kept or kept[start].role != Role.USER:
        return kept
    question = kept[start]
    if any(not isinstance(b, TextBlock) for b in question.content):
        return kept
    quoted = " ".join(f'"{m.strip()}"' for m in memories if m.strip())
    text = f"Earlier I told you: {quoted}\n{question.text}"
    kept[start] = dataclasses.replace(question, content=[TextBlock(text)])
    return kept
