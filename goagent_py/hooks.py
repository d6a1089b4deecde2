"""What a run reports: hooks, the run result, and the typed events of the loop.

Hooks are optional callables, sync or async. They observe; a hook that raises is logged and the
run goes on. The same events feed hooks, telemetry and ``Agent.stream``.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from goagent_py.messages import ContentBlock, Message, ScoredMessage, StopReason, ToolCall, Usage
from goagent_py.provider import CompletionRequest

__all__ = [
    "AgentEnd",
    "AgentEvent",
    "AgentStart",
    "Hooks",
    "MessageDelta",
    "MessageEnd",
    "ProviderEvent",
    "RunInfo",
    "RunResult",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolResult",
    "TurnEnd",
    "TurnStart",
    "merge_hooks",
]

_log = logging.getLogger("goagent_py.hooks")

Hook = Callable[..., Any]


@dataclass(slots=True, frozen=True)
class RunInfo:
    """What a run starts with."""

    run_id: str
    agent_name: str
    model: str
    content: list[ContentBlock]
    provider: object | None = None


@dataclass(slots=True, frozen=True)
class ProviderEvent:
    """The outcome of one provider call (``error`` set on failure, ``message`` on success)."""

    duration: float
    usage: Usage = field(default_factory=Usage)
    stop_reason: StopReason | None = None
    tool_calls: int = 0
    model: str = ""
    error: BaseException | None = None
    message: Message | None = None


@dataclass(slots=True, frozen=True)
class ToolResult:
    """The outcome of one tool call.

    Attributes:
        call: the call as the model made it.
        content: what the model reads (on error, the error text).
        error: the error, or None on success.
        duration: seconds the call took (0 when the tool was not found or was blocked).
        started_at: when the call started (UTC).
    """

    call: ToolCall
    content: list[ContentBlock]
    error: BaseException | None = None
    duration: float = 0.0
    started_at: datetime | None = None

    @property
    def is_error(self) -> bool:
        """Whether the call failed."""
        return self.error is not None


@dataclass(slots=True, frozen=True)
class RunResult:
    """What a run did: the answer, why it stopped, what it cost, what it added.

    Attributes:
        text: the final answer text ("" when the run failed before one).
        stop_reason: the final response's stop reason, so a truncated answer is never silent.
        iterations: model calls made (1-based).
        usage: token usage summed over every call.
        tool_calls: tool calls made.
        tool_time: seconds spent in tools (parallel calls each counted).
        duration: seconds the run took.
        messages: the messages this run added (the user message, then assistant and tool messages).
        error: the error the run ended with, or None.
        run_id: the id given to the run in ``RunInfo``.
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


@dataclass(slots=True)
class Hooks:
    """Callbacks on the life of a run. Every field is optional; each may be sync or async.

    In firing order on success: ``on_run_start`` -> [``on_long_term_retrieve``] ->
    [``on_short_term_load``] -> per iteration {``on_iteration_start`` -> ``on_provider_request``
    -> [``on_stream_start`` -> ``on_stream_token``/``on_thinking_text``...] ->
    ``on_provider_response`` -> ``on_thinking``... -> (``on_tool_call``... ->
    ``on_tool_result``...)}
    -> ``on_response`` -> [``on_short_term_append``] -> [``on_long_term_store``] -> ``on_run_end``.
    ``on_run_end`` fires exactly once on every exit.

    ``on_tool_call`` fires in a task of the call's own, just before the call runs (after
    ``before_tool_call`` let it through or blocked it; a blocked call gets both hooks too), so a
    context variable it sets, such as the current OpenTelemetry span, reaches the tool (a sync
    tool's worker thread copies the task's context) and neither the run nor a sibling call.
    Calls of a turn run concurrently: a call's ``on_tool_call`` may come after a sibling has
    started running. ``on_tool_result`` fires in the run's task once every call of the turn is
    done, in call order.

    ``on_circuit_open(call, open_until)``, ``on_tool_retry(call, attempt, error, delay)`` and
    ``on_tool_timeout(call, timeout)`` fire from inside the tool dispatch chain, while calls run.
    ``call`` is the :class:`ToolCall` concerned: its ``id`` tells apart parallel calls of one tool.
    """

    on_run_start: Callable[[RunInfo], Any] | None = None
    on_run_end: Callable[[RunResult], Any] | None = None
    on_iteration_start: Callable[[int], Any] | None = None
    on_provider_request: Callable[[int, CompletionRequest], Any] | None = None
    on_provider_response: Callable[[int, ProviderEvent], Any] | None = None
    on_thinking: Callable[[str], Any] | None = None
    on_tool_call: Callable[[ToolCall], Any] | None = None
    on_tool_result: Callable[[ToolResult], Any] | None = None
    on_circuit_open: Callable[[ToolCall, datetime], Any] | None = None
    on_tool_retry: Callable[[ToolCall, int, BaseException, float], Any] | None = None
    on_tool_timeout: Callable[[ToolCall, float], Any] | None = None
    on_response: Callable[[str, int], Any] | None = None
    on_short_term_load: Callable[[int, float, BaseException | None], Any] | None = None
    on_short_term_append: Callable[[int, float, BaseException | None], Any] | None = None
    on_long_term_retrieve: (
        Callable[[list[ScoredMessage], float, BaseException | None], Any] | None
    ) = None
    on_long_term_store: Callable[[int, float, BaseException | None], Any] | None = None
    on_stream_start: Callable[[int], Any] | None = None
    on_stream_token: Callable[[str], Any] | None = None
    on_thinking_text: Callable[[str], Any] | None = None


