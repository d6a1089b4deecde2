"""A guard against answers that copy: the user's message, or an earlier answer, word for word.

Small models continue patterns. Greeted with "Hello! How are you today?", the 135M model
answers "Hello! How are you today?" (or "How are you today?"); after a few "It is 12:04."
answers, "Thanks!" gets "It is 12:04." too, and once an answer has been repeated it is repeated
for ever. The wrapper checks each text answer:

- an **echo** (the answer adds nothing to the user's message: its words are a run of the
  message's words) is asked again with the current turn only, after a few example exchanges
  (:data:`DEFAULT_EXAMPLES`: the model imitates what it reads; with two example replies before
  them, the 135M model echoed none of 14 small-talk prompts over 3 seeds, against 7 of 39
  with a system prompt alone); if the second answer is an echo too, ``fallback`` is the answer;
- a **repeat** (the answer is, up to spacing and case, an assistant answer the model was shown)
  is asked again without the earlier turns (the current turn and recalled memories stay), and
  the first answer is kept when the second is a copy as well::

    provider = avoid_repeats(LlamaCppProvider())

A tool call is never a copy. The wrapper streams when the wrapped provider does: text is held
back only while it could still turn out to be a copy (it is a piece of the user's message, or
the start of an earlier answer), then passes through as it comes; a copy is never shown.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from goagent_py._recall import RECALL_METADATA_KEY  # the recalled memories: kept on a re-ask
from goagent_py.errors import ConfigurationError
from goagent_py.messages import Message, Role, StopReason, TextBlock
from goagent_py.provider import (
    CompletionRequest,
    CompletionResponse,
    Provider,
    StreamDone,
    StreamEvent,
    StreamingProvider,
    TextDelta,
    events_of,
)
from goagent_py.small_models.context_filters import INLINED_MEMORIES_KEY, current_turn_start

__all__ = [
    "DEFAULT_EXAMPLES",
    "DEFAULT_FALLBACK",
    "RepeatGuardProvider",
    "avoid_repeats",
    "copies_message",
    "is_repeat",
]

DEFAULT_EXAMPLES: tuple[tuple[str, str], ...] = (
    ("Hi!", "Hello! How can I help you today?"),
    ("How are you?", "I'm doing well, thank you. What can I do for you?"),
)
"""(user message, reply) exchanges put before the message when an echo is asked again."""

DEFAULT_FALLBACK = "Sorry, I have no good answer to that. Could you say it another way?"
"""The answer when the model echoes the user's message twice."""

_WORD = re.compile(r"[\w']+")


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


def _words(text: str) -> str:
    return " ".join(_WORD.findall(text.casefold()))


def is_repeat(answer: str, messages: list[Message]) -> bool:
    """Whether ``answer`` is, up to spacing and case, an assistant answer in ``messages``."""
    wanted = _normal(answer)
    if not wanted:
        return False
    return any(
        m.role == Role.ASSISTANT and _normal(m.text) == wanted for m in messages if m.text.strip()
    )


def copies_message(answer: str, message: str) -> bool:
    """Whether ``answer`` adds nothing to ``message``: its words (case and punctuation aside)
    are a run of the message's words ("How are you today?" for "Hello! How are you today?")."""
    words = _words(answer)
    return bool(words) and f" {words} " in f" {_words(message)} "


def _question(messages: list[Message]) -> str:
    """The user's message being answered (without memories quoted before it), or ""."""
    start = current_turn_start(messages)
    if start >= len(messages) or messages[start].role != Role.USER:
        return ""
    message = messages[start]
    inlined = message.metadata.get(INLINED_MEMORIES_KEY)
    if isinstance(inlined, dict) and isinstance(inlined.get("question"), str):
        return str(inlined["question"])
    return message.text


def _current_turn(messages: list[Message]) -> list[Message]:
    recalled = [m for m in messages if m.metadata.get(RECALL_METADATA_KEY)]
    return [*recalled, *messages[current_turn_start(messages) :]]


def _exchanges(examples: list[tuple[str, str]]) -> list[Message]:
    out = []
    for user, reply in examples:
        out.append(Message(Role.USER, [TextBlock(user)]))
        out.append(Message(Role.ASSISTANT, [TextBlock(reply)]))
    return out


def _text(text: str, request: CompletionRequest) -> CompletionResponse:
    return CompletionResponse(
        Message(Role.ASSISTANT, [TextBlock(text)]), StopReason.END_TURN, model=request.model
    )


