"""A guard against answers copied word for word from earlier in the conversation.

Small models continue patterns: after a few "It is 12:04." answers, "Thanks!" gets "It is
12:04." too, and once an answer has been repeated it is repeated for ever. The wrapper compares
each text answer with the assistant answers the model was shown; on a verbatim copy it asks
again with the earlier turns left out (the current turn and recalled memories stay), and keeps
the first answer only when the second is a copy as well::

    provider = avoid_repeats(LlamaCppProvider())

The wrapper answers whole (it must see the answer before giving it): an agent streams nothing
through it, which costs little with a small local model.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from goagent_py._recall import RECALL_METADATA_KEY  # the recalled memories: kept on a re-ask
from goagent_py.errors import ConfigurationError
from goagent_py.messages import Message, Role
from goagent_py.provider import CompletionRequest, CompletionResponse, Provider
from goagent_py.small_models.context_filters import current_turn_start

__all__ = ["RepeatGuardProvider", "avoid_repeats", "is_repeat"]


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


def is_repeat(answer: str, messages: list[Message]) -> bool:
    """Whether ``answer`` is, up to spacing and case, an assistant answer in ``messages``."""
    wanted = _normal(answer)
    if not wanted:
        return False
    return any(
        m.role == Role.ASSISTANT and _normal(m.text) == wanted for m in messages if m.text.strip()
    )


def _current_turn(messages: list[Message]) -> list[Message]:
    recalled = [m for m in messages if m.metadata.get(RECALL_METADATA_KEY)]
    return [*recalled, *messages[current_turn_start(messages) :]]


class RepeatGuardProvider:
    """Re-asks, without earlier turns, when the answer copies an earlier one. Build it with
    :func:`avoid_repeats`.
    """

    def __init__(self, provider: Provider) -> None:
        if not isinstance(provider, Provider):
            raise ConfigurationError(
                f"avoid_repeats: provider must have async complete(request), "
                f"got {type(provider).__name__}"
            )
        self.provider = provider
        self.repeats = 0  # answers re-asked because they were copies

    def __repr__(self) -> str:
        return f"avoid_repeats({self.provider!r})"

    def __getattr__(self, name: str) -> Any:
        if name == "provider":
            raise AttributeError(name)
        return getattr(self.provider, name)

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """The wrapped provider's answer, re-asked once without earlier turns if it is a copy."""
        response = await self.provider.complete(request)
        message = response.message
        if message.tool_calls or not is_repeat(message.text, request.messages):
            return response
        self.repeats += 1
        fresh = dataclasses.replace(request, messages=_current_turn(request.messages))
        retry = await self.provider.complete(fresh)
        if retry.message.tool_calls or not is_repeat(retry.message.text, request.messages):
            return retry
        return response


def avoid_repeats(provider: Provider) -> RepeatGuardProvider:
    """Wrap ``provider`` so that an answer copied verbatim from an earlier one is asked again
    without the earlier turns (see the module's docstring).

    Raises:
        ConfigurationError: a provider of the wrong kind.
    """
    return RepeatGuardProvider(provider)
