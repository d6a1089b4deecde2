"""The model side: what a provider receives and returns, and what a streaming provider yields."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from goagent_py.messages import Message, StopReason, ThinkingBlock, Usage
from goagent_py.tools import ToolDefinition

__all__ = [
    "CompletionRequest",
    "CompletionResponse",
    "OutputFormat",
    "OutputMode",
    "OutputSchemaLimits",
    "Provider",
    "StreamDone",
    "StreamEvent",
    "StreamingProvider",
    "StructuredOutputProvider",
    "TextDelta",
    "ThinkingConfig",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolCallStart",
    "events_of",
]

Effort = Literal["low", "medium", "high"]


@dataclass(slots=True, frozen=True)
class ThinkingConfig:
    """Extended thinking: a token budget, or ``budget_tokens=0`` for adaptive thinking."""

    budget_tokens: int = 0

    @property
    def adaptive(self) -> bool:
        """Whether the model decides how much to think."""
        return self.budget_tokens == 0


OutputMode = Literal["tool", "native", "prompted"]
"""How a run asks for typed output: a final-result tool the model calls, the provider's own
structured output (a JSON schema the provider enforces), or JSON asked for in the prompt."""


@dataclass(slots=True, frozen=True)
class OutputFormat:
    """The JSON the model must answer with, for providers that enforce it (native mode).

    Attributes:
        name: a name for the schema (``[a-zA-Z0-9_-]``, what OpenAI's ``json_schema.name`` takes).
        schema: a JSON schema whose top level is an object.
        description: what the output is, for the model.
    """

    name: str
    schema: dict[str, Any]
    description: str = ""


@dataclass(slots=True)
class CompletionRequest:
    """One call to a model.

    Attributes:
        model: the model name; providers raise if it is empty and they have no default.
        system_prompt: the system prompt ("" for none).
        messages: the conversation, oldest first.
        tools: the tools the model may call.
        thinking: extended thinking, or None for off.
        effort: "low", "medium" or "high", or None for the provider's default.
        max_tokens: the output token limit, or None for the provider's default.
        output: a JSON schema the answer must follow (the provider's structured output), or
            None for free text. OpenAI sends it as ``response_format``, Anthropic as
            ``output_config.format``, Ollama as ``format``; a provider that cannot enforce one
            ignores it (the run still validates the answer and asks again).
    """

    model: str
    system_prompt: str = ""
    messages: list[Message] = field(default_factory=list)
    tools: list[ToolDefinition] = field(default_factory=list)
    thinking: ThinkingConfig | None = None
    effort: Effort | None = None
    max_tokens: int | None = None
    output: OutputFormat | None = None


@dataclass(slots=True)
class CompletionResponse:
    """A model's answer: one assistant message, why it stopped and what it cost."""

    message: Message
    stop_reason: StopReason = StopReason.END_TURN
    usage: Usage = field(default_factory=Usage)
    model: str = ""


@dataclass(slots=True, frozen=True)
class TextDelta:
    """A piece of answer text."""

    text: str


@dataclass(slots=True, frozen=True)
class ThinkingDelta:
    """A piece of the model's reasoning."""

    thinking: str


@dataclass(slots=True, frozen=True)
class ToolCallStart:
    """The model started a tool call (arguments follow as deltas)."""

    index: int
    id: str
    name: str


@dataclass(slots=True, frozen=True)
class ToolCallDelta:
    """A piece of a tool call's JSON arguments."""

    index: int
    arguments_delta: str


@dataclass(slots=True, frozen=True)
class StreamDone:
    """The stream's last event: the complete response, assembled by the provider."""

    response: CompletionResponse


StreamEvent = TextDelta | ThinkingDelta | ToolCallStart | ToolCallDelta | StreamDone
"""What a streaming provider yields; the last event is always :class:`StreamDone`."""


def events_of(response: CompletionResponse) -> list[StreamEvent]:
    """A whole answer as the events a stream of it would have given: its reasoning, its text,
    its tool calls, then :class:`StreamDone` (for a provider that streams an answer it had to
    compute whole)."""
    events: list[StreamEvent] = []
    thinking = "".join(b.thinking for b in response.message.content if isinstance(b, ThinkingBlock))
    if thinking:
        events.append(ThinkingDelta(thinking))
    if response.message.text:
        events.append(TextDelta(response.message.text))
    for i, call in enumerate(response.message.tool_calls):
        events.append(ToolCallStart(i, call.id, call.name))
        events.append(ToolCallDelta(i, json.dumps(call.arguments)))
    events.append(StreamDone(response))
    return events


@runtime_checkable
class Provider(Protocol):
    """A model backend: implement ``complete``, raising :class:`~goagent_py.ProviderError`."""

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """Send ``request`` to the model and return its answer."""
        ...


@runtime_checkable
class StructuredOutputProvider(Provider, Protocol):
    """A provider that enforces a JSON schema on its answer (:attr:`CompletionRequest.output`).

    ``default_output_mode`` is the mode a run with an ``output_type`` uses on it unless the
    agent says otherwise (``"tool"`` where tool calling is the surer path).
    """

    default_output_mode: OutputMode


@runtime_checkable
class OutputSchemaLimits(Protocol):
    """A provider whose native structured output cannot express every JSON schema.

    A run whose output schema the provider cannot take uses the ``"tool"`` mode instead when
    the mode was the provider's default, and fails with a
    :class:`~goagent_py.ConfigurationError` naming the field when the agent asked for
    ``output_mode="native"``.
    """

    def native_output_problem(self, schema: dict[str, Any]) -> str | None:
        """What in ``schema`` (path first) native mode cannot express, or None."""
        ...


@runtime_checkable
class StreamingProvider(Provider, Protocol):
    """A provider that can also stream its answer as it is produced."""

    def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        """Yield deltas as they arrive, then one :class:`StreamDone` with the whole response."""
        ...


def _streams(provider: object) -> bool:
    """``isinstance(provider, StreamingProvider)``, answered by its two methods first.

    On Python 3.11 a runtime protocol's ``isinstance`` lists the protocol's members anew on
    every call (several µs; the loop asks once per streamed run). A provider with both methods
    (neither set to None) is a streaming provider either way; any other goes to ``isinstance``
    itself (a registered or subclassing class).
    """
    if (
        getattr(provider, "stream", None) is not None
        and getattr(provider, "complete", None) is not None
    ):
        return True
    return isinstance(provider, StreamingProvider)
