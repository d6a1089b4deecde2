"""What a running tool can know about its call, and how it reports progress.

A tool's ``execute(args)`` keeps its plain signature; the call's context travels in a context
variable that the loop sets in the call's own task (a sync tool's worker thread copies it)::

    @tool
    async def index(folder: str) -> str:
        ctx = current_tool_context()
        for i, path in enumerate(files(folder)):
            ...
            if ctx is not None:
                ctx.report({"done": i + 1})    # a ToolExecutionUpdate event, not sent to the model
        return "indexed"

Outside a run (a tool called directly, in a test) :func:`current_tool_context` returns None.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from goagent_py import _deps
from goagent_py.messages import Message, ToolCall, Usage
from goagent_py.results import PendingCall

__all__ = ["ToolContext", "ToolResume", "current_tool_context"]

D = TypeVar("D")


def _drop(_: Any) -> None:
    return None


def _no_messages() -> Sequence[Message]:
    return ()


_MAKING = threading.Lock()


class _CancelEvent(threading.Event):
    """A :class:`threading.Event` whose lock and condition are made on first use.

    Each tool call gets one and almost none is ever set or waited on; a ``threading.Event``
    builds a ``Condition`` and a lock at once, a measurable share of a run's cost (issue 36).
    Same semantics: the flag is written under the condition, read without it.
    """

    def __init__(self) -> None:
        self._flag = False
        self._cond: threading.Condition | None = None

    def _condition(self) -> threading.Condition:
        cond = self._cond
        if cond is None:
            with _MAKING:  # two threads at once make one condition
                if self._cond is None:
                    self._cond = threading.Condition(threading.Lock())
                cond = self._cond
        return cond

    def _at_fork_reinit(self) -> None:
        if self._cond is not None:
            self._cond._at_fork_reinit()  # type: ignore[attr-defined]

    def set(self) -> None:
        cond = self._condition()
        with cond:
            self._flag = True
            cond.notify_all()

    def clear(self) -> None:
        with self._condition():
            self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        cond = self._condition()
        with cond:
            signaled = self._flag
            if not signaled:
                signaled = cond.wait(timeout)
            return signaled


@dataclass(slots=True, frozen=True)
class ToolResume:
    """What a tool that made its run wait (:meth:`ToolContext.wait_for`) gets when the run is
    resumed: the loop calls it again, with the same call, and this in ``ctx.resumed``.

    Attributes:
        state: the JSON the tool gave to ``wait_for``.
        decisions: the decisions (``Approve``, ``Deny``, ``ToolOutput``) for the calls it
            listed, by the ids it listed them under.
    """

    state: Any
    decisions: Mapping[str, Any]


@dataclass(slots=True, frozen=True, kw_only=True)
class ToolContext:
    """The context of one tool call.

    Attributes:
        call: the call as the model made it (``call.id`` tells parallel calls apart).
        run_id: the id of the run the call belongs to.
        iteration: the 0-based iteration (model call) that asked for the tool.
        path: the names of the agents from the root run down to this one (empty at top level).
        reporter: where :meth:`report` sends updates (the loop sets it; a no-op by default).
        max_result_chars: the most characters a result that is not text (a dict, a list, an
            iterator...) is serialised to; None means the default (100,000). The loop sets the
            agent's ``max_tool_result_chars``.
        usage_sink: where :meth:`add_usage` sends tokens (the loop sets it; a no-op by default).
        messages_source: what :meth:`transcript` reads (the loop sets it; empty by default).
        outcome: what :meth:`set_details` and :meth:`terminate` recorded for the result.
        deps: the run's request-scoped dependencies (``agent.run(prompt, deps=...)``), or None.
        cancel_event: set when the call is abandoned (see :attr:`cancelled`).
        can_wait: whether the run can stop for :meth:`wait_for` (the agent's loop can; a
            durable activity cannot).
        resumed: when the run resumed a call that waited (:meth:`wait_for`), its state and
            the decisions; None otherwise.
        conversations: the stored conversations of the run and the runs it is part of (an
            agent used as a tool): a sub-agent whose short-term memory keeps one of them is
            refused (the loop sets it; empty by default).
    """

    call: ToolCall
    run_id: str = ""
    iteration: int = 0
    path: tuple[str, ...] = ()
    reporter: Callable[[Any], None] = field(default=_drop, repr=False)
    max_result_chars: int | None = None
    usage_sink: Callable[[Usage], None] = field(default=_drop, repr=False)
    messages_source: Callable[[], Sequence[Message]] = field(default=_no_messages, repr=False)
    outcome: dict[str, Any] = field(default_factory=dict, repr=False)
    deps: Any = field(default=None, repr=False)
    cancel_event: threading.Event = field(default_factory=_CancelEvent, repr=False)
    can_wait: bool = False
    resumed: ToolResume | None = field(default=None, repr=False)
    conversations: frozenset[Hashable] = field(default=frozenset(), repr=False)

    def deps_as(self, kind: type[D]) -> D:
        """The run's deps, typed: ``current_tool_context().deps_as(MyDeps).db``.

        Raises:
            TypeError: the run's deps are not a ``kind`` (the message names both).
        """
        return _deps.deps_as(self.deps, kind)

    @property
    def cancelled(self) -> bool:
        """Whether the call was abandoned: the run was aborted or cancelled, or the call timed
        out. A sync tool runs on in its worker thread after that (a thread cannot be stopped
        from outside), so a long one polls this flag to stop early. Safe from any thread."""
        return self.cancel_event.is_set()

    @property
    def idempotency_key(self) -> str:
        """A key unique to this call of this run (``run_id:iteration:call_id``), stable across
        retries of the call, so a tool can de-duplicate external side effects."""
        return f"{self.run_id}:{self.iteration}:{self.call.id}"

    def set_details(self, details: Any) -> None:
        """Attach structured data to the call's result for UIs and logs (``ToolResult.details``);
        the model never sees it."""
        self.outcome["details"] = details

    def terminate(self) -> None:
        """Ask the run to stop after this batch (it stops when every call of the batch asks):
        the tool's result is the last thing the model produced an answer from."""
        self.outcome["terminate"] = True

    def wait_for(self, pending: Sequence[PendingCall], state: Any) -> None:
        """Stop the run after this batch until a person decides ``pending``, calls made
        inside this tool (an agent used as a tool does this for its own run's waiting calls).

        The run lists them under this call (``PendingCall.via``) and keeps ``state`` (JSON) in
        its record; what the tool returns now is dropped. On resume the loop calls the tool
        again with the same call and :attr:`resumed` set. Only when :attr:`can_wait`.
        """
        self.outcome["wait"] = (list(pending), state)

    def report(self, update: Any) -> None:
        """Report progress or a partial result; it reaches the run's events as a
        ``ToolExecutionUpdate`` (for UIs), never the model. Safe from a worker thread."""
        self.reporter(update)

    def add_usage(self, usage: Usage) -> None:
        """Add tokens spent on the call's behalf (a sub-agent's model calls) to the run's
        ``RunResult.usage``. Call it from the event loop's thread."""
        self.usage_sink(usage)

    def transcript(self) -> list[Message]:
        """The run's conversation so far (as kept, before any ``transform_context``), up to
        and including the assistant message that made this call (its results are not in yet).
        A copy."""
        return list(self.messages_source())


