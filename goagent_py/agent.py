"""The Agent: a model, tools and memory around one ReAct loop."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Hashable,
    Mapping,
    MutableMapping,
    Sequence,
)
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Unpack, overload

from typing_extensions import TypeVar

from goagent_py._cancel import stray
from goagent_py._closing import Closing
from goagent_py._control import RunControl
from goagent_py._generation import expect_generation, generation_read
from goagent_py._interrupt import run_command
from goagent_py._loop import Resumed, Run
from goagent_py._metadata_keys import PENDING_KEY
from goagent_py._prompt import Prompt, to_messages
from goagent_py._record_hold import record_hold
from goagent_py._tool_servers import (
    JoinedTools,
    ServerTool,
    admit_outside_tools,
    sync_server_tools,
)
from goagent_py._transcript import holding_wait, waiting_at
from goagent_py.agent_tool import AgentTool, as_tool
from goagent_py.approvals import (
    ToolDecision,
    answered_at,
    answered_result,
    check_decisions,
    pending_of,
    record_of,
    reused_ids,
    settled,
    stale_token,
    waits_under,
)
from goagent_py.dispatch import Dispatcher
from goagent_py.errors import (
    ApprovalConflictError,
    ConfigurationError,
    GoAgentError,
    NotPendingError,
    SessionBusyError,
)
from goagent_py.events import AgentEnd, AgentEvent
from goagent_py.hooks import HookDispatcher
from goagent_py.memory.base import UpdatableMemory
from goagent_py.messages import (
    Message,
)
from goagent_py.options import (
    AgentOptions,
    AgentSettings,
    Option,
    build_options,
)
from goagent_py.results import RunResult
from goagent_py.tools import Tool, ToolDefinition, _name_of

if TYPE_CHECKING:
    from goagent_py.output import OutputSpec

__all__ = ["Agent", "Prompt"]

Deps = TypeVar("Deps", default=Any)
Out = TypeVar("Out", default=str)
RunOut = TypeVar("RunOut")
_UNSET: Any = object()


class _Default:
    """The default shown for each keyword in ``help(Agent)`` (None is a real value: "off")."""

    def __repr__(self) -> str:
        return "<default>"


class Agent(Generic[Deps, Out]):
    """An agent: a model that calls tools in a loop until it answers.

    Configure it with settings as keywords, or with ``with_*`` options (the same settings, for
    code that builds its configuration step by step); both are validated here, so a bad setting
    fails at construction, never in the middle of a run::

        agent = Agent(provider=provider, model="claude-sonnet-4-6", tools=[add])
        result = await agent.run("What is 2 + 3?")
        print(result.text)

    Scalar settings: the last given wins (options, then keywords). List-like settings (tools,
    hooks, dispatch middlewares, MCP connectors) accumulate. None means "off".

    The agent keeps no per-run state: concurrent runs are safe when its memory is.

    Args:
        provider: the model backend (required).
        model: the model name sent with every request.
        tools: the tools the model may call.
        system_prompt: the system prompt (it travels on the request, not as a message).
        instructions: functions ``(run: RunContext) -> str | None`` (sync or async) asked before
            each model call; their text joins the system prompt for that call (a dynamic
            system prompt: ``run.deps`` is the run's deps, ``run.messages`` the conversation).
        max_iterations: the most model calls one run may make (default 10).
        short_term_memory: the conversation, loaded before and appended after each run.
        long_term_memory: semantic memory recalled before each run and written after it.
        long_term_top_k: memories recalled per run (None: the memory's own ``top_k``).
        write_policy: what a finished turn leaves in long-term memory (default: everything).
        name: the agent's name; it namespaces its long-term memory.
        hooks: one or several :class:`Hooks` sets, all called.
        logger: where the agent logs.
        tool_timeout: seconds each tool call may take (None: no limit).
        circuit_breaker: a per-tool :class:`CircuitBreakerConfig` (None: off).
        dispatch_middlewares: custom middlewares around every tool call (first is outermost).
        thinking: an extended-thinking token budget (None: off).
        adaptive_thinking: extended thinking where the model decides the budget.
        effort: "low", "medium" or "high", for providers that support it.
        max_tokens: the output token limit per model call (None: the provider's default).
        short_term_trace_tools: store the tool trace in short-term memory (default True).
        mcp_connectors: connectors run on first use whose tools join the agent's.
        mcp_servers: MCP servers (``goagent_py.mcp``) whose tools join the agent's and are
            refreshed between turns when the server's list changes.
        before_tool_call: approve or block each call (return a reason to block).
        stop_on_denied: a call blocked by ``before_tool_call`` also ends the run.
        after_tool_call: see each result; return a replacement to override it.
        prepare_arguments: repair a call's raw arguments before validation.
        should_stop: asked after each turn with tool calls whether to stop there.
        prepare_turn: shape each request before it is sent (model, thinking, tools).
        tool_execution: "parallel" (default) or "sequential".
        sequential_tools: tools whose turns run sequentially.
        max_parallel_tools: at most this many calls of one turn at once (default 64; None: no
            limit), so a model that asks for 2,000 calls cannot start them all at once.
        max_run_tokens: a token budget for the run, checked after every model call (None: none).
        max_tool_result_chars: cut longer tool results, with a visible marker (default
            100 000; None: no cap).
        transform_context: rewrite the messages sent with each request.
        tool_retry: a :class:`RetryPolicy` for failed tool calls (None: no retry).
        rate_limit: a :class:`RateLimitConfig` for tool calls (None: no limit).
        output_type: the type of ``result.output`` (default ``str``, the text): a pydantic
            model, dataclass, TypedDict, ``list[...]``, a union or a ``Literal``; the answer is
            validated, and an invalid one sent back to the model (see docs/typed-output.md).
        deps_type: the type of the ``deps`` its runs take (for type checkers only:
            ``Agent(deps_type=Db, output_type=City)`` is an ``Agent[Db, City]``, whose
            ``run(..., deps=...)`` must get a ``Db``); default ``Any``.
        output_mode: "tool", "native" or "prompted" (None: the provider's default).
        output_retries: how many times an invalid output is sent back (default 1).
        input_guardrails: checks on the prompt before the first model call; one that trips
            ends the run with :class:`GuardrailTripped` (see :mod:`goagent_py.guardrails`).
        output_guardrails: checks on the final answer (typed output too); one that trips
            ends the run with :class:`GuardrailTripped`.
        requires_approval: ``policy(call, run)`` returning True for calls a person must
            decide (docs/approvals.md).
        approval_timeout: seconds a waiting call's decision may take (then only a denial).
        output_validators: functions run on the validated output; they may raise
            :class:`ModelRetry` with a message for the model.

    Raises:
        ConfigurationError: a setting is missing, of the wrong type or out of range; the
            message names the setting as it was written.
        TypeError: an unknown keyword (the message suggests the closest setting).
    """

    def __init__(
        self,
        *options: Option,
        output_type: type[Out] = str,  # type: ignore[assignment]  # Out defaults to str
        deps_type: type[Deps] = object,  # type: ignore[assignment]  # Deps defaults to Any
        **settings: Unpack[AgentSettings],
    ) -> None:
        # The keywords arrive as the dict of those given, which is what build_options reads: a
        # signature with every setting spelled out cost ~3 us per agent to sort given from not.
        # output_type is apart so a type checker binds Out to it (a union or a Literal, which
        # are not a type[...] to mypy, make an Agent[..., Any]).
        keywords: dict[str, Any] = dict(settings)
        if output_type is not str:
            keywords["output_type"] = output_type
        self._setup(build_options(options, keywords))

    def _setup(self, options: AgentOptions) -> None:
        self._options = options
        o = options
        self._tools: MutableMapping[str, Tool] = {_name_of(t): t for t in o.tools}
        self._connected = not (o.mcp_connectors or o.mcp_servers)
        self._connect_lock: asyncio.Lock | None = None
        self._closers: list[Callable[[], Awaitable[None]]] = []
        # The name clashes with tools from outside warned about, kept with the tools they left
        # out of: each is warned about once while it lasts, not at every sync between turns.
        self._clashes: set[tuple[str, str, str]] = set()
        # The agent whose tools, tool dispatch and MCP connections this one uses (see
        # :meth:`_sharing_tools`), or None: its own.
        self._origin: Agent[Any, Any] | None = None
        self._hook_dispatcher = HookDispatcher(o.hooks, o.logger)
        self._dispatcher = Dispatcher(
            self._tools,
            timeout=o.tool_timeout,
            circuit_breaker=o.circuit_breaker,
            retry=o.tool_retry,
            rate_limit=o.rate_limit,
            middlewares=o.dispatch_middlewares,
            logger=o.logger,
        )

    def replace(self, **settings: Unpack[AgentSettings]) -> Agent[Deps, Out]:
        """A new agent with these settings changed (the same keywords as the constructor).

        For switching model, system prompt, thinking or tools between runs (a
        :class:`~goagent_py.Session` takes the new agent with ``set_agent``). List-like settings
        given here replace the old lists rather than adding to them. The new agent has its own
        circuit breakers and rate limits.

        ``output_type`` is accepted too (the served app asks for a run's JSON schema so); a
        type checker still types the clone as this agent.

        Raises:
            ConfigurationError: a setting is invalid (the message names it as written).
            TypeError: an unknown setting.
        """
        unknown = set(settings) - _KEYWORDS - {"output_type"}
        if unknown:
            raise TypeError(f"Agent.replace() got unknown settings: {', '.join(sorted(unknown))}")
        base = dataclasses.replace(
            self._options,
            tools=[] if "tools" in settings else list(self._options.tools),
            hook_sets=[] if "hooks" in settings else list(self._options.hook_sets),
            dispatch_middlewares=[]
            if "dispatch_middlewares" in settings
            else list(self._options.dispatch_middlewares),
            mcp_connectors=list(self._options.mcp_connectors),
            mcp_servers=list(self._options.mcp_servers),
            sequential_tools=set(self._options.sequential_tools),
            instructions=[] if "instructions" in settings else list(self._options.instructions),
            output_validators=[]
            if "output_validators" in settings
            else list(self._options.output_validators),
            input_guardrails=[]
            if "input_guardrails" in settings
            else list(self._options.input_guardrails),
            output_guardrails=[]
            if "output_guardrails" in settings
            else list(self._options.output_guardrails),
            sources=dict(self._options.sources),
        )
        clone: Agent[Deps, Out] = Agent.__new__(Agent)
        clone._setup(build_options((), settings, base=base))
        return clone

    def _sharing_tools(
        self,
        *,
        client_tools: Sequence[Tool] = (),
        client: Hashable = None,
        **settings: Unpack[AgentSettings],
    ) -> Agent[Deps, Out]:
        """:meth:`replace` for one client of a served agent (an A2A context, an MCP session, an
        OpenAI-compatible request): these settings changed (its conversation's memory, its
        name, its output type), while its tools, their dispatch (circuit breakers, rate limits:
        one server's, whatever client calls) and its MCP connections stay this agent's own, one
        source of truth for every client (docs/a2a.md, "One conversation per client"). Closing
        the clone closes nothing. Only what differs is built: no tool table, no dispatcher, no
        copy of the settings it shares.

        ``client_tools`` are the client's own tools for the clone (an OpenAI client's
        functions), offered after this agent's; their calls count in breakers and rate limits
        of ``client``'s, kept by this agent across clones (one client's failures never open
        another client's circuit).

        Raises:
            ConfigurationError: a setting of the tools or of their dispatch was given, or a
                client tool is not a tool, has a duplicate name or one of this agent's.
        """
        kept = sorted(set(settings) & _TOOLING)
        if kept:
            raise ConfigurationError(
                f"a client's agent shares the served agent's tools and their dispatch: "
                f"{', '.join(kept)} cannot differ (use replace() for an agent of its own)"
            )
        unknown = set(settings) - _KEYWORDS - {"output_type"}
        if unknown:
            raise TypeError(f"Agent.replace() got unknown settings: {', '.join(sorted(unknown))}")
        origin = self._origin or self
        given = set(settings)
        # The lists given are replaced (as in replace()); the others are this agent's, shared
        # read-only (the options are never changed after construction).
        fresh: dict[str, Any] = {f: [] for k, f in _REPLACED_LISTS.items() if k in given}
        tools = self._options.tools
        if client_tools:
            AgentOptions.check_tools(client_tools)
            clash = sorted({_name_of(t) for t in client_tools} & set(origin._tools))
            if clash:
                raise ConfigurationError(
                    f"the client's tools {', '.join(clash)} have the names of the served "
                    "agent's own: rename them"
                )
            tools = [*tools, *client_tools]
        if "sequential_tools" in given:
            fresh["sequential_tools"] = set(self._options.sequential_tools)
        # Validated with every tool: what depends on them (a typed output's tool name, the
        # calls that wait for approval) is checked for the clone as it is.
        base = dataclasses.replace(
            self._options, sources=dict(self._options.sources), tools=tools, **fresh
        )
        options = build_options((), settings, base=base)
        clone: Agent[Deps, Out] = Agent.__new__(Agent)
        clone._options = options
        if client_tools:
            extra = {_name_of(t): t for t in client_tools}
            clone._tools = JoinedTools(origin._tools, extra)
            clone._dispatcher = origin._dispatcher.joined(extra, scope=client)
        else:
            clone._tools = origin._tools
            clone._dispatcher = origin._dispatcher
        clone._connected = origin._connected
        clone._connect_lock = None
        clone._closers = []
        clone._clashes = origin._clashes
        clone._origin = origin
        clone._hook_dispatcher = HookDispatcher(options.hooks, options.logger)
        return clone

    @property
    def options(self) -> AgentOptions:
        """The validated settings (read-only by convention)."""
        return self._options

    @property
    def name(self) -> str:
        """The agent's name ("" if none)."""
        return self._options.name

    @property
    def tools(self) -> list[Tool]:
        """The registered tools, in registration order (connector tools after local ones)."""
        return list(self._tools.values())

    def as_tool(
        self, *, name: str, description: str, **options: Any
    ) -> AgentTool[Agent[Deps, Out]]:
        """This agent as a tool another agent's model can call: see
        :func:`goagent_py.agent_tool.as_tool` for the options and what crosses the boundary."""
        return as_tool(self, name=name, description=description, **options)

    async def _connect(self) -> None:
        if self._connected:
            return
        if self._origin is not None:  # the served agent's connections, made once for all
            await self._origin._connect()
            self._connected = True
            return
        if self._connect_lock is None:
            self._connect_lock = asyncio.Lock()
        async with self._connect_lock:
            if self._connected:
                return
            added: list[tuple[str, Tool]] = []
            try:
                for i, connector in enumerate(self._options.mcp_connectors):
                    try:
                        tools, close = await connector()
                    except asyncio.CancelledError as exc:
                        # Its other failures fail the run: so does this one (_cancel.py).
                        if (error := stray(exc, "an MCP connector")) is None:
                            raise
                        raise error from exc
                    if close is not None:
                        self._closers.append(close)
                    for t in tools:
                        source = t.server_name if isinstance(t, ServerTool) else f"connector {i}"
                        added.append((source, t))
                for _, t in added:  # each must be a tool; a name clash only leaves it out
                    AgentOptions.check_tools([t])
            except BaseException:
                await self.aclose()
                raise
            self._tools.update(
                admit_outside_tools(
                    self._tools, added, log=self._options.logger, warned=self._clashes
                )
            )
            self._connected = True

    async def _sync_mcp(self) -> None:
        """Bring the MCP servers' tools up to date (never while a run's tool batch runs: the
        loop calls this between turns)."""
        if self._origin is not None:
            await self._origin._sync_mcp()
            return
        assert self._connect_lock is not None
        async with self._connect_lock:
            try:
                await sync_server_tools(
                    self._tools,
                    self._options.mcp_servers,
                    log=self._options.logger,
                    warned=self._clashes,
                )
            except asyncio.CancelledError as exc:
                # A GoAgentError, as a server's own failures are: the first run fails with it,
                # a refresh between turns logs it and keeps the tools (_cancel.py).
                if (error := stray(exc, "an MCP server")) is None:
                    raise
                raise error from exc

    async def _current_tools(self) -> list[ToolDefinition]:
        """The tool definitions for the next turn; a failed refresh keeps the previous ones."""
        try:
            await self._sync_mcp()
        except GoAgentError as exc:
            self._options.logger.warning("MCP tools not refreshed: %s", exc)
        return [t.definition for t in self._tools.values()]

    async def start_run(
        self,
        prompt: Prompt | None,
        *,
        streaming: bool,
        control: RunControl | None = None,
        history: list[Message] | None = None,
        path: tuple[str, ...] = (),
        output_type: object = _UNSET,
        deps: Any = None,
    ) -> Run:
        """The :class:`Run` of one prompt, not started (its ``events()`` runs it).

        For sessions and orchestration built on the agent; applications call :meth:`run`,
        :meth:`stream` or use a :class:`~goagent_py.Session`. ``prompt=None`` continues from
        ``history`` without a new user message; ``output_type`` overrides the agent's for
        this run.
        """
        output = (
            self._options.output
            if output_type is _UNSET or output_type is self._options.output_type
            else self._options.output_spec(output_type)
        )
        messages = [] if prompt is None else to_messages(prompt, "run()")
        if not self._connected:  # every run after the first: no coroutine to make (issue 36)
            await self._connect()
        if self._options.mcp_servers:
            await self._sync_mcp()  # the first run connects; a name clash raises here
        return self._new_run(messages, output, streaming, control, history, path, deps)

    def _new_run(
        self,
        messages: list[Message],
        output: OutputSpec[Any] | None,
        streaming: bool,
        control: RunControl | None,
        history: list[Message] | None,
        path: tuple[str, ...],
        deps: Any,
        *,
        resume: Resumed | None = None,
        answered: RunResult[Any] | None = None,
    ) -> Run:
        """A :class:`Run` of this agent (what :meth:`start_run` and :meth:`start_resume`
        return, once the agent is connected and its MCP tools are up to date). ``answered``:
        a retried resume's run, which runs nothing and so refreshes no tools."""
        return Run(
            self._options,
            self._dispatcher,
            self._hook_dispatcher,
            [t.definition for t in self._tools.values()],
            messages,
            streaming=streaming,
            control=control,
            history=history,
            path=path,
            refresh_tools=(
                self._current_tools if self._options.mcp_servers and answered is None else None
            ),
            output=output,
            deps=deps,
            resume=resume,
            answered=answered,
        )

    async def start_resume(
        self,
        decisions: Mapping[str, ToolDecision],
        *,
        streaming: bool,
        control: RunControl | None = None,
        history: list[Message] | None = None,
        path: tuple[str, ...] = (),
        deps: Any = None,
        now: float | None = None,
        matched: bool = False,
    ) -> Run:
        """The :class:`Run` that goes on with a conversation whose calls waited for
        ``decisions``, not started; the decisions are claimed before it is returned.

        The claim is a compare-and-set on the record: with short-term memory, on the stored
        message (:class:`~goagent_py.memory.base.UpdatableMemory`); without one, on the
        message object in ``history`` (in this process). Of two resumes of the same wait,
        the second raises :class:`ApprovalConflictError` and nothing of it runs. ``now`` is the
        time deadlines are checked against (default: the clock; a durable workflow passes its
        own, replay-safe). ``matched`` says the caller matched the decisions to this wait
        already (a parent run's resume passing its sub-agent's decisions on, a durable run
        whose validator checked them): a call whose id an earlier call of the conversation
        had is then not refused for a decision without the wait's token.
        """
        if not isinstance(decisions, Mapping):
            raise ConfigurationError(
                "resume() takes the decisions as a dict: {call_id: Approve() | Deny(...) | "
                f"ToolOutput(...)}}, got {type(decisions).__name__}"
            )
        decided = dict(decisions)
        memory = self._options.short_term_memory
        if history is None:
            if memory is None:
                raise ConfigurationError(
                    "resume(): this agent has no short-term memory, so pass the conversation: "
                    "resume(decisions, history=earlier_messages + result.messages)"
                )
            history = await memory.messages()
        history = list(history)
        # The read the decisions are based on (``history``: read above, or by the caller just
        # before) fences the claim, as a run's read fences its appends: a clear since, and a
        # refill with the same waiting message, refuse it (approve14). Reading the whole record
        # below must not move the fence to what it finds.
        storage = getattr(memory, "storage", None)
        base = generation_read(storage)
        stored: list[Message] | None = None
        if memory is not None and not matched:
            # Which calls wait is the record's to say, never a window's (approve15): a view
            # that cut the waiting turn off (or was read before it) is given that turn.
            stored = await record_of(memory)
            if base is not None:
                expect_generation(storage, base)
            history = holding_wait(history, stored)
        at = waiting_at(history)
        if not matched and (
            at < 0 or any(stale_token(d, pending_of(history[at])[0]) for d in decided.values())
        ):
            # Not for the wait now: maybe a retry of a resume that went through (approve14).
            answered = await self._answered(history, decided, streaming, control, path, deps)
            if answered is not None:
                return answered
        if at < 0:
            raise NotPendingError(
                "resume(): nothing in this conversation waits for a decision (its last run "
                "finished, or another resume went on with it); start a new run instead"
            )
        waiting = history[at]
        token, pending = pending_of(waiting)
        reused = set() if matched else _reused(history, at, stored)
        check_decisions(pending, decided, now=now, reused=reused)
        record = dict(waiting.metadata[PENDING_KEY])  # read before the claim replaces it
        if memory is not None:
            if not isinstance(memory, UpdatableMemory):
                raise ConfigurationError(
                    f"resume(): {type(memory).__name__} cannot update a stored message, which "
                    "deciding a waiting call needs; use ShortTermMemory with InMemoryStorage or "
                    "SQLiteStorage"
                )
            found = await memory.update_where(
                waits_under(token), lambda m: settled(m, token, decided)
            )
            if found is None and not matched:
                # Another resume claimed it first: this one's retry, or another decider's.
                answered = await self._answered(history, decided, streaming, control, path, deps)
                if answered is not None:
                    return answered
            if found is None:
                raise ApprovalConflictError(
                    "these calls were already decided by another resume (the first decision "
                    "wins); load the conversation again to see how it went on"
                )
            waiting = dataclasses.replace(waiting, metadata=found.metadata)
        else:
            # Claimed in place, before any await: a second resume in this process sees it.
            new = settled(waiting, token, decided)
            waiting.metadata.clear()
            waiting.metadata.update(new.metadata)
        history[at] = waiting
        await self._connect()
        if self._options.mcp_servers:
            await self._sync_mcp()
        resumed = Resumed(waiting, decided, tuple(pending), record)
        output = self._options.output
        return self._new_run([], output, streaming, control, history, path, deps, resume=resumed)

    async def _answered(
        self,
        history: list[Message],
        decisions: Mapping[str, ToolDecision],
        streaming: bool,
        control: RunControl | None,
        path: tuple[str, ...],
        deps: Any,
    ) -> Run | None:
        """The run that answers a retried resume (the same decisions, under the same wait's
        token, as one that went through: :func:`~goagent_py.approvals.answered_at`), running
        nothing; None when these decisions were not taken before.

        Raises:
            ApprovalConflictError: the wait took other decisions (the first decision wins).
        """
        memory = self._options.short_term_memory
        record = history if memory is None else await record_of(memory)
        at = answered_at(record, decisions)
        if at < 0:
            return None
        result = answered_result(record, at)
        if self._options.output is not None:  # a typed answer is not re-parsed from text
            result = dataclasses.replace(result, output=None)
        output = self._options.output
        return self._new_run([], output, streaming, control, record, path, deps, answered=result)

    async def resume(
        self,
        decisions: Mapping[str, ToolDecision],
        *,
        history: Sequence[Message] | None = None,
        deps: Deps | None = None,
    ) -> RunResult[Out]:
        """Go on with a run that stopped on calls waiting for decisions
        (``result.stop_reason`` ``DEFERRED``; docs/approvals.md).

        Args:
            decisions: one decision per waiting call, by call id: ``Approve()`` (or
                ``Approve(arguments={...})``), ``Deny(message)`` (``stop=True`` also ends the
                run), ``ToolOutput(...)`` for an external tool.
            history: the conversation, when the agent has no short-term memory (the earlier
                messages and the stopped run's ``result.messages``); with short-term memory it
                is read from there (in this process or another one).
            deps: request-scoped dependencies, as in :meth:`run`.

        Raises:
            NotPendingError: nothing waits, or a decision names a call that does not.
            ApprovalConflictError: another resume decided these calls first.
            ApprovalExpiredError: an approval came after its call's deadline.
            ConfigurationError: a waiting call has no decision, or one of the wrong kind.
            SessionBusyError: another run (another decider's resume, a run or a Session's)
                is going on in the stored conversation; nothing of this one was taken.
            ProviderError, MaxIterationsError, MemoryStoreError: as :meth:`run`.
        """
        async with contextlib.AsyncExitStack() as held:
            run = await self._held_resume(decisions, False, history, deps, held)
            return await run.outcome()

    def resume_sync(
        self,
        decisions: Mapping[str, ToolDecision],
        *,
        history: Sequence[Message] | None = None,
        deps: Deps | None = None,
    ) -> RunResult[Out]:
        """Blocking :meth:`resume`, for scripts and notebooks without an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return run_command(self.resume(decisions, history=history, deps=deps))
        raise ConfigurationError(
            "resume_sync() was called inside a running event loop: use 'await agent.resume(...)'"
        )

    async def stream_resume(
        self,
        decisions: Mapping[str, ToolDecision],
        *,
        history: Sequence[Message] | None = None,
        deps: Deps | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """:meth:`resume`, yielding the run's events as they happen."""
        async with contextlib.AsyncExitStack() as held:
            run = await self._held_resume(decisions, True, history, deps, held)
            async with Closing(run.events()) as events:
                async for event in events:
                    if isinstance(event, AgentEnd) and not event.path:
                        await held.aclose()  # over and stored: released before it is seen
                    yield event

    async def _held_resume(
        self,
        decisions: Mapping[str, ToolDecision],
        streaming: bool,
        history: Sequence[Message] | None,
        deps: Any,
        held: contextlib.AsyncExitStack,
    ) -> Run:
        """:meth:`start_resume` under the conversation's hold (entered on ``held``). A resume
        refused by the hold that repeats the decisions of the resume holding it (a retry: a
        double click, a request sent again) is answered from the record as a retry always is
        (the outcome, or nothing yet while that run goes on), running and writing nothing.

        Raises:
            SessionBusyError: another run holds the conversation, and these decisions are not
                the ones it took; nothing was taken or written.
        """
        given = None if history is None else list(history)
        try:
            await held.enter_async_context(self._holding())
        except SessionBusyError:
            if isinstance(decisions, Mapping):
                try:
                    answered = await self._answered(
                        given or [], dict(decisions), streaming, None, (), deps
                    )
                except ApprovalConflictError:
                    answered = None  # another decider's: the hold's refusal says it best
                if answered is not None:
                    return answered
            raise
        return await self.start_resume(decisions, streaming=streaming, history=given, deps=deps)

    def _holding(self) -> contextlib.AbstractAsyncContextManager[object]:
        """The hold a run without a :class:`~goagent_py.Session` takes on the stored
        conversation it writes to (its short-term memory's; none without one): no other run,
        bare or in a Session, in this process or another, appends to that conversation
        meanwhile (docs/sessions.md "One run per stored
        conversation, whoever opens it"). A Session takes the same hold (the same
        :func:`~goagent_py._record_hold.record_hold`) around its runs, which go through
        :meth:`start_run` and :meth:`start_resume`, so it is taken once.

        Raises (on entry):
            SessionBusyError: another run holds the conversation; nothing was written.
        """
        hold = record_hold(self._options.short_term_memory)
        return contextlib.nullcontext() if hold is None else hold()

    @overload
    async def run(self, prompt: Prompt, *, deps: Deps | None = None) -> RunResult[Out]: ...
    @overload
    async def run(
        self, prompt: Prompt, *, output_type: type[RunOut], deps: Deps | None = None
    ) -> RunResult[RunOut]: ...
    @overload
    async def run(
        self, prompt: Prompt, *, output_type: object, deps: Deps | None = None
    ) -> RunResult[Any]: ...
    async def run(
        self, prompt: Prompt, *, output_type: object = _UNSET, deps: Deps | None = None
    ) -> RunResult[Any]:
        """Run the agent on a prompt and return what the run did (``result.output`` is the
        answer, of the agent's ``output_type``; ``result.text`` its text).

        Args:
            prompt: text, content blocks (``[TextBlock(...), ImageBlock(...)]``), or user
                messages.
            output_type: this run's output type, instead of the agent's.
            deps: request-scoped dependencies (a user id, a database connection) that tools
                read as ``current_tool_context().deps``.

        Raises:
            MaxIterationsError: the iteration budget ran out (the turn is still persisted).
            ProviderError: the model call failed.
            MemoryStoreError: memory could not be loaded.
            ConfigurationError: the prompt is not text, blocks or user messages.
            InvalidInputError: the prompt is empty (text only, all whitespace).
            OutputValidationError: the output stayed invalid after ``output_retries``.
            SessionBusyError: another run (bare like this one, or a Session's; in this process
                or another) is going on in the stored conversation of the agent's short-term
                memory; nothing was written (docs/sessions.md "One run per stored
                conversation, whoever opens it").

        A failed run's exception carries the run's result as ``exc.run_result``.
        """
        hold = record_hold(self._options.short_term_memory)
        if hold is None:
            return await self._run_once(prompt, output_type, deps)
        async with hold():  # one run at a time in the stored conversation
            return await self._run_once(prompt, output_type, deps)

    async def _run_once(self, prompt: Prompt, output_type: object, deps: Any) -> RunResult[Any]:
        """:meth:`run`'s run, once its conversation is held."""
        if self._connected and not self._options.mcp_servers and output_type is _UNSET:
            # :meth:`start_run` with nothing to await: no coroutine for it (issue 36).
            messages = to_messages(prompt, "run()")
            run = self._new_run(messages, self._options.output, False, None, None, (), deps)
        else:
            run = await self.start_run(prompt, streaming=False, output_type=output_type, deps=deps)
        return await run.outcome()

    async def stream(
        self, prompt: Prompt, *, output_type: object = _UNSET, deps: Deps | None = None
    ) -> AsyncIterator[AgentEvent]:
        """Run the agent and yield its events as they happen (text deltas when the provider
        streams). The last event is :class:`~goagent_py.AgentEnd` (its result's ``output``
        is the typed answer); failures then raise as in :meth:`run`."""
        async with contextlib.AsyncExitStack() as held:
            await held.enter_async_context(self._holding())
            run = await self.start_run(prompt, streaming=True, output_type=output_type, deps=deps)
            # Closing: a consumer that stops early still ends the run (on_run_end) right away.
            async with Closing(run.events()) as events:
                async for event in events:
                    if isinstance(event, AgentEnd) and not event.path:
                        # Over and stored: released before the consumer sees the end, so one
                        # that starts the next run here is not refused by this one.
                        await held.aclose()
                    yield event

    @overload
    def run_sync(self, prompt: Prompt, *, deps: Deps | None = None) -> RunResult[Out]: ...
    @overload
    def run_sync(
        self, prompt: Prompt, *, output_type: type[RunOut], deps: Deps | None = None
    ) -> RunResult[RunOut]: ...
    @overload
    def run_sync(
        self, prompt: Prompt, *, output_type: object, deps: Deps | None = None
    ) -> RunResult[Any]: ...
    def run_sync(
        self, prompt: Prompt, *, output_type: object = _UNSET, deps: Deps | None = None
    ) -> RunResult[Any]:
        """Blocking :meth:`run`, for scripts and notebooks without an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return run_command(self.run(prompt, output_type=output_type, deps=deps))
        raise ConfigurationError(
            "run_sync() was called inside a running event loop: use 'await agent.run(...)'"
        )

    async def aclose(self) -> None:
        """Close what the agent's connectors and MCP servers opened. Idempotent."""
        if self._origin is not None:  # a client's agent: the served agent's, closed with it
            return
        closers, self._closers = self._closers, []
        closers = [s.aclose for s in self._options.mcp_servers] + closers
        for close in reversed(closers):
            try:
                await close()
            except Exception as exc:
                self._options.logger.warning("connector close failed: %s", exc)

    async def __aenter__(self) -> Agent[Deps, Out]:
        await self._connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        o = self._options
        return f"Agent(name={o.name!r}, model={o.model!r}, tools={list(self._tools)})"


_KEYWORDS = frozenset(AgentSettings.__annotations__)
# The list settings _sharing_tools() starts afresh when given (as replace() does), by the field
# of AgentOptions that holds each.
_REPLACED_LISTS = {
    "hooks": "hook_sets",
    "instructions": "instructions",
    "output_validators": "output_validators",
    "input_guardrails": "input_guardrails",
    "output_guardrails": "output_guardrails",
}
# What a client's agent shares with the served one (:meth:`Agent._sharing_tools`).
_TOOLING = frozenset(
    {
        "tools",
        "tool_timeout",
        "circuit_breaker",
        "tool_retry",
        "rate_limit",
        "dispatch_middlewares",
        "logger",
        "mcp_connectors",
        "mcp_servers",
    }
)


def _reused(history: list[Message], at: int, record: list[Message] | None) -> set[str]:
    """The ids of the calls waiting in ``history[at]`` that an earlier call of the
    conversation had; with short-term memory, read from the whole ``record`` too (the run's
    view may start after a window or a compaction cut the earlier calls off)."""
    if record is not None:
        found = waiting_at(record)
        if found >= 0 and record[found].metadata.get(PENDING_KEY) == history[at].metadata.get(
            PENDING_KEY
        ):
            return reused_ids(record, found) | reused_ids(history, at)
    return reused_ids(history, at)


def _signature() -> inspect.Signature:
    """``Agent(*options, provider=..., ...)`` for ``help()`` and ``inspect``: the runtime
    signature is ``**settings``, so name the keywords (their types are AgentSettings')."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    return inspect.Signature(
        [
            inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            inspect.Parameter("options", inspect.Parameter.VAR_POSITIONAL, annotation="Option"),
            *(
                inspect.Parameter(
                    name,
                    keyword,
                    default=_Default(),
                    annotation=getattr(annotation, "__forward_arg__", annotation),
                )
                for name, annotation in AgentSettings.__annotations__.items()
            ),
            inspect.Parameter("output_type", keyword, default=str, annotation="type[Out]"),
        ],
        return_annotation="None",
    )


Agent.__init__.__signature__ = _signature()  # type: ignore[attr-defined]
