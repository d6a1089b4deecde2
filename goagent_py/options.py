"""Agent configuration: the ``with_*`` options, the settings objects, and their one validation.

``Agent(with_provider(p), with_tool(add))`` and ``Agent(provider=p, tools=[add])`` are the same
thing: every keyword maps onto the option of the same name, so there is one code path, one
validation (at construction) and one set of rules:

- scalar settings: the last one given wins (options first, then keywords);
- list-like settings (tools, hooks, dispatch middlewares, MCP connectors) accumulate, in order;
- ``None`` means "off" wherever a setting can be off; 0 is never a secret "off".

Error messages name what the caller wrote (``max_iterations='5'`` or ``with_max_iterations('5')``).
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from goagent_py._json_schema import check_parameters_once
from goagent_py._tool_servers import ToolServer
from goagent_py.approvals import RequiresApproval, RunContext
from goagent_py.dispatch import (
    BreakerKey,
    CircuitBreakerConfig,
    DispatchMiddleware,
    RateLimitConfig,
    check_dispatch_settings,
)
from goagent_py.errors import ConfigurationError
from goagent_py.guardrails import InputGuardrail, OutputGuardrail
from goagent_py.hooks import Hooks, ToolResult, merge_hooks
from goagent_py.memory.base import LongTermMemoryProtocol, ShortTermMemoryProtocol, WritePolicy
from goagent_py.messages import Message, ToolCall
from goagent_py.output import FINAL_RESULT_TOOL, OutputSpec, OutputValidator
from goagent_py.provider import CompletionRequest, OutputMode, Provider, ThinkingConfig
from goagent_py.resilience import PerTool, RetryPolicy
from goagent_py.tools import FunctionTool, Tool, _name_of

__all__ = [
    "AfterToolCall",
    "AgentOptions",
    "AgentSettings",
    "BeforeToolCall",
    "CircuitBreakerConfig",
    "Instructions",
    "MCPConnector",
    "Option",
    "PrepareArguments",
    "PrepareTurn",
    "RateLimitConfig",
    "ShouldStop",
    "TransformContext",
    "TurnState",
    "with_adaptive_thinking",
    "with_after_tool_call",
    "with_before_tool_call",
    "with_circuit_breaker",
    "with_dispatch_middleware",
    "with_effort",
    "with_hooks",
    "with_logger",
    "with_long_term_memory",
    "with_long_term_top_k",
    "with_max_iterations",
    "with_max_parallel_tools",
    "with_max_run_tokens",
    "with_max_tokens",
    "with_max_tool_result_chars",
    "with_mcp_connector",
    "with_mcp_server",
    "with_model",
    "with_name",
    "with_output_mode",
    "with_output_retries",
    "with_output_type",
    "with_output_validator",
    "with_prepare_arguments",
    "with_prepare_turn",
    "with_provider",
    "with_rate_limit",
    "with_short_term_memory",
    "with_short_term_trace_tools",
    "with_should_stop",
    "with_system_prompt",
    "with_thinking",
    "with_tool",
    "with_tool_execution",
    "with_tool_retry",
    "with_tool_timeout",
    "with_tools",
    "with_transform_context",
    "with_write_policy",
]

BeforeToolCall = Callable[..., "str | Awaitable[str | None] | None"]
"""``(call)``, ``(call, assistant_message)`` or ``(call, run: RunContext)`` (the second
parameter annotated ``RunContext``: the run so far, the tools offered, the deps): return
``None`` to let a call run, or a reason (shown to the model) to block it. The call's arguments
are the validated ones."""

AfterToolCall = Callable[[ToolResult], "ToolResult | Awaitable[ToolResult | None] | None"]
"""Return ``None`` to keep a result, or a replacement :class:`ToolResult`."""

TransformContext = Callable[[list[Message]], "list[Message] | Awaitable[list[Message]]"]
"""Rewrites the message list sent with each request; the run's history is kept."""

PrepareArguments = Callable[[ToolCall], "dict[str, Any] | Awaitable[dict[str, Any] | None] | None"]
"""Repairs a call's raw arguments before validation: return new arguments, or None to keep."""

Instructions = Callable[[RunContext], "str | Awaitable[str | None] | None"]
"""A dynamic part of the system prompt: asked before each model call with the run so far
(``run.deps``, ``run.messages``, ``run.iteration``); its text (None or "": nothing) is joined to
the system prompt of that call. ``run.message`` is the conversation's last message."""

MCPConnector = Callable[[], Awaitable[tuple[Sequence[Tool], Callable[[], Awaitable[None]] | None]]]
"""Connects to tool servers on first use: returns the tools and an async ``close`` (or None)."""


