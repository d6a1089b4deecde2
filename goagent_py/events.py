"""The typed events of a run: the one channel through which a run is observed.

``Agent.stream`` and ``Session`` subscribers see these events; hooks and telemetry are fed from
them by one adapter (:func:`goagent_py.hooks.dispatch_event`). Every event carries ``path``: the
names of the agents from the root run down to the one that emitted it (empty for a top-level run),
so the events of sub-agents can stream through their parent.

Events are plain slotted dataclasses, not frozen (a frozen dataclass costs a
``object.__setattr__`` per field, and a run makes twenty of them). The messages, calls, results
and requests they carry are copies of the run's record (made once per run per message;
``goagent_py/_shown.py``): a consumer that changes them changes its copies, never what the model
is sent, what is stored or ``RunResult.messages``.

In order, for a run that calls one tool and then answers::

    AgentStart [MemoryRecall] [HistoryLoad] MessageStart(user) MessageEnd(user)
    TurnStart ModelRequest MessageStart(assistant) MessageDelta... ModelResponse
    MessageEnd(assistant) ToolExecutionStart [ToolExecutionUpdate|ToolRetry|ToolTimeout|
    CircuitOpen]... ToolExecutionEnd MessageStart(tool) MessageEnd(tool) TurnEnd
    TurnStart ... MessageEnd(assistant) TurnEnd FinalResponse [HistoryAppend] [MemoryStore]
    AgentEnd
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from goagent_py.messages import Message, Role, ScoredMessage, StopReason, ToolCall, Usage
from goagent_py.provider import CompletionRequest
from goagent_py.results import ModelResponse, PendingCall, RunInfo, RunResult, ToolResult

__all__ = [
    "AbortRequested",
    "AgentEnd",
    "AgentEvent",
    "AgentStart",
    "CircuitOpen",
    "ContextCompacted",
    "FinalResponse",
    "GuardrailChecked",
    "HistoryAppend",
    "HistoryLoad",
    "MemoryRecall",
    "MemoryStore",
    "MessageDelta",
    "MessageEnd",
    "MessageStart",
    "MessagesInjected",
    "ModelRequest",
    "ModelResponse",
    "OutputDelta",
    "OutputRetry",
    "QueueUpdate",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolRetry",
    "ToolsPending",
    "ToolTimeout",
    "TurnEnd",
    "TurnStart",
]


@dataclass(slots=True)
class AgentStart:
    """The run started."""

    info: RunInfo
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class MemoryRecall:
    """Long-term memory was searched (``error`` set if that failed)."""

    memories: list[ScoredMessage]
    duration: float
    error: BaseException | None = None
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class HistoryLoad:
    """Short-term history was loaded: ``count`` messages (``error`` set if that failed)."""

    count: int
    duration: float
    error: BaseException | None = None
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class TurnStart:
    """An iteration (one model call and its tool calls) started; ``iteration`` is 0-based."""

    iteration: int
    path: tuple[str, ...] = field(default=(), kw_only=True)


class ModelRequest:
    """The request about to be sent to the model.

    ``request`` is a copy, made when it is first read (``copy``, given by the run): the
    request holds the whole conversation, and most consumers only note that a request went out
    (a served turn's stream), so a copy made for every event would cost as the history grows.
    """

    __slots__ = ("_copy", "_request", "iteration", "path")
    __match_args__ = ("iteration", "request")

    def __init__(
        self,
        iteration: int,
        request: CompletionRequest,
        *,
        path: tuple[str, ...] = (),
        copy: Callable[[CompletionRequest], CompletionRequest] | None = None,
    ) -> None:
        self.iteration = iteration
        self.path = path
        self._request = request
        self._copy = copy

    @property
    def request(self) -> CompletionRequest:
        """The request (a copy of the run's: changing it changes nothing of the run)."""
        copy = self._copy
        if copy is not None:
            self._copy = None
            self._request = copy(self._request)
        return self._request

    def __repr__(self) -> str:
        shown = f"iteration={self.iteration!r}, request={self.request!r}, path={self.path!r}"
        return f"ModelRequest({shown})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ModelRequest):
            return NotImplemented
        return (self.iteration, self.request, self.path) == (
            other.iteration,
            other.request,
            other.path,
        )

    __hash__ = None  # type: ignore[assignment]  # as a dataclass with eq: unhashable


@dataclass(slots=True)
class MessageStart:
    """A message begins: the user's prompt, an injected message, the assistant's reply (before
    the model call; ``streaming`` tells whether deltas follow) or a tool result.

    ``message`` is the whole message for user and tool messages, None for the assistant's (it
    is built while the model answers: see :class:`MessageEnd`).
    """

    role: Role
    iteration: int
    message: Message | None = None
    streaming: bool = False
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class MessageDelta:
    """A piece of the assistant's message while it streams.

    ``kind`` is "text", "thinking", or "tool_call" (a piece of a call's JSON arguments, with
    ``call_id`` and ``name`` when the provider reports them).
    """

    kind: Literal["text", "thinking", "tool_call"]
    delta: str
    call_id: str = ""
    name: str = ""
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class OutputDelta:
    """The typed output so far, while a typed run streams its answer: ``partial`` is what the
    JSON received until now validates to (a list with its first items, a model once its
    required fields are in). Sent when it changes; the final output is ``AgentEnd``'s."""

    partial: Any
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class OutputRetry:
    """A typed answer was rejected and the model is asked again: the ``OutputDelta`` events
    before this one belong to the rejected answer (``attempt``, 1-based, failed with
    ``feedback``, what the model reads); those after it to the next attempt. Sent after the
    rejected answer's ``MessageEnd``, before the next ``TurnStart``; never when the retries are
    spent (the run then fails with ``OutputValidationError``)."""

    attempt: int
    feedback: str
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class MessageEnd:
    """A message is complete. For the assistant's: exactly as the provider returned it, with its
    stop reason and usage (both None for user and tool messages)."""

    message: Message
    stop_reason: StopReason | None = None
    usage: Usage | None = None
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class ToolExecutionStart:
    """A tool call is about to run, with the arguments it runs with."""

    call: ToolCall
    path: tuple[str, ...] = field(default=(), kw_only=True)

    @property
    def arguments(self) -> dict[str, Any]:
        """The call's arguments."""
        return self.call.arguments


@dataclass(slots=True)
class ToolExecutionUpdate:
    """A running tool reported progress or a partial result (for UIs; not sent to the model)."""

    call: ToolCall
    update: Any
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class ToolRetry:
    """A failed call is retried: ``attempt`` (1-based) failed with ``error``; next in ``delay``."""

    call: ToolCall
    attempt: int
    error: BaseException
    delay: float
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class ToolTimeout:
    """A call ran past the tool timeout and was cancelled."""

    call: ToolCall
    timeout: float
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class CircuitOpen:
    """A call was refused: the tool's circuit breaker is open until ``open_until`` (UTC)."""

    call: ToolCall
    open_until: datetime
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class ToolExecutionEnd:
    """A tool call finished (successfully or not); sent as each call finishes."""

    result: ToolResult
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class GuardrailChecked:
    """A guardrail decided (``kind`` "input" before the first model call, "output" on the
    final answer); ``tripped`` ends the run with ``GuardrailTripped``."""

    kind: Literal["input", "output"]
    name: str
    tripped: bool
    reason: str = ""
    info: Any = None
    duration: float = 0.0
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class ToolsPending:
    """The turn's tool calls wait for decisions (docs/approvals.md): the run stops here, its
    record stored, and goes on with ``resume(decisions)``."""

    calls: list[PendingCall]
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class TurnEnd:
    """An iteration ended; ``tool_results`` is empty on the final iteration."""

    iteration: int
    message: Message
    tool_results: list[ToolResult]
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class FinalResponse:
    """The run has its answer (or gave up on the iteration budget); persistence follows."""

    text: str
    iterations: int
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class HistoryAppend:
    """The run's messages were appended to short-term history (``error`` set if that failed)."""

    count: int
    duration: float
    error: BaseException | None = None
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class MemoryStore:
    """Messages were written to long-term memory (``error`` set if that failed)."""

    count: int
    duration: float
    error: BaseException | None = None
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True, frozen=True)
class CompactionEvent:
    """One compaction: what ran, what it cost, and what came out.

    Attributes:
        steps: the strategies that ran, in order ("clamp_parts", "summarize", ...).
        tokens_before: the estimated context size before.
        tokens_after: the estimated context size after.
        covers: how many transcript messages the newest boundary covers (0 without one).
        summary: the boundary's summary ("" when no boundary was made).
        fallback_used: whether a strategy failed (or fell short) and the fallback ran.
        error: the first failure, or None; with ``changed=False`` the history was left as is.
        changed: whether the context sent differs from the one given.
        persisted: whether the boundary is now in short-term memory.
        usage: tokens the summary model used.
    """

    steps: tuple[str, ...]
    tokens_before: int
    tokens_after: int
    covers: int = 0
    summary: str = ""
    fallback_used: bool = False
    error: BaseException | None = None
    changed: bool = True
    persisted: bool = False
    usage: Usage = field(default_factory=Usage)


USAGE_SINK: contextvars.ContextVar[Callable[[Usage], None] | None] = contextvars.ContextVar(
    "goagent_compaction_usage_sink", default=None
)
"""Set by a run around ``transform_context``: the summary model's usage is passed to it, so it
counts toward the run's usage."""

EVENT_SINK: contextvars.ContextVar[Callable[[CompactionEvent], None] | None] = (
    contextvars.ContextVar("goagent_compaction_event_sink", default=None)
)
"""Set by a run around ``transform_context``: each :class:`CompactionEvent` is passed to it, so
the run can emit it among its own events."""


@dataclass(slots=True)
class ContextCompacted:
    """The context was compacted before a request (strategy, tokens before and after)."""

    compaction: CompactionEvent
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class QueueUpdate:
    """A session's steering or follow-up queue changed: ``size`` messages are waiting."""

    queue: Literal["steering", "follow_up"]
    size: int
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class MessagesInjected:
    """Queued messages entered the conversation, taken from ``queue``."""

    queue: Literal["steering", "follow_up"]
    messages: list[Message]
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class AbortRequested:
    """An abort was asked for, in ``mode`` ("now", "after_tools" or "after_turn")."""

    mode: Literal["now", "after_tools", "after_turn"]
    reason: str = ""
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class AgentEnd:
    """The run ended (``result.error`` tells how; ``result.stop_reason`` is ``ABORTED`` after
    an abort). Sent on every exit but cancellation, which is only reported to hooks."""

    result: RunResult
    path: tuple[str, ...] = field(default=(), kw_only=True)


AgentEvent = (
    AgentStart
    | MemoryRecall
    | HistoryLoad
    | TurnStart
    | ModelRequest
    | MessageStart
    | MessageDelta
    | OutputDelta
    | OutputRetry
    | ModelResponse
    | MessageEnd
    | ToolExecutionStart
    | ToolExecutionUpdate
    | ToolRetry
    | ToolTimeout
    | CircuitOpen
    | ToolExecutionEnd
    | ToolsPending
    | GuardrailChecked
    | TurnEnd
    | FinalResponse
    | HistoryAppend
    | MemoryStore
    | ContextCompacted
    | QueueUpdate
    | MessagesInjected
    | AbortRequested
    | AgentEnd
)
"""Any event of a run."""
