"""Context filters: what earlier turns the model sees, for ``transform_context``.

A filter takes the messages about to be sent and returns the ones to send; storage is never
touched (short-term memory keeps the whole trace). Made for small models, which copy what they
read: a failed tool call and the confused answer after it, left in the context, come back as
new failed calls and as the same answer, word for word, on later turns::

    agent = Agent(provider=..., transform_context=drop_failed_tool_exchanges)
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from goagent_py._recall import RECALL_METADATA_KEY  # the agent's flag on its recalled memories
from goagent_py.errors import ConfigurationError
from goagent_py.messages import Message, Role, TextBlock

INLINED_MEMORIES_KEY = "goagent.inlined_memories"
"""Metadata of a message rewritten by :func:`inline_memories`: ``{"question": the message's own
text, "memories": the texts put before it}``."""

__all__ = [
    "INLINED_MEMORIES_KEY",
    "current_turn_start",
    "drop_earlier_tool_exchanges",
    "drop_failed_tool_exchanges",
    "inline_memories",
    "second_person",
    "used_to",
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


def inline_memories(
    messages: Sequence[Message], memories: Sequence[str], *, style: str = "said_back"
) -> list[Message]:
    """``messages`` with recalled ``memories`` put in front of the last user message, and the
    agent's recalled-memories message left out.

    For small models: they ignore a separate block of recalled excerpts but use a fact written
    next to the question. ``memories`` are the texts the agent recalled for this turn (its
    ``on_long_term_retrieve`` hook has them).

    Args:
        messages: the messages about to be sent.
        memories: the recalled texts to show (the best first; small models mix up several).
        style: ``"said_back"`` (default): each memory as the assistant would say it back, in
            the second person, then the question (``"You live in Lisbon.\nWhere do I
            live?"``, see :func:`second_person`); for memories that are the user's own
            statements. ``"quoted"``: the memories quoted as the user's words
            (``Earlier I told you: "I live in Lisbon."``), for memories of any kind.

    Raises:
        ConfigurationError: an unknown ``style``.
    """
    if style not in _STYLES:
        raise ConfigurationError(f"style must be one of {sorted(_STYLES)}, got {style!r}")
    kept = [m for m in messages if not m.metadata.get(RECALL_METADATA_KEY)]
    start = current_turn_start(kept)
    texts = [m.strip() for m in memories if m.strip()]
    if not texts or not kept or kept[start].role != Role.USER:
        return kept
    question = kept[start]
    if any(not isinstance(b, TextBlock) for b in question.content):
        return kept
    if style == "quoted":
        facts = "Earlier I told you: " + " ".join(f'"{m}"' for m in texts)
    else:
        facts = " ".join(second_person(m) for m in texts)
    text = f"{facts}\n{question.text}"
    # What was asked and what was added, for select_tools (it scores the question alone).
    metadata = {
        **question.metadata,
        INLINED_MEMORIES_KEY: {"question": question.text, "memories": texts},
    }
    kept[start] = dataclasses.replace(question, content=[TextBlock(text)], metadata=metadata)
    return kept


_STYLES = frozenset({"quoted", "said_back"})

_GREETING = re.compile(
    r"^\s*(?:hello|hi|hey|good (?:morning|afternoon|evening))(?: there)?\b[!,.]*\s+", re.I
)
_TO_SECOND = {
    "i": "you",
    "i'm": "you're",
    "i've": "you've",
    "i'd": "you'd",
    "i'll": "you'll",
    "me": "you",
    "my": "your",
    "mine": "yours",
    "myself": "yourself",
    "am": "are",
    "we": "you",
    "we're": "you're",
    "we've": "you've",
    "our": "your",
    "ours": "yours",
    "us": "you",
}
_WORD = re.compile(r"[A-Za-z]+(?:['\u2019][A-Za-z]+)?")


def second_person(statement: str) -> str:
    """A user's first-person statement (English) as said back to them, without a greeting.

    ``"Hello! My name is Priya and I live in Lisbon."`` becomes ``"Your name is Priya and you
    live in Lisbon."``. For small models: asked "Where do I live?", they copy a fact phrased as
    the answer ("You live in Lisbon.") far more often than they turn "I live in Lisbon" around.
    Word by word (I, me, my, am, we, our...; "I was" becomes "you were"); a statement in
    another language comes back unchanged but for those English words.
    """
    text = _GREETING.sub("", statement, count=1) or statement
    words = list(_WORD.finditer(text))
    out: list[str] = []
    last = 0
    for i, match in enumerate(words):
        word = match.group(0)
        key = word.lower().replace("\u2019", "'")
        new = _TO_SECOND.get(key, word)
        if key == "was" and i > 0 and words[i - 1].group(0).lower() in ("i", "we"):
            new = "were"
        if new is not word and word[0].isupper() and (key != "i" or match.start() == 0):
            new = new[0].upper() + new[1:]
        out.append(text[last : match.start()] + new)
        last = match.end()
    out.append(text[last:])
    said = "".join(out).strip()
    return said[:1].upper() + said[1:]


_USED_TO = [
    (re.compile(r"^(I|We)(?:'m| am| are)\s+(.+)$", re.I), r"\1 used to be \2"),
    (re.compile(r"^((?:My|Our) [\w' -]+?) (?:is|are)\s+(.+)$", re.I), r"\1 used to be \2"),
    (re.compile(r"^(I|We) (?!used to\b)([a-z]+)\b(.*)$", re.I), r"\1 used to \2\3"),
]


def used_to(statement: str) -> str:
    """A first-person statement that is no longer true, said as the past (English).

    ``"I live in Lisbon."`` becomes ``"Before, I used to live in Lisbon."`` and ``"My name is
    Priya."`` ``"Before, my name used to be Priya."``; anything else gets ``"Before: "`` in
    front. For a memory a newer fact replaced, recalled for a question about the past ("Where
    did I live before?"): said back as it was stored, a small model reads it as current.
    """
    text = _GREETING.sub("", statement.strip(), count=1) or statement.strip()
    for pattern, replacement in _USED_TO:
        if pattern.match(text):
            said = pattern.sub(replacement, text, count=1)
            if not said.startswith("I "):
                said = said[:1].lower() + said[1:]
            return "Before, " + said
    return "Before: " + text