@dataclass(slots=True, frozen=True)
class TurnState:
    """What turn-shaping hooks see between turns.

    Attributes:
        iteration: the 0-based iteration that just ended.
        messages: the conversation so far, as the next request would start from.
        last: the assistant message of the turn that just ended.
        tool_results: that turn's tool results (empty when it called none).
    """

    iteration: int
    messages: list[Message]
    last: Message
    tool_results: list[ToolResult]


ShouldStop = Callable[[TurnState], "bool | Awaitable[bool]"]
"""Asked after each turn with tool calls: True ends the run there (its answer is the last text)."""

PrepareTurn = Callable[[CompletionRequest], "CompletionRequest | Awaitable[CompletionRequest]"]
"""Shapes the next request (model, thinking, tools, ...) just before it is sent."""

Label = str | Callable[[], str] | tuple[str, Any]
"""What the caller wrote, or what formats it only when an error needs it: a function, or
``(keyword, value)`` for ``keyword=value``."""

_LOGGER = logging.getLogger("goagent_py")

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_EFFORTS = ("low", "medium", "high")


def _takes_two(fn: Callable[..., object]) -> bool:
    """Whether ``fn`` takes a second positional argument (the assistant message)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


def _takes_run(fn: Callable[..., object]) -> bool:
    """Whether ``fn``'s second positional parameter is annotated :class:`RunContext` (as the
    class, or as the name under ``from __future__ import annotations``)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < 2:
        return False
    annotation = positional[1].annotation
    if annotation is RunContext:
        return True
    return isinstance(annotation, str) and annotation.rsplit(".", 1)[-1] == "RunContext"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class AgentSettings(TypedDict, total=False):
    """The keyword settings of :class:`~goagent_py.Agent` and ``Agent.replace``, for type
    checkers: ``Agent(provider=p, max_iteration=5)`` is an error under mypy or pyright, and a
    ``TypeError`` at run time. Each key is documented on :class:`~goagent_py.Agent`.

    Use it to type a function that passes settings through:
    ``def make(**settings: Unpack[AgentSettings]) -> Agent``.
    """

    provider: Provider
    model: str
    tools: Sequence[Tool]
    system_prompt: str
    instructions: Instructions | Sequence[Instructions]
    max_iterations: int
    short_term_memory: ShortTermMemoryProtocol | None
    long_term_memory: LongTermMemoryProtocol | None
    long_term_top_k: int | None
    write_policy: WritePolicy | None
    name: str
    hooks: Hooks | Sequence[Hooks] | None
    logger: logging.Logger
    tool_timeout: float | None
    circuit_breaker: CircuitBreakerConfig | None
    dispatch_middlewares: Sequence[DispatchMiddleware]
    thinking: int | None
    adaptive_thinking: bool
    effort: Literal["low", "medium", "high"] | None
    max_tokens: int | None
    short_term_trace_tools: bool
    mcp_connectors: Sequence[MCPConnector]
    mcp_servers: Sequence[ToolServer]
    before_tool_call: BeforeToolCall | None
    stop_on_denied: bool
    requires_approval: RequiresApproval | None
    approval_timeout: float | None
    after_tool_call: AfterToolCall | None
    prepare_arguments: PrepareArguments | None
    should_stop: ShouldStop | None
    prepare_turn: PrepareTurn | None
    tool_execution: Literal["parallel", "sequential"]
    sequential_tools: Sequence[str]
    max_parallel_tools: int | None
    max_run_tokens: int | None
    max_tool_result_chars: int | None
    transform_context: TransformContext | None
    tool_retry: RetryPolicy | None
    rate_limit: RateLimitConfig | None
    output_mode: OutputMode | None
    output_retries: int
    output_validators: Sequence[OutputValidator]
    input_guardrails: Sequence[InputGuardrail]
    output_guardrails: Sequence[OutputGuardrail]


