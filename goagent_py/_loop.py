"""The ReAct loop: one async generator of typed events, shared by run, stream and sessions.

The rules it keeps are numbered in docs/architecture.md ("The loop"): the assistant message is
appended as returned (1); the loop goes on while tool calls come back (2); each call gets one
result, in order (3); errors are data (4); calls of a turn run concurrently (5); the budget raises
and persists (6); recall comes first, as data (7); hooks fire in order and ``on_run_end`` once (8).

Everything observable is an event, emitted through :meth:`Run._emit`, which feeds the hooks and
then yields it. ``on_tool_call`` is the one hook fired elsewhere: in the call's own task.

A :class:`RunControl` (given by a session) makes the run steerable: steering messages are taken
before the first model call, after every batch of tool results and after context preparation;
follow-ups only when the run would otherwise stop; an abort stops it at the point its mode names.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import inspect
import itertools
import logging
import os
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal, TypeVar, cast

from goagent_py._call_gates import (
    after_call,
    bound_file,
    checked_arguments,
    gate_reason,
    let_go,
    moved_reason,
    prepared_call,
    resolved_path,
    take_place,
    with_arguments,
)
from goagent_py._cancel import as_failure, cancels_the_run, failed, in_the_runs_task, stray
from goagent_py._control import AbortMode, RunControl
from goagent_py._conversation import held_with
from goagent_py._deepcopy import snapshot_message
from goagent_py._describe import described, message_of
from goagent_py._metadata_keys import DECISIONS_KEY, PENDING_KEY
from goagent_py._recall import answer_context, context_of, handed, recall_message, turn_of
from goagent_py._records import run_result, text_of
from goagent_py._redact import redact
from goagent_py._shown import Shown
from goagent_py._transcript import (
    SYNTHETIC_METADATA_KEY,
    UI_ONLY_KEY,
    closing_tail,
    error_result,
    repair_transcript,
    strip_thinking,
    synthetic,
    text_length,
    tool_message,
    truncate_content,
    waiting_at,
)
from goagent_py.approvals import (
    Approve,
    Deny,
    RunContext,
    ToolDecision,
    ToolOutput,
    decision_hint,
    inner_decisions,
    kept_results,
    new_token,
    pending_metadata,
    pending_of,
    under,
)
from goagent_py.budget import BudgetExceededError, active_budgets, before_call
from goagent_py.dispatch import Dispatcher, _sink, set_event_sink
from goagent_py.errors import (
    ApprovalPendingError,
    ConfigurationError,
    GoAgentError,
    GuardrailTripped,
    MaxIterationsError,
    MemoryStoreError,
    OutputValidationError,
    ProviderError,
    TokenBudgetError,
    ToolAbortedError,
    ToolArgumentsError,
    ToolBlockedError,
    ToolError,
    ToolExecutionError,
)
from goagent_py.events import (
    EVENT_SINK,
    USAGE_SINK,
    AgentEnd,
    AgentEvent,
    AgentStart,
    ContextCompacted,
    FinalResponse,
    GuardrailChecked,
    HistoryAppend,
    HistoryLoad,
    MemoryRecall,
    MemoryStore,
    MessageDelta,
    MessageEnd,
    MessagesInjected,
    MessageStart,
    ModelRequest,
    OutputDelta,
    OutputRetry,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolsPending,
    TurnEnd,
    TurnStart,
)
from goagent_py.guardrails import GuardrailContext, GuardrailResult, decide, guardrail_name
from goagent_py.hooks import HookContext, HookDispatcher, call_hook, call_in
from goagent_py.memory.base import UpdatableMemory, store_always
from goagent_py.messages import (
    ContentBlock,
    Message,
    Role,
    StopReason,
    TextBlock,
    ToolCall,
    Usage,
    assistant_message,
)
from goagent_py.options import AgentOptions, TurnState
from goagent_py.output import FINAL_RESULT_TOOL, OutputContext, OutputSpec, Verdict
from goagent_py.provider import (
    CompletionRequest,
    CompletionResponse,
    Effort,
    StreamDone,
    StreamingProvider,
    TextDelta,
    ThinkingConfig,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    _streams,
)
from goagent_py.results import ModelResponse, PendingCall, RunInfo, RunResult, ToolResult
from goagent_py.tool_context import ToolContext, ToolResume, _current, _LazyContext
from goagent_py.tools import FunctionTool, Tool, ToolDefinition

__all__ = ["Run"]

T = TypeVar("T")
A = TypeVar("A")


_TRUNCATED_CALL = (
    "Error: your response was cut off at the output token limit, so this call's arguments may "
    "be incomplete; it was not run. Re-issue the call with complete arguments."
)


_UNASKED = (
    "this call needs a person's approval by this agent's rules, and nobody was asked when its "
    "turn stopped (the rules changed while the turn waited); it was not run: call it again to "
    "be asked"
)


_BESIDE_FINAL = (
    "not run: the final_result call in the same response ends the turn; call the tool in a "
    "response of its own if you still need it"
)


class _RunIds:
    """Run ids: 32 hex characters, an 80-bit random prefix drawn once per process (again in a
    forked child) and a 48-bit counter. They go into stored records and idempotency keys
    (``run_id:iteration:call_id``), so they must be unique across processes and restarts, which
    the random prefix makes them, as a uuid4 would; a counter spares a ``getrandom`` system call
    per run (issue 36). They are unique, not secret: nothing grants access by a run id."""

    def __init__(self) -> None:
        self._draw()
        os.register_at_fork(after_in_child=self._draw)

    def _draw(self) -> None:
        self._prefix = os.urandom(10).hex()
        self._count = itertools.count(1)

    def next(self) -> str:
        n = next(self._count)  # one C call: atomic under the GIL, so threads never share an id
        if n >= 1 << 48:
            self._draw()
            return self.next()
        return f"{self._prefix}{n:012x}"


_run_ids = _RunIds()


def new_request(
    model: str,
    system_prompt: str,
    messages: list[Message],
    tools: list[ToolDefinition],
    thinking: ThinkingConfig | None,
    effort: Effort | None,
    max_tokens: int | None,
) -> CompletionRequest:
    """``CompletionRequest(model=..., ..., max_tokens=...)`` without an output format, every
    field set here (no default factories, no ``__init__`` frame): the loop makes one per model
    call (issue 36; ``tests/test_records.py`` compares it with the constructor)."""
    out: CompletionRequest = _new(CompletionRequest)
    out.model = model
    out.system_prompt = system_prompt
    out.messages = messages
    out.tools = tools
    out.thinking = thinking
    out.effort = effort
    out.max_tokens = max_tokens
    out.output = None
    return out


_new = object.__new__
_NOTHING_STREAMED: tuple[str, ...] = ()
_PARSE_EVERY_DELTA = 4096  # answer characters up to which each delta's partial output is parsed
_NO_USAGE = Usage()


async def _whole(write: Awaitable[None]) -> None:
    """Await a storage write that a cancel does not cut short: a cancel waits for the write to
    end, then propagates. A write cut short went on in its worker thread and committed after
    the session had reloaded its view (review7a: a cancel right after a tool batch left
    storage three messages ahead of the session)."""
    task = asyncio.ensure_future(write)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await task  # a second cancel ends this wait; the write itself is never cancelled
        raise


def _check_response(response: object) -> None:
    """Raise ProviderError unless ``response`` is a CompletionResponse with a Message."""
    if type(response) is CompletionResponse and type(response.message) is Message:
        return  # the usual answer: two type checks, no isinstance
    if not isinstance(response, CompletionResponse) or not isinstance(response.message, Message):
        raise ProviderError(
            f"provider returned {type(response).__name__}, not a CompletionResponse"
        )


def _drop(item: Any) -> None:
    """Where a quiet run's events go (see :meth:`Run.outcome`)."""


def _without_calls(message: Message, text: str) -> Message:
    """``message`` without its tool calls: what a trace without tool messages may keep of an
    answer that stopped on calls (a call stored without its result is refused by every vendor).
    Its text becomes ``text``, the run's answer: a typed answer is the ``final_result`` call's
    arguments, so without the call the message said nothing and the answer was not stored."""
    if not message.tool_calls:
        return message
    kept: list[ContentBlock] = [b for b in message.content if not isinstance(b, TextBlock)]
    if text:
        kept.append(TextBlock(text))
    return replace(message, content=kept, tool_calls=[])


def _given(messages: list[Message], context: dict[str, Any]) -> list[Message]:
    """``messages`` (what short-term memory is about to store) with the answer, their last
    assistant message, recording its turn (``context``: :func:`~goagent_py._recall.answer_context`;
    a copy: the run's own message is left as returned)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role is Role.ASSISTANT:
            answer = messages[i]
            tagged = replace(answer, metadata={**answer.metadata, **context})
            return [*messages[:i], tagged, *messages[i + 1 :]]
    return messages


def _readable(messages: Iterable[Message]) -> list[Message]:
    """Copies of ``messages`` for user code to read (a guardrail, ``instructions``,
    ``should_stop``, ``before_tool_call``): one that changes what it was given changes its copy,
    never the run's record or what the model is sent (one source of truth). Made only where such
    a callback is configured: the plain path copies nothing (issue 36)."""
    return [snapshot_message(m) for m in messages]


_MISCONFIGURED = (
    "Error: the tool could not run: the application is misconfigured (its developer has the "
    "details); the run was stopped."
)


def _misconfigured(results: list[ToolResult]) -> ConfigurationError | None:
    """The first :class:`ConfigurationError` a tool of the batch raised (an ``as_tool`` whose
    ``deps=`` or ``returns=`` function failed, a tool that built a misconfigured agent), or None.
    That is the developer's error, not the model's: the run records the batch and fails with it,
    and the model is never shown it. The error tree says whose error it is (a value from data,
    an :class:`InvalidInputError`, is not a ConfigurationError: the model reads it)."""
    for r in results:
        error = r.error
        if type(error) is ToolExecutionError and isinstance(
            cause := error.cause, ConfigurationError
        ):
            return cause
    return None


def _told_misconfigured(results: list[ToolResult]) -> list[ToolResult]:
    """``results`` where each call :func:`_misconfigured` would name reads a note that leaves
    the developer's error text out of the record."""
    return [
        replace(r, content=[TextBlock(_MISCONFIGURED)]) if _misconfigured([r]) is not None else r
        for r in results
    ]


async def _decide(policy: Any, user: Message, answer: Message) -> list[Message] | None:
    """What a write policy keeps of ``user`` and ``answer`` (sync or async)."""
    kept: list[Message] | None = await _maybe_await(policy(user, answer))
    return kept


async def _maybe_await(value: T | Awaitable[T]) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


class _Abort(Exception):
    """Internal: the run stops here because of an abort (never escapes the loop)."""


@dataclass(slots=True)
class _Done:
    index: int
    result: ToolResult


@dataclass(slots=True)
class _Failed:
    exc: BaseException


_WAKE = object()
_UNSET = object()  # a context variable with no value


