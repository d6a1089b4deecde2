"""What a run reports: how it started, each model call, each tool call, and how it ended.

These are plain data: the loop builds them, events carry them, hooks receive them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, cast

from typing_extensions import TypeVar  # a default (PEP 696): a bare RunResult is RunResult[str]

from goagent_py.messages import ContentBlock, Message, StopReason, ToolCall, Usage

__all__ = [
    "ModelResponse",
    "PendingCall",
    "ProviderEvent",
    "RunInfo",
    "RunResult",
    "ToolResult",
]

Out = TypeVar("Out", default=str)


@dataclass(slots=True, frozen=True)
class RunInfo:
    """What a run starts with."""

    run_id: str
    agent_name: str
    model: str
    content: list[ContentBlock]
    provider: object | None = None


@dataclass(slots=True, frozen=True)
class ModelResponse:
    """The outcome of one model call (``error`` set on failure, ``message`` on success).

    Attributes:
        duration: seconds the call took.
        usage: the tokens the call used.
        stop_reason: why the model stopped (None on failure).
        tool_calls: how many tool calls the response asks for.
        model: the model that answered, as the provider reported it.
        error: the error the call failed with, or None.
        message: the assistant message, or None on failure.
        iteration: the 0-based iteration of the call.
        path: the agent names from the root run down to this one (empty at top level).
    """

    duration: float
    usage: Usage = field(default_factory=Usage)
    stop_reason: StopReason | None = None
    tool_calls: int = 0
    model: str = ""
    error: BaseException | None = None
    message: Message | None = None
    iteration: int = 0
    path: tuple[str, ...] = ()


ProviderEvent = ModelResponse
"""The former name of :class:`ModelResponse` (what ``on_provider_response`` receives)."""


@dataclass(slots=True, frozen=True)
class ToolResult:
    """The outcome of one tool call.

    Attributes:
        call: the call as the model made it.
        content: what the model reads (on error, the error text).
        error: the specific error (``ToolTimeoutError``, ``CircuitOpenError``,
            ``ToolArgumentsError``, ``ToolNotFoundError``, ``ToolBlockedError``, or
            ``ToolExecutionError`` whose ``__cause__`` is what the tool raised), or None.
        duration: seconds the call took (0 when the tool was not found or was blocked; for a
            call an abort cut short, how long it had run).
        started_at: when the call started (UTC).
        details: structured data for UIs and logs; never sent to the model.
        terminate: ask the run to stop after this batch (it stops when every result of the
            batch asks).
    """

    call: ToolCall
    content: list[ContentBlock]
    error: BaseException | None = None
    duration: float = 0.0
    started_at: datetime | None = None
    details: object = None
    terminate: bool = False

    @property
    def is_error(self) -> bool:
        """Whether the call failed."""
        return self.error is not None


@dataclass(slots=True, frozen=True)
class PendingCall:
    """A tool call that waits for a decision before it runs (docs/approvals.md).

    Attributes:
        call: the call, with its validated arguments (what the person approves).
        kind: "approval" (a person decides: approve, edit, deny) or "external" (the client
            runs the tool and sends its output back).
        deadline: when the decision is due (seconds since the epoch, UTC), or None. After it,
            only a denial is accepted.
        via: for a call made inside a tool (an agent used as a tool), the ids of the calls it
            was made under, from this run's down (empty for this run's own calls). The call's
            ``id`` is then that path and the inner call's id joined by ``/``: ``"p1/k1"``.
        token: the token of the wait the call is listed in (one per wait: every call of a
            turn that waits shares it; "" where none is known). A decision may carry it
            (``Approve(token=call.token)``) so that it cannot be taken by a later wait whose
            call reuses this id (local models' servers number calls per turn); once an
            earlier call of the conversation had this id, a decision without it is refused.
        resolved: for a call of a file tool (one with ``rule_path``, the coding agent's), the
            file its ``path`` led to when the call was listed: symlinks resolved, relative to
            the tool's root ("" for other calls). The approval is for that file: a call whose
            path leads elsewhere when it runs (a link swapped meanwhile) is refused, not run.
    """

    call: ToolCall
    kind: Literal["approval", "external"] = "approval"
    deadline: float | None = None
    via: tuple[str, ...] = ()
    token: str = ""
    resolved: str = ""

    @property
    def id(self) -> str:
        """The call's id: the key of its decision."""
        return self.call.id

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.call.name

    @property
    def arguments(self) -> dict[str, Any]:
        """The validated arguments."""
        return self.call.arguments


@dataclass(slots=True, frozen=True)
class RunResult(Generic[Out]):
    """What a run did: the answer, why it stopped, what it cost, what it added.

    ``str(result)`` is the answer text. ``RunResult[Out]``: ``output`` has the run's
    ``output_type`` (``str`` by default).

    Attributes:
        output: the validated answer, of the run's ``output_type`` (for ``str``, the text;
            None when the run failed before one).
        text: the final answer text ("" when the run failed before one; in tool mode, the
            JSON the model gave).
        stop_reason: the final response's stop reason, so a truncated answer is never silent;
            ``ABORTED`` when the run was aborted.
        iterations: model calls made (1-based).
        usage: token usage summed over every call (sub-agents' included).
        tool_calls: tool calls made.
        tool_time: seconds spent in tools (parallel calls each counted).
        duration: seconds the run took.
        messages: the messages this run added (the user message, then assistant and tool messages).
        error: the error the run ended with, or None.
        run_id: the id given to the run in ``RunInfo``.
        pending: the calls that wait for decisions when ``stop_reason`` is ``DEFERRED``
            (resume with ``agent.resume(decisions)``); empty otherwise.
    """

    text: str = ""
    stop_reason: StopReason | None = None
    iterations: int = 0
    usage: Usage = field(default_factory=Usage)
    tool_calls: int = 0
    tool_time: float = 0.0
    duration: float = 0.0
    messages: list[Message] = field(default_factory=list)
    error: BaseException | None = None
    run_id: str = ""
    output: Out = field(default=cast(Any, None))
    pending: list[PendingCall] = field(default_factory=list)

    def __str__(self) -> str:
        return self.text