@dataclass(slots=True)
class AgentOptions:
    """The validated settings of an agent. Built by :class:`~goagent_py.Agent` from options.

    ``sources`` maps each setting to what the caller wrote to set it, for error messages.
    """

    provider: Provider | None = None
    model: str = ""
    tools: list[Tool] = field(default_factory=list)
    system_prompt: str = ""
    instructions: list[Instructions] = field(default_factory=list)
    max_iterations: int = 10
    short_term_memory: ShortTermMemoryProtocol | None = None
    long_term_memory: LongTermMemoryProtocol | None = None
    long_term_top_k: int | None = None
    write_policy: WritePolicy | None = None
    name: str = ""
    hooks: Hooks | None = None  # the hook sets merged (validate); None: none given
    hook_sets: list[Hooks] = field(default_factory=list)
    logger: logging.Logger = _LOGGER
    tool_timeout: float | None = None
    circuit_breaker: CircuitBreakerConfig | None = None
    dispatch_middlewares: list[DispatchMiddleware] = field(default_factory=list)
    thinking: ThinkingConfig | None = None
    effort: Literal["low", "medium", "high"] | None = None
    max_tokens: int | None = None
    short_term_trace_tools: bool = True
    mcp_connectors: list[MCPConnector] = field(default_factory=list)
    mcp_servers: list[ToolServer] = field(default_factory=list)
    before_tool_call: BeforeToolCall | None = None
    stop_on_denied: bool = False
    before_tool_call_sees_message: bool = False
    before_tool_call_sees_run: bool = False
    requires_approval: RequiresApproval | None = None
    approval_timeout: float | None = None
    holds_calls: bool = False  # a tool, or the policy, may make calls wait (validate)
    after_tool_call: AfterToolCall | None = None
    prepare_arguments: PrepareArguments | None = None
    should_stop: ShouldStop | None = None
    prepare_turn: PrepareTurn | None = None
    tool_execution: Literal["parallel", "sequential"] = "parallel"
    sequential_tools: set[str] = field(default_factory=set)
    max_parallel_tools: int | None = 64
    max_run_tokens: int | None = None
    # Results from servers and functions alike (docs/tools.md, "Result size"); the same
    # number as DEFAULT_RESULT_CHARS in _results.py, which bounds serialising non-text results.
    max_tool_result_chars: int | None = 100_000
    transform_context: TransformContext | None = None
    tool_retry: RetryPolicy | None = None
    rate_limit: RateLimitConfig | None = None
    output_type: Any = str
    output_mode: OutputMode | None = None
    output_retries: int = 1
    output_validators: list[OutputValidator] = field(default_factory=list)
    input_guardrails: list[InputGuardrail] = field(default_factory=list)
    output_guardrails: list[OutputGuardrail] = field(default_factory=list)
    output: OutputSpec[Any] | None = None  # built from the four above (validate); None: text
    sources: dict[str, Label] = field(default_factory=dict)

    def _said(self, setting: str, default: str) -> str:
        label = self.sources.get(setting, default)
        if isinstance(label, tuple):  # a keyword, formatted now that an error needs it
            return f"{label[0]}={label[1]!r}"
        return label if isinstance(label, str) else label()

    def _positive_int(self, setting: str, *, optional: bool) -> None:
        value = getattr(self, setting)
        if value is None and optional:
            return
        if not _is_int(value) or value <= 0:
            off = f" (or None for {_OFF_MEANING[setting]})" if optional else ""
            raise ConfigurationError(
                f"{self._said(setting, setting)}: must be an int > 0{off}, "
                f"got {type(value).__name__} {value!r}"
            )

    def validate(self) -> None:
        """Check every setting the caller gave (the defaults are valid); raise
        :class:`ConfigurationError` naming the fix."""
        self._check_provider()
        given = self.sources
        if not _POSITIVE_INT_SET.isdisjoint(given):
            for setting in _POSITIVE_INTS:
                if setting in given:
                    self._positive_int(setting, optional=setting != "max_iterations")
        if not (
            type(self.model) is str and type(self.system_prompt) is str and type(self.name) is str
        ):
            for setting in ("model", "system_prompt", "name"):
                if setting in given and not isinstance(getattr(self, setting), str):
                    raise ConfigurationError(
                        f"{self._said(setting, setting)}: must be a str, "
                        f"got {type(getattr(self, setting)).__name__}"
                    )
        if self.name and not _NAME_RE.match(self.name):
            raise ConfigurationError(
                f"{self._said('name', 'name')}: invalid agent name {self.name!r}: the name "
                "namespaces the agent's memory sessions, so use 1-128 letters, digits, '_', '-' "
                "or '.', starting with a letter or digit"
            )
        if not _DISPATCH_SET.isdisjoint(given):
            check_dispatch_settings(
                timeout=self.tool_timeout,
                circuit_breaker=self.circuit_breaker,
                retry=self.tool_retry,
                rate_limit=self.rate_limit,
                middlewares=self.dispatch_middlewares,
                said=self._said_dispatch,
            )
        self._check_types()
        if self.effort is not None and self.effort not in _EFFORTS:
            raise ConfigurationError(
                f"{self._said('effort', 'effort')}: use one of {', '.join(_EFFORTS)}"
            )
        if self.thinking is not None and (
            not _is_int(self.thinking.budget_tokens) or self.thinking.budget_tokens < 0
        ):
            raise ConfigurationError(
                f"{self._said('thinking', 'thinking')}: the budget must be an int > 0 "
                "(adaptive_thinking=True lets the model decide)"
            )
        if self.tool_execution not in ("parallel", "sequential"):
            raise ConfigurationError(
                f"{self._said('tool_execution', 'tool_execution')}: use 'parallel' or 'sequential'"
            )
        if self.tools:
            self.check_tools(self.tools)
        for server in self.mcp_servers:
            if not callable(getattr(server, "tools", None)) or not callable(
                getattr(server, "aclose", None)
            ):
                raise ConfigurationError(
                    f"mcp_servers: {server!r} is not an MCP connection; use MCPStdio(...), "
                    "MCPHttp(...) or MCPInProcess(...) from goagent_py.mcp"
                )
        if self.sequential_tools:
            unknown = self.sequential_tools - {t.definition.name for t in self.tools}
            if unknown and not (self.mcp_connectors or self.mcp_servers):
                raise ConfigurationError(
                    f"{self._said('sequential_tools', 'sequential_tools')} names unknown tools: "
                    f"{', '.join(sorted(unknown))}"
                )
        if self.hook_sets:
            self.hooks = merge_hooks(*self.hook_sets)
        if self.before_tool_call is not None:
            self.before_tool_call_sees_message = _takes_two(self.before_tool_call)
            self.before_tool_call_sees_run = _takes_run(self.before_tool_call)
        self._check_approvals()
        if _given_any(self.sources, _OUTPUT):
            self.output = self.output_spec(self.output_type)
            if self.output is not None and self.provider is not None:
                self.output.mode_for(self.provider)  # a schema native mode cannot take fails here

    def _check_approvals(self) -> None:
        timeout = self.approval_timeout
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0
        ):
            raise ConfigurationError(
                f"{self._said('approval_timeout', 'approval_timeout')}: seconds a decision may "
                "take, a number >= 0 (or None: no deadline)"
            )
        self.holds_calls = self.requires_approval is not None or any(
            getattr(t, "requires_approval", False) or getattr(t, "external", False)
            for t in self.tools
        )
        if (
            self.holds_calls
            and self.short_term_memory is not None
            and not self.short_term_trace_tools
        ):
            raise ConfigurationError(
                "short_term_trace_tools=False: a call that waits for a decision is kept in "
                "short-term memory with its results, so approvals need the tool trace; "
                "leave short_term_trace_tools at True"
            )

    def output_spec(self, output_type: Any) -> OutputSpec[Any] | None:
        """The spec a run with ``output_type`` uses (None: plain text, nothing to check). The
        agent's output validators check the agent's own output type only."""
        if not _is_int(self.output_retries) or self.output_retries < 0:
            raise ConfigurationError(
                f"{self._said('output_retries', 'output_retries')}: must be an int >= 0"
            )
        validators = self.output_validators if output_type is self.output_type else []
        for validator in validators:
            if not callable(validator):
                raise ConfigurationError(
                    f"output_validators: {validator!r} is not a function; a validator takes the "
                    "output and returns it, or raises ModelRetry('what to fix')"
                )
        if output_type is str and not validators:
            return None
        spec: OutputSpec[Any] = OutputSpec(
            output_type,
            mode=self.output_mode,
            retries=self.output_retries,
            validators=validators,
        )
        if not spec.is_text and spec.mode in (None, "tool"):
            # The output tool would be a second tool of that name: vendors refuse the request,
            # and the model's call to the user's tool would be taken for the answer.
            clash = [t for t in self.tools if _name_of(t) == FINAL_RESULT_TOOL]
            if clash:
                raise ConfigurationError(
                    f"tool {FINAL_RESULT_TOOL!r}: a typed output in tool mode gives the model a "
                    "tool of that name; rename yours (@tool(name=...)), or use "
                    "output_mode='native' or 'prompted'"
                )
        return spec

    def _said_dispatch(self, name: str, value: object) -> str:
        setting = _DISPATCH_SETTING.get(name, name)
        return self._said(setting, f"{setting}={value!r}")

    def _check_provider(self) -> None:
        if self.provider is None:
            raise ConfigurationError(
                "no provider configured: pass provider=... (or with_provider(...)), e.g. "
                "AnthropicProvider(), OpenAIProvider(), or ScriptedProvider(...) in tests"
            )
        if not callable(getattr(self.provider, "complete", None)):
            raise ConfigurationError(
                f"{self._said('provider', 'provider')}: {self.provider!r} has no "
                "complete(request) method: it must implement the Provider protocol"
            )

    def _check_types(self) -> None:
        if not _given_any(self.sources, _TYPED):
            return
        checks: list[tuple[str, object, type[Any] | tuple[type[Any], ...], str]] = [
            ("short_term_memory", self.short_term_memory, ShortTermMemoryProtocol,
             "async messages() and append(*messages), e.g. ShortTermMemory(...)"),
            ("long_term_memory", self.long_term_memory, LongTermMemoryProtocol,
             "async retrieve(query, top_k=, session=) and store(messages, session=), "
             "e.g. LongTermMemory(...)"),
            ("logger", self.logger, logging.Logger, "a logging.Logger"),
        ]  # fmt: skip
        for setting, value, expected, want in checks:
            if value is not None and not isinstance(value, expected):
                raise ConfigurationError(
                    f"{self._said(setting, setting)}: expected {want}, got {type(value).__name__}"
                )
        for setting in (
            "before_tool_call", "after_tool_call", "transform_context", "write_policy",
            "prepare_arguments", "should_stop", "prepare_turn", "requires_approval",
        ):  # fmt: skip
            value = getattr(self, setting)
            if value is not None and not callable(value):
                raise ConfigurationError(
                    f"{self._said(setting, setting)}: expected a function, "
                    f"got {type(value).__name__}"
                )
        for hooks in self.hook_sets:
            if not isinstance(hooks, Hooks):
                raise ConfigurationError(
                    f"hooks: expected Hooks objects, got {type(hooks).__name__}"
                )

    @staticmethod
    def check_tools(tools: Iterable[Tool]) -> None:
        """Every tool must implement the protocol, and names must be unique."""
        seen: set[str] = set()
        for t in tools:
            if not isinstance(t, Tool):
                raise ConfigurationError(
                    f"{t!r} is not a tool: decorate the function with @tool, or implement "
                    "definition and async execute(args)"
                )
            name = _name_of(t)
            if type(t) is not FunctionTool:  # a FunctionTool's schema was checked when made
                definition = t.definition
                check_parameters_once(
                    definition, definition.parameters, what=f"tool {name!r} parameters"
                )
            if name in seen:
                raise ConfigurationError(
                    f"duplicate tool name {name!r}: every tool needs its own name "
                    "(rename one with @tool(name=...))"
                )
            seen.add(name)


