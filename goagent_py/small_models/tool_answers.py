"""Direct answers from tool results, for models too small to relay them.

A provider wrapper. When the conversation ends with a round of tool results and every call of
that round has an answer template, the wrapper answers from the results itself, without calling
the model; otherwise the wrapped provider answers. A 135M-parameter model calls ``calculator``
with the right expression, reads ``395`` and then writes "17 * 23 + 4 = 69"; with::

    provider = answer_from_tools(LlamaCppProvider(), {"calculator": "{expression} = {result}"})

the answer is "17 * 23 + 4 = 395". A template is a :meth:`str.format` string over the call's
arguments and ``{result}`` (the result's text). A failed call is answered with
``error_template`` (over ``{tool}`` and ``{error}``), so the model never writes a confused
essay about an error; pass ``error_template=None`` to let the model read errors instead.

With ``memory_answers=True`` it also answers a question about the user from the user's own
statement that :func:`~goagent_py.small_models.inline_memories` put before it, said back in
the second person ("Where was I born?" with "I was born in Goa, in India." recalled: "You were
born in Goa, in India."), when every content word of the question is in the statement;
otherwise the model answers. The 135M model, shown that very sentence, still
answered "You were born in India" or took "Your name is Priya" as its own name.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

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
)
from goagent_py.small_models.context_filters import INLINED_MEMORIES_KEY, second_person

__all__ = [
    "DEFAULT_ERROR_TEMPLATE",
    "ToolAnsweringProvider",
    "answer_from_memory",
    "answer_from_tools",
    "direct_answer",
]

DEFAULT_ERROR_TEMPLATE = "Sorry, {tool} failed: {error}"


class _Missing(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return ""


def direct_answer(
    messages: list[Message],
    templates: Mapping[str, str],
    error_template: str | None = DEFAULT_ERROR_TEMPLATE,
) -> str | None:
    """The answer to give from the tool round that ends ``messages``, or None for the model.

    None when the conversation does not end with tool results, when a call of the round has no
    template, or when a call failed and ``error_template`` is None.
    """
    end = len(messages)
    start = end
    while start > 0 and messages[start - 1].role == Role.TOOL:
        start -= 1
    if start == end or start == 0:
        return None
    calls = messages[start - 1]
    if calls.role != Role.ASSISTANT or not calls.tool_calls:
        return None
    results = {m.tool_call_id: m for m in messages[start:end]}
    lines = []
    for call in calls.tool_calls:
        result = results.get(call.id)
        template = templates.get(call.name)
        if result is None or template is None:
            return None
        if result.is_error:
            if error_template is None:
                return None
            error = result.text.removeprefix("Error: ")
            lines.append(error_template.format_map(_Missing(tool=call.name, error=error)))
            continue
        values = _Missing({k: v for k, v in call.arguments.items() if isinstance(k, str)})
        values["result"] = result.text
        lines.append(template.format_map(values))
    return "\n".join(lines)


_ABOUT_USER = re.compile(
    r"^\s*(?:where|what|when|who|which|how old)\b.*\b(?:i|my|me)\b[^?]*\?\s*$", re.I
)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_NOT_CONTENT = frozenset({
    "where", "what", "when", "who", "which", "how", "old", "what's", "where's", "who's", "when's",
    "i", "my", "me", "mine", "am", "is", "are", "was", "were", "do", "does", "did", "be", "been",
    "the", "a", "an", "of", "in", "on", "at", "to", "from", "for", "called", "s",
})  # fmt: skip


def answer_from_memory(messages: list[Message]) -> str | None:
    """The answer to a question about the user from the statement recalled for it, or None.

    The last user message must carry what :func:`~goagent_py.small_models.inline_memories`
    put before it; the question must ask about the user (``where/what/when/who/which/how old``
    ... ``I/my/me`` ... ``?``) and every content word of it must be in the best recalled
    statement, which is then said back in the second person.
    """
    last = messages[-1] if messages else None
    if last is None or last.role != Role.USER:
        return None
    inlined = last.metadata.get(INLINED_MEMORIES_KEY)
    if not isinstance(inlined, dict):
        return None
    question, memories = inlined.get("question"), inlined.get("memories")
    if not isinstance(question, str) or not memories or not _ABOUT_USER.match(question):
        return None
    statement = str(memories[0])
    asked = set(_WORD.findall(question.lower())) - _NOT_CONTENT
    if not asked or not asked <= set(_WORD.findall(statement.lower())):
        return None
    return second_person(statement)


class ToolAnsweringProvider:
    """Answers from tool results when it can, else asks the wrapped provider.

    Build it with :func:`answer_from_tools`; arguments are as there.
    """

    def __init__(
        self,
        provider: Provider,
        templates: Mapping[str, str],
        *,
        error_template: str | None = DEFAULT_ERROR_TEMPLATE,
        memory_answers: bool = False,
    ) -> None:
        if not isinstance(provider, Provider):
            raise ConfigurationError(
                f"answer_from_tools: provider must have async complete(request), "
                f"got {type(provider).__name__}"
            )
        for name, template in templates.items():
            if not isinstance(template, str):
                raise ConfigurationError(
                    f"answer_from_tools: the template for {name!r} must be a str, "
                    f"got {type(template).__name__}"
                )
        self.provider = provider
        self.templates = dict(templates)
        self.error_template = error_template
        self.memory_answers = memory_answers

    def __repr__(self) -> str:
        return f"answer_from_tools({self.provider!r}, tools={sorted(self.templates)})"

    def __getattr__(self, name: str) -> Any:
        if name == "provider":
            raise AttributeError(name)
        return getattr(self.provider, name)

    def _direct(self, request: CompletionRequest) -> CompletionResponse | None:
        text = direct_answer(request.messages, self.templates, self.error_template)
        if text is None and self.memory_answers:
            text = answer_from_memory(request.messages)
        if text is None:
            return None
        return CompletionResponse(
            Message(Role.ASSISTANT, [TextBlock(text)]), StopReason.END_TURN, model=request.model
        )

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """The direct answer when the request ends with templated tool results, else the model's."""
        direct = self._direct(request)
        if direct is not None:
            return direct
        return await self.provider.complete(request)


class _StreamingToolAnsweringProvider(ToolAnsweringProvider):
    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        """The direct answer as one delta, or the wrapped provider's stream."""
        direct = self._direct(request)
        if direct is not None:
            yield TextDelta(direct.message.text)
            yield StreamDone(direct)
            return
        assert isinstance(self.provider, StreamingProvider)
        async for event in self.provider.stream(request):
            yield event


def answer_from_tools(
    provider: Provider,
    templates: Mapping[str, str],
    *,
    error_template: str | None = DEFAULT_ERROR_TEMPLATE,
    memory_answers: bool = False,
) -> ToolAnsweringProvider:
    """Wrap ``provider`` so that a round of templated tool results is answered directly.

    Args:
        provider: the provider to wrap (the wrapper streams when it does).
        templates: per tool name, the answer as a ``str.format`` template over the call's
            arguments and ``{result}``; a missing field formats as "".
        error_template: the answer for a failed call, over ``{tool}`` and ``{error}``; None
            hands a round with an error to the model.
        memory_answers: also answer a question about the user from the statement recalled for
            it (see :func:`answer_from_memory`).

    Raises:
        ConfigurationError: a provider of the wrong kind, or a template that is not a string.
    """
    cls = (
        _StreamingToolAnsweringProvider
        if isinstance(provider, StreamingProvider)
        else ToolAnsweringProvider
    )
    return cls(provider, templates, error_template=error_template, memory_answers=memory_answers)
