"""The durable agent: an :class:`~goagent_py.Agent`'s definition, run on Temporal.

The same ``Agent`` (model, system prompt, tools, memory) is used on both sides:

- in app processes, :meth:`DurableAgent.start` / :meth:`DurableAgent.execute` start a workflow
  with the agent's plain settings (no objects: names, numbers, tool schemas);
- in workflows, the unchanged loop runs with a provider, tools and memories that are proxies:
  each call is an activity (see :mod:`goagent_py.durable._workflow`);
- in worker processes, those activities call the real tools (through the agent's dispatch
  chain and tool gates), the real memories, the agent's MCP servers (each worker connects from
  their :class:`~goagent_py.durable.MCPServerSpec`), and the provider that a
  :class:`ProviderRegistry` builds from the agent's provider spec (``"anthropic:..."``).

Activity names come from the agent's, the tool's and the MCP server's names
(``goagent.model.<agent>``, ``goagent.tool.<agent>.<tool>``,
``goagent.memory.<load|append|recall|store|settle>.<agent>``,
``goagent.approval.<agent>``, ``goagent.guardrail.<agent>``,
``goagent.mcp.<list|call>.<agent>.<server>``):
renaming an agent or a tool while runs are in flight strands them, so it is a deliberate act
(drain the task queue first, or keep the old names registered on a worker).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from goagent_py._prompt import to_messages
from goagent_py.agent import Agent
from goagent_py.approvals import ToolDecision
from goagent_py.errors import ConfigurationError, SessionBusyError
from goagent_py.guardrails import guardrail_name
from goagent_py.memory.base import LongTermMemoryProtocol, ShortTermMemoryProtocol
from goagent_py.memory.storage._parts import check_session_id
from goagent_py.messages import ContentBlock
from goagent_py.provider import Provider
from goagent_py.results import PendingCall

from ._deps import DepsSpec
from ._mcp import MCPServerSpec, specs_of
from ._telemetry import TRACE_KEY, caller_trace
from ._wire import (
    ABORT_SIGNAL,
    DECIDE_UPDATE,
    DEFAULT_PAYLOAD_LIMIT,
    EVENTS_UPDATE,
    FOLLOW_UP_SIGNAL,
    PENDING_QUERY,
    STATE_QUERY,
    STEER_SIGNAL,
    WORKFLOW_NAME,
    DurableResult,
    content_to_text,
    definition_to_data,
    server_blob_limit,
)

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowHandle

__all__ = [
    "ABORT_SIGNAL",
    "DECIDE_UPDATE",
    "EVENTS_UPDATE",
    "FOLLOW_UP_SIGNAL",
    "PENDING_QUERY",
    "STATE_QUERY",
    "STEER_SIGNAL",
    "WORKFLOW_NAME",
    "DurableAgent",
    "DurableResult",
    "ProviderRegistry",
]

ShortTermFactory = Callable[[str], ShortTermMemoryProtocol]


class ProviderRegistry:
    """Builds providers inside worker processes from serialisable specs (``"prefix:rest"``).

    A workflow only carries the spec; each worker maps its prefix to a factory that receives the
    rest (often a model name) and returns a provider, built once per spec and reused::

        registry = ProviderRegistry.default()            # anthropic:, openai:, ollama:
        registry.register("scripted", lambda name: my_scripts[name])

    Leave provider-level retries off (no ``retry_provider``): the engine retries the activity.
    """

    def __init__(self, factories: Mapping[str, Callable[[str], Provider]] | None = None) -> None:
        self._factories: dict[str, Callable[[str], Provider]] = {}
        self._built: dict[str, Provider] = {}
        self._lock = threading.Lock()
        for prefix, factory in (factories or {}).items():
            self.register(prefix, factory)

    @classmethod
    def default(cls) -> ProviderRegistry:
        """A registry for the HTTP providers (their API keys come from the environment)."""

        def anthropic(_: str) -> Provider:
            from goagent_py.providers.anthropic import AnthropicProvider

            return AnthropicProvider()

        def openai(_: str) -> Provider:
            from goagent_py.providers.openai import OpenAIProvider

            return OpenAIProvider()

        def ollama(_: str) -> Provider:
            from goagent_py.providers.ollama import OllamaProvider

            return OllamaProvider()

        return cls({"anthropic": anthropic, "openai": openai, "ollama": ollama})

    def register(self, prefix: str, factory: Callable[[str], Provider]) -> None:
        """Build providers for specs ``"prefix:..."`` with ``factory(rest)``."""
        if not prefix or ":" in prefix or not callable(factory):
            raise ConfigurationError(
                f"ProviderRegistry.register: need a prefix without ':' and a callable, got "
                f"{prefix!r}, {factory!r}"
            )
        with self._lock:
            self._factories[prefix] = factory

    def resolve(self, spec: str) -> Provider:
        """The provider for ``spec`` (built on first use, then reused).

        Raises:
            ConfigurationError: no factory is registered for the spec's prefix.
        """
        with self._lock:
            if spec in self._built:
                return self._built[spec]
            prefix, _, rest = spec.partition(":")
            factory = self._factories.get(prefix)
            if factory is None:
                raise ConfigurationError(
                    f"no provider registered for spec {spec!r} on this worker; known prefixes: "
                    f"{', '.join(sorted(self._factories)) or 'none'} (ProviderRegistry.register)"
                )
            provider = factory(rest)
            self._built[spec] = provider
            return provider


class DurableAgent:
    """An agent whose runs survive worker crashes: see the module docs.

    The agent's ``mcp_servers`` (``MCPStdio``/``MCPHttp``) are described as
    :class:`~goagent_py.durable.MCPServerSpec` objects (:attr:`mcp_servers`); only their names
    reach the workflow. Its ``prepare_arguments``, ``before_tool_call``, ``after_tool_call``,
    ``tool_timeout``, circuit breaker, rate limit and dispatch middlewares apply on the workers,
    in each tool activity; its ``tool_retry`` does not (the engine retries: ``max_attempts``).
    ``transform_context``, ``should_stop``, ``prepare_turn`` and ``instructions`` are refused
    (they would run in the workflow). Its input and output guardrails run on the workers, one
    activity each. A call that needs a person (a tool's ``requires_approval``, the agent's
    policy, an ``ExternalTool``) makes the run wait in its workflow, holding no worker, until
    :meth:`decide` (or the deadline: ``approval_timeout``, then ``approval_default``);
    :meth:`pending` lists what waits (docs/approvals.md).

    Args:
        agent: the agent's definition (a name is required: activity names derive from it).
            Its own provider is not used by workers; ``provider`` is.
        provider: the provider spec workers resolve in their :class:`ProviderRegistry`.
        short_term_memory: ``session_id -> memory`` for workers (e.g. a
            :class:`~goagent_py.memory.storage.PostgresStorage` per session); None uses the
            agent's own short-term memory for every session.
        long_term_memory: the workers' long-term memory (None: the agent's own). Recall and
            store run only if the app process's definition has one too.
        model_timeout: seconds one model call may take before it is retried.
        tool_timeout: seconds one tool call's activity may take. A live worker gives the call
            up a little before (at 80%, or 5 s before, whichever is later) with a
            ``ToolTimeoutError`` the model reads, not retried (a slow tool would run again); a
            call on a worker that died is retried.
        heartbeat_timeout: seconds without a heartbeat after which a call is retried on
            another worker (activities heartbeat while they wait); None: only the timeouts.
        max_attempts: attempts per model or tool call (1 = no retry).
        max_retry_delay: the longest wait between attempts (caps a server's Retry-After).
        retry_interval: the wait before the first retry (it doubles up to ``max_retry_delay``).
            A call on a worker that died is retried ``heartbeat_timeout + retry_interval``
            after its last heartbeat: for a run that goes on within ~2 s of a crash, use
            ``heartbeat_timeout=0.5, retry_interval=0.1`` and workers from
            :func:`~goagent_py.durable.create_worker` with
            ``sticky_queue_schedule_to_start_timeout=timedelta(seconds=0.5)``
            (docs/scaling-out.md).
        payload_limit: the largest request or result, in bytes, that is recorded.
        task_queue: the Temporal task queue of this agent's workflows and activities.
        approval_default: what a call that waits for a person gets when the agent's
            ``approval_timeout`` (or :meth:`start`'s) passes without a decision: ``"deny"``
            (the model reads that no decision came) or ``"approve"`` (an external tool's call
            is denied either way).
    """

    def __init__(
        self,
        agent: Agent,
        *,
        provider: str,
        short_term_memory: ShortTermFactory | None = None,
        long_term_memory: LongTermMemoryProtocol | None = None,
        model_timeout: float = 300.0,
        tool_timeout: float = 300.0,
        heartbeat_timeout: float | None = 30.0,
        max_attempts: int = 5,
        max_retry_delay: float = 60.0,
        retry_interval: float = 1.0,
        payload_limit: int = DEFAULT_PAYLOAD_LIMIT,
        task_queue: str = "goagent",
        approval_default: Literal["deny", "approve"] = "deny",
    ) -> None:
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"DurableAgent takes an Agent, got {type(agent).__name__}")
        o = agent.options
        if not o.name:
            raise ConfigurationError(
                "DurableAgent: the agent needs a name (with_name(...)): its activities are "
                "named after it"
            )
        if not isinstance(provider, str) or not provider.partition(":")[0]:
            raise ConfigurationError(
                f"DurableAgent: provider must be a spec like 'anthropic:claude-sonnet-4-6', "
                f"got {provider!r}"
            )
        for label, value in (
            ("model_timeout", model_timeout),
            ("tool_timeout", tool_timeout),
            ("max_retry_delay", max_retry_delay),
            ("retry_interval", retry_interval),
        ):
            if value <= 0:
                raise ConfigurationError(f"DurableAgent: {label} must be > 0, got {value!r}")
        if retry_interval > max_retry_delay:
            # Temporal refuses such a retry policy when the first activity is scheduled: every
            # run failed then (memory, model, tool), or hung on a workflow task retried forever.
            raise ConfigurationError(
                f"DurableAgent: retry_interval ({retry_interval!r} s) is longer than "
                f"max_retry_delay ({max_retry_delay!r} s), the longest wait between two "
                "attempts: raise max_retry_delay to at least retry_interval"
            )
        if heartbeat_timeout is not None and heartbeat_timeout <= 0:
            raise ConfigurationError("DurableAgent: heartbeat_timeout must be > 0 or None")
        if max_attempts < 1 or payload_limit < 1:
            raise ConfigurationError("DurableAgent: max_attempts and payload_limit must be >= 1")
        if o.mcp_connectors:
            raise ConfigurationError(
                "DurableAgent: mcp_connectors are opaque callables that cannot reach the workers; "
                "attach MCP servers with mcp_servers=[MCPStdio(...) or MCPHttp(...)] instead"
            )
        # These run between turns, in the workflow, where a callable would have to be
        # deterministic and replay-safe: refuse them rather than drop them silently.
        for setting in ("transform_context", "should_stop", "prepare_turn"):
            if getattr(o, setting) is not None:
                raise ConfigurationError(
                    f"DurableAgent: {setting} is not supported for durable runs (it would run in "
                    "the workflow, between turns); remove it, or run this agent without "
                    "DurableAgent"
                )
        if approval_default not in ("deny", "approve"):
            raise ConfigurationError(
                f"DurableAgent: approval_default must be 'deny' or 'approve', got "
                f"{approval_default!r}"
            )
        if (
            (_approval_checks(agent) or _external_tools(agent))
            and short_term_memory is None
            and o.short_term_memory is None
        ):
            raise ConfigurationError(
                "DurableAgent: calls that wait for a person are kept in the conversation "
                "record: give the workers a short-term memory (short_term_memory=lambda "
                "session: ShortTermMemory(storage.for_session(session)))"
            )
        if o.instructions:
            raise ConfigurationError(
                "DurableAgent: instructions are not supported for durable runs (they would run "
                "in the workflow, before each model call); put fixed text in system_prompt="
            )
        self.mcp_servers: list[MCPServerSpec] = specs_of(o.mcp_servers)
        self.agent = agent
        self.provider = provider
        self.task_queue = task_queue
        self._short_term = short_term_memory
        self._long_term = long_term_memory if long_term_memory is not None else o.long_term_memory
        self._settings = {
            "model_timeout": model_timeout,
            "tool_timeout": tool_timeout,
            "heartbeat_timeout": heartbeat_timeout,
            "max_attempts": max_attempts,
            "max_retry_delay": max_retry_delay,
            "retry_interval": retry_interval,
            "payload_limit": payload_limit,
            "approval_default": approval_default,
        }

    @property
    def name(self) -> str:
        """The agent's name (the stem of its activity names)."""
        return self.agent.name

    # -- worker side ---------------------------------------------------------------------------

    def short_term_memory(self, session_id: str) -> ShortTermMemoryProtocol | None:
        """The short-term memory of ``session_id`` on a worker."""
        if self._short_term is not None:
            return self._short_term(session_id)
        return self.agent.options.short_term_memory

    @property
    def long_term_memory(self) -> LongTermMemoryProtocol | None:
        """The long-term memory on a worker."""
        return self._long_term

    # -- plain settings ------------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        """The agent's settings as plain data: what a workflow needs to run the loop."""
        o = self.agent.options
        return {
            "agent": self.name,
            "provider": self.provider,
            "model": o.model,
            "system_prompt": o.system_prompt,
            "max_iterations": o.max_iterations,
            "tools": [definition_to_data(t.definition) for t in self.agent.tools],
            "tool_execution": o.tool_execution,
            "sequential_tools": sorted(o.sequential_tools),
            "max_tool_result_chars": o.max_tool_result_chars,
            "thinking": None if o.thinking is None else o.thinking.budget_tokens,
            "effort": o.effort,
            "max_tokens": o.max_tokens,
            "long_term_top_k": o.long_term_top_k,
            "short_term_trace_tools": o.short_term_trace_tools,
            # Only the names: the workers hold the servers' specs (commands, env, headers).
            "mcp_servers": [spec.name for spec in self.mcp_servers],
            # before/after_tool_call run on the workers (in the tool activity); the loop in the
            # workflow needs to know only whether a denial ends the run.
            "stop_on_denied": o.stop_on_denied,
            "gate_sees_message": o.before_tool_call is not None and o.before_tool_call_sees_message,
            # Always: only workers know their memory (app processes need no database
            # settings); a worker without one loads nothing and stores nothing.
            "short_term": True,
            "long_term": self._long_term is not None,
            # Short-term loads (and appends, where the worker's storage is keyed) run as local
            # activities; a run started without this key, by an older client, replays as it
            # ran: as activities.
            "local_memory_activities": True,
            # Appends to keyed storage ride on the run's next model call (its activity applies
            # them first), and none are sent to a worker without short-term memory; a run
            # started without this key replays as it ran: an activity per append.
            "carry_appends": True,
            # The run's own messages, once stored (or carried by the call), cross to the model
            # activity as stand-ins, and a result over the payload limit lists them so; a run
            # started without this key replays as it ran: its messages whole (issue 30).
            "run_refs": True,
            # A tool result over 64 KB is stored by its activity beside the session and
            # crosses as a reference (the workers put it back in model requests and appends);
            # a run started without this key replays as it ran: results whole (issue 30).
            "block_refs": True,
            # Which calls may wait for a person ("*": every tool, the agent has a policy); the
            # workers' check decides (the predicates and the policy are code).
            "approval_checks": _approval_checks(self.agent),
            "external_tools": _external_tools(self.agent),
            # The tools that queue their calls by file (a file tool's writes, ``reserve``): in
            # the workflow, a call of one waits for the earlier calls of the same batch on the
            # same path, as a plain run's queue orders them; a run started without this key
            # replays as it ran: unordered.
            "queued_tools": _queued_tools(self.agent),
            "approval_timeout": o.approval_timeout,
            # The guardrails run on the workers, one activity each; only their names cross.
            "input_guardrails": [guardrail_name(g) for g in o.input_guardrails],
            "output_guardrails": [guardrail_name(g) for g in o.output_guardrails],
            **self._settings,
        }

    # -- app side ------------------------------------------------------------------------------

    async def start(
        self,
        client: Client,
        prompt: str | list[ContentBlock],
        *,
        session_id: str = "default",
        workflow_id: str | None = None,
        exclusive: bool = False,
        approval_timeout: float | None = None,
        deps: DepsSpec | None = None,
        **start_options: Any,
    ) -> WorkflowHandle[Any, Any]:
        """Start a durable run; returns its workflow handle (signal, query, await it).

        Args:
            client: a connected ``temporalio.client.Client``.
            prompt: the user's text or content blocks.
            session_id: the conversation (short-term memory) this run belongs to.
            workflow_id: the run's id (default: ``<agent>-<session>-<random>``).
            exclusive: one run per session at a time: the run's id is ``<agent>-<session>``,
                which Temporal keeps unique among running workflows, so a second start while
                one runs raises :class:`~goagent_py.errors.SessionBusyError`.
            approval_timeout: seconds a call that waits for a person may wait in this run
                (default: the agent's ``approval_timeout``); then ``approval_default``
                applies.
            deps: the run's deps as a :class:`~goagent_py.durable.DepsSpec` (a resolver's name
                and JSON arguments); each worker resolves it with its ``DepsRegistry``, and
                tools read the live deps from their context as in a plain run.
            **start_options: passed to ``Client.start_workflow`` (e.g. ``id_reuse_policy``).
                ``request_eager_start`` defaults to True here (Temporal's default is False):
                when this client also runs a worker of the agent's task queue with a free
                slot, the server hands the run's first workflow task back in the start's
                reply instead of through its task queues, which on a server of few history
                shards costs a wait of up to 50 ms (docs/scaling-out.md, "What a step
                costs"); with no such worker the request is not made.

        Raises:
            InvalidInputError: the prompt is empty (text only, all whitespace); nothing
                is started.
            SessionBusyError: ``exclusive`` and a run of this session is in progress.
        """
        import uuid

        from temporalio.exceptions import WorkflowAlreadyStartedError

        check_session_id(session_id, "DurableAgent.start")
        if exclusive:
            if workflow_id is not None:
                raise ConfigurationError("DurableAgent.start: exclusive= sets the workflow id")
            workflow_id = f"{self.name}-{session_id}"

        content = prompt_content(prompt, "DurableAgent.start()")
        config = self.config()
        if approval_timeout is not None:
            if approval_timeout <= 0:
                raise ConfigurationError(
                    f"DurableAgent.start: approval_timeout must be > 0 seconds, got "
                    f"{approval_timeout!r}"
                )
            config["approval_timeout"] = float(approval_timeout)
        # What the workflow sends (model requests, tool arguments, appends) is checked against
        # the server's own limit too: an activity input over it would fail the workflow task
        # again and again instead of the run.
        config["server_payload_limit"] = await server_blob_limit(client)
        data = {"config": config, "content": content_to_text(content), "session_id": session_id}
        if deps is not None:
            if not isinstance(deps, DepsSpec):
                raise ConfigurationError(
                    f"DurableAgent.start: deps must be a DepsSpec(name, args) that the workers "
                    f"resolve, got {type(deps).__name__}: a live object cannot cross to them"
                )
            data["deps"] = deps.to_data()
        trace = caller_trace()
        if trace is not None:  # the run's spans join the caller's trace (workers that trace)
            data[TRACE_KEY] = trace
        start_options.setdefault("request_eager_start", True)
        try:
            return await client.start_workflow(
                WORKFLOW_NAME,
                data,
                id=workflow_id or f"{self.name}-{session_id}-{uuid.uuid4().hex[:12]}",
                task_queue=self.task_queue,
                **start_options,
            )
        except WorkflowAlreadyStartedError as exc:
            if not exclusive:
                raise
            raise SessionBusyError(
                f"session {session_id!r} is busy: the durable run {exc.workflow_id!r} is in "
                "progress; wait for it, signal it a follow-up, or retry later",
                session_id=session_id,
                holder=exc.workflow_id,
            ) from exc

    async def execute(
        self,
        client: Client,
        prompt: str | list[ContentBlock],
        *,
        session_id: str = "default",
        workflow_id: str | None = None,
        exclusive: bool = False,
        deps: DepsSpec | None = None,
        **start_options: Any,
    ) -> DurableResult:
        """Start a durable run and wait for its result (arguments as in :meth:`start`).

        A big tool result or thinking block that crossed the run by reference is put back in
        the result's messages from this agent's short-term memory (the workers'); without one
        it stays the reference (docs/scaling-out.md, "What the caller gets").

        Raises:
            InvalidInputError: the prompt is empty (text only, all whitespace).
            SessionBusyError: ``exclusive`` and a run of this session is in progress.
            DurableRunError: the run failed (its ``type`` names the error inside, e.g.
                ``"ProviderError"`` or ``"MaxIterationsError"``).
        """
        from ._client import result_of

        handle = await self.start(
            client,
            prompt,
            session_id=session_id,
            workflow_id=workflow_id,
            exclusive=exclusive,
            deps=deps,
            **start_options,
        )
        return await result_of(handle, self.short_term_memory)

    def events(self, handle: WorkflowHandle[Any, Any]) -> AsyncIterator[dict[str, Any]]:
        """Stream a running run's events (turn starts, model messages, tool results) as plain
        dicts, while it runs::

            handle = await durable.start(client, "Add 2 and 3")
            async for event in durable.events(handle):
                print(event["type"], event.get("text", ""))
        """
        from ._client import stream_events

        return stream_events(handle)

    async def result(self, handle: WorkflowHandle[Any, Any]) -> DurableResult:
        """Wait for a started run's result (after :meth:`start`, or once its decisions are in).

        Big results by reference are put back as in :meth:`execute`.

        Raises:
            GuardrailTripped: a guardrail ended the run.
            DurableRunError: the run failed (its ``type`` names the error inside).
        """
        from ._client import result_of

        return await result_of(handle, self.short_term_memory)

    async def pending(self, handle: WorkflowHandle[Any, Any]) -> list[PendingCall]:
        """The calls a durable run waits on (empty while it runs, or once it ended), with
        their validated arguments and deadline::

            for call in await durable.pending(handle):
                print(call.id, call.name, call.arguments, call.deadline)
        """
        from ._client import pending_of_run

        return await pending_of_run(handle)

    async def decide(
        self, handle: WorkflowHandle[Any, Any], decisions: Mapping[str, ToolDecision]
    ) -> list[str]:
        """Decide calls a durable run waits on: ``{call_id: Approve() | Approve(arguments=...)
        | Deny("why") | ToolOutput(...)}``, some or all of them. The run goes on once every
        waiting call is decided; returns the ids that still wait. Give each decision the
        token of the wait it is for (``Approve(token=call.token)``, the call from
        :meth:`pending`): a late decision for an earlier wait is then refused, never taken by a
        later call with the same id (docs/approvals.md, "Which wait a decision is for"). The
        same decision sent again (a retried request whose first attempt went through)
        succeeds and changes nothing.

        Raises:
            NotPendingError: a call does not wait (or the run has finished), or no wait of
                the run has the decision's token.
            ApprovalConflictError: a call was decided already (the first decision wins), the
                decision's token names a wait that is over, or, without a token, the id was
                also the id of a call of an earlier wait of the run.
            ApprovalExpiredError: a call's deadline passed (its default decision applied).
            ConfigurationError: a decision of the wrong kind (``ToolOutput`` for a tool
                that waits for approval, ``Approve`` for an external tool).
        """
        from ._client import decide_run

        return await decide_run(handle, decisions)

    async def run(
        self,
        prompt: str | list[ContentBlock],
        *,
        session_id: str = "default",
        deps: DepsSpec | None = None,
    ) -> Any:
        """Run the loop here, inside your own Temporal workflow (model and tool calls become
        activities). Outside a workflow this raises: use :meth:`execute` there.

        Raises:
            ConfigurationError: called outside a Temporal workflow.
            InvalidInputError: the prompt is empty (text only, all whitespace).
        """
        from ._workflow import run_in_workflow

        check_session_id(session_id, "DurableAgent.run")
        content = prompt_content(prompt, "DurableAgent.run()")
        return DurableResult.from_data(
            await run_in_workflow(
                self.config(),
                content,
                session_id,
                None,
                deps=None if deps is None else deps.to_data(),
            )
        )

    def run_sync(self, prompt: str) -> str:
        """Always raises: a durable run is started with :meth:`execute` on a client."""
        raise ConfigurationError(
            f"DurableAgent {self.name!r} runs only on Temporal: start it with "
            "'await durable.execute(client, prompt)' (a worker must be running), or use "
            "durable.agent.run_sync(prompt) for a plain, non-durable run"
        )

    def __repr__(self) -> str:
        return f"DurableAgent(name={self.name!r}, provider={self.provider!r})"


def prompt_content(prompt: str | list[ContentBlock], where: str) -> list[ContentBlock]:
    """The content of a durable run's one user message, checked by the rule every run's
    prompt follows (``to_messages``: an empty or whitespace-only prompt is refused with
    ``InvalidInputError`` before anything starts; docs/architecture.md, "Running an agent")."""
    if not isinstance(prompt, str | list):
        raise ConfigurationError(
            f"{where} takes the user's text or a list of content blocks, got "
            f"{type(prompt).__name__}"
        )
    messages = to_messages(prompt, where)
    if len(messages) != 1:
        raise ConfigurationError(
            f"{where} takes one prompt (text or content blocks), got {len(messages)} messages: "
            "earlier turns belong in the session's short-term memory"
        )
    return list(messages[0].content)


def _approval_checks(agent: Agent) -> list[str]:
    """The tools whose calls may wait for a person: every tool ("*") when the agent has an
    approval policy, else those with a ``requires_approval`` flag or predicate."""
    if agent.options.requires_approval is not None:
        return ["*"]
    return [
        t.definition.name
        for t in agent.tools
        if getattr(t, "requires_approval", False) is not False
        and getattr(t, "external", False) is not True
    ]


def _queued_tools(agent: Agent) -> list[str]:
    return [t.definition.name for t in agent.tools if callable(getattr(t, "reserve", None))]


def _external_tools(agent: Agent) -> list[str]:
    return [t.definition.name for t in agent.tools if getattr(t, "external", False) is True]