_POSITIVE_INTS = (
    "max_iterations", "long_term_top_k", "max_tokens", "max_tool_result_chars",
    "max_parallel_tools", "max_run_tokens",
)  # fmt: skip
_POSITIVE_INT_SET = frozenset(_POSITIVE_INTS)
_OUTPUT = frozenset({"output_type", "output_mode", "output_retries", "output_validators"})
# The Agent's names of the Dispatcher's settings (check_dispatch_settings checks them for both).
_DISPATCH_SETTING = {"timeout": "tool_timeout", "retry": "tool_retry"}
_DISPATCH_SET = frozenset(
    {"tool_timeout", "circuit_breaker", "tool_retry", "rate_limit", "dispatch_middlewares"}
)
_TYPED = frozenset(
    {
        "short_term_memory", "long_term_memory", "logger", "before_tool_call", "after_tool_call",
        "transform_context", "write_policy", "prepare_arguments", "should_stop", "prepare_turn",
        "hooks", "requires_approval",
    }
)  # fmt: skip


def _given_any(sources: Mapping[str, object], settings: frozenset[str]) -> bool:
    """Whether any of ``settings`` was given (is in ``sources``)."""
    return not settings.isdisjoint(sources)


_OFF_MEANING = {
    "long_term_top_k": "the memory's own top_k",
    "max_tokens": "the provider's default",
    "max_tool_result_chars": "no cap",
    "max_parallel_tools": "no limit",
    "max_run_tokens": "no token budget",
}