class RepeatGuardProvider:
    """Asks again when the answer echoes the user's message or copies an earlier answer. Build
    it with :func:`avoid_repeats`.
    """

    def __init__(
        self,
        provider: Provider,
        *,
        examples: Sequence[tuple[str, str]] = DEFAULT_EXAMPLES,
        fallback: str = DEFAULT_FALLBACK,
    ) -> None:
        if not isinstance(provider, Provider):
            raise ConfigurationError(
                f"avoid_repeats: provider must have async complete(request), "
                f"got {type(provider).__name__}"
            )
        self.provider = provider
        self.examples = [(str(user), str(reply)) for user, reply in examples]
        self.fallback = fallback
        self.repeats = 0  # answers asked again because they copied an earlier answer
        self.echoes = 0  # answers asked again because they copied the user's message

    def __repr__(self) -> str:
        return f"avoid_repeats({self.provider!r})"

    def __getattr__(self, name: str) -> Any:
        # Never hand out the wrapped provider's ``stream``: a run would stream round the guard.
        if name in ("provider", "stream"):
            raise AttributeError(name)
        return getattr(self.provider, name)

    def _copy(self, response: CompletionResponse, request: CompletionRequest) -> str | None:
        """ "echo", "repeat" or None: what ``response`` copies."""
        message = response.message
        if message.tool_calls:
            return None
        if copies_message(message.text, _question(request.messages)):
            return "echo"
        if is_repeat(message.text, request.messages):
            return "repeat"
        return None

    def _again(self, request: CompletionRequest, copy: str) -> CompletionRequest:
        """The request to ask again after a copy of kind ``copy``."""
        turn = _current_turn(request.messages)
        if copy == "echo":
            self.echoes += 1
            turn = [*_exchanges(self.examples), *turn]
        else:
            self.repeats += 1
        return dataclasses.replace(request, messages=turn)

    def _settle(
        self,
        first: CompletionResponse,
        copy: str,
        retry: CompletionResponse,
        request: CompletionRequest,
    ) -> CompletionResponse:
        """The answer after asking again: the retry unless it copies too."""
        if self._copy(retry, request) is None:
            return retry
        return _text(self.fallback, request) if copy == "echo" else first

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """The wrapped provider's answer, asked again once if it is a copy."""
        response = await self.provider.complete(request)
        copy = self._copy(response, request)
        if copy is None:
            return response
        retry = await self.provider.complete(self._again(request, copy))
        return self._settle(response, copy, retry, request)


class _StreamingRepeatGuardProvider(RepeatGuardProvider):
    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        """The wrapped provider's stream, held back while it could still be a copy; a copy is
        asked again (whole) and never shown."""
        assert isinstance(self.provider, StreamingProvider)
        question = _words(_question(request.messages))
        earlier = [_normal(m.text) for m in request.messages if m.role == Role.ASSISTANT]
        earlier = [text for text in earlier if text]
        held: list[StreamEvent] = []
        holding = True
        text = ""
        response: CompletionResponse | None = None
        async for event in self.provider.stream(request):
            if isinstance(event, StreamDone):
                response = event.response
                continue
            if not holding:
                yield event
                continue
            held.append(event)
            if isinstance(event, TextDelta):
                text += event.text
                if not _could_copy(text, question, earlier):
                    holding = False
                    for waiting in held:
                        yield waiting
                    held.clear()
        if response is None:  # the wrapped stream broke its contract: let the loop say so
            for waiting in held:
                yield waiting
            return
        copy = self._copy(response, request) if holding else None
        if copy is None:
            for waiting in held:
                yield waiting
            yield StreamDone(response)
            return
        retry = await self.provider.complete(self._again(request, copy))
        for event in events_of(self._settle(response, copy, retry, request)):
            yield event


def _could_copy(text: str, question: str, earlier: list[str]) -> bool:
    """Whether an answer starting with ``text`` may still turn out to be a copy."""
    words = _words(text)
    if not words or words in question:
        return True
    start = _normal(text)
    return any(answer.startswith(start) for answer in earlier)


def avoid_repeats(
    provider: Provider,
    *,
    examples: Sequence[tuple[str, str]] = DEFAULT_EXAMPLES,
    fallback: str = DEFAULT_FALLBACK,
) -> RepeatGuardProvider:
    """Wrap ``provider`` so that an answer that echoes the user's message, or copies an earlier
    answer word for word, is asked again (see the module's docstring).

    Args:
        provider: the provider to wrap (the wrapper streams when it does).
        examples: (user message, reply) exchanges shown before the message when an echo is
            asked again.
        fallback: the answer when the second answer echoes the message too.

    Raises:
        ConfigurationError: a provider of the wrong kind.
    """
    cls = (
        _StreamingRepeatGuardProvider
        if isinstance(provider, StreamingProvider)
        else RepeatGuardProvider
    )
    return cls(provider, examples=examples, fallback=fallback)
