"""A live conversation with an agent: stream it, steer it, queue follow-ups, abort, continue.

:class:`Session` wraps an :class:`~goagent_py.Agent` with a transcript (loaded from and stored to
the agent's short-term memory when it has one), two queues and an abort lever::

    session = Session(agent)
    task = asyncio.create_task(session.prompt("Refactor the parser"))
    session.steer("Keep the public names")       # taken after the current tool batch
    session.follow_up("Then write the changelog") # taken when the run would stop
    session.abort("after_tools")                  # or "now", "after_turn"
    result = await task                           # result.stop_reason is ABORTED

The drain points (a contract, see docs/architecture.md "Sessions"): steering messages are taken
before the first model call, after every batch of tool results, and again after context
preparation; follow-ups only when the run would otherwise stop. ``steer``, ``follow_up`` and
``abort`` are safe from another thread or task while a run streams. A steer into an idle
session starts nothing: it waits for the next prompt (or :meth:`Session.continue_`).

An aborted run is a state, not an exception: it ends with ``TurnEnd`` and ``AgentEnd``, its
result's ``stop_reason`` is ``ABORTED``, the partial answer is kept, and every tool call without
a result gets an error result, so the transcript (and what is stored) is always valid for the
next request. Cancelling the task that runs a prompt still raises ``CancelledError``; the
transcript stays well-formed then too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, overload, runtime_checkable

from goagent_py._cancel import failed, stray
from goagent_py._closing import Closing
from goagent_py._control import AbortMode, QueueMode, RunControl
from goagent_py._loop import Run
from goagent_py._prompt import to_messages
from goagent_py._record_hold import record_hold
from goagent_py._transcript import (
    SYNTHETIC_METADATA_KEY,
    UI_ONLY_KEY,
    closing_tail,
    repair_transcript,
    waiting_at,
)
from goagent_py.agent import _UNSET, Agent, Prompt
from goagent_py.approvals import ToolDecision, decision_hint, pending_of, record_of
from goagent_py.errors import ApprovalPendingError, ConfigurationError, SessionBusyError
from goagent_py.events import AbortRequested, AgentEnd, AgentEvent, CompactionEvent, QueueUpdate
from goagent_py.messages import Message, Role, TextBlock, ToolCall
from goagent_py.results import PendingCall, RunResult
from goagent_py.tools import Tool


@runtime_checkable
class _CompactsNow(Protocol):
    """A ``transform_context`` that compacts on request: a :class:`~goagent_py.memory.Compactor`.
    (The session is core; the compactor is memory, a layer above: docs/architecture.md.)"""

    async def compact_now(self, messages: list[Message], *, focus: str = "") -> object: ...

    @property
    def events(self) -> Sequence[CompactionEvent]: ...


__all__ = ["Session", "SessionState"]

_log = logging.getLogger("goagent_py.session")

Subscriber = Callable[[AgentEvent], object]


RunOut = TypeVar("RunOut")


@dataclass(slots=True, frozen=True)
class SessionState:
    """A snapshot of a session.

    Attributes:
        running: whether a run is in progress.
        streaming_message: the assistant text streamed so far in the current model call.
        pending_tool_calls: the calls of the current batch that have no result yet.
        steering: messages waiting in the steering queue.
        follow_ups: messages waiting in the follow-up queue.
        last_error: the error the last run ended with, or None.
        messages: how many messages the transcript holds.
    """

    running: bool
    streaming_message: str
    pending_tool_calls: list[ToolCall]
    steering: int
    follow_ups: int
    last_error: BaseException | None
    messages: int
    last_result: RunResult | None = field(default=None, repr=False)


def _as_message(message: str | Message) -> Message:
    if isinstance(message, str):
        return to_messages(message, "steer()")[0]
    if not isinstance(message, Message) or message.role is not Role.USER:
        raise ConfigurationError("queue a str or a user Message")
    return to_messages(message, "steer()")[0]  # checked as a prompt is (an empty one refused)


class Session:
    """A stateful conversation around an agent (see the module docstring).

    Args:
        agent: the agent that answers. Its short-term memory, if any, holds the transcript.
        steering_mode: take steering messages "one_at_a_time" (default) or "all" at once.
        follow_up_mode: the same for follow-ups.

    A prompt while a run is in progress raises :class:`SessionBusyError`: steer it, queue a
    follow-up, or abort it instead.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        steering_mode: QueueMode = "one_at_a_time",
        follow_up_mode: QueueMode = "one_at_a_time",
    ) -> None:
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"Session() takes an Agent, got {type(agent).__name__}")
        for name, mode in (("steering_mode", steering_mode), ("follow_up_mode", follow_up_mode)):
            if mode not in ("one_at_a_time", "all"):
                raise ConfigurationError(f"{name}={mode!r}: use 'one_at_a_time' or 'all'")
        self.agent = agent
        self._control = RunControl(
            steering_mode=steering_mode, follow_up_mode=follow_up_mode, on_change=self._queued
        )
        # With short-term memory, storage is the record and this is its projection, reloaded
        # after every change (never extended by hand: issue 28); without one, this list is the
        # record itself.
        self._transcript: list[Message] = []
        self._loaded = False
        self._busy = False  # set before the first await of a run: one run at a time
        self._run: Run | None = None
        self._subscribers: list[Subscriber] = []
        self._last_error: BaseException | None = None
        self._last_result: RunResult | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # The run's hold on its stored conversation (the storage's ``hold_run``), released when
        # the run settles: another Session over the same record is refused meanwhile.
        self._held: contextlib.AsyncExitStack | None = None

    # -- transcript --------------------------------------------------------------------------

    @property
    def transcript(self) -> list[Message]:
        """The conversation so far (a copy): with short-term memory, every stored message but
        the compaction boundaries (UI-only messages and what a summary covers included), as
        this session last read it (at :meth:`load`, and after each of its own runs and
        changes). Another session's writes to the same record show after the next
        :meth:`load` or run (docs/sessions.md "One run per stored conversation")."""
        return list(self._transcript)

    @property
    def loaded(self) -> bool:
        """Whether :attr:`transcript` is the record's projection: loaded (by :meth:`load` or the
        first run) and read back after every run and change since (a failed read back clears
        it; the next run loads again)."""
        return self._loaded

    @property
    def pending(self) -> list[PendingCall]:
        """The calls that wait for decisions (``resume(...)`` takes them), read from the
        transcript; empty when nothing waits."""
        at = waiting_at(self._transcript)
        return [] if at < 0 else pending_of(self._transcript[at])[1]

    async def load(self) -> list[Message]:
        """Load the transcript from the agent's short-term memory (done before the first run).

        A stored transcript that ends in tool calls without results (a crash in the middle of
        a batch, written by an older version) is repaired: the missing error results are
        appended to storage, so what is stored and what is shown stay one record.
        """
        memory = self.agent.options.short_term_memory
        if memory is not None:
            stored = await record_of(memory)
            closing = closing_tail(stored)
            if closing:
                try:
                    async with self._holding(refused_ok=True) as holding:
                        # Calls without results while another Session's run holds the record
                        # are its calls, still running: that run closes them, not this load.
                        if holding:
                            await memory.append(*closing)
                            stored = await record_of(memory)
                except asyncio.CancelledError as exc:
                    if (error := stray(exc, "short-term memory")) is None:
                        raise
                    raise error from exc
            self._transcript = stored
        self._loaded = True
        return self.transcript

    async def reopen(self) -> bool:
        """Go on with the file now at its path when the short-term memory's file was deleted
        or replaced since its storage opened it (a backup restored over it): the storage
        reopens (``SQLiteStorage.reopen``) and the transcript is loaded from the file now
        there. For a turn boundary, with no run going on: the chat, the coding session and
        the served chat call it before each turn (docs/sessions.md "Session ids and the file
        under the record").

        Returns:
            True if the session went over to the file now at the path (its transcript read
            from it), False if the file is the one opened (or the memory keeps no file).

        Raises:
            SessionBusyError: a run is going on.
            MemoryStoreError: the file now there cannot be read; the next run loads again.
        """
        self._ensure_idle("reopen()")
        storage = getattr(self.agent.options.short_term_memory, "storage", None)
        reopen = getattr(storage, "reopen", None)
        if reopen is None:
            return False
        # The look first (a stat, here); the reopen (in a worker thread) only when the file
        # changed: a served turn would pay for that hop every time (issue 36).
        replaced = getattr(storage, "replaced", None)
        if (replaced is not None and not replaced()) or not await reopen():
            return False
        self._loaded = False  # a failed load below leaves the next run to load again
        await self.load()
        return True

    async def _history(self) -> list[Message]:
        """What the next run starts from: the model's view of the record (the latest compaction
        boundary and what follows it, through the memory's window), or the session's list."""
        memory = self.agent.options.short_term_memory
        if memory is None:
            return list(self._transcript)
        stored = await memory.messages()
        # Another process may have died with calls open since this session loaded: closed in
        # the record, as load() does, not only in what this run sends (review6a).
        closing = closing_tail(stored)
        if closing:
            await memory.append(*closing)
            stored += closing
        return repair_transcript(stored, "interrupted")

    async def _reload(self) -> None:
        """Project the record again after a run or a change (storage wins, always)."""
        memory = self.agent.options.short_term_memory
        if memory is None:
            return
        try:
            self._transcript = await record_of(memory)
        except Exception as exc:  # the run's own outcome is what the caller gets
            _log.warning("reloading the transcript from short-term memory failed: %s", exc)
            self._loaded = False  # the next run loads it again

    async def reset(self) -> None:
        """Forget the conversation: clear the transcript, the queues and (if it can) memory."""
        self._ensure_idle("reset()")
        memory = self.agent.options.short_term_memory
        clear = getattr(memory, "clear", None)
        if callable(clear):
            async with self._holding():  # not under another Session's run
                await clear()
        self._transcript = []
        self._control.clear()

    # -- configuration between runs ----------------------------------------------------------

    def set_agent(self, agent: Agent) -> None:
        """Answer with another agent from the next run on (other model, prompt, tools...)."""
        self._ensure_idle("set_agent()")
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"set_agent() takes an Agent, got {type(agent).__name__}")
        self.agent = agent

    def set_model(self, model: str) -> None:
        """Use ``model`` from the next run on."""
        self.set_agent(self.agent.replace(model=model))

    def set_system_prompt(self, prompt: str) -> None:
        """Use ``prompt`` as the system prompt from the next run on."""
        self.set_agent(self.agent.replace(system_prompt=prompt))

    def set_thinking(self, budget_tokens: int | None) -> None:
        """Extended thinking with this budget from the next run on (None: off)."""
        self.set_agent(self.agent.replace(thinking=budget_tokens))

    def set_tools(self, tools: Sequence[Tool]) -> None:
        """Offer exactly these tools from the next run on."""
        self.set_agent(self.agent.replace(tools=list(tools)))

    async def compact_now(self, focus: str = "") -> CompactionEvent | None:
        """Compact the conversation now (``/compact``), with an optional focus for the summary.

        The agent's ``transform_context`` must be a :class:`~goagent_py.memory.Compactor`; the
        transcript stays whole and the compactor persists its boundary in short-term memory.

        Raises:
            ConfigurationError: the agent has no compactor.
        """
        self._ensure_idle("compact_now()")
        compactor = self.agent.options.transform_context
        if not isinstance(compactor, _CompactsNow):
            raise ConfigurationError(
                "compact_now(): the agent has no compactor; pass "
                "transform_context=Compactor(...) to the Agent"
            )
        if not self._loaded:
            await self.load()
        async with self._holding():  # the boundary goes in no other Session's run
            await compactor.compact_now(await self._history(), focus=focus)
        await self._reload()
        return compactor.events[-1] if compactor.events else None

    async def add_ui_message(self, message: Message) -> None:
        """Keep a message in the transcript for the UI only: it is stored (in short-term memory
        too), never sent to the model (``metadata["goagent.ui_only"] = True`` marks it)."""
        self._ensure_idle("add_ui_message()")
        if not self._loaded:
            await self.load()
        message.metadata[UI_ONLY_KEY] = True
        memory = self.agent.options.short_term_memory
        if memory is None:
            self._transcript.append(message)
            return
        async with self._holding():  # not inside another Session's run
            await memory.append(message)
        await self._reload()

    # -- queues and abort (thread-safe) ------------------------------------------------------

    def steer(self, message: str | Message) -> None:
        """Queue a message to inject into the current run at its next drain point."""
        self._control.push("steering", _as_message(message))

    def follow_up(self, message: str | Message) -> None:
        """Queue a message to process when the current run would otherwise stop."""
        self._control.push("follow_up", _as_message(message))

    @property
    def steering_queue(self) -> list[Message]:
        """The queued steering messages (a copy)."""
        return self._control.peek()[0]

    @property
    def follow_up_queue(self) -> list[Message]:
        """The queued follow-up messages (a copy)."""
        return self._control.peek()[1]

    def clear_queues(self, queue: Literal["steering", "follow_up"] | None = None) -> None:
        """Drop queued messages (both queues when ``queue`` is None)."""
        self._control.clear(queue)

    def abort(self, mode: AbortMode = "now", *, reason: str = "") -> None:
        """Stop the current run: "now", "after_tools" (let running tools finish) or
        "after_turn" (let the model's reply and its tools finish). A no-op when idle."""
        if mode not in ("now", "after_tools", "after_turn"):
            raise ConfigurationError(f"abort({mode!r}): use 'now', 'after_tools' or 'after_turn'")
        if not self._busy:
            return
        # Busy covers the start of a run too (history load, MCP connection): the run checks
        # the lever before its first model call, so an early abort is never dropped.
        self._control.abort(mode, reason)
        self._publish_on_loop(AbortRequested(mode, reason))

    # -- observation -------------------------------------------------------------------------

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Call ``subscriber(event)`` for every event of every run; returns the unsubscribe.
        A subscriber that raises is logged and never breaks the run."""
        self._subscribers.append(subscriber)
        return lambda: self._subscribers.remove(subscriber)

    @property
    def state(self) -> SessionState:
        """A snapshot: running or idle, what streams, pending calls, queue sizes, last error."""
        run = self._run
        steering, follow_ups = self._control.sizes()
        return SessionState(
            running=run is not None,
            streaming_message=run.streaming_message if run is not None else "",
            pending_tool_calls=list(run.pending_calls) if run is not None else [],
            steering=steering,
            follow_ups=follow_ups,
            last_error=self._last_error,
            messages=len(self._transcript) + (len(run.new_messages) if run is not None else 0),
            last_result=self._last_result,
        )

    def _publish(self, event: AgentEvent) -> None:
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except (Exception, asyncio.CancelledError) as exc:
                if not failed(exc):  # the run's own cancellation (goagent_py/_cancel.py)
                    raise
                _log.exception("session subscriber %r raised; the run goes on", subscriber)

    def _queued(self, queue: str, size: int) -> None:
        self._publish_on_loop(QueueUpdate(queue, size))  # type: ignore[arg-type]

    def _publish_on_loop(self, event: AgentEvent) -> None:
        """Publish from any thread: subscribers are called on the session's loop."""
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is not None and running is not loop and not loop.is_closed():
            loop.call_soon_threadsafe(self._publish, event)
        else:
            self._publish(event)

    # -- runs --------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _holding(self, *, refused_ok: bool = False) -> AsyncGenerator[bool, None]:
        """Hold the stored conversation for a write outside a run (``add_ui_message``, a
        reset, a compaction, a load's repair); within this session's own run it is held
        already. Yields whether it is held (False only with ``refused_ok``, when another
        Session's run holds it).

        Raises:
            SessionBusyError: another Session's run holds the conversation (unless
                ``refused_ok``).
        """
        hold = self._hold_of()
        if hold is None or self._held is not None:
            yield True
            return
        try:
            held = hold()
            await held.__aenter__()
        except SessionBusyError:
            if not refused_ok:
                raise
            yield False
            return
        try:
            yield True
        except BaseException as exc:
            await held.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        await held.__aexit__(None, None, None)

    def _hold_of(self) -> Callable[[], contextlib.AbstractAsyncContextManager[object]] | None:
        """The hold of the stored conversation (docs/sessions.md "One run at a time"): the one
        a bare run of the agent takes too (:func:`~goagent_py._record_hold.record_hold`), or
        None without short-term memory."""
        return record_hold(self.agent.options.short_term_memory)

    async def _hold(self) -> None:
        """Take the run's hold on its stored conversation (released by :meth:`_settle`)."""
        hold = self._hold_of()
        if hold is None:
            return
        stack = contextlib.AsyncExitStack()
        await stack.enter_async_context(hold())
        self._held = stack

    def _ensure_idle(self, what: str) -> None:
        if self._busy:
            raise SessionBusyError(
                f"{what}: the session is running; steer(), follow_up() or abort() it, or wait "
                "for the run to end"
            )

    @overload
    async def prompt(self, prompt: Prompt, *, deps: Any = None) -> RunResult[Any]: ...
    @overload
    async def prompt(
        self, prompt: Prompt, *, output_type: type[RunOut], deps: Any = None
    ) -> RunResult[RunOut]: ...
    @overload
    async def prompt(
        self, prompt: Prompt, *, output_type: object, deps: Any = None
    ) -> RunResult[Any]: ...
    async def prompt(
        self, prompt: Prompt, *, output_type: object = _UNSET, deps: Any = None
    ) -> RunResult[Any]:
        """Run the agent on ``prompt`` in this conversation and return the result.

        Args:
            prompt: as :meth:`Agent.run`.
            output_type: this prompt's output type, instead of the agent's
                (``result.output`` has it; the conversation keeps the answer's JSON).
            deps: this run's request-scoped dependencies, as :meth:`Agent.run`.

        Raises:
            SessionBusyError: a run is in progress.
            ProviderError, MaxIterationsError, MemoryStoreError, OutputValidationError: as
                :meth:`Agent.run`.
        """
        async for event in self.stream(prompt, output_type=output_type, deps=deps):
            del event
        assert self._last_result is not None
        return self._last_result

    async def continue_(self, *, output_type: object = _UNSET, deps: Any = None) -> RunResult:
        """Resume from the transcript without a new prompt (after an abort, an error, a crash).

        If the transcript ends with a user message or tool results, the model is called; if it
        ends with the assistant's answer, queued steering, then follow-ups, are taken as the
        next prompt; with nothing queued, an answer cut off (an abort, a cancel, a failed
        stream) or the iteration budget's note is followed by a prompt asking the model to go on.

        Args:
            output_type: the run's output type, instead of the agent's (as :meth:`prompt`:
                give the type the stopped prompt asked for to get it again).
            deps: the run's request-scoped dependencies, as :meth:`prompt` (a run has its own;
                the stopped one's are not kept).

        Raises:
            ConfigurationError: the transcript is empty, or ends with a complete answer and
                nothing is queued.
            ApprovalPendingError: tool calls wait for decisions (:meth:`resume`); the queues
                are left as they were.
        """
        async for event in self.stream_continue(output_type=output_type, deps=deps):
            del event
        assert self._last_result is not None
        return self._last_result

    async def resume(
        self, decisions: Mapping[str, ToolDecision], *, deps: Any = None
    ) -> RunResult[Any]:
        """Go on with a run that stopped on calls waiting for decisions (see
        :meth:`Agent.resume` for the decisions and the errors).

        Raises:
            SessionBusyError: a run is in progress.
            NotPendingError, ApprovalConflictError, ApprovalExpiredError: as
                :meth:`Agent.resume`.
        """
        async for event in self.stream_resume(decisions, deps=deps):
            del event
        assert self._last_result is not None
        return self._last_result

    def stream_resume(
        self, decisions: Mapping[str, ToolDecision], *, deps: Any = None
    ) -> AsyncGenerator[AgentEvent, None]:
        """Like :meth:`resume`, yielding the run's events as they happen."""
        # The run's own generator, claiming the session at its first step as a generator of
        # this method did (issue 36: a layer of its own cost ~46,000 instructions a turn).
        return self._go(None, decisions, deps=deps, claim="resume()")

    def stream(
        self, prompt: Prompt, *, output_type: object = _UNSET, deps: Any = None
    ) -> AsyncGenerator[AgentEvent, None]:
        """Like :meth:`prompt`, yielding the run's events as they happen."""
        return self._go(prompt, output_type=output_type, deps=deps, claim="prompt()")

    async def stream_continue(
        self, *, output_type: object = _UNSET, deps: Any = None
    ) -> AsyncGenerator[AgentEvent, None]:
        """Like :meth:`continue_`, yielding the run's events as they happen."""
        self._claim("continue_()")
        try:
            if not self._loaded:
                await self.load()
            if not self._transcript:
                raise ConfigurationError("continue_(): the transcript is empty; use prompt(...)")
            # Before any queue is taken: a queued message would be lost to the refusal.
            at = waiting_at(self._transcript)
            if at >= 0:
                hint = decision_hint(pending_of(self._transcript[at])[1])
                raise ApprovalPendingError(
                    f"continue_(): the last tool calls wait for decisions; {hint} goes on"
                )
            prompt: list[Message] | None = None
            if self._transcript[-1].role is Role.ASSISTANT:
                prompt = self._control.take_steering() or self._control.take_follow_ups()
                prompt = prompt or _going_on(self._transcript[-1])
                if not prompt:
                    raise ConfigurationError(
                        "continue_(): the transcript ends with the assistant's answer and no "
                        "message is queued; prompt(...) or steer(...)/follow_up(...) first"
                    )
        except BaseException:
            self._busy = False
            raise
        async with Closing(self._go(prompt, output_type=output_type, deps=deps)) as events:
            async for event in events:
                yield event

    def _claim(self, what: str) -> None:
        """Mark the session busy before anything awaits: two prompts started together (say,
        under ``asyncio.gather``) cannot both pass the check, and an abort that lands while
        the run starts (history load, MCP connection) is kept, not reset."""
        self._ensure_idle(what)
        self._busy = True
        self._loop = asyncio.get_running_loop()
        self._control.abort_mode = None
        self._control.abort_reason = ""

    async def _go(
        self,
        prompt: Prompt | None,
        decisions: Mapping[str, ToolDecision] | None = None,
        output_type: object = _UNSET,
        deps: Any = None,
        *,
        claim: str = "",
    ) -> AsyncGenerator[AgentEvent, None]:
        """The run's events. ``claim``: the method to claim the session for first (at the
        generator's first step, before anything that its end would undo; ``prompt`` is then
        checked, for a prompt, as that method's)."""
        if claim:
            if prompt is not None:
                prompt = to_messages(prompt, claim)
            self._claim(claim)
        run: Run | None = None
        settled = False
        self._last_error = None
        try:
            # First: a second Session over this record is refused before it reads or writes.
            await self._hold()
            if not self._loaded:
                await self.load()
            if decisions is not None:
                run = await self.agent.start_resume(
                    decisions,
                    streaming=True,
                    control=self._control,
                    history=await self._history(),
                    deps=deps,
                )
            else:
                run = await self.agent.start_run(
                    prompt,
                    streaming=True,
                    control=self._control,
                    history=await self._history(),
                    output_type=output_type,
                    deps=deps,
                )
            self._run = run
            async with Closing(run.events()) as events:
                async for event in events:
                    self._publish(event)
                    if isinstance(event, AgentEnd) and not event.path:
                        # The run is over and stored: settle before the consumer sees its end,
                        # so one that stops reading here (a natural place) leaves the session
                        # idle and its transcript current, not busy until the stream is closed.
                        settled = True
                        await self._settle(run)
                    yield event
        except BaseException as exc:
            self._last_error = exc
            raise
        finally:
            if not settled:
                await self._settle(run)

    async def _settle(self, run: Run | None) -> None:
        """The end of a run: the transcript from the record, the result, the session idle."""
        if run is not None:
            if self.agent.options.short_term_memory is None:
                self._transcript = repair_transcript(
                    self._transcript + run.new_messages, "interrupted"
                )
            else:
                await self._reload()
            self._last_result = run.result
        held, self._held = self._held, None
        self._run = None
        self._busy = False
        if held is not None:
            await held.aclose()
        self._control.abort_mode = None


_CONTINUE_PROMPT = (
    'Your answer was cut off after: "{tail}". Go on from there, without repeating what you '
    "already wrote."
)
"""What :meth:`Session.continue_` asks after an answer cut off (an abort, a cancel, a failed
stream): models do not resume a message of their own; they continue what they are shown."""

_GO_ON_PROMPT = "You stopped at the iteration limit before a final answer. Go on with the task."
"""What :meth:`Session.continue_` asks after a run stopped by its iteration budget."""


def _going_on(last: Message) -> list[Message]:
    """The prompt that goes on from ``last``, a stop's synthetic message: an answer cut off
    (its text kept) or the iteration budget's note; none after a complete answer (review7a:
    ``continue_`` refused both although the task was unfinished)."""
    kind = last.metadata.get(SYNTHETIC_METADATA_KEY)
    if kind in ("aborted", "interrupted", "failed") and last.text.strip():
        tail = " ".join(last.text.split()[-12:])
        return [Message(Role.USER, [TextBlock(_CONTINUE_PROMPT.format(tail=tail))])]
    if kind == "max_iterations":
        return [Message(Role.USER, [TextBlock(_GO_ON_PROMPT)])]
    return []