def build_options(
    options: Sequence[Option], keywords: Mapping[str, Any], *, base: AgentOptions | None = None
) -> AgentOptions:
    """Apply ``options`` then ``keywords`` (mapped onto the same options) to ``base`` (or the
    defaults) and validate."""
    settings = base if base is not None else AgentOptions()
    for step in options:
        if not isinstance(step, Option):
            raise ConfigurationError(
                f"Agent() takes options made by the with_* functions as positional arguments, "
                f"got {step!r}; pass settings as keywords (provider=..., tools=[...])"
            )
        step.apply(settings)
    for key, value in keywords.items():
        # output_type is not in AgentSettings: Agent.__init__ takes it apart, to type the agent.
        if key in _SCALARS or key == "output_type":  # the common case, without an Option
            setattr(settings, key, value)
            settings.sources[key] = (key, value)
        elif key == "tools":
            settings.tools.extend(_sequence(key, value))
            settings.sources[key] = (key, value)
        else:
            _keyword_option(key, value).apply(settings)
    settings.validate()
    return settings


def _sequence(key: str, value: Any) -> list[Any]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | set | frozenset):
        raise ConfigurationError(f"{key}=: expected a list, got {type(value).__name__}")
    return list(value)


def _keyword_option(key: str, value: Any) -> Option:
    def label() -> str:  # formatted only for an error message: a repr can be costly
        return f"{key}={value!r}"

    option: Option
    if key == "hooks":
        sets = [value] if isinstance(value, Hooks) or value is None else _sequence(key, value)
        option = with_hooks(*[h for h in sets if h is not None])
    elif key == "dispatch_middlewares":
        option = with_dispatch_middleware(*_sequence(key, value))
    elif key == "mcp_connectors":
        connectors = _sequence(key, value)
        option = Option("mcp_connectors", lambda o: o.mcp_connectors.extend(connectors))
    elif key == "mcp_servers":
        option = with_mcp_server(*_sequence(key, value))
    elif key == "thinking":
        option = Option(
            "thinking",
            lambda o: setattr(o, "thinking", None if value is None else ThinkingConfig(value)),
        )
    elif key == "adaptive_thinking":
        option = Option(
            "thinking", lambda o: setattr(o, "thinking", ThinkingConfig(0)) if value else None
        )
    elif key == "sequential_tools":
        names = _sequence(key, value)
        option = Option("sequential_tools", lambda o: o.sequential_tools.update(names))
    elif key == "stop_on_denied":
        option = Option("stop_on_denied", lambda o: setattr(o, "stop_on_denied", bool(value)))
    elif key in ("input_guardrails", "output_guardrails"):
        guards = _sequence(key, value)
        for guard in guards:
            if not callable(guard):
                raise ConfigurationError(
                    f"{key}: {guard!r} is not a function; a guardrail takes (value, ctx) and "
                    "returns None to pass, or a reason to trip"
                )
        option = Option(key, lambda o: getattr(o, key).extend(guards))
    elif key == "instructions":
        parts = [value] if callable(value) else _sequence(key, value)
        for part in parts:
            if not callable(part):
                raise ConfigurationError(
                    f"instructions: {part!r} is not a function; an instructions function takes "
                    "the RunContext and returns the text to add to the system prompt (for a "
                    "fixed text, use system_prompt=)"
                )
        option = Option(key, lambda o: o.instructions.extend(parts))
    elif key == "output_validators":
        validators = _sequence(key, value)
        option = Option(key, lambda o: o.output_validators.extend(validators))
    elif key in _SCALARS:
        option = _set(key, value)
    else:
        import difflib

        known = sorted([*_SCALARS, *_SPECIAL])
        close = difflib.get_close_matches(key, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        # A TypeError, as Python raises for an unexpected keyword (the keywords arrive as one
        # dict; see Agent.__init__).
        raise TypeError(
            f"Agent() got an unexpected keyword argument {key!r}; {hint}"
            f"known settings: {', '.join(known)}"
        )
    return option.relabel(label)


_SPECIAL = (
    "tools", "hooks", "dispatch_middlewares", "mcp_connectors", "mcp_servers", "thinking",
    "adaptive_thinking",
    "sequential_tools", "stop_on_denied", "output_validators", "input_guardrails",
    "output_guardrails", "instructions",
)  # fmt: skip
_SCALARS = frozenset(
    {
        "provider", "model", "system_prompt", "max_iterations", "short_term_memory",
        "long_term_memory", "long_term_top_k", "write_policy", "name", "logger", "tool_timeout",
        "circuit_breaker", "effort", "max_tokens", "short_term_trace_tools", "before_tool_call",
        "after_tool_call", "prepare_arguments", "should_stop", "prepare_turn", "tool_execution",
        "max_parallel_tools", "max_run_tokens", "max_tool_result_chars", "transform_context",
        "tool_retry",
        "rate_limit", "output_mode", "output_retries", "requires_approval", "approval_timeout",
    }
)  # fmt: skip


class Option:
    """One configuration step for :class:`~goagent_py.Agent`, made by a ``with_*`` function.

    ``label`` is what the caller wrote (``with_max_iterations(5)``), used in error messages.
    """

    __slots__ = ("_apply", "_label", "_value", "name")

    def __init__(
        self,
        name: str,
        apply: Callable[[AgentOptions], None] | None = None,
        label: Label = "",
        *,
        value: Any = None,
    ) -> None:
        self.name = name
        self._label = label
        self._apply = apply  # None: set the setting ``name`` to ``value``
        self._value = value

    @property
    def label(self) -> str:
        """What the caller wrote, e.g. ``with_max_iterations(5)`` or ``max_iterations=5``."""
        label = self._label
        if not label:  # formatted only now that it is asked for: a repr can be costly
            if self._apply is None:
                return f"with_{self.name}({self._value!r})"
            return f"with_{self.name}(...)"
        if isinstance(label, tuple):
            return f"{label[0]}={label[1]!r}"
        return label if isinstance(label, str) else label()

    def __call__(self) -> str:
        """The label (an option is its own lazy label in ``AgentOptions.sources``)."""
        return self.label

    def apply(self, options: AgentOptions) -> None:
        """Apply this option to ``options``, recording what set it."""
        if self._apply is None:
            setattr(options, self.name, self._value)
        else:
            self._apply(options)
        options.sources[self.name] = self._label or self

    def relabel(self, label: Label) -> Option:
        """The same option, reported as ``label`` in error messages."""
        self._label = label
        return self

    def __repr__(self) -> str:
        return f"<Option {self.label}>"


def _set(name: str, value: Any) -> Option:
    return Option(name, value=value)


def with_provider(provider: Provider) -> Option:
    """The model backend (required)."""
    return _set("provider", provider)


def with_model(model: str) -> Option:
    """The model name sent with every request."""
    return _set("model", model)


def with_tool(tool: Tool) -> Option:
    """Add one tool."""
    return Option("tools", lambda o: o.tools.append(tool), lambda: f"with_tool({tool!r})")


def with_tools(*tools: Tool) -> Option:
    """Add several tools."""
    return Option("tools", lambda o: o.tools.extend(tools), "with_tools(...)")


def with_system_prompt(prompt: str) -> Option:
    """The system prompt (sent on the request, never as a message)."""
    return _set("system_prompt", prompt)


def with_max_iterations(n: int) -> Option:
    """The most model calls one run may make (default 10)."""
    return _set("max_iterations", n)


def with_short_term_memory(memory: ShortTermMemoryProtocol) -> Option:
    """The conversation memory, loaded before and appended after each run."""
    return _set("short_term_memory", memory)


def with_long_term_memory(memory: LongTermMemoryProtocol) -> Option:
    """Semantic memory recalled before each run and written after it."""
    return _set("long_term_memory", memory)


def with_long_term_top_k(k: int | None) -> Option:
    """How many memories to recall per run (None, the default: the memory's own ``top_k``)."""
    return _set("long_term_top_k", k)


def with_write_policy(policy: WritePolicy) -> Option:
    """What a finished turn leaves in long-term memory (default: store_always)."""
    return _set("write_policy", policy)


def with_name(name: str) -> Option:
    """The agent's name; it also namespaces its long-term memory session."""
    return _set("name", name)


def with_hooks(*hooks: Hooks) -> Option:
    """Add hook sets; every set given (here or in other ``with_hooks``/``hooks=``) is called."""
    return Option("hooks", lambda o: o.hook_sets.extend(hooks), "with_hooks(...)")


def with_logger(logger: logging.Logger) -> Option:
    """Where the agent logs (default: the "goagent_py" logger)."""
    return _set("logger", logger)


def with_tool_timeout(seconds: float | None) -> Option:
    """Seconds each tool call may take (None, the default: no limit)."""
    return _set("tool_timeout", seconds)


def with_circuit_breaker(
    max_failures: int = 5,
    reset_timeout: float = 30.0,
    *,
    key: BreakerKey | None = None,
    max_keys: int = 10_000,
) -> Option:
    """Open a tool's circuit after ``max_failures`` consecutive failures for ``reset_timeout`` s.

    ``key``: one breaker per tool and key instead of one per tool shared by every run, e.g.
    per user: ``key=lambda call, ctx: ctx.deps.user_id``; ``max_keys``: the most keyed
    breakers kept, the least recently used dropped first (see :class:`CircuitBreakerConfig`).

    Raises:
        ConfigurationError: a value is not > 0, or ``key`` is not a function.
    """
    config = CircuitBreakerConfig(max_failures, reset_timeout, key, max_keys)
    return _set("circuit_breaker", config)


def with_dispatch_middleware(*middlewares: DispatchMiddleware) -> Option:
    """Add custom dispatch middlewares (the first registered is the outermost)."""
    return Option(
        "dispatch_middlewares",
        lambda o: o.dispatch_middlewares.extend(middlewares),
        "with_dispatch_middleware(...)",
    )


def with_tool_retry(policy: RetryPolicy | None) -> Option:
    """Retry failed tool calls under ``policy`` (None: no retry, the default).

    Retries run inside the circuit breaker and the tool timeout: the breaker counts one failure
    per call, and the timeout bounds all its attempts together. ``ToolRetry`` events report each.
    """
    return _set("tool_retry", policy)


def with_rate_limit(rate: float, burst: int = 1, *, per_tool: PerTool = False) -> Option:
    """Hold tool calls to ``rate`` per second, with up to ``burst`` at once (a token bucket).

    See :class:`RateLimitConfig` for ``per_tool``. A call waiting for a token still counts
    against the tool timeout.
    """
    return _set("rate_limit", RateLimitConfig(rate, burst, per_tool))


def with_thinking(budget_tokens: int) -> Option:
    """Extended thinking with a token budget."""
    return Option(
        "thinking",
        lambda o: setattr(o, "thinking", ThinkingConfig(budget_tokens)),
        f"with_thinking({budget_tokens!r})",
    )


def with_adaptive_thinking() -> Option:
    """Extended thinking where the model decides the budget."""
    return Option(
        "thinking", lambda o: setattr(o, "thinking", ThinkingConfig(0)), "with_adaptive_thinking()"
    )


def with_effort(level: Literal["low", "medium", "high"]) -> Option:
    """The effort level ("low", "medium", "high") for providers that support it."""
    return _set("effort", level)


def with_max_tokens(n: int | None) -> Option:
    """The output token limit per model call (None: the provider's default)."""
    return _set("max_tokens", n)


def with_short_term_trace_tools(enabled: bool) -> Option:
    """Store the full tool trace in short-term memory (default) or only [user, final answer]."""
    return _set("short_term_trace_tools", enabled)


def with_mcp_connector(connector: MCPConnector) -> Option:
    """Add a connector run on first use; its tools join the agent's and ``aclose`` closes it."""
    return Option(
        "mcp_connectors", lambda o: o.mcp_connectors.append(connector), "with_mcp_connector(...)"
    )


def with_mcp_server(*servers: ToolServer) -> Option:
    """Attach MCP servers (``MCPStdio``, ``MCPHttp``, ``MCPInProcess`` from goagent_py.mcp):
    their tools join the agent's at the first run and are brought up to date between turns."""
    return Option("mcp_servers", lambda o: o.mcp_servers.extend(servers), "with_mcp_server(...)")


def with_before_tool_call(fn: BeforeToolCall, *, stop_on_deny: bool = False) -> Option:
    """Approve or block each call: return None to run it, or a reason the model reads.

    With ``stop_on_deny=True`` a denied call also ends the run after its batch (the denial is
    still recorded as the call's result, so the transcript stays valid).
    """

    def apply(o: AgentOptions) -> None:
        o.before_tool_call = fn
        o.stop_on_denied = stop_on_deny

    return Option("before_tool_call", apply, "with_before_tool_call(...)")


def with_after_tool_call(fn: AfterToolCall) -> Option:
    """See each result; return a replacement ToolResult to override it."""
    return _set("after_tool_call", fn)


def with_prepare_arguments(fn: PrepareArguments) -> Option:
    """Repair each call's raw arguments before they are validated (e.g. fix a model's quirks)."""
    return _set("prepare_arguments", fn)


def with_should_stop(fn: ShouldStop) -> Option:
    """Ask after each turn with tool calls whether the run should stop there."""
    return _set("should_stop", fn)


def with_prepare_turn(fn: PrepareTurn) -> Option:
    """Shape each request before it is sent (swap model, thinking or tools between turns)."""
    return _set("prepare_turn", fn)


def with_tool_execution(
    mode: Literal["parallel", "sequential"], *, tools: Iterable[str] | None = None
) -> Option:
    """How a turn's calls run: "parallel" (default) or "sequential" (one at a time, in order).

    With ``tools``, only those tools are sequential: a turn that calls any of them runs in order.
    """
    names = None if tools is None else list(tools)

    def apply(o: AgentOptions) -> None:
        if names is None:
            o.tool_execution = mode
        elif mode == "sequential":
            o.sequential_tools.update(names)
            o.sources["sequential_tools"] = f"with_tool_execution('sequential', tools={names!r})"
        else:
            o.sequential_tools.difference_update(names)

    return Option("tool_execution", apply, f"with_tool_execution({mode!r})")


def with_max_run_tokens(n: int | None) -> Option:
    """A token budget for the whole run (input + output of every model call, sub-agents'
    included): checked after each call; past it the run ends with ``TokenBudgetError``."""
    return _set("max_run_tokens", n)


def with_max_parallel_tools(n: int | None) -> Option:
    """Run at most ``n`` calls of one turn at once (default 64; None: no limit)."""
    return _set("max_parallel_tools", n)


def with_max_tool_result_chars(n: int | None) -> Option:
    """Cut tool results longer than ``n`` characters, with a visible truncation marker
    (default 100 000, about 25 000 tokens; None: no cap)."""
    return _set("max_tool_result_chars", n)


def with_transform_context(fn: TransformContext) -> Option:
    """Rewrite the messages sent with each request; the run's history stays intact."""
    return _set("transform_context", fn)


def with_output_type(output_type: Any) -> Option:
    """The type of ``result.output`` (see ``Agent(output_type=...)``, which a type checker
    follows: this option types the agent's output as ``Any``)."""
    return _set("output_type", output_type)


def with_output_mode(mode: OutputMode | None) -> Option:
    """How typed output is asked for: "tool", "native" or "prompted" (None: the provider's
    default)."""
    return _set("output_mode", mode)


def with_output_retries(n: int) -> Option:
    """How many times an invalid output is sent back to the model before the run fails."""
    return _set("output_retries", n)


def with_output_validator(*validators: OutputValidator) -> Option:
    """Functions run on the validated output; they may raise ``ModelRetry('what to fix')``."""
    return Option("output_validators", lambda o: o.output_validators.extend(validators))