class _LazyContext:
    """A call's :class:`ToolContext`, made when someone first asks for it (issue 36: most tools
    never do, and a context of thirteen fields is a measurable share of a run). Every ask in the
    call's task, its worker thread and the tasks it starts gets the same context."""

    __slots__ = ("args", "made", "make", "max_result_chars")

    def __init__(
        self, make: Callable[..., ToolContext], max_result_chars: int | None, *args: Any
    ) -> None:
        self.make = make
        self.args = args
        self.made: ToolContext | None = None
        # What the context will say, known without making it (every result is sized by it).
        self.max_result_chars = max_result_chars

    def get(self) -> ToolContext:
        made = self.made
        if made is None:
            with _MAKING:  # a sync tool's thread and the loop ask at once: one context
                made = self.made
                if made is None:
                    made = self.made = self.make(*self.args)
        return made


_current: ContextVar[ToolContext | _LazyContext | None] = ContextVar(
    "goagent_tool_context", default=None
)


def _result_chars() -> int | None:
    """The running call's ``max_result_chars``, without making its context."""
    ctx = _current.get()
    return None if ctx is None else ctx.max_result_chars


def _fresh_attempt() -> None:
    """Forget what an earlier attempt of the running call recorded (:meth:`ToolContext.set_details`,
    ``terminate``, ``wait_for``): the result of a retried call is its last attempt's. A context
    nobody made yet has nothing to forget (and is not made here)."""
    ctx = _current.get()
    made = ctx.made if isinstance(ctx, _LazyContext) else ctx
    if made is not None:
        made.outcome.clear()


def current_tool_context() -> ToolContext | None:
    """The context of the tool call running in this task or thread, or None outside one."""
    ctx = _current.get()
    if type(ctx) is _LazyContext:
        return ctx.get()
    return ctx  # type: ignore[return-value]