HOOK_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Hooks))


async def call_hook(hook: Hook | None, *args: Any, logger: logging.Logger = _log) -> None:
    """Call one hook, sync or async; log and swallow any ``Exception`` it raises."""
    if hook is None:
        return
    try:
        result = hook(*args)
        if inspect.isawaitable(result):
            await result
    except Exception:
        name = getattr(hook, "__qualname__", repr(hook))
        logger.exception("hook %s raised; the run goes on", name)


def _merged(callbacks: list[Hook]) -> Hook:
    async def merged(*args: Any) -> None:
        for callback in callbacks:
            await call_hook(callback, *args)

    merged.__qualname__ = "merged_hook"
    return merged


def merge_hooks(*hooks: Hooks) -> Hooks:
    """Combine hook sets: each event calls every set's callback, in the order given.

    A callback that raises does not stop the ones after it. Fields that no set defines stay None.
    """
    if len(hooks) == 1:
        return hooks[0]
    merged = Hooks()
    for name in HOOK_NAMES:
        callbacks = [getattr(h, name) for h in hooks if getattr(h, name) is not None]
        if len(callbacks) == 1:
            setattr(merged, name, callbacks[0])
        elif callbacks:
            setattr(merged, name, _merged(callbacks))
    return merged


# ---------------------------------------------------------------------------------------------
# Events of the loop (what Agent.stream yields)


@dataclass(slots=True, frozen=True)
class AgentStart:
    """The run started."""

    info: RunInfo


@dataclass(slots=True, frozen=True)
class TurnStart:
    """An iteration (one model call and its tool calls) started; ``iteration`` is 0-based."""

    iteration: int


@dataclass(slots=True, frozen=True)
class MessageDelta:
    """A piece of the assistant's message while it streams: ``kind`` is "text" or "thinking"."""

    kind: str
    delta: str


@dataclass(slots=True, frozen=True)
class MessageEnd:
    """The assistant's message of this iteration, exactly as the provider returned it."""

    message: Message
    stop_reason: StopReason
    usage: Usage


@dataclass(slots=True, frozen=True)
class ToolExecutionStart:
    """A tool call is about to run."""

    call: ToolCall


@dataclass(slots=True, frozen=True)
class ToolExecutionEnd:
    """A tool call finished (successfully or not)."""

    result: ToolResult


@dataclass(slots=True, frozen=True)
class TurnEnd:
    """An iteration ended; ``tool_results`` is empty on the final iteration."""

    iteration: int
    message: Message
    tool_results: list[ToolResult]


@dataclass(slots=True, frozen=True)
class AgentEnd:
    """The run ended (``result.error`` tells how)."""

    result: RunResult


AgentEvent = (
    AgentStart
    | TurnStart
    | MessageDelta
    | MessageEnd
    | ToolExecutionStart
    | ToolExecutionEnd
    | TurnEnd
    | AgentEnd
)
"""Any event of a run, as ``Agent.stream`` yields them."""
