"""The runnable shape every orchestration node shares, its result, its events and its errors.

A node is an :class:`~goagent_py.Agent`, an orchestration (:class:`Flow`), or a plain async
function ``async (input: str) -> str``; :class:`Node` names one and gives it an input mapping
and a retry policy. Every node run ends in a :class:`FlowResult`, so patterns nest freely.

Nodes pass text to each other; a typed agent (``output_type=``) passes its output as JSON, and
its typed value is the node's ``FlowResult.output``. Every run of a flow also has one
:class:`FlowState`, shared by all its nodes (nested flows included): each node's output under
its name, and the artifacts nodes put there, all plain JSON data so a durable run could
checkpoint it; a node reaches it with :func:`current_flow_state`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import inspect
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from goagent_py._closing import Closing, scoped
from goagent_py._describe import described
from goagent_py._flow_frames import enter_frame, leave_frame
from goagent_py._prompt import to_messages
from goagent_py._recall import PROVENANCE_KEY
from goagent_py._record_hold import record_hold
from goagent_py.agent_tool import _PROMPT_SCHEMA
from goagent_py.budget import Budget, BudgetExceededError, active_budgets
from goagent_py.errors import (
    ApprovalPendingError,
    ConfigurationError,
    GoAgentError,
    InvalidInputError,
    ToolArgumentsError,
    ToolBlockedError,
)
from goagent_py.events import AgentEvent
from goagent_py.messages import ContentBlock, Message, Role, StopReason, TextBlock, Usage
from goagent_py.resilience import RetryPolicy
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import ToolDefinition, validate_tool_name

if TYPE_CHECKING:
    from goagent_py.agent import Agent
    from goagent_py.results import RunResult

__all__ = [
    "Flow",
    "FlowEvent",
    "FlowResult",
    "FlowState",
    "MaxStepsError",
    "Node",
    "NodeEnd",
    "NodeStart",
    "NodeTimeoutError",
    "OrchestrationError",
    "Runnable",
    "Step",
    "StepFailedError",
    "current_flow_state",
]

T = TypeVar("T")

AsyncFn: TypeAlias = Callable[[str], Awaitable[str]]
Runnable: TypeAlias = "Agent | Flow | AsyncFn"
"""What a node runs: an agent, an orchestration, or ``async (input: str) -> str``."""


# -- results -----------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class Step:
    """One leaf run (an agent run or a function call) inside an orchestration.

    Attributes:
        path: the node names from the root orchestration down to this node.
        text: what it returned ("" on failure).
        usage: the tokens it used (sub-agents included).
        iterations: model calls it made (0 for a function).
        duration: seconds it took.
        error: what it failed with, or None.
        output: a typed agent's validated output (``text`` is its JSON), else None.
    """

    path: tuple[str, ...]
    text: str
    usage: Usage = field(default_factory=Usage)
    iterations: int = 0
    duration: float = 0.0
    error: BaseException | None = None
    output: Any = None


@dataclass(slots=True, frozen=True)
class FlowResult:
    """What any node returns: its output and what getting it cost.

    ``str(result)`` is the output text.

    Attributes:
        text: the output.
        usage: tokens summed over every agent run inside (sub-agents included, and the failed
            attempts of a retried node).
        iterations: model calls of the agent runs the flow started itself (its nodes, failed
            attempts included); the calls of their sub-agents (``as_tool``, a coordinating
            :class:`Supervisor`'s members) are in ``usage`` and the budget, not here.
        duration: seconds the node took.
        steps: every leaf run inside, in the order they finished.
        trace: the names of the direct children run, in order (a graph's path, a loop's rounds,
            a router's choice).
        outputs: the last output of each direct child, by name.
        errors: the errors of direct children that failed without failing the whole
            (``Parallel(fail_fast=False)``), by name.
        state: a :class:`Graph`'s final state (plain data), else None.
        messages: for :class:`Handoffs`, the whole conversation, every agent's turns in order;
            for another pattern, the conversations of the :class:`Handoffs` inside, in order.
        output: the typed output behind ``text`` (a typed agent's, or the last node's of a
            pattern whose text is that node's), else None.
        flow_state: the run's :class:`FlowState` (on the result of ``run``/``stream``).
    """

    text: str
    usage: Usage = field(default_factory=Usage)
    iterations: int = 0
    duration: float = 0.0
    steps: tuple[Step, ...] = ()
    trace: tuple[str, ...] = ()
    outputs: Mapping[str, str] = field(default_factory=dict)
    errors: Mapping[str, BaseException] = field(default_factory=dict)
    state: Any = None
    messages: tuple[Message, ...] = ()
    output: Any = None
    flow_state: FlowState | None = None

    def __str__(self) -> str:
        return self.text


def _plain(value: Any, what: str) -> Any:
    """``value`` as plain JSON data (a pydantic model or dataclass dumped), or a
    ConfigurationError saying what was not."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    from pydantic_core import PydanticSerializationError, to_jsonable_python

    try:
        plain = to_jsonable_python(value)
        json.dumps(plain)
    except (PydanticSerializationError, TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"{what}: a {type(value).__name__} is not plain data ({exc}); a flow's state holds "
            "JSON data (str, numbers, lists, dicts, pydantic models, dataclasses)"
        ) from None
    return plain


@dataclass(slots=True)
class FlowState:
    """The state one run of a flow shares between its nodes, as plain JSON data.

    Attributes:
        outputs: each node's last output by its path below the root ("draft", or
            "review/check" in a nested flow): a typed agent's output as JSON data (a dict for
            a pydantic model), else its text.
        artifacts: what nodes put with :meth:`put` (JSON data), by name.
    """

    outputs: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, Any] = field(default_factory=dict)

    def put(self, name: str, value: Any) -> None:
        """Keep ``value`` (JSON data, a pydantic model or a dataclass: stored as JSON data)
        under ``name`` for the nodes after this one.

        Raises:
            ConfigurationError: ``name`` is not a non-empty str, or ``value`` is not plain data.
        """
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"FlowState.put: name must be a non-empty str, got {name!r}")
        self.artifacts[name] = _plain(value, f"FlowState.put({name!r})")

    def output_as(self, name: str, kind: type[T]) -> T:
        """The output of node ``name``, validated back into ``kind`` (a pydantic model...).

        Raises:
            KeyError: no node of that name has run (the message lists those that have).
            pydantic.ValidationError: the output does not fit ``kind``.
        """
        if name not in self.outputs:
            raise KeyError(f"no output named {name!r}; the outputs are {sorted(self.outputs)}")
        return _validate(self.outputs[name], kind)

    def artifact_as(self, name: str, kind: type[T]) -> T:
        """The artifact ``name``, validated back into ``kind``.

        Raises:
            KeyError: no artifact of that name (the message lists those there are).
        """
        if name not in self.artifacts:
            raise KeyError(f"no artifact {name!r}; the artifacts are {sorted(self.artifacts)}")
        return _validate(self.artifacts[name], kind)

    def to_dict(self) -> dict[str, Any]:
        """The state as one JSON-ready dict (a checkpoint)."""
        return {"outputs": dict(self.outputs), "artifacts": dict(self.artifacts)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FlowState:
        """The state a :meth:`to_dict` checkpoint holds."""
        return cls(dict(data.get("outputs", {})), dict(data.get("artifacts", {})))


def _validate(value: Any, kind: type[T]) -> T:
    from pydantic import TypeAdapter

    return TypeAdapter(kind).validate_python(value)


_flow_state: contextvars.ContextVar[FlowState | None] = contextvars.ContextVar(
    "goagent_flow_state", default=None
)


def current_flow_state() -> FlowState | None:
    """The state of the flow run this code runs in (a node, or a tool of an agent node), or
    None outside a flow."""
    return _flow_state.get()


@contextlib.contextmanager
def _state_scope() -> Any:
    """The running flow's state, or a new one for a root run (set for the run's duration)."""
    state = _flow_state.get()
    if state is not None:
        yield state
        return
    state = FlowState()
    with scoped(_flow_state, state):
        yield state


_flow_deps: contextvars.ContextVar[Any] = contextvars.ContextVar("goagent_flow_deps", default=None)


def flow_deps() -> Any:
    """The deps of the flow run this code runs in (``flow.run(..., deps=...)``, or the deps of
    the run that called the flow as a tool), or None."""
    return _flow_deps.get()


@contextlib.contextmanager
def _deps_scope(deps: Any, *, inherit: bool = True) -> Any:
    """``deps`` as the deps of every agent run inside (None with ``inherit``: those around
    it, if any)."""
    if deps is None and inherit:
        yield
        return
    with scoped(_flow_deps, deps):
        yield


def combine(
    text: str,
    parts: list[tuple[str, FlowResult]],
    start: float,
    *,
    errors: Mapping[str, BaseException] | None = None,
    state: Any = None,
    failed: Sequence[FlowResult] = (),
) -> FlowResult:
    """The result of a pattern from its children's ``(name, result)`` in the order they ran.

    ``failed``: what children that failed did before they failed (their errors' ``partial``);
    their usage, model calls, steps and messages count, though they have no output.
    """
    done = [r for _, r in parts] + list(failed)
    usage = Usage()
    for r in done:
        usage = usage + r.usage
    last = parts[-1][1] if parts else None
    return FlowResult(
        text=text,
        usage=usage,
        iterations=sum(r.iterations for r in done),
        duration=time.perf_counter() - start,
        steps=tuple(s for r in done for s in r.steps),
        trace=tuple(n for n, _ in parts),
        outputs={n: r.text for n, r in parts},
        errors=dict(errors or {}),
        state=state,
        messages=tuple(m for r in done for m in r.messages),
        output=last.output if last is not None and last.text == text else None,
    )


def partial_of(error: BaseException) -> FlowResult | None:
    """What the node that failed with ``error`` had done (its ``partial``), or None."""
    partial = getattr(error, "partial", None)
    return partial if isinstance(partial, FlowResult) else None


def failed_partial(
    error: BaseException,
    parts: list[tuple[str, FlowResult]],
    start: float,
    *,
    state: Any = None,
    cut: Sequence[FlowResult] = (),
) -> FlowResult:
    """The ``partial`` a pattern ended by ``error`` sets: its finished children, plus what the
    failing child had done (its own ``partial``, nested flows and the agent that ran out
    included), so no level of a nested run loses what a deeper one spent, plus ``cut``: what
    children cancelled because of it had spent."""
    failed = partial_of(error)
    spent = [*(() if failed is None else (failed,)), *cut]
    return combine("", parts, start, state=state, failed=spent)


def attach_partial(error: BaseException, partial: FlowResult) -> None:
    """Set ``partial`` on ``error``, of whatever type (a pattern's own callback may raise any
    exception: it keeps its type, and what the flow spent goes with it). An exception that
    refuses new attributes is raised without it."""
    with contextlib.suppress(AttributeError, TypeError):
        error.partial = partial  # type: ignore[attr-defined]


# -- errors ------------------------------------------------------------------------------------


class OrchestrationError(GoAgentError):
    """Base of the errors an orchestration run ends with.

    Attributes:
        partial: what the orchestration did before it failed (a :class:`FlowResult`); not
            pickled.
    """

    partial: FlowResult | None = None

    def _reduce_with(self, *args: Any, **kwargs: Any) -> Any:
        fn, rebuild_args, state = super()._reduce_with(*args, **kwargs)
        if state is not None:
            state = {k: v for k, v in state.items() if k != "partial"} or None
        return fn, rebuild_args, state


class StepFailedError(OrchestrationError):
    """A node failed; ``__cause__`` (and ``cause``) is what it failed with.

    Attributes:
        path: the node names from the root down to the node that failed.
        cause: the node's error.
    """

    def __init__(self, path: tuple[str, ...], cause: BaseException) -> None:
        self.path = tuple(path)
        self.cause = cause
        super().__init__(f"node {'/'.join(self.path)!r} failed: {described(cause)}")
        self.__cause__ = cause

    def __reduce__(self) -> Any:
        return self._reduce_with(self.path, self.cause)


class MaxStepsError(OrchestrationError):
    """A graph or loop ran out of steps; ``taken`` is the path of node names it ran.

    Attributes:
        max_steps: the limit.
        taken: the node names run, in order.
        where: the graph or loop's path.
    """

    def __init__(self, max_steps: int, taken: tuple[str, ...], where: tuple[str, ...] = ()) -> None:
        self.max_steps = max_steps
        self.taken = tuple(taken)
        self.where = tuple(where)
        label = "/".join(self.where) or "flow"
        super().__init__(
            f"{label!r} stopped after {max_steps} steps without finishing; "
            f"path taken: {' -> '.join(self.taken)}"
        )

    def __reduce__(self) -> Any:
        return self._reduce_with(self.max_steps, self.taken, self.where)


class NodeTimeoutError(OrchestrationError):
    """A node ran past its ``Node(..., timeout=...)`` and was cancelled (a node failure: its
    retry policy may retry it, and it reaches you wrapped in :class:`StepFailedError`).

    Attributes:
        path: the node's path.
        timeout: the node's timeout in seconds.
    """

    def __init__(self, path: tuple[str, ...], timeout: float) -> None:
        self.path = tuple(path)
        self.timeout = timeout
        super().__init__(f"node {'/'.join(self.path)!r} ran past its {timeout:g}s timeout")

    def __reduce__(self) -> Any:
        return self._reduce_with(self.path, self.timeout)


# -- events ------------------------------------------------------------------------------------


@dataclass(slots=True)
class NodeStart:
    """A node starts with ``input``; ``path`` names it from the root orchestration."""

    input: str
    path: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(slots=True)
class NodeEnd:
    """A node ended: ``result`` on success, ``error`` on failure (treat as read-only)."""

    result: FlowResult | None
    error: BaseException | None = None
    path: tuple[str, ...] = field(default=(), kw_only=True)


FlowEvent: TypeAlias = NodeStart | NodeEnd | AgentEvent
"""What an orchestration streams: node starts and ends, and the events of every agent inside
(``path`` says where; an agent's own events carry its node path)."""


# -- running nodes -----------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class Scope:
    """Where a node runs: its path and where events go (None: nobody listens)."""

    path: tuple[str, ...] = ()
    emit: Callable[[Any], None] | None = None

    def child(self, name: str) -> Scope:
        return Scope((*self.path, name), self.emit)


class Flow:
    """Base of every orchestration: run it, stream it, or use it as a node of another.

    Subclasses implement :meth:`_invoke`.
    """

    name: str = "flow"
    # A run of it is a workflow (an ``invoke_workflow`` span with goagent_py.otel); False for a
    # flow that only stands for one agent node (MappedDeps).
    _workflow: bool = True

    async def _invoke(self, input: str, scope: Scope) -> FlowResult:
        raise NotImplementedError

    async def _call(self, input: str, scope: Scope) -> FlowResult:
        """One run of this flow (what every caller runs, :meth:`_invoke` inside a frame that
        telemetry can open the workflow's span for: goagent_py/_flow_frames.py)."""
        if not self._workflow:
            return await self._invoke(input, scope)
        frame, token = enter_frame(self.name, input, self._hook_sets)
        try:
            result = await self._invoke(input, scope)
        except GeneratorExit:  # a run dropped unclosed (goagent_py._closing): no end here
            raise
        except BaseException as exc:
            try:
                frame.end(None, exc)
            finally:
                leave_frame(frame, token)
            raise
        leave_frame(frame, token)
        frame.end(result.text, None)
        return result

    def _hook_sets(self) -> list[Any]:
        """The hook sets of the agents this flow holds, at any depth (its nodes, the flows
        among them, what a pattern built from them), for telemetry to open the flow's span
        with their tracer as the flow starts (goagent_py/_flow_frames.py)."""
        from goagent_py.agent import Agent

        found: list[Any] = []
        seen: set[int] = set()
        pending: list[Any] = [self]
        while pending:
            item = pending.pop()
            if id(item) in seen:
                continue
            seen.add(id(item))
            if isinstance(item, Agent):
                found.extend(item._options.hook_sets)
            elif isinstance(item, Node):
                pending.append(item.runnable)
            elif isinstance(item, Flow):
                pending.extend(reversed(list(vars(item).values())))
            elif isinstance(item, list | tuple):
                pending.extend(reversed(item))
            elif isinstance(item, dict):
                pending.extend(reversed(list(item.values())))
        return found

    def as_tool(self, *, name: str, description: str) -> FlowTool:
        """This orchestration as a tool an agent's model can call with a ``prompt`` (see
        the same contract as :func:`~goagent_py.agent_tool.as_tool`)."""

        return FlowTool(self, name=name, description=description)

    async def run(
        self, input: str, *, budget: Budget | None = None, deps: Any = None
    ) -> FlowResult:
        """Run the orchestration on ``input`` (drawing from ``budget``, or the active one).

        ``deps`` are the deps of every agent run inside, at any depth (their tools read them
        as ``current_tool_context().deps``, sub-agents called as tools get them too); None:
        the deps of the run this flow runs in (a flow called as a tool), if any.

        Raises:
            InvalidInputError: ``input`` is empty (all whitespace): nothing runs.
            BudgetExceededError: the run-wide budget ran out.
            StepFailedError: a node failed (``path`` names it, ``partial`` holds what was done).
            MaxStepsError: a graph or loop ran past its limit.
        """
        to_messages(input, f"{type(self).__name__}.run()")  # the one prompt rule
        with (
            _user_input_scope(input),
            _state_scope() as state,
            _deps_scope(deps),
            budget if budget is not None else contextlib.nullcontext(),
        ):
            result = await self._call(input, Scope((self.name,)))
        return dataclasses.replace(result, flow_state=state)

    async def stream(
        self, input: str, *, budget: Budget | None = None, deps: Any = None
    ) -> AsyncIterator[FlowEvent]:
        """Run on ``input`` yielding every event as it happens, from the root's
        :class:`NodeStart` to its :class:`NodeEnd` (whose ``result`` is the run's); raises what
        :meth:`run` raises, with ``budget`` and ``deps`` as :meth:`run` takes them.
        Closing the iterator early cancels the run."""
        to_messages(input, f"{type(self).__name__}.stream()")  # the one prompt rule
        queue: asyncio.Queue[Any] = asyncio.Queue()
        done = object()
        scope = Scope((self.name,), queue.put_nowait)

        async def body() -> FlowResult:
            try:
                return await self._call(input, scope)
            finally:
                queue.put_nowait(done)

        with (
            _user_input_scope(input),
            _state_scope() as state,
            _deps_scope(deps),
            budget if budget is not None else contextlib.nullcontext(),
        ):
            task = asyncio.create_task(body())  # the task copies the context: budget, state
        try:
            yield NodeStart(input, path=scope.path)
            while (item := await queue.get()) is not done:
                yield item
            result = dataclasses.replace(await task, flow_state=state)
            yield NodeEnd(result, path=scope.path)
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task


class Node:
    """A runnable with a name, an optional input mapping, retry policy and timeout.

    Args:
        runnable: an agent, an orchestration, or ``async (input: str) -> str``.
        name: the node's name in paths (default: the agent's or flow's name, or the function's).
        input: maps what the node receives to its input (in a :class:`Graph`, it receives the
            state dict instead of a string).
        retry: retry a failing node (cancellation is never retried).
        timeout: seconds each attempt of the node may take; past it the node is cancelled and
            fails with :class:`NodeTimeoutError` (None: no limit but the budget's wall time).
    """

    __slots__ = ("input", "name", "retry", "runnable", "timeout")

    def __init__(
        self,
        runnable: Runnable,
        *,
        name: str | None = None,
        input: Callable[[Any], str] | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> None:
        from goagent_py.agent import Agent

        if isinstance(runnable, Node):
            raise ConfigurationError("Node(...) takes an agent, a flow or a function, not a Node")
        if not isinstance(runnable, Agent | Flow) and not callable(runnable):
            raise ConfigurationError(
                "a node must be an Agent, an orchestration or an async function "
                f"(input: str) -> str, got {type(runnable).__name__}"
            )
        if input is not None and not callable(input):
            raise ConfigurationError("Node input must be a function")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigurationError(f"Node retry must be a RetryPolicy, got {retry!r}")
        self.runnable = runnable
        self.name = name or _default_name(runnable)
        if not isinstance(self.name, str) or not self.name or "/" in self.name:
            raise ConfigurationError(f"invalid node name {self.name!r}")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise ConfigurationError(
                f"Node {self.name!r}: timeout must be a positive number of seconds or None, "
                f"got {timeout!r}"
            )
        self.input = input
        self.retry = retry
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"Node({self.name!r})"


def _default_name(runnable: Runnable) -> str:
    from goagent_py.agent import Agent

    if isinstance(runnable, Agent):
        return runnable.name or "agent"
    if isinstance(runnable, Flow):
        return runnable.name
    return str(getattr(runnable, "__name__", "") or type(runnable).__name__)


def as_nodes(items: Any, where: str, *, number_repeats: bool = False) -> list[Node]:
    """Nodes from runnables, nodes or a ``{name: runnable}`` dict; names must be unique, or
    with ``number_repeats`` a repeated default name gets a suffix ("refine", "refine-2")."""
    if isinstance(items, Mapping):
        nodes = [
            v if isinstance(v, Node) and v.name == k else _named(v, k) for k, v in items.items()
        ]
    else:
        nodes = [v if isinstance(v, Node) else Node(v) for v in items]
    seen: set[str] = set()
    for i, n in enumerate(nodes):
        if n.name in seen and number_repeats and not isinstance(items[i], Node):
            count = 2
            while f"{n.name}-{count}" in seen:
                count += 1
            n = nodes[i] = _named(n, f"{n.name}-{count}")
        if n.name in seen:
            raise ConfigurationError(
                f"{where}: two nodes are named {n.name!r}; name them with Node(..., name=...)"
            )
        seen.add(n.name)
    return nodes


def _named(value: Any, name: str) -> Node:
    if isinstance(value, Node):
        return Node(
            value.runnable, name=name, input=value.input, retry=value.retry, timeout=value.timeout
        )
    return Node(value, name=name)


async def run_node(node: Node, received: Any, scope: Scope) -> FlowResult:
    """Run ``node`` (mapping ``received`` to its input, retrying by its policy) under ``scope``.

    Raises:
        StepFailedError: the node failed (after its retries).
    """
    here = scope.child(node.name)
    text = node.input(received) if node.input is not None else received
    if not isinstance(text, str):
        raise ConfigurationError(
            f"node {'/'.join(here.path)!r} got a {type(text).__name__} as input; "
            "give it Node(..., input=...) that returns a str"
        )
    for budget in active_budgets():
        budget.check()
    if here.emit is not None:
        here.emit(NodeStart(text, path=here.path))
    attempt = 0
    spent: list[FlowResult] = []  # what the failed attempts did: it was spent, it counts
    while True:
        attempt += 1
        try:
            result = await _run_bounded(node, text, here)
        except ConfigurationError:
            raise  # misuse: never retried or wrapped
        except BudgetExceededError as exc:
            # The whole run is out of budget: never retried or wrapped, but what this node
            # spent (earlier attempts included) goes with it.
            if spent:
                exc.partial = _with_earlier(partial_of(exc) or FlowResult(""), spent)
            raise
        except Exception as exc:
            policy = node.retry
            # The policy judges what the node failed with, not the wrapper naming the node.
            cause = exc.cause if isinstance(exc, StepFailedError) else exc
            if (
                policy is not None
                and attempt < policy.max_attempts
                and (policy.retryable is None or policy.retryable(cause))
            ):
                spent.extend(p for p in (partial_of(exc),) if p is not None)
                await policy.sleep(policy.delay(attempt, cause))
                continue
            if here.emit is not None:
                here.emit(NodeEnd(None, exc, path=here.path))
            # already names the node that failed, deepest first; else name this node
            failure = exc if isinstance(exc, StepFailedError) else StepFailedError(here.path, exc)
            done = partial_of(exc)
            if done is not None or spent:
                failure.partial = _with_earlier(done or FlowResult(""), spent)
            if failure is exc:
                raise
            raise failure from exc
        if spent:
            result = _with_earlier(result, spent)
        state = _flow_state.get()
        if state is not None:
            value = result.output if result.output is not None else result.text
            state.outputs["/".join(here.path[1:])] = _plain(value, f"node {here.path!r} output")
        if here.emit is not None:
            here.emit(NodeEnd(result, path=here.path))
        return result


# The text of the flow run that is the user's own words: the input of the outermost run made
# outside any tool call (a flow called as a tool, or inside one, has none: a model wrote it).
_said_by_user: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "goagent_flow_said_by_user", default=None
)


@contextlib.contextmanager
def _user_input_scope(input: str) -> Iterator[None]:
    outer = _said_by_user.get()
    said = outer if outer is not None else (input if current_tool_context() is None else "")
    with scoped(_said_by_user, said):
        yield


def agent_prompt(text: str) -> str | list[Message]:
    """An agent node's prompt: ``text`` as it is when it is the user's input to the flow, else
    one user message recorded as an agent's text (another node's output, a task a model wrote,
    a prompt the flow built): long-term memory never takes it for the user's statement."""
    said = _said_by_user.get()
    if said is not None and text == said:
        return text
    return [Message(Role.USER, [TextBlock(text)], metadata={PROVENANCE_KEY: "assistant"})]


# Every leaf run (an agent's, a function's) records what it spent in each enclosing tally (a
# node attempt bounded in time, a Parallel branch): a task that is cancelled returns nothing, so
# what it had spent before (its agent's run_result is set even then) is read from its tally.
_tallies: contextvars.ContextVar[tuple[list[FlowResult], ...]] = contextvars.ContextVar(
    "goagent_flow_tallies", default=()
)


@contextlib.contextmanager
def tally() -> Iterator[list[FlowResult]]:
    """A list every leaf run inside records its result (or what it spent) in."""
    spent: list[FlowResult] = []
    with scoped(_tallies, (*_tallies.get(), spent)):
        yield spent


def _record(result: FlowResult) -> FlowResult:
    for spent in _tallies.get():
        spent.append(result)
    return result


def _with_earlier(result: FlowResult, earlier: list[FlowResult]) -> FlowResult:
    """``result`` with the usage, model calls and steps of a node's failed earlier attempts
    added (what a retried node spent in all)."""
    if not earlier:
        return result
    usage = result.usage
    for r in earlier:
        usage = usage + r.usage
    return dataclasses.replace(
        result,
        usage=usage,
        iterations=result.iterations + sum(r.iterations for r in earlier),
        steps=(*(s for r in earlier for s in r.steps), *result.steps),
    )


async def _run_bounded(node: Node, text: str, scope: Scope) -> FlowResult:
    """One attempt of ``node``, cancelled at its timeout or when an active budget's wall time
    is up, whichever comes first (a node is not let run to its end past either)."""
    timed = [(b.remaining_seconds(), b) for b in active_budgets() if b.max_seconds is not None]
    first = min(timed, key=lambda pair: pair[0] or 0.0, default=None)  # the soonest out
    budget = None if first is None else first[1]
    left = None if first is None else first[0]
    bounds = [b for b in (node.timeout, left) if b is not None]
    if not bounds:
        return await _run_once(node.runnable, text, scope)
    bound = min(bounds)
    start = time.perf_counter()
    with tally() as spent:
        try:
            async with asyncio.timeout(bound) as limit:
                return await _run_once(node.runnable, text, scope)
        except TimeoutError:
            if not limit.expired():
                raise  # the node's own TimeoutError, not ours
            error: BudgetExceededError | NodeTimeoutError
            if budget is not None and budget.max_seconds is not None and bound == left:
                error = BudgetExceededError("seconds", budget.max_seconds, round(budget.elapsed, 3))
            else:
                assert node.timeout is not None
                error = NodeTimeoutError(scope.path, node.timeout)
            error.partial = combine("", [], start, failed=spent)  # what the cancelled run spent
            raise error from None


async def _run_once(runnable: Runnable, text: str, scope: Scope) -> FlowResult:
    from goagent_py.agent import Agent

    if isinstance(runnable, Flow):
        return await runnable._call(text, scope)
    start = time.perf_counter()
    if isinstance(runnable, Agent):
        return await _run_agent(runnable, text, scope, start)
    value: Any = runnable(text)
    if inspect.isawaitable(value):
        value = await value
    if isinstance(value, FlowResult):
        value = value.text
    if not isinstance(value, str):
        raise ConfigurationError(
            f"node {'/'.join(scope.path)!r} returned {type(value).__name__}; a function node "
            "returns a str"
        )
    duration = time.perf_counter() - start
    step = Step(scope.path, value, duration=duration)
    return _record(FlowResult(value, duration=duration, steps=(step,)))


async def _run_agent(agent: Agent, text: str, scope: Scope, start: float) -> FlowResult:
    # The node's stored conversation is held for its run as any run's is (two nodes running
    # one agent at once would interleave their turns in its record): the second is refused.
    hold = record_hold(agent.options.short_term_memory)
    if hold is None:
        return await _agent_node(agent, text, scope, start)
    async with hold():
        return await _agent_node(agent, text, scope, start)


async def _agent_node(agent: Agent, text: str, scope: Scope, start: float) -> FlowResult:
    run = await agent.start_run(
        agent_prompt(text), streaming=scope.emit is not None, path=scope.path, deps=flow_deps()
    )
    try:
        async with Closing(run.events()) as events:
            async for event in events:
                if scope.emit is not None:
                    scope.emit(event)
    except BudgetExceededError as exc:
        # The whole run is out of budget, not this node: raised as it is, with what the agent
        # spent before it ran out (its calls counted, its tokens charged) as its partial.
        r = run.result
        if r is not None:
            exc.partial = _record(failed_run(scope.path, r, exc))
        raise
    except Exception as exc:
        r = run.result
        if r is not None:
            wrapped = StepFailedError(scope.path, exc)
            wrapped.partial = _record(failed_run(scope.path, r, exc))
            raise wrapped from exc
        raise
    except asyncio.CancelledError as exc:
        if run.result is not None:  # set on cancellation too: what it spent goes in the tallies
            _record(failed_run(scope.path, run.result, exc))
        raise
    r = run.result
    assert r is not None
    waiting = still_waiting(agent.name, r)
    if waiting is not None:
        failed = StepFailedError(scope.path, waiting)
        failed.partial = _record(failed_run(scope.path, r, waiting))
        raise failed
    duration = time.perf_counter() - start
    output = r.output
    if output is None or isinstance(output, str):
        text, output = r.text, None
    else:  # a typed agent: the next node reads its output as JSON
        from pydantic_core import to_json

        text = to_json(output).decode()
    step = Step(scope.path, text, r.usage, r.iterations, duration, output=output)
    return _record(FlowResult(text, r.usage, r.iterations, duration, (step,), output=output))


def still_waiting(name: str, r: RunResult[Any]) -> ApprovalPendingError | None:
    """The error of an agent node whose run stopped on tool calls that wait for a person's
    decision (``StopReason.DEFERRED``): a flow does not pause for decisions, and the run's text
    is no answer to hand on (approve14). None for a run that ended otherwise. The wait stays
    in the agent's record, for a resume outside the flow."""
    if r.stop_reason is not StopReason.DEFERRED:
        return None
    calls = ", ".join(f"{p.name!r} ({p.id})" for p in r.pending) or "its tool calls"
    return ApprovalPendingError(
        f"agent {name or 'the agent'!r} stopped on {calls}, which wait for a person's "
        "decision; a flow does not pause for decisions, so it stops here. Resume the agent "
        "with them (agent.resume({call_id: Approve() or Deny(...)}), the calls in "
        "exc.partial or the agent's record), or give a flow's agents no approval rules"
    )


def failed_run(path: tuple[str, ...], r: RunResult[Any], error: BaseException) -> FlowResult:
    """What an agent node that failed with ``error`` had done: one failed step."""
    failed = Step(path, "", r.usage, r.iterations, r.duration, error)
    return FlowResult("", r.usage, r.iterations, r.duration, (failed,))


class MappedDeps(Flow):
    """An agent node whose runs get ``deps(the flow's deps)`` instead of the flow's own (a
    member given as ``as_tool(agent, deps=fn)`` that an orchestration runs as a node)."""

    _workflow = False  # one agent node, not a workflow

    def __init__(self, agent: Agent, deps: Callable[[Any], Any], *, name: str) -> None:
        self.agent = agent
        self.deps = deps
        self.name = name

    async def _invoke(self, input: str, scope: Scope) -> FlowResult:
        with scoped(_flow_deps, self.deps(_flow_deps.get())):
            return await _run_once(self.agent, input, scope)


# -- an orchestration as a tool ------------------------------------------------------------
# The orchestration counterpart of as_tool, with the same contract: the flow's usage rolls into
# the calling run's usage, its events reach the caller's stream as ToolExecutionUpdates with
# path = caller path + (name, node...), cancelling the caller cancels it, and a failure is an
# error result for the model.


# The flows whose runs, started through their tool, lead to the running code (FlowTool).
_FLOWS_RUNNING: contextvars.ContextVar[tuple[object, ...]] = contextvars.ContextVar(
    "goagent_flow_tool_running", default=()
)


class FlowTool:
    """A tool that runs an orchestration on the model's ``prompt`` (made by
    :meth:`Flow.as_tool <goagent_py.orchestration.Flow.as_tool>`)."""

    def __init__(self, flow: Flow, *, name: str, description: str) -> None:
        validate_tool_name(name)
        if not isinstance(description, str) or not description.strip():
            raise ConfigurationError(f"as_tool({name!r}) needs a description for the model")
        self.flow = flow
        self.name = name
        self._definition = ToolDefinition(name, description, _PROMPT_SCHEMA)

    @property
    def definition(self) -> ToolDefinition:
        """The definition shown to the model."""
        return self._definition

    async def execute(self, args: dict[str, Any]) -> list[ContentBlock]:
        """Run the flow on ``args["prompt"]``; its output is the result.

        Raises:
            ToolArgumentsError: no usable prompt.
            OrchestrationError: what the flow failed with (an error result for the model).
        """
        text = args.get("prompt")
        if not isinstance(text, str):
            raise ToolArgumentsError(self.name, "'prompt' must be a non-empty string")
        try:
            to_messages(text, "the call's prompt")  # the rule every run's prompt follows
        except InvalidInputError:
            raise ToolArgumentsError(self.name, "'prompt' must be a non-empty string") from None
        running = _FLOWS_RUNNING.get()
        if any(flow is self.flow for flow in running):
            # An agent of the flow calling the flow again: each level ran the next (as an
            # agent reaching itself through as_tool did, agent_tool._RUNNING).
            raise ToolBlockedError(
                self.name,
                "it runs a flow that is already running in this chain: a flow cannot be "
                "called from inside itself; answer with what you have",
            )
        with scoped(_FLOWS_RUNNING, (*running, self.flow)):
            return await self._execute(text)

    async def _execute(self, text: str) -> list[ContentBlock]:
        ctx = current_tool_context()
        if ctx is None:
            with _state_scope():
                result = await self.flow._call(text, Scope((self.name,)))
            return [TextBlock(result.text)]
        scope = Scope((*ctx.path, self.name), ctx.report)
        try:
            # The calling run's deps are the flow's agents' deps, as as_tool gives a child its
            # parent's.
            with _state_scope(), _deps_scope(ctx.deps, inherit=False):
                result = await self.flow._call(text, scope)
        except Exception as exc:
            partial = getattr(exc, "partial", None)
            if isinstance(partial, FlowResult):
                ctx.add_usage(partial.usage)
            raise
        ctx.add_usage(result.usage)
        return [TextBlock(result.text)]

    def __repr__(self) -> str:
        return f"FlowTool({self.name!r})"