class _Inbox:
    """What a task of the run puts (a streamed answer's deltas and its end, a batch's tool
    events) and the run's task gets, in order: one reader, puts on the run's loop only.
    ``asyncio.Queue`` did the same with bookkeeping never used here (a bound, putters,
    ``join``): ~0.8 us a put and get against ~0.06 (issue 36: a served turn streams every
    delta through it)."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: collections.deque[Any] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: Any) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> Any:
        items = self._items
        while not items:
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        return items.popleft()


@dataclass(slots=True, frozen=True)
class Resumed:
    """What a resumed run starts from: the assistant message whose calls were decided (its
    wait already settled in the record), the decisions, by call id, and what the wait held:
    its calls and record (the state of tools that waited inside, results kept)."""

    message: Message
    decisions: dict[str, ToolDecision]
    pending: tuple[PendingCall, ...] = ()
    record: dict[str, Any] = field(default_factory=dict)


class Run:
    """The state of one run. The agent holds no per-run state, so runs may overlap."""

    # Slots: a run has ~50 attributes, past what a shared-key instance dict holds inline, so
    # each one set or read went through a dict of its own (issue 36).
    __slots__ = (
        "_abandoned",
        "_answered",
        "_bound",
        "_calls_started",
        "_compactions",
        "_held_in",
        "_history",
        "_hooked",
        "_injected",
        "_inner",
        "_messages",
        "_output_failure",
        "_output_tries",
        "_partial",
        "_partial_len",
        "_partial_next",
        "_partial_raw",
        "_persisted",
        "_recalled",
        "_recalled_ids",
        "_results",
        "_resume_final",
        "_said",
        "_said_answers",
        "_shown_by",
        "_start",
        "_streamed",
        "_waiting",
        "_watch_calls",
        "clock",
        "control",
        "deps",
        "dispatcher",
        "given_history",
        "hooks",
        "iterations",
        "last_text",
        "log",
        "loud",
        "new_messages",
        "new_token",
        "o",
        "output",
        "output_mode",
        "output_value",
        "path",
        "pending",
        "pending_calls",
        "prompt",
        "refresh_tools",
        "result",
        "resume",
        "run_id",
        "stop_reason",
        "streaming",
        "tool_calls",
        "tool_defs",
        "tool_time",
        "usage",
    )

    def __init__(
        self,
        options: AgentOptions,
        dispatcher: Dispatcher,
        hooks: HookDispatcher,
        tool_defs: list[ToolDefinition],
        prompt: list[Message],
        *,
        streaming: bool,
        control: RunControl | None = None,
        history: list[Message] | None = None,
        path: tuple[str, ...] = (),
        refresh_tools: Callable[[], Awaitable[list[ToolDefinition]]] | None = None,
        output: OutputSpec[Any] | None = None,
        deps: Any = None,
        resume: Resumed | None = None,
        answered: RunResult[Any] | None = None,
    ) -> None:
        self.o = options
        self.resume = resume
        # A retried resume that went through already (approvals.answered_at): this run runs
        # nothing and ends with this result.
        self._answered = answered
        # The resumed calls a person approved on a file their path led to then (call id ->
        # (the path argument, that file)): they run only if it still leads there.
        self._bound: dict[str, tuple[str, str]] | None = None
        self.pending: list[PendingCall] = []
        # The clock of approval deadlines and the maker of wait tokens: a durable workflow
        # sets replay-safe ones (its own time, its seeded randomness).
        self.clock: Callable[[], float] = time.time
        self.new_token: Callable[[], str] = new_token
        self._resume_final: Message | None = None
        self._shown_by: Shown | None = None
        self._held_in: frozenset[Hashable] | None = None  # see _conversations
        self.output = output
        self.output_mode = output.mode_for(options.provider) if output is not None else "tool"
        self.output_value: Any = None
        self._output_tries = 0
        self._output_failure: OutputValidationError | None = None
        self._partial_raw: list[str] = []  # the answer's JSON so far, in pieces
        self._partial_len = 0
        self._partial_next = 0  # the length at which it is parsed next
        self._partial: Any = None
        self.deps = deps
        self._hooked: HookContext | None = None
        self.refresh_tools = refresh_tools
        self.hooks = hooks
        self.log = options.logger
        self.dispatcher = dispatcher
        self.tool_defs = tool_defs
        self.prompt = prompt
        self.streaming = streaming and _streams(options.provider)
        self.control = control
        self.given_history = history
        self.path = path
        self.usage = _NO_USAGE  # frozen: every sum makes a new one
        self.iterations = 0
        self.tool_calls = 0
        self.tool_time = 0.0
        self.last_text = ""
        self.stop_reason: StopReason | None = None
        self.new_messages: list[Message] = []
        self.result: RunResult[Any] | None = None
        self.run_id = ""
        self._streamed: list[str] | tuple[str, ...] = _NOTHING_STREAMED
        self.pending_calls: list[ToolCall] = []
        self._persisted = 0
        self._start = 0.0
        self._recalled: Message | None = None
        self._recalled_ids: list[str] = []  # the memories this run's answer is given, best first
        self._history: list[Message] = []
        self._results: list[ToolResult | None] = []
        self._watch_calls = False
        self._compactions: list[Any] = []
        self._messages: list[Message] = []
        self._injected = False  # a queued message went into the request being prepared
        # The user's words the run took after its prompt (steering, follow-ups), as turns: the
        # first list joins the prompt's turn; each later one opens a turn after the answer
        # that closed the one before (the answers are the second list). Long-term memory's
        # write policy gets each, as it gets the prompt (:meth:`_said_turns`).
        self._said: list[list[Message]] = [[]]
        self._said_answers: list[tuple[Message, list[str]]] = []  # and the memories it had
        self._abandoned: list[ToolResult] = []  # calls an abort answered with an error result
        # call id -> when its tool started (perf_counter, time), while it runs; kept only where
        # the run can be aborted, so an aborted call's result says how long it ran.
        self._calls_started: dict[str, tuple[float, float]] = {}
        # Whether anyone sees the events: False only in :meth:`outcome` without hooks, where
        # the plain path builds none (a session, a stream and a hook see every one).
        self.loud = True
        # Tools that waited inside this batch (ToolContext.wait_for), and on resume the state
        # and decisions each gets back (agents used as tools), by call id.
        self._waiting: dict[str, tuple[list[PendingCall], Any]] = {}
        self._inner: dict[str, ToolResume] = {}

    def _add_usage(self, usage: Usage) -> None:
        self.usage = self.usage + usage

    def _drain_compactions(self) -> list[ContextCompacted]:
        done, self._compactions = self._compactions, []
        return [ContextCompacted(c, path=self.path) for c in done]

    def _content(self) -> list[ContentBlock]:
        return [b for m in self.prompt for b in m.content]

    # -- memory ------------------------------------------------------------------------------

    async def _recall(self, query: Message | None = None) -> AsyncGenerator[AgentEvent, None]:
        """Search long-term memory for ``query`` (by default the prompt; the caller checks
        there is a memory, and a prompt)."""
        memory = self.o.long_term_memory
        assert memory is not None
        start = time.perf_counter()
        retrieve = partial(
            memory.retrieve,
            (query or self.prompt[-1]).content,
            top_k=self.o.long_term_top_k,
            session=self.o.name,
        )
        try:
            if self.control is None:
                recalled = await retrieve()
            else:  # a memory whose embedder hangs never holds an abort (review7a)
                recalled = await self._unheld(retrieve)
        except _Abort:  # the run meets the abort at its first turn, the prompt stored
            yield MemoryRecall([], time.perf_counter() - start, path=self.path)
            return
        except (Exception, asyncio.CancelledError) as caught:
            exc = as_failure(caught, "long-term memory")
            yield MemoryRecall([], time.perf_counter() - start, exc, path=self.path)
            raise MemoryStoreError(
                f"retrieving long-term context failed: {message_of(exc)}"
            ) from exc
        yield MemoryRecall(recalled, time.perf_counter() - start, path=self.path)
        if recalled:
            self._recalled = recall_message(recalled)
            self._recalled_ids = [s.id for s in recalled if s.id]

    async def _load(self) -> AsyncGenerator[AgentEvent, None]:
        """Load short-term history (the caller checks there is a memory and no given history)."""
        memory = self.o.short_term_memory
        assert memory is not None
        start = time.perf_counter()
        try:
            past = await memory.messages()
            # Calls the record ends on without results (a crash between a decision, or a
            # batch's message, and its results) are closed in the record first (review6a).
            closing = closing_tail(past)
            if closing:
                await memory.append(*closing)
                past = past + closing
        except (Exception, asyncio.CancelledError) as caught:
            exc = as_failure(caught, "short-term memory")
            yield HistoryLoad(0, time.perf_counter() - start, exc, path=self.path)
            raise MemoryStoreError(f"loading short-term history failed: {message_of(exc)}") from exc
        yield HistoryLoad(len(past), time.perf_counter() - start, path=self.path)
        self._history = past

    async def _persist(self, final: Message | None) -> AsyncGenerator[AgentEvent, None]:
        """Store the turn: short-term gets the trace (or [user, answer]); long-term what the
        write policy keeps. Failures are reported as events and never fail the run."""
        o = self.o
        # The turn's id, recorded on its answer and its facts: what the next turn's correction
        # follows (docs/memory.md, "Corrections of the last answer").
        said = self._said_turns() if o.long_term_memory is not None else []
        # The turn the answer replies to: the last user message the run took (a follow-up's,
        # when one came after the prompt's answer).
        last_said = [m for users in said for m in users][-1:]
        turn = turn_of(last_said[0]) if last_said else ""
        if o.short_term_memory is not None and self.new_messages:
            # ``final`` is stored only when the run has not appended it already (the synthetic
            # note of an exhausted budget): a run stopped right after a tool batch ends on the
            # message that made the calls, which is in the trace (issue 28: it was stored twice).
            # A resumed run that stops on its decided batch ends on the message it resumed,
            # which is in the history, stored already.
            resumed = self.resume is not None and final is self.resume.message
            extra: list[Message] = []
            if final is not None and not resumed and not any(m is final for m in self.new_messages):
                extra = [final]
            if o.short_term_trace_tools:
                to_store = strip_thinking(self.new_messages[self._persisted :] + extra)
            else:
                users = [m for m in self.new_messages if m.role is Role.USER]
                last = [] if final is None else [_without_calls(final, self.last_text)]
                to_store = strip_thinking(users + [m for m in last if m.content])
            self._persisted = len(self.new_messages)
            if final is not None and turn:
                to_store = _given(to_store, answer_context(self._recalled_ids, turn))
            if to_store:
                start = time.perf_counter()
                error: BaseException | None = None
                try:
                    if self.control is None:
                        await o.short_term_memory.append(*to_store)
                    else:
                        await _whole(o.short_term_memory.append(*to_store))
                except (Exception, asyncio.CancelledError) as caught:
                    exc = as_failure(caught, "short-term memory")
                    error = exc
                    self.log.warning("short-term memory append failed: %s", message_of(exc))
                duration = time.perf_counter() - start
                yield HistoryAppend(len(to_store), duration, error, path=self.path)
        if (
            turn
            and final is not None
            and (o.short_term_memory is None or self.given_history is not None)
        ):
            # The caller keeps the conversation (``history=``): the run's messages are its
            # record, so its answer records the turn there (a copy, in the run's messages).
            context = answer_context(self._recalled_ids, turn)
            for i, m in enumerate(self.new_messages):
                if m is final:
                    self.new_messages[i] = replace(m, metadata={**m.metadata, **context})
        if o.long_term_memory is not None and final is not None and last_said:
            policy = o.write_policy or store_always
            # The run's answer text (a typed answer's JSON; its message's text may be "" or
            # only the sentence beside the call); a stop's synthetic note as it reads.
            synthetic_note = final.metadata.get(SYNTHETIC_METADATA_KEY) is not None
            answers = [
                *self._said_answers,
                (
                    assistant_message(final.text if synthetic_note else self.last_text),
                    self._recalled_ids,
                ),
            ]
            follows = context_of(self._history)  # what the answer before the run recorded
            for users, (answer, recalled) in zip(said, answers, strict=True):
                if not users:
                    continue
                chosen: list[Message] = []
                for prompt in users:
                    try:
                        if self.control is None:
                            kept = await _decide(policy, prompt, answer)
                        else:  # user code: one that hangs never holds an abort (review7a)
                            kept = await self._unheld(partial(_decide, policy, prompt, answer))
                    except _Abort:
                        self.log.warning("the run was aborted while its write policy decided")
                        return
                    except (Exception, asyncio.CancelledError) as caught:
                        exc = as_failure(caught, "the write policy")
                        self.log.warning("write policy failed; nothing stored: %s", message_of(exc))
                        return
                    if kept is not None:  # the turn's answer once, for several messages
                        fresh = [m for m in kept if not any(m is c for c in chosen)]
                        chosen.extend(handed(fresh, follows, turn_of(prompt)))
                # The next turn follows this one's answer: its memories and its turn.
                recorded = answer_context(recalled, turn_of(users[-1]))
                follows = context_of([Message(Role.ASSISTANT, [], metadata=recorded)])
                if not chosen:
                    continue
                async for event in self._store_long_term(chosen):
                    yield event

    async def _store_long_term(self, chosen: list[Message]) -> AsyncGenerator[AgentEvent, None]:
        """Hand ``chosen`` to long-term memory; a failure is reported, never raised."""
        o = self.o
        assert o.long_term_memory is not None
        start = time.perf_counter()
        error: BaseException | None = None
        store = partial(o.long_term_memory.store, chosen, session=o.name)
        try:
            await (store() if self.control is None else self._unheld(store))
        except _Abort:
            error = MemoryStoreError("the run was aborted while long-term memory stored")
            self.log.warning("%s", error)
        except (Exception, asyncio.CancelledError) as caught:
            exc = as_failure(caught, "long-term memory")
            error = exc
            self.log.warning("long-term memory store failed: %s", message_of(exc))
        duration = time.perf_counter() - start
        yield MemoryStore(len(chosen), duration, error, path=self.path)

    def _said_turns(self) -> list[list[Message]]:
        """The user's turns of this run, as their messages, one list per answer: the prompt's
        (with steering taken before its answer), then each one queued messages opened after
        an answer (a list may be empty: queued messages that were not the user's)."""
        return [[*self.prompt[-1:], *self._said[0]], *self._said[1:]]

    async def _checkpoint(self) -> AsyncGenerator[AgentEvent, None]:
        """In a session, store what the run has added so far (each append leaves a valid
        transcript), so a crash loses at most the turn in flight."""
        if self.control is not None and self.o.short_term_trace_tools:
            async for event in self._persist(None):
                yield event

    # -- model -------------------------------------------------------------------------------

    async def _request(self, messages: list[Message], iteration: int) -> CompletionRequest:
        o = self.o
        for m in messages:  # a loop in this frame, not a comprehension: once per model call
            if m.metadata.get(UI_ONLY_KEY):
                sent = [m for m in messages if not m.metadata.get(UI_ONLY_KEY)]
                break
        else:
            sent = list(messages)
        if o.transform_context is not None:
            transform = o.transform_context
            # A transform reads copies (one that changes them changes what this request sends,
            # never the record); the built-in compactor, which anchors its measure on the
            # identity of what it was sent and hands its strategy copies, reads the messages.
            if getattr(transform, "_keeps_messages", False) is not True:
                sent = _readable(sent)
            # A compactor reports its summary usage (counted in the run) and what it did.
            usage_token = USAGE_SINK.set(self._add_usage)
            event_token = EVENT_SINK.set(self._compactions.append)
            try:
                sent = list(await _maybe_await(transform(sent)))
            except asyncio.CancelledError as exc:  # user code's, or the run's
                if (error := stray(exc, "transform_context")) is None:
                    raise
                raise error from exc
            finally:
                USAGE_SINK.reset(usage_token)
                EVENT_SINK.reset(event_token)
        system_prompt = o.system_prompt
        if o.instructions:
            system_prompt = await self._instructed(system_prompt, messages, iteration)
        request = new_request(
            o.model, system_prompt, sent, list(self.tool_defs), o.thinking, o.effort, o.max_tokens
        )
        if self.output is not None:
            request = self.output.shape(request, self.output_mode)
        if o.prepare_turn is not None:
            try:
                request = await _maybe_await(o.prepare_turn(request))
            except asyncio.CancelledError as exc:  # user code's, or the run's
                if (error := stray(exc, "prepare_turn")) is None:
                    raise
                raise error from exc
        return request

    async def _instructed(self, system_prompt: str, messages: list[Message], iteration: int) -> str:
        """``system_prompt`` with the text of the agent's instructions functions, asked now."""
        given = _readable(messages)
        run = RunContext(
            message=given[-1] if given else Message(Role.USER, []),
            messages=given,
            tools=list(self.tool_defs),
            deps=self.deps,
            run_id=self.run_id,
            iteration=iteration,
        )
        parts = [system_prompt] if system_prompt else []
        for instructions in self.o.instructions:
            try:
                text = await _maybe_await(instructions(run))
            except asyncio.CancelledError as exc:  # user code's, or the run's
                if (error := stray(exc, "instructions")) is None:
                    raise
                raise error from exc
            if text:
                parts.append(text)
        return "\n\n".join(parts)

    async def _prepared(self, messages: list[Message], iteration: int) -> CompletionRequest:
        """:meth:`_request`; in a session whose requests run user code (``transform_context``,
        where a summariser may run, ``instructions``, ``prepare_turn``), in a task an abort
        interrupts: a hung summariser or hook never holds an abort."""
        o = self.o
        if self.control is None or (
            o.transform_context is None and not o.instructions and o.prepare_turn is None
        ):
            return await self._request(messages, iteration)

        async def work(
            i: int, given: list[Message], put: Callable[[Any], None]
        ) -> CompletionRequest:
            return await self._request(given, i)

        async with contextlib.aclosing(self._interruptible(work, iteration, messages)) as items:
            async for item in items:
                if isinstance(item, CompletionRequest):
                    return item
        raise AssertionError("the request was not prepared")  # pragma: no cover

    async def _model_events(
        self, iteration: int, request: CompletionRequest, put: Callable[[Any], None]
    ) -> CompletionResponse:
        provider = self.o.provider
        assert provider is not None
        if not self.streaming:
            return await provider.complete(request)
        provider = cast(StreamingProvider, provider)  # self.streaming: it streams (see _streams)
        response: CompletionResponse | None = None
        calls: dict[int, tuple[str, str]] = {}
        self._new_partial()
        # The text in pieces, joined when read: each ``+=`` copied all of it, quadratic in a
        # long answer (320 KB streamed in 8-character deltas took 2.3 s).
        streamed: list[str] = []
        self._streamed = streamed
        async for event in provider.stream(request):
            if isinstance(event, TextDelta):
                streamed.append(event.text)
                put(MessageDelta("text", event.text, path=self.path))
            elif isinstance(event, ThinkingDelta):
                put(MessageDelta("thinking", event.thinking, path=self.path))
            elif isinstance(event, ToolCallStart):
                calls[event.index] = (event.id, event.name)
            elif isinstance(event, ToolCallDelta):
                call_id, name = calls.get(event.index, ("", ""))
                put(MessageDelta("tool_call", event.arguments_delta, call_id, name, path=self.path))
            elif isinstance(event, StreamDone):
                response = event.response
            if self.output is not None and not self.output.is_text:
                self._stream_output(event, calls, put)
        if response is None:
            raise ProviderError("the stream ended without a final response")
        return response

    async def _call_model(
        self, iteration: int, request: CompletionRequest
    ) -> AsyncGenerator[AgentEvent | CompletionResponse, None]:
        start = time.perf_counter()
        self._streamed = _NOTHING_STREAMED
        try:
            if self.control is None and not self.streaming:
                response = await self._model_events(iteration, request, lambda e: None)
            else:
                response = None
                async for item in self._interruptible(self._model_events, iteration, request):
                    if isinstance(item, CompletionResponse):
                        response = item
                    else:
                        yield item
                assert response is not None
            if not isinstance(response, CompletionResponse) or not isinstance(
                response.message, Message
            ):
                raise ProviderError(
                    f"provider returned {type(response).__name__}, not a CompletionResponse"
                )
        except _Abort:
            raise
        except (Exception, asyncio.CancelledError) as caught:
            exc = as_failure(caught, "the provider")
            failed = ModelResponse(
                time.perf_counter() - start, error=exc, iteration=iteration, path=self.path
            )
            yield failed
            self.log.warning("provider error: %s", message_of(exc))
            if isinstance(exc, ProviderError):
                raise
            raise ProviderError(described(exc)) from exc
        yield (
            ModelResponse(
                time.perf_counter() - start,
                usage=response.usage,
                stop_reason=response.stop_reason,
                tool_calls=len(response.message.tool_calls),
                model=response.model,
                message=response.message,
                iteration=iteration,
                path=self.path,
            )
        )
        yield response

    async def _call_model_once(
        self, iteration: int, request: CompletionRequest
    ) -> tuple[ModelResponse | None, CompletionResponse | None, BaseException | None]:
        """:meth:`_call_model` for a run with no control and no streaming: the event (None in a
        quiet run), then the response or the error to raise (the same error, cause and context;
        the caller logs it after the event, as :meth:`_call_model` does)."""
        start = time.perf_counter()
        self._streamed = _NOTHING_STREAMED
        provider = self.o.provider
        try:
            assert provider is not None
            response = await provider.complete(request)
            _check_response(response)
        except (Exception, asyncio.CancelledError) as caught:
            exc = as_failure(caught, "the provider")
            failed, error = self._model_failure(exc, start, iteration)
            return failed, None, error
        if not self.loud:
            return None, response, None
        reported = ModelResponse(
            time.perf_counter() - start,
            usage=response.usage,
            stop_reason=response.stop_reason,
            tool_calls=len(response.message.tool_calls),
            model=response.model,
            message=response.message,
            iteration=iteration,
            path=self.path,
        )
        return reported, response, None

    def _model_failure(
        self, exc: Exception, start: float, iteration: int
    ) -> tuple[ModelResponse, ProviderError]:
        """The event of a failed model call and the error the run raises for ``exc`` (itself
        when it is a ProviderError; else one with ``exc`` as its cause and context)."""
        failed = ModelResponse(
            time.perf_counter() - start, error=exc, iteration=iteration, path=self.path
        )
        if isinstance(exc, ProviderError):
            return failed, exc
        error = ProviderError(described(exc))
        error.__cause__ = exc
        error.__context__ = exc
        return failed, error

    async def _interruptible(
        self,
        work: Callable[[int, A, Callable[[Any], None]], Awaitable[T]],
        iteration: int,
        request: A,
    ) -> AsyncGenerator[AgentEvent | T, None]:
        """Run ``work`` in a task whose events arrive through a queue, so that they stream and an
        abort ("now" or "after_tools") interrupts it."""
        queue = _Inbox()

        async def body() -> None:
            try:
                queue.put_nowait(_Done(0, await work(iteration, request, queue.put_nowait)))  # type: ignore[arg-type]
            except BaseException as exc:  # handed to the run's task, which re-raises it
                queue.put_nowait(_Failed(exc))
                if isinstance(exc, asyncio.CancelledError):
                    raise

        task = asyncio.create_task(body())
        if self.control is not None:
            self.control._attach(lambda: queue.put_nowait(_WAKE))
        try:
            while True:
                if self.control is not None and self.control.abort_mode in ("now", "after_tools"):
                    raise _Abort
                item = await queue.get()
                if item is _WAKE:
                    continue
                if isinstance(item, _Done):
                    yield item.result  # type: ignore[misc]
                    return
                if isinstance(item, _Failed):
                    raise item.exc
                yield item
        finally:
            if self.control is not None:
                self.control._attach(None)
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    # -- tools -------------------------------------------------------------------------------

    async def _run_one(
        self, call: ToolCall, message: Message, put: Callable[[Any], None]
    ) -> ToolResult:
        """One call, holding its place in line (see :func:`take_place`) until it ends."""
        tool = self.dispatcher.tool(call.name)
        # A function tool has no ``reserve`` (slotted, no instance dict): no place to take.
        release = None if type(tool) is FunctionTool else take_place(tool, call)
        try:
            return await self._run_checked(call, message, put, tool)
        finally:
            if release is not None:
                let_go(release, self.log)

    async def _run_checked(
        self, call: ToolCall, message: Message, put: Callable[[Any], None], tool: Tool | None
    ) -> ToolResult:
        """One call: repair, validate, announce, approve, ``on_tool_call`` (in the call's own
        task), run. The start event and the approval see the validated arguments. ``tool`` is
        the dispatcher's tool of ``call.name`` (looked up once by the caller)."""
        o = self.o
        if o.prepare_arguments is not None:
            try:
                call = await prepared_call(o.prepare_arguments, call)
            except ToolArgumentsError as exc:
                if self.loud:
                    put(ToolExecutionStart(self._shown().call(call), path=self.path))
                return await self._after(error_result(call, exc))
        shown = call
        try:
            validated = checked_arguments(tool, call)
        except ToolArgumentsError as exc:
            if self.loud:
                put(ToolExecutionStart(self._shown().call(call), path=self.path))
            return await self._after(error_result(call, exc))
        # The call as validated, for whom sees it (the start event, a gate); a quiet run without
        # a gate shows it to nobody.
        if validated is not None and (self.loud or o.before_tool_call is not None):
            shown = with_arguments(call, validated)
        if self.loud:
            put(ToolExecutionStart(self._shown().call(shown), path=self.path))
        reason: str | None = None
        if self._bound is not None and call.id in self._bound:
            bind = getattr(tool, "bind_file", None)
            if callable(bind):  # the tool runs elsewhere (a durable run's): checked there
                bind(call, *self._bound[call.id])
            else:
                reason = moved_reason(tool, call, validated, *self._bound[call.id])
        if reason is None and o.before_tool_call is not None:
            reason = await gate_reason(
                o.before_tool_call,
                o.before_tool_call_sees_message,
                shown,
                lambda: message,
                self.log,
                sees_run=o.before_tool_call_sees_run,
                run=lambda: self._run_context(message, max(self.iterations - 1, 0)),
            )
        hook = self.hooks.hooks.on_tool_call
        if hook is not None:
            # Here, in the call's task: what the hook sets in its context (the OpenTelemetry
            # hooks make the call's span current) reaches the tool and no sibling.
            await call_in(self._hook_context(), partial(call_hook, hook, logger=self.log), call)
        if reason is not None:
            return await self._after(error_result(call, ToolBlockedError(call.name, reason)))
        if validated is not None and (o.before_tool_call is not None or hook is not None):
            # A gate or hook may change the call's arguments in place before it runs: the tool
            # validates what it then gets, as it would on its own.
            validated = None
        if validated is not None and shown is not call:
            validated = dict(validated)  # the tool may change it; the call shown keeps its own
        if self.control is None:
            result = await self.dispatcher.execute(call, validated=validated)
        else:
            # Kept when the call is cancelled: the abort's result reads it (_record_results).
            self._calls_started[call.id] = (time.perf_counter(), time.time())
            result = await self.dispatcher.execute(call, validated=validated)
            self._calls_started.pop(call.id, None)
        asked = _current.get()
        # A context nobody asked for (still lazy) recorded nothing.
        ctx = asked.made if type(asked) is _LazyContext else cast(ToolContext | None, asked)
        if ctx is not None and ctx.outcome and ctx.call.id == call.id:
            result = replace(
                result,
                details=ctx.outcome.get("details", result.details),
                terminate=bool(ctx.outcome.get("terminate", result.terminate)),
            )
            wait = ctx.outcome.get("wait")
            if wait is not None:
                self._waiting[call.id] = wait
        limit = o.max_tool_result_chars
        if o.after_tool_call is None and (limit is None or text_length(result.content) <= limit):
            return result  # :meth:`_after` has nothing to do: no coroutine for it (issue 36)
        return await self._after(result)

    async def _after(self, result: ToolResult) -> ToolResult:
        o = self.o
        if o.after_tool_call is not None:
            result = await after_call(o.after_tool_call, result, self.log)
        if o.max_tool_result_chars is not None:
            content = list(result.content)
            cut = truncate_content(content, o.max_tool_result_chars)
            if cut is not content:  # over the limit: a result that says it was cut
                result = replace(result, content=cut)
        return result

    def _lazy_context(
        self, call: ToolCall, iteration: int, put: Callable[[Any], None]
    ) -> _LazyContext:
        """The call's context, made when first asked for, from what holds now: the resume of
        the call is read here, since the batch forgets it when it ends (a context first asked
        for after that, by a task the tool started, still holds it)."""
        resumed = self._inner.get(call.id) if self._inner else None
        return _LazyContext(
            self._context, self.o.max_tool_result_chars, call, iteration, put, resumed
        )

    def _context(
        self,
        call: ToolCall,
        iteration: int,
        put: Callable[[Any], None],
        resumed: ToolResume | None,
    ) -> ToolContext:
        def report(update: Any) -> None:
            put(ToolExecutionUpdate(self._shown().call(call), update, path=self.path))

        return ToolContext(
            call=call,
            run_id=self.run_id,
            iteration=iteration,
            path=self.path,
            reporter=report,
            max_result_chars=self.o.max_tool_result_chars,
            usage_sink=self._add_usage,
            messages_source=self._current_messages,
            deps=self.deps,
            can_wait=True,
            resumed=resumed,
            conversations=self._conversations(),
        )

    def _conversations(self) -> frozenset[Hashable]:
        """The conversations this run's tool calls are inside (its memory's and its parents'),
        worked out once: a SQLite memory's key resolves its file's path."""
        held = self._held_in
        if held is None:
            held = self._held_in = held_with(self.o.short_term_memory)
        return held

    def _current_messages(self) -> list[Message]:
        # What ``ToolContext.transcript()`` reads: copies, made when a tool asks (issue 36).
        return _readable(self._messages)

    def _shown(self) -> Shown:
        """The copies of the record this run's events carry (``goagent_py/_shown.py``): a
        consumer that changes what an event carries never changes the record."""
        shown = self._shown_by
        if shown is None:
            shown = self._shown_by = Shown()
        return shown

    def _inline(self, calls: list[ToolCall]) -> bool:
        """Whether a quiet run's batch runs inline, in the run's task: one call, and nobody
        who watches it live (no session, no stream, no ``on_tool_call``), so no task is
        needed. A run whose events someone iterates never does (see :meth:`_tools`)."""
        return (
            len(calls) == 1
            and self.control is None
            and not self.streaming
            and not self._watch_calls
        )

    async def _run_inline(
        self, iteration: int, message: Message, call: ToolCall, put: Callable[[Any], None]
    ) -> ToolResult:
        """The lone call of an inline batch (see :meth:`_inline`); its events go to ``put``."""
        # :meth:`_lazy_context` and :func:`set_event_sink` in this frame (no frame for the one,
        # no undo closure for the other). Each run sets its own sink (a quiet one too): a run
        # inside the tool never reports to the run around it.
        resumed = self._inner.get(call.id) if self._inner else None
        lazy = _LazyContext(
            self._context, self.o.max_tool_result_chars, call, iteration, put, resumed
        )
        token = _current.set(lazy)
        sink_token = _sink.set((put, self.path))
        # :meth:`_run_one`, one coroutine layer fewer (issue 36).
        tool = self.dispatcher.tool(call.name)
        # A function tool has no ``reserve`` (slotted, no instance dict): no place to take.
        release = None if type(tool) is FunctionTool else take_place(tool, call)
        try:
            # In the run's task, with the rule of the call's own task (as :meth:`_tools`
            # gives it): a cancel request the call makes on the task it runs in is its own.
            return await in_the_runs_task(
                self._run_checked(call, message, put, tool), self._cancelled, call
            )
        finally:
            if release is not None:
                let_go(release, self.log)
            _current.reset(token)
            _sink.reset(sink_token)

    async def _cancelled(self, call: ToolCall, exc: asyncio.CancelledError) -> ToolResult:
        """The result of a call that ended with a ``CancelledError`` that was not the run's:
        code other than the run cancelled the call's task (the call itself, another call
        holding it), or the call let out one nobody asked for. That call's failure, an error
        result the model reads; the batch and the run go on (goagent_py/_cancel.py)."""
        error = ToolExecutionError(call.name, call.arguments, exc)
        return await self._after(error_result(call, error))

    async def _tools(
        self, iteration: int, message: Message, calls: list[ToolCall]
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run a turn's calls, yielding their events as they happen and each end as it comes;
        the results land in ``self._results`` in call order (rule 3)."""
        o = self.o
        n = len(calls)
        results = self._results  # set with pending_calls: a cancelled run keeps what finished
        sequential = o.tool_execution == "sequential" or any(
            c.name in o.sequential_tools for c in calls
        )
        limit = 1 if sequential else (o.max_parallel_tools or n)
        # No inline shortcut here: whoever iterates these events (a stream, hooks, a parent
        # run that forwards a sub-agent's events to its user) sees each when it happens; a
        # lone call run inline delivered its start only with its end (code12). A quiet run
        # (nobody sees its events) runs a lone call inline (:meth:`_run_inline`).
        loop = asyncio.get_running_loop()
        queue = _Inbox()

        def put(item: Any) -> None:
            # By the running loop, not the thread: an event loop may hop threads between steps
            # (a Temporal workflow's does), while a sync tool's worker thread has no loop.
            try:
                here = asyncio.get_running_loop()
            except RuntimeError:
                here = None
            if here is loop:
                queue.put_nowait(item)
            else:  # a sync tool reporting from its worker thread
                loop.call_soon_threadsafe(queue.put_nowait, item)

        async def one(index: int, call: ToolCall) -> None:
            _current.set(self._lazy_context(call, iteration, put))
            set_event_sink(put, self.path)
            try:
                result = await self._run_one(call, message, put)
            except asyncio.CancelledError as exc:
                if closing or cancels_the_run(exc):  # the run cancels its calls, or ends
                    put(_Failed(exc))
                    raise
                # Code other than the run cancelled this call's task (the call itself,
                # another call holding it): see :meth:`_cancelled`.
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    task.uncancel()
                result = await self._cancelled(call, exc)
            except BaseException as exc:
                put(_Failed(exc))
                # Only cancellation ends the task as cancelled: a SystemExit or
                # KeyboardInterrupt raised here would escape the event loop itself, so it
                # reaches the run's task through the queue and is raised there as itself.
                if isinstance(exc, asyncio.CancelledError):
                    raise
                return
            results[index] = result  # before the event: a cancel now keeps this result
            put(_Done(index, result))

        tasks: dict[int, asyncio.Task[None]] = {}
        started = done = 0
        closing = False  # set before the run cancels the calls still running
        if self.control is not None:
            self.control._attach(lambda: queue.put_nowait(_WAKE))
        try:
            while done < n:
                while started < n and started - done < limit:
                    tasks[started] = asyncio.create_task(one(started, calls[started]))
                    started += 1
                if self.control is not None and self.control.abort_mode == "now":
                    raise _Abort
                item = await queue.get()
                if item is _WAKE:
                    continue
                if isinstance(item, _Done):
                    results[item.index] = item.result
                    done += 1
                    yield ToolExecutionEnd(self._shown().result(item.result), path=self.path)
                elif isinstance(item, _Failed):
                    raise item.exc
                else:
                    yield item
        finally:
            if self.control is not None:
                self.control._attach(None)
            pending = [t for t in tasks.values() if not t.done()]
            closing = True
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)

    # -- guardrails (guardrails.py) ------------------------------------------------------------

    async def _guard(
        self,
        kind: Literal["input", "output"],
        messages: list[Message],
        value: Any,
        final: Message | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run the ``kind`` guardrails together; report each decision in order, and end the run
        on the first (in list order) that trips: the turn is stored well formed (an input trip
        adds a note that answers the prompt; an output trip replaces the answer ``final`` with
        a note, see :meth:`_withhold`) and :class:`GuardrailTripped` raised."""
        o = self.o
        guards = o.input_guardrails if kind == "input" else o.output_guardrails
        text = self.last_text if kind == "output" else ""

        async def timed(guard: Any) -> tuple[Any, float]:
            # Each guardrail its own copies: one that changes them changes neither the record
            # nor what another guardrail reads.
            context = GuardrailContext(
                kind=kind, agent=o.name, deps=self.deps, messages=_readable(messages), text=text
            )
            given = _readable(value) if kind == "input" else value
            start = time.perf_counter()
            verdict = await decide(guard, given, context)
            return verdict, time.perf_counter() - start

        async def together() -> list[tuple[GuardrailResult, float]]:
            return list(await asyncio.gather(*(timed(g) for g in guards)))

        if self.control is None:
            decided = await together()
        else:
            # In a task an abort interrupts, as a summariser (issue 28): a guardrail that hangs
            # (a model that never answers) never holds an abort (review6a).
            try:
                decided = await self._unheld(together)
            except _Abort:
                if kind == "output":  # never checked: withheld, as a trip withholds it
                    self._withhold(messages, final, "the run was aborted before it was checked")
                else:  # never checked: answered, as a trip answers it, so continue_ never
                    # sends it on unchecked (a continued run has no prompt of its own to check)
                    self._append(messages, self._refusal("it was not checked: the run was aborted"))
                raise
        tripped: GuardrailTripped | None = None
        for guard, (verdict, duration) in zip(guards, decided, strict=True):
            name = guardrail_name(guard)
            yield GuardrailChecked(
                kind,
                name,
                verdict.tripped,
                verdict.reason,
                verdict.info,
                duration,
                path=self.path,
            )
            if verdict.tripped and tripped is None:
                tripped = GuardrailTripped(name, kind, verdict.reason)
        if tripped is None:
            return
        if kind == "input":
            self._append(messages, self._refusal(redact(tripped.reason)))
        else:
            self._withhold(messages, final, tripped.reason)
        if o.short_term_memory is not None:
            async for event in self._persist(None):  # the trace only: no long-term write
                yield event
        raise tripped

    @staticmethod
    def _refusal(why: str) -> Message:
        """The note that answers user input an input guardrail refused (or never checked)."""
        return Message(
            Role.ASSISTANT,
            [TextBlock(f"[The request was refused: {why}]")],
            metadata={SYNTHETIC_METADATA_KEY: "guardrail"},
        )

    def _withhold(self, messages: list[Message], final: Message | None, why: str) -> None:
        """Take the answer ``final`` out of the result and the record: what an output guardrail
        blocked (or never checked) is neither sent to the model again nor shown after a reload
        (review7a: it was stored as said). A plain or typed answer (with its ``final_result``
        call and result: no tool ran) is replaced by a synthetic note; an answer that ended a
        run after a tool batch keeps its calls, which ran, loses its text, and the note follows
        the results."""
        self.last_text, self.output_value = "", None
        note = Message(
            Role.ASSISTANT,
            [TextBlock(f"[The answer was withheld: {redact(why)}]")],
            metadata={SYNTHETIC_METADATA_KEY: "guardrail"},
        )
        at = next((i for i, m in enumerate(self.new_messages) if m is final), -1)
        if final is None or at < 0:  # stored already (a resumed message): the note follows
            self._append(messages, note)
            return
        tail = len(self.new_messages) - at
        ran = [c for c in final.tool_calls if c.name != FINAL_RESULT_TOOL or self.output is None]
        if not ran:
            del self.new_messages[at:]
            del messages[len(messages) - tail :]
            self._append(messages, note)
            return
        kept = replace(final, content=[])
        self.new_messages[at] = kept
        messages[len(messages) - tail] = kept
        self._append(messages, note)

    # -- calls that wait for decisions (approvals.py) ------------------------------------------

    def _hook_context(self) -> HookContext:
        if self._hooked is None or self._hooked.run_id != self.run_id:
            self._hooked = HookContext(self.run_id, self.deps, self.path)
        return self._hooked

    def _run_context(self, message: Message, iteration: int) -> RunContext:
        given = _readable(self._messages)
        # The message that made the call is the record's last one: its copy, once.
        last = given[-1] if given and self._messages[-1] is message else snapshot_message(message)
        return RunContext(
            message=last,
            messages=given,
            tools=list(self.tool_defs),
            deps=self.deps,
            run_id=self.run_id,
            iteration=iteration,
        )

    async def _validated(self, call: ToolCall) -> ToolCall | None:
        """``call`` repaired and validated as it would run; None when that fails (the call then
        gets its error result when its batch runs)."""
        prepare = self.o.prepare_arguments
        try:
            if prepare is not None:
                call = await prepared_call(prepare, call)
            validated = checked_arguments(self.dispatcher.tool(call.name), call)
            return call if validated is None else with_arguments(call, validated)
        except ToolArgumentsError:
            return None

    async def _holding(
        self, iteration: int, message: Message, calls: list[ToolCall]
    ) -> list[PendingCall]:
        """:meth:`_held`; in a session with an approval policy (user code that may ask a
        service), in a task an abort interrupts, as a summariser (review6a)."""
        if self.control is None or self.o.requires_approval is None:
            return await self._held(iteration, message, calls)
        return await self._unheld(lambda: self._held(iteration, message, calls))

    async def _held(
        self, iteration: int, message: Message, calls: list[ToolCall]
    ) -> list[PendingCall]:
        """The calls of this batch that wait for a decision: an external tool's, a tool's that
        requires approval, or one the agent's policy picks. A check that raises holds the call
        (fail closed, as ``before_tool_call`` does)."""
        o = self.o
        policy = o.requires_approval
        deadline = None if o.approval_timeout is None else self.clock() + o.approval_timeout
        held: list[PendingCall] = []
        for call in calls:
            tool = self.dispatcher.tool(call.name)
            if tool is None:
                continue
            external = getattr(tool, "external", False) is True
            flag = getattr(tool, "requires_approval", False)
            if not external and flag is False and policy is None:
                continue
            shown = await self._validated(call)
            if shown is None:
                continue
            if external:
                held.append(PendingCall(shown, "external", deadline))
                continue
            try:
                need = bool(flag(dict(shown.arguments)) if callable(flag) else flag)
                if not need and policy is not None:
                    context = self._run_context(message, iteration)
                    need = bool(await _maybe_await(policy(shown, context)))
            except (Exception, asyncio.CancelledError) as caught:
                exc = as_failure(caught, "the approval policy")
                self.log.warning("the approval check raised; the call waits: %s", message_of(exc))
                need = True
            if need:
                resolved = resolved_path(tool, shown)
                held.append(PendingCall(shown, "approval", deadline, resolved=resolved))
        return held

    async def _defer(
        self,
        iteration: int,
        message: Message,
        held: list[PendingCall],
        results: list[ToolResult] | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Stop before the batch runs: the waiting calls go on the assistant message (the one
        record), the record is stored, the result lists them.

        With ``results``, the batch ran and a tool of it waits inside (``wait_for``: an agent
        used as a tool): its inner calls are listed under its call, its state and the results
        of the calls that finished are kept on the message, so a resume runs nothing twice."""
        inner: dict[str, Any] = {}
        done: list[Message] = []
        for result in results or ():  # call order
            wait = self._waiting.get(result.call.id)
            if wait is None:
                done.append(tool_message(result))
            else:
                held.extend(under(result.call.id, wait[0]))
                inner[result.call.id] = wait[1]
        # This run's deadline holds for every call its wait lists, a tool's inner run's too
        # (a sub-agent without a timeout of its own, or a later one): the earlier applies.
        if self.o.approval_timeout is not None:
            due = self.clock() + self.o.approval_timeout
            held = [
                p if p.deadline is not None and p.deadline <= due else replace(p, deadline=due)
                for p in held
            ]
        self._waiting = {}
        token = self.new_token()
        # Every call listed in this wait carries its token (PendingCall.token): a decision
        # may name it, so a late one for an earlier wait is refused, not taken here.
        held = [replace(p, token=token) for p in held]
        message.metadata[PENDING_KEY] = pending_metadata(token, held, inner=inner, done=done)
        self.pending_calls = []
        self.pending = held
        self.stop_reason = StopReason.DEFERRED
        yield ToolsPending(
            [replace(p, call=self._shown().call(p.call)) for p in held], path=self.path
        )
        yield TurnEnd(iteration, self._shown().message(message), [], path=self.path)
        yield FinalResponse(self.last_text, self.iterations, path=self.path)
        if self.o.short_term_memory is not None:
            if self.resume is not None and message is self.resume.message:
                await self._wait_again(message)
            async for event in self._persist(None):
                yield event
        self.result = self._finish(None)
        yield AgentEnd(self.result, path=self.path)

    async def _wait_again(self, message: Message) -> None:
        """A resumed batch whose tool waits inside again: the stored message, decided a
        moment ago, waits once more (the one record)."""
        memory = self.o.short_term_memory
        if not isinstance(memory, UpdatableMemory):  # start_resume refused it already
            return
        decided = message.metadata.get(DECISIONS_KEY)
        ids = [c.id for c in message.tool_calls]
        waiting = message.metadata[PENDING_KEY]

        def match(m: Message) -> bool:
            return m.metadata.get(DECISIONS_KEY) == decided and [c.id for c in m.tool_calls] == ids

        def update(m: Message) -> Message:
            return replace(m, metadata={**m.metadata, PENDING_KEY: waiting})

        try:
            await memory.update_where(match, update)
        except (Exception, asyncio.CancelledError) as caught:
            exc = as_failure(caught, "short-term memory")
            raise MemoryStoreError(
                f"storing the calls that wait failed: {message_of(exc)}"
            ) from exc

    async def _resumed(
        self, messages: list[Message], resume: Resumed
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run the decided batch: approved calls (and those that waited for nothing) through
        the usual path, denials and client outputs as their results, in call order (rule 3).
        Calls that finished before a tool waited inside keep their results; that tool runs
        again with its state and decisions (``ToolContext.resumed``)."""
        message = resume.message
        calls = list(message.tool_calls)
        results: list[ToolResult | None] = [None] * len(calls)
        to_run: list[tuple[int, ToolCall]] = []
        stop = False
        kept = kept_results(resume.record)
        states = resume.record.get("inner") or {}
        # What a person approved is what the record showed them (validated, defaults filled):
        # never the message's raw arguments, validated again by the tool this process has,
        # nor a stored call changed while it waited (review9c).
        asked = {p.id: p for p in resume.pending if not p.via}
        for index, call in enumerate(calls):
            if call.id in kept:
                m = kept[call.id]
                failed = ToolError(m.text) if m.is_error else None
                results[index] = ToolResult(call, list(m.content), failed)
                continue
            if call.id in states:
                decided = inner_decisions(call.id, resume.pending, resume.decisions)
                self._inner[call.id] = ToolResume(states[call.id], decided)
                to_run.append((index, call))
                continue
            decision = resume.decisions.get(call.id)
            if isinstance(decision, Deny):
                stop = stop or decision.stop
                results[index] = error_result(call, ToolBlockedError(call.name, decision.message))
            elif isinstance(decision, ToolOutput):
                error = ToolError(f"tool {call.name!r} failed on the client")
                results[index] = ToolResult(
                    call, decision.blocks(), error if decision.is_error else None
                )
            elif isinstance(decision, Approve) and decision.arguments is not None:
                to_run.append((index, with_arguments(call, dict(decision.arguments))))
            elif isinstance(decision, Approve) and call.id in asked:
                shown = asked[call.id]
                to_run.append(
                    (index, replace(call, name=shown.name, arguments=dict(shown.arguments)))
                )
                bound = bound_file(shown, decision)
                if bound is not None:
                    self._bound = self._bound or {}
                    self._bound[call.id] = bound
            else:
                to_run.append((index, call))
        # A call that waited for nothing when its turn stopped, which this agent's rules make
        # wait (the tool's requires_approval or the policy changed meanwhile, another deploy
        # resumed it): nobody was asked, so it does not run (fail closed, as a durable run's
        # worker refuses it).
        undecided = [c for _, c in to_run if c.id not in resume.decisions and c.id not in states]
        unasked = {p.id for p in await self._holding(0, message, undecided)} if undecided else set()
        for index, call in [(i, c) for i, c in to_run if c.id in unasked]:
            results[index] = error_result(call, ToolBlockedError(call.name, _UNASKED))
        to_run = [(i, c) for i, c in to_run if c.id not in unasked]
        for result in results:
            if result is not None:
                seen = self._shown().result(result)
                yield ToolExecutionStart(seen.call, path=self.path)
                yield ToolExecutionEnd(seen, path=self.path)
        if to_run:
            subset = [c for _, c in to_run]
            self.pending_calls = subset
            self._results = [None] * len(subset)
            try:
                async for event in self._tools(0, message, subset):
                    yield event
            except _Abort:
                done = dict(zip((i for i, _ in to_run), self._results, strict=True))
                self._record_results(
                    messages, calls, [results[i] or done.get(i) for i in range(len(calls))]
                )
                raise
            for (index, _), result in zip(to_run, self._results, strict=True):
                results[index] = result
        self._inner = {}
        self.pending_calls = []
        finished = [r for r in results if r is not None]
        if (misconfigured := _misconfigured(finished)) is not None:
            finished = _told_misconfigured(finished)
        if self._waiting:
            async for event in self._defer(0, message, [], finished):
                yield event
            return
        for event in self._tool_messages(messages, finished):
            yield event
        yield TurnEnd(
            0, self._shown().message(message), self._shown().results(finished), path=self.path
        )
        # The batch answers a message stored already (the claim): its results are stored now,
        # in a plain run too, so a later failure cannot leave that message with calls no
        # resume reaches and no result answers (review6a).
        if self.o.short_term_trace_tools:
            async for event in self._persist(None):
                yield event
        if misconfigured is not None:  # recorded, each call answered: the run fails
            raise misconfigured
        if stop or await self._stop_after(0, messages, message, finished):
            self._resume_final = message
            self.last_text = text_of(message)

    # -- the loop ----------------------------------------------------------------------------

    def _finish(self, error: BaseException | None) -> RunResult[Any]:
        return run_result(
            self.last_text if error is None else "",
            self.stop_reason,
            self.iterations,
            self.usage,
            self.tool_calls,
            self.tool_time,
            time.perf_counter() - self._start,
            list(self.new_messages),
            error,
            self.run_id,
            None  # :meth:`_output` without a call
            if error is not None
            else (self.last_text if self.output is None else self.output_value),
            list(self.pending),
        )

    # -- typed output (see output.py) ---------------------------------------------------------

    def _output(self) -> Any:
        return self.last_text if self.output is None else self.output_value

    async def _judge(
        self, message: Message, stop: StopReason, max_tokens: int | None
    ) -> Verdict | None:
        """The verdict on ``message`` as the run's answer (``stop``: why its response ended;
        ``max_tokens`` when the request set one), or None when it is not one yet (it calls
        tools). When the retries are spent, or at once when the model refused (asking again
        only repeats a refusal), the OutputValidationError the run ends with is kept in
        ``_output_failure``: the run raises it once the turn is recorded."""
        cut_off = stop == StopReason.MAX_TOKENS
        spec = self.output
        assert spec is not None
        found = spec.candidate(message, self.output_mode)
        if found is None:
            return None
        context = OutputContext(self.deps, self._output_tries)
        raw, call = found
        cut_off_at = (max_tokens or 0) if cut_off else None
        mode = self.output_mode
        prepare = self.o.prepare_arguments

        async def judged_one(raw: str, call: ToolCall | None) -> Verdict:
            text = raw
            if call is not None and prepare is not None:
                # The final_result call is a call the model made: repaired as every other call
                # is before it is validated (it was judged as sent, past the user's repair).
                try:
                    text = spec.arguments_text(await prepared_call(prepare, call))
                except ToolArgumentsError as exc:
                    return spec.rejected(raw, call, exc.details)
            return await spec.judge(text, call, mode, context, cut_off_at=cut_off_at)

        async def judged() -> Verdict:
            verdict = await judged_one(raw, call)
            if verdict.accepted or call is None:
                return verdict
            # Several final_result calls in one response: the first valid one is the answer
            # (docs/typed-output.md); the model was asked again although it had given one.
            for other in message.tool_calls:
                if other is not call and other.name == FINAL_RESULT_TOOL:
                    again = await judged_one(spec.arguments_text(other), other)
                    if again.accepted:
                        return again
            return verdict

        # The validators are user code: in a session, one that hangs never holds an abort.
        verdict = await (judged() if self.control is None else self._unheld(judged))
        if verdict.accepted:
            self.output_value = verdict.value
            if verdict.call is not None:
                # The answer is the call's arguments: its text is their JSON, after what the
                # model wrote beside the call. The sentence alone was the text an output
                # guardrail judged (ctx.text), never the answer it let through.
                raw = verdict.raw if verdict.text is None else verdict.text
                self.last_text = f"{self.last_text}\n\n{raw}" if self.last_text else raw
            elif verdict.text is not None:
                # A validator changed the answer: the run's text (what a guardrail reads,
                # long-term memory stores and callers send on) is the answer it returns.
                self.last_text = verdict.text
            return verdict
        if stop == StopReason.REFUSAL:
            self._output_failure = spec.failed(verdict, refused=True)
            return verdict
        self._output_tries += 1
        if self._output_tries > spec.retries:
            self._output_failure = spec.failed(verdict)
        return verdict

    def _stream_output(
        self, event: Any, calls: dict[int, tuple[str, str]], put: Callable[[Any], None]
    ) -> None:
        """Put an :class:`OutputDelta` when the answer streamed so far validates to more."""
        spec = self.output
        assert spec is not None
        if isinstance(event, ToolCallStart):
            self._new_partial()  # a new call: a new answer
            return
        if self.output_mode == "tool":
            if not isinstance(event, ToolCallDelta):
                return
            if calls.get(event.index, ("", ""))[1] != FINAL_RESULT_TOOL:
                return
            piece = event.arguments_delta
        elif isinstance(event, TextDelta):
            piece = event.text
        else:
            return
        pieces = self._partial_raw
        pieces.append(piece)
        self._partial_len = n = self._partial_len + len(piece)
        if n < self._partial_next:
            return
        # Each parse reads all the JSON so far: on every delta that was quadratic (a 79 KB
        # answer held the event loop 12 s). Every delta up to 4 KB, then each time the
        # answer has grown by an eighth: linear in all.
        self._partial_next = n + n // 8 if n > _PARSE_EVERY_DELTA else 0
        raw = "".join(pieces)
        pieces[:] = [raw]
        value = spec.partial(raw)
        if value is not None and value != self._partial:
            self._partial = value
            put(OutputDelta(value, path=self.path))

    def _new_partial(self) -> None:
        self._partial_raw, self._partial_len, self._partial_next, self._partial = [], 0, 0, None

    @property
    def streaming_message(self) -> str:
        """The assistant text streamed so far in the current model call ("" outside one)."""
        # Joined, never collapsed in place: ``session.state`` may read it from another thread
        # while the stream appends, and a piece appended between the two would be lost.
        return "".join(self._streamed)

    def _output_turn(
        self, messages: list[Message], i: int, message: Message, verdict: Verdict
    ) -> Iterator[AgentEvent]:
        """End a turn that gave an answer: the ``final_result`` call (and any call beside it,
        not run) gets its result; an answer to retry gets the feedback as a user message."""
        results: list[ToolResult] = []
        if not verdict.accepted and self._output_failure is None:  # the model is asked again
            yield OutputRetry(self._output_tries, verdict.feedback, path=self.path)
        if message.tool_calls:
            for call in message.tool_calls:
                if call is verdict.call:
                    text = "Final result accepted." if verdict.accepted else verdict.feedback
                    error = None if verdict.accepted else ToolArgumentsError(call.name, text)
                    result = ToolResult(call, [TextBlock(text)], error)
                else:
                    result = error_result(call, ToolBlockedError(call.name, _BESIDE_FINAL))
                shown = self._shown().result(result)
                yield ToolExecutionStart(shown.call, path=self.path)
                yield ToolExecutionEnd(shown, path=self.path)
                results.append(result)
            yield from self._tool_messages(messages, results)
        elif not verdict.accepted and self._output_failure is None:  # no retry after the last
            retry = Message(Role.USER, [TextBlock(verdict.feedback)])
            self._append(messages, retry)
            shown_retry = self._shown().message(retry)
            yield MessageStart(Role.USER, i, shown_retry, path=self.path)
            yield MessageEnd(shown_retry, path=self.path)
        yield TurnEnd(
            i, self._shown().message(message), self._shown().results(results), path=self.path
        )

    def _append(self, messages: list[Message], message: Message) -> None:
        messages.append(message)
        self.new_messages.append(message)

    async def _inject(
        self,
        messages: list[Message],
        taken: list[Message],
        queue: Literal["steering", "follow_up"],
        *,
        answered: bool = False,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Put queued messages into the run; ``answered``: the run had its answer and would
        have stopped (the answer closes the user's turn, and ``taken`` open the next one)."""
        self._injected = True
        said = [m for m in taken if m.role is Role.USER]
        if self.o.long_term_memory is None or (
            self.control is not None and not self.control.said_taken()
        ):
            pass  # nothing to recall or store (or a durable history from before: as it ran)
        elif answered:
            self._said_answers.append((assistant_message(self.last_text), self._recalled_ids))
            self._said.append(said)
            if said:
                async for event in self._recall_again(messages, said[-1]):
                    yield event
        else:
            self._said[-1].extend(said)
        yield MessagesInjected(queue, self._shown().messages(taken), path=self.path)
        for m in taken:
            self._append(messages, m)
            shown = self._shown().message(m)
            yield MessageStart(Role.USER, self.iterations, shown, path=self.path)
            yield MessageEnd(shown, path=self.path)
        if self.o.input_guardrails and (self.control is None or self.control.guards_taken()):
            # A queued message is user input as the prompt is: checked before any request
            # carries it (a served chat's /steer took text past every input guardrail). A
            # trip answers it with the refusal note, as a prompt's trip does.
            async for event in self._guard("input", messages, list(taken)):
                yield event

    async def _recall_again(
        self, messages: list[Message], query: Message
    ) -> AsyncGenerator[AgentEvent, None]:
        """A turn a queued message opens recalls for it, as a prompt's turn does (rule 7): the
        recalled block at the head of the context becomes that turn's. When nothing is recalled
        for it, the block the run had stays (and the ids its answer records)."""
        before, before_ids = self._recalled, self._recalled_ids
        self._recalled, self._recalled_ids = None, []
        async for event in self._recall(query):
            yield event
        if self._recalled is None:
            self._recalled, self._recalled_ids = before, before_ids
        elif before is not None and messages and messages[0] is before:
            messages[0] = self._recalled
        else:
            messages.insert(0, self._recalled)

    async def _steer(self, messages: list[Message]) -> AsyncGenerator[AgentEvent, None]:
        if self.control is not None and (taken := self.control.take_steering()):
            async for event in self._inject(messages, taken, "steering"):
                yield event

    def _queued(self) -> tuple[list[Message], Literal["steering", "follow_up"]]:
        """What a run that would stop takes from its queues: steering first, else follow-ups
        (the run goes on with them)."""
        control = self.control
        assert control is not None
        taken = control.take_steering()
        if taken:
            return taken, "steering"
        return control.take_follow_ups(), "follow_up"

    def _abort_due(self, *modes: AbortMode) -> bool:
        return self.control is not None and self.control.abort_mode in modes

    async def outcome(self) -> RunResult[Any]:
        """Run to the end and return the result, building no event nobody sees: for
        ``Agent.run`` and ``resume``, which only drain the events (issue 36). With hooks set
        the run is loud, as :meth:`events` is; the result, the record stored and what the
        hooks see are the same either way. Raises what the run ends with."""
        self.loud = bool(self.hooks.handlers)
        async for _ in self.events():
            pass
        assert self.result is not None
        return self.result

    def events(self) -> AsyncGenerator[AgentEvent, None]:
        """Run the loop, yielding its events; raises what the run ends with.

        Each event feeds the hooks (through the agent's :class:`HookDispatcher`) just before it
        is yielded: one place, so hooks and the stream can never disagree.
        """
        if self._answered is not None:
            return self._answer(self._answered)  # nothing runs: no hook sees a run
        if not self.hooks.handlers:
            return self._events()  # no hook to feed: spare every event a generator hop
        return self._hooked_events()

    async def _answer(self, result: RunResult[Any]) -> AsyncGenerator[AgentEvent, None]:
        """The end of a retried resume: the result the record gives, nothing run again. Its
        answer is streamed again (the client that retries lost it), as one message."""
        self.run_id = _run_ids.next()
        self.stop_reason = result.stop_reason
        self.pending = list(result.pending)
        self.result = replace(result, run_id=self.run_id)
        if result.text:
            yield MessageStart(Role.ASSISTANT, 0, None, streaming=True, path=self.path)
            yield MessageDelta("text", result.text, path=self.path)
            answer = Message(Role.ASSISTANT, [TextBlock(result.text)])
            yield MessageEnd(answer, result.stop_reason, path=self.path)
        if result.pending:  # what waits now, as a run that stops on it says
            shown = [replace(p, call=self._shown().call(p.call)) for p in result.pending]
            yield ToolsPending(shown, path=self.path)
        yield AgentEnd(self.result, path=self.path)

    async def _hooked_events(self) -> AsyncGenerator[AgentEvent, None]:
        handlers = self.hooks.handlers
        awaiter = None if self.control is None else self._hook_awaited
        inner = self._events()
        try:
            async for event in inner:
                handler = handlers.get(type(event))
                if handler is not None:
                    await call_in(self._hook_context(), handler, event, awaiter)
                yield event
        finally:
            await inner.aclose()

    async def _hook_awaited(self, awaitable: Awaitable[Any]) -> None:
        """Await an async hook in a task that an ``abort("now")`` signalled meanwhile cancels
        (a hook that hangs never holds an abort, review7a): the hook is given up, logged, and
        the run goes on to meet the abort. An abort signalled before the hook began does not
        cancel it (the hooks of an aborted run's end run); another signal does."""
        control = self.control
        assert control is not None
        # The hook's context variables come back to the run's context when it ends, as when it
        # was awaited in place (an async on_run_start may set what later hooks read).
        context = contextvars.copy_context()
        if inspect.iscoroutine(awaitable):
            task = asyncio.get_running_loop().create_task(awaitable, context=context)
        else:
            task = asyncio.ensure_future(awaitable)
        previous = control._wake  # the wake of the model call or batch suspended meanwhile

        def wake() -> None:
            if previous is not None:
                previous()
            if control.abort_mode == "now":
                task.cancel()

        control._attach(wake)
        try:
            await asyncio.wait((task,))
        except BaseException:
            task.cancel()
            raise
        finally:
            control._attach(previous)
        # What the hook set comes back even when it was given up, as it would have stayed had
        # it been awaited in place and cancelled (merged hooks before or after the one that
        # hung may have restored the run's context: the OpenTelemetry hooks' on_run_end).
        for var, value in context.items():
            if var.get(_UNSET) is not value:
                var.set(value)
        if task.cancelled():
            self.log.warning("a hook was still running when the run was aborted; given up")
            return
        task.result()  # its error, for the hook's logging

    async def _events(self) -> AsyncGenerator[AgentEvent, None]:
        o = self.o
        self._start = time.perf_counter()
        self.run_id = _run_ids.next()
        self._watch_calls = self.hooks.hooks.on_tool_call is not None
        loud = self.loud
        if self.log.isEnabledFor(logging.INFO):  # one call fewer when it is off
            self.log.info(
                "run started: agent=%s model=%s max_iterations=%d tools=%d",
                o.name or "-",
                o.model,
                o.max_iterations,
                len(self.tool_defs),
            )
        ended = False
        try:
            if loud:
                info = RunInfo(self.run_id, o.name, o.model, self._content(), o.provider)
                yield AgentStart(info, path=self.path)
            if o.long_term_memory is not None and self.prompt:
                async for event in self._recall():
                    yield event
            if self.given_history is not None:
                self._history = list(self.given_history)
            elif o.short_term_memory is not None:
                async for event in self._load():
                    yield event
            messages = ([self._recalled] if self._recalled is not None else []) + self._history
            self._messages = messages  # what a tool's context reads (agents as tools)
            at = waiting_at(self._history) if self.resume is None and self._history else -1
            if at >= 0:
                hint = decision_hint(pending_of(self._history[at])[1], now=self.clock())
                raise ApprovalPendingError(
                    "the conversation's last tool calls wait for decisions: resume it with "
                    f"them (agent.{hint}, or session.resume(...)) before a new prompt"
                )
            for m in self.prompt:
                messages.append(m)  # :meth:`_append`, without a call per message
                self.new_messages.append(m)
                if loud:
                    shown = self._shown().message(m)
                    yield MessageStart(Role.USER, 0, shown, path=self.path)
                    yield MessageEnd(shown, path=self.path)
            if self.control is not None:
                async for event in self._checkpoint():
                    yield event
            final: Message | None = None
            if o.input_guardrails and self.prompt and self.resume is None:
                async for event in self._guard("input", messages, list(self.prompt)):
                    yield event
            if self.resume is not None:
                async for event in self._resumed(messages, self.resume):
                    yield event
                if self.stop_reason is StopReason.DEFERRED:  # a tool waits inside again
                    ended = True
                    return
                final = self._resume_final
            while final is None:
                if self.iterations >= o.max_iterations:
                    async for event in self._exhausted():
                        yield event
                i = self.iterations
                self.iterations += 1
                if self.control is not None and self._abort_due("now", "after_tools", "after_turn"):
                    raise _Abort
                if loud:
                    yield TurnStart(i, path=self.path)
                if i > 0 and self.refresh_tools is not None:  # between turns, never in a batch
                    self.tool_defs = await self.refresh_tools()
                if self.control is not None and i == 0:  # later turns drained at their end
                    async for event in self._steer(messages):
                        yield event
                # :meth:`_prepared`, one coroutine layer fewer outside a session (where it
                # would only call this).
                if self.control is None:
                    request = await self._request(messages, i)
                else:
                    request = await self._prepared(messages, i)
                if self._compactions:
                    for compacted in self._drain_compactions():
                        yield compacted
                # After context preparation, unless this request already took a queued
                # message: one at a time means one per request (issue 28).
                if o.transform_context is not None and not self._injected:
                    before = len(messages)
                    async for event in self._steer(messages):
                        yield event
                    if len(messages) != before:
                        request = await self._prepared(messages, i)
                self._injected = False
                # Every enclosing budget, once per call each, at any depth.
                budgets = active_budgets()
                if budgets:
                    try:
                        before_call(budgets)
                    except BudgetExceededError as spent:
                        async for event in self._run_budget_spent(spent):
                            yield event
                if loud:
                    yield ModelRequest(i, request, path=self.path, copy=self._shown().request)
                    yield MessageStart(Role.ASSISTANT, i, streaming=self.streaming, path=self.path)
                response: CompletionResponse | None = None
                if not loud and self.control is None and not self.streaming:
                    # :meth:`_call_model_once` of a quiet run, in this frame (no coroutine per
                    # model call; the failure made there too, its event seen by nobody).
                    start = time.perf_counter()
                    self._streamed = _NOTHING_STREAMED
                    quiet_failure: ProviderError | None = None
                    try:
                        provider = o.provider
                        assert provider is not None
                        response = await provider.complete(request)
                        _check_response(response)
                    except (Exception, asyncio.CancelledError) as caught:
                        exc = as_failure(caught, "the provider")
                        quiet_failure = self._model_failure(exc, start, i)[1]
                        self.log.warning("provider error: %s", message_of(exc))
                    if quiet_failure is not None:  # raised here, as the loud path raises it
                        raise quiet_failure
                elif self.control is None and not self.streaming:
                    # Nothing to interrupt or stream: a plain call, no async generator.
                    reported, response, failure = await self._call_model_once(i, request)
                    if reported is not None:  # None only in a quiet run's answer
                        yield reported
                    if failure is not None:
                        error = reported.error if reported is not None else failure
                        self.log.warning("provider error: %s", message_of(error or failure))
                        raise failure
                else:
                    async with contextlib.aclosing(self._call_model(i, request)) as items:
                        async for item in items:
                            if isinstance(item, CompletionResponse):
                                response = item
                            else:
                                yield item
                assert response is not None
                for budget in budgets:
                    budget.charge(response.usage)
                self.usage = self.usage + response.usage
                self.stop_reason = response.stop_reason
                message = response.message
                messages.append(message)  # rule 1: exactly as returned (:meth:`_append`)
                self.new_messages.append(message)
                self.last_text = text_of(message)
                self._streamed = _NOTHING_STREAMED
                if loud:
                    yield MessageEnd(
                        self._shown().message(message),
                        response.stop_reason,
                        response.usage,
                        path=self.path,
                    )
                if (
                    self.output is not None
                    and (
                        verdict := await self._judge(
                            message, response.stop_reason, request.max_tokens
                        )
                    )
                    is not None
                ):
                    for event in self._output_turn(messages, i, message, verdict):
                        yield event
                    if self._output_failure is not None:
                        # Raised once the turn is recorded: the last answer's call is answered
                        # with what was wrong (it was closed as "the run was aborted").
                        raise self._output_failure
                    if verdict.accepted:
                        if self.control is not None:
                            # As a plain answer: the run goes on while messages are queued
                            # (they waited for the next prompt, and came after it).
                            taken, queue = self._queued()
                            if taken:
                                async for event in self._inject(
                                    messages, taken, queue, answered=True
                                ):
                                    yield event
                                continue
                        final = message
                        break
                    if self.control is not None:  # the retry's turn, stored as a batch's is
                        async for event in self._checkpoint():
                            yield event
                    continue
                if not message.tool_calls:  # rule 2: only the absence of tool calls ends a run
                    if loud:
                        yield TurnEnd(i, self._shown().message(message), [], path=self.path)
                    if self.control is not None and self._abort_due(
                        "now", "after_tools", "after_turn"
                    ):
                        raise _Abort
                    taken, queue = self._queued() if self.control is not None else ([], "steering")
                    if taken:
                        async for event in self._inject(messages, taken, queue, answered=True):
                            yield event
                        continue
                    final = message
                    break
                calls = list(message.tool_calls)
                self.pending_calls = calls
                self._results = [None] * len(calls)
                misconfigured: ConfigurationError | None = None
                over_budget = (
                    o.max_run_tokens is not None and self.usage.total_tokens > o.max_run_tokens
                )
                if over_budget:
                    note = "Error: the run's token budget is spent; this call was not run."
                    results = [
                        error_result(c, TokenBudgetError(o.max_run_tokens or 0, 0), note)
                        for c in calls
                    ]
                    for r in self._shown().results(results):
                        yield ToolExecutionStart(r.call, path=self.path)
                        yield ToolExecutionEnd(r, path=self.path)
                elif response.stop_reason == StopReason.MAX_TOKENS:
                    results = [
                        error_result(c, ToolArgumentsError(c.name, "cut off"), _TRUNCATED_CALL)
                        for c in calls
                    ]
                    for r in self._shown().results(results):
                        yield ToolExecutionStart(r.call, path=self.path)
                        yield ToolExecutionEnd(r, path=self.path)
                else:
                    held = await self._holding(i, message, calls) if o.holds_calls else None
                    if held:
                        async for event in self._defer(i, message, held):
                            yield event
                        ended = True
                        return
                    if not loud and self._inline(calls):  # no task, no generator: one await
                        self._results[0] = await self._run_inline(i, message, calls[0], _drop)
                    else:
                        try:
                            # aclosing: a consumer that closes the stream mid-batch cancels
                            # the calls (an as_tool child among them) now, not when the
                            # generator is collected (issue 28).
                            async with contextlib.aclosing(
                                self._tools(i, message, calls)
                            ) as tool_events:
                                async for event in tool_events:
                                    yield event
                        except _Abort:
                            self._record_results(messages, calls, self._results)
                            raise
                    results = [r for r in self._results if r is not None]
                    if (misconfigured := _misconfigured(results)) is not None:
                        results = _told_misconfigured(results)
                    if self._waiting:  # a tool waits inside (an agent used as a tool)
                        async for event in self._defer(i, message, [], results):
                            yield event
                        ended = True
                        return
                self.pending_calls = []
                if loud:
                    for event in self._tool_messages(messages, results):
                        yield event
                else:
                    self._add_tool_messages(messages, results)
                if loud:
                    yield TurnEnd(
                        i,
                        self._shown().message(message),
                        self._shown().results(results),
                        path=self.path,
                    )
                if self.control is not None:  # spare an async generator when it has nothing
                    async for event in self._checkpoint():
                        yield event
                if misconfigured is not None:  # recorded, each call answered: the run fails
                    raise misconfigured
                if over_budget:
                    async for event in self._budget_spent():
                        yield event
                # :meth:`_stop_after`, with no coroutine unless ``should_stop`` is set.
                if self._stops(results) or (
                    o.should_stop is not None
                    and await self._asked_to_stop(i, messages, message, results)
                ):
                    final = message
                    break
                if self.control is not None and self._abort_due("now", "after_tools", "after_turn"):
                    raise _Abort
                if self.control is not None:  # after the tool batch
                    async for event in self._steer(messages):
                        yield event
            if o.output_guardrails:
                async for event in self._guard("output", messages, self._output(), final):
                    yield event
            if loud:
                yield FinalResponse(self.last_text, self.iterations, path=self.path)
            if o.short_term_memory is not None or o.long_term_memory is not None:
                async for event in self._persist(final):
                    yield event
            self.result = self._finish(None)
            ended = True
            if loud:
                yield AgentEnd(self.result, path=self.path)
        except _Abort:
            async for event in self._aborted(messages):
                yield event
            ended = True
        except BaseException as caught:
            raised: BaseException = caught
            if not ended:
                # Only the run's own cancellation ends it cancelled: one user code let out
                # (where it was awaited, nothing turned it into that code's failure) fails it.
                strayed = stray(caught, "code the run awaited")
                if strayed is not None:
                    raised = strayed
                cancelled = isinstance(raised, asyncio.CancelledError | GeneratorExit)
                await self._failed(cancelled)
                self.result = self._finish(raised)
                ended = True
                if cancelled:
                    self.log.info("run cancelled")
                    await call_in(
                        self._hook_context(), self.hooks, AgentEnd(self.result, path=self.path)
                    )
                else:
                    if isinstance(raised, GoAgentError):
                        raised.run_result = self.result
                    yield AgentEnd(self.result, path=self.path)
            if raised is not caught:
                raise raised from caught
            raise

    async def _failed(self, cancelled: bool) -> None:
        """A run that raises (cancelled, or failed): keep the streamed partial answer, keep every
        result that finished and close the other calls, so ``new_messages`` is a valid record.
        A session's run has stored each turn as it ended, so it stores this last part too
        (issue 28: the session and storage must hold the same record); a plain run stores no
        half turn (rule 6)."""
        reason = "interrupted" if cancelled else "failed"
        self._close_open(self._messages, reason)
        # A resumed run whose decided batch was cut short stores it closed: its message is
        # stored already, so without its results the record would be invalid (review6a).
        batch_open = self.resume is not None and self._persisted == 0
        if (self.control is None and not batch_open) or not self.o.short_term_trace_tools:
            return
        try:
            async for _ in self._persist(None):
                pass
        except Exception as exc:  # the run's own error is what the caller gets
            self.log.warning("storing the interrupted turn failed: %s", message_of(exc))

    def _close_open(self, messages: list[Message], reason: str) -> Message | None:
        """Keep the partial answer streamed so far and give every open call a result (the
        finished ones keep theirs); returns the partial answer kept, if any."""
        partial = self.streaming_message
        self._streamed = _NOTHING_STREAMED
        kept: Message | None = None
        if partial:
            kept = Message(
                Role.ASSISTANT, [TextBlock(partial)], metadata={SYNTHETIC_METADATA_KEY: reason}
            )
            self._append(messages, kept)
            self.last_text = partial
        calls = self.pending_calls
        if calls:
            results = self._results
            if len(results) != len(calls):
                results = [None] * len(calls)
            self._record_results(messages, calls, results, reason)
        # A resumed run's first messages answer the message it resumed: repaired with it, so
        # they are not taken for orphans and its calls that got no result are closed.
        head = [] if self.resume is None else [self.resume.message]
        repaired = repair_transcript(head + self.new_messages, reason)[len(head) :]
        if repaired != self.new_messages:
            self.new_messages = repaired
        return kept

    def _record_results(
        self,
        messages: list[Message],
        calls: list[ToolCall],
        results: list[ToolResult | None],
        reason: str = "aborted",
    ) -> None:
        """After an abort in a batch: the finished results, and an error result for the rest."""
        kind = reason
        if self.control is not None and self.control.abort_reason:
            reason = self.control.abort_reason
        for call, result in zip(calls, results, strict=True):
            if result is None:
                result = error_result(call, ToolAbortedError(call.name, reason))
                started = self._calls_started.pop(call.id, None)
                if started is not None:  # it ran until the abort: for how long (a UI shows it)
                    took = max(time.perf_counter() - started[0], 0.0)
                    when = datetime.fromtimestamp(started[1], UTC)
                    result = replace(result, duration=took, started_at=when)
                self._append(messages, synthetic(tool_message(result), kind))
                self._abandoned.append(result)
                self.tool_calls += 1
                continue
            self._append(messages, tool_message(result))
            self.tool_calls += 1
            self.tool_time += result.duration
        self.pending_calls = []

    def _tool_messages(
        self, messages: list[Message], results: list[ToolResult]
    ) -> Iterator[AgentEvent]:
        # A plain generator (nothing here awaits): no async generator to set up per turn.
        self._count(results)
        for result in results:  # rule 3: one result per call, in call order
            tool_msg = tool_message(result)
            self._append(messages, tool_msg)
            if self.loud:
                shown = self._shown().message(tool_msg)
                yield MessageStart(Role.TOOL, self.iterations - 1, shown, path=self.path)
                yield MessageEnd(shown, path=self.path)

    def _add_tool_messages(self, messages: list[Message], results: list[ToolResult]) -> None:
        """:meth:`_tool_messages` of a quiet run: no event, so no generator (issue 36)."""
        self._count(results)
        added = self.new_messages
        for result in results:  # rule 3: one result per call, in call order
            tool_msg = tool_message(result)
            messages.append(tool_msg)  # :meth:`_append`, without a call per message
            added.append(tool_msg)

    def _count(self, results: list[ToolResult]) -> None:
        self.tool_calls += len(results)
        spent = 0.0
        for r in results:  # the order sum() adds them in: the same float
            spent += r.duration
        self.tool_time += spent

    async def _stop_after(
        self, i: int, messages: list[Message], message: Message, results: list[ToolResult]
    ) -> bool:
        return self._stops(results) or (
            self.o.should_stop is not None
            and await self._asked_to_stop(i, messages, message, results)
        )

    def _stops(self, results: list[ToolResult]) -> bool:
        """What of :meth:`_stop_after` needs no await: every result terminates, or a denial
        stops the run (``stop_on_denied``)."""
        for r in results:  # a loop, not all(<generator>): this runs every turn
            if not r.terminate:
                break
        else:
            if results:
                return True
        return self.o.stop_on_denied and any(isinstance(r.error, ToolBlockedError) for r in results)

    async def _asked_to_stop(
        self, i: int, messages: list[Message], message: Message, results: list[ToolResult]
    ) -> bool:
        should_stop = self.o.should_stop
        assert should_stop is not None
        given = _readable(messages)
        last = given[-1] if given and messages[-1] is message else snapshot_message(message)
        state = TurnState(i, given, last, list(results))
        try:
            if self.control is None:
                return bool(await _maybe_await(should_stop(state)))
            return await self._should_stop(state)
        except _Abort:
            raise
        except (Exception, asyncio.CancelledError) as exc:
            if not failed(exc):
                raise
            self.log.warning("should_stop raised; the run goes on: %s", message_of(exc))
        return False

    async def _should_stop(self, state: TurnState) -> bool:
        """``should_stop`` in a task an abort interrupts (a session run), as a summariser: one
        that hangs never holds an abort (review6a)."""
        should_stop = self.o.should_stop
        assert should_stop is not None

        async def decide() -> bool:
            return bool(await _maybe_await(should_stop(state)))

        return await self._unheld(decide)

    async def _unheld(self, call: Callable[[], Awaitable[T]]) -> T:
        """``await call()`` in a task an abort interrupts (a session run): user code that hangs
        never holds an abort (review6a, review7a)."""

        async def work(i: int, _: None, put: Callable[[Any], None]) -> T:
            return await call()

        async with contextlib.aclosing(self._interruptible(work, 0, None)) as items:
            async for item in items:
                return cast(T, item)
        raise AssertionError("the call gave no answer")  # pragma: no cover

    async def _budget_spent(self) -> AsyncGenerator[AgentEvent, None]:
        """The token budget ran out with tool calls pending (answered with errors above):
        persist the well-formed turn and raise, as the iteration budget does (rule 6)."""
        yield FinalResponse(self.last_text, self.iterations, path=self.path)
        async for event in self._persist(None):
            yield event
        raise TokenBudgetError(self.o.max_run_tokens or 0, self.usage.total_tokens)

    async def _run_budget_spent(
        self, spent: BudgetExceededError
    ) -> AsyncGenerator[AgentEvent, None]:
        """A run-wide budget refused the next model call (the last tool batch, if any, is
        closed): persist the well-formed turn with a note and raise, as the iteration budget
        does (rule 6). Before, nothing was stored: a tool that ran (a refund) was in the error's
        ``run_result`` and not in the conversation, and a retry from memory ran it again."""
        self.iterations -= 1  # the refused call was counted when its turn began, never made
        yield FinalResponse(self.last_text, self.iterations, path=self.path)
        note = Message(
            Role.ASSISTANT,
            [TextBlock(f"[The agent stopped: {spent}.]")],
            metadata={SYNTHETIC_METADATA_KEY: "budget"},
        )
        self.new_messages.append(note)  # in the result as in storage: one record
        async for event in self._persist(note):
            yield event
        raise spent

    async def _exhausted(self) -> AsyncGenerator[AgentEvent, None]:
        """Budget exhausted (rule 6): report, persist a well-formed turn, raise."""
        o = self.o
        yield FinalResponse(self.last_text, o.max_iterations, path=self.path)
        note = f"[The agent stopped after {o.max_iterations} iterations without a final answer." + (
            f" Last thought: {self.last_text}]" if self.last_text else "]"
        )
        final = Message(
            Role.ASSISTANT, [TextBlock(note)], metadata={SYNTHETIC_METADATA_KEY: "max_iterations"}
        )
        self.new_messages.append(final)  # in the result as in storage: one record
        async for event in self._persist(final):
            yield event
        raise MaxIterationsError(o.max_iterations, self.last_text)

    async def _aborted(self, messages: list[Message]) -> AsyncGenerator[AgentEvent, None]:
        """End an aborted run: keep the partial answer, close every open call, persist, report."""
        kept = self._close_open(messages, "aborted")
        if kept is not None:
            yield MessageEnd(
                self._shown().message(kept), StopReason.ABORTED, Usage(), path=self.path
            )
        abandoned, self._abandoned = self._abandoned, []
        for result in abandoned:  # a live stream shows every call's end, an aborted one too
            yield ToolExecutionEnd(self._shown().result(result), path=self.path)
        self.stop_reason = StopReason.ABORTED
        last = self.new_messages[-1] if self.new_messages else None
        yield (
            TurnEnd(
                max(self.iterations - 1, 0),
                Message(Role.ASSISTANT) if last is None else self._shown().message(last),
                [],
                path=self.path,
            )
        )
        async for event in self._persist(None):  # the trace only: no long-term write
            yield event
        self.result = self._finish(None)
        yield AgentEnd(self.result, path=self.path)
