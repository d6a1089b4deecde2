"""Agent configuration: the ``with_*`` options and the validated :class:`AgentOptions`.

Every setting is a functional option; ``Agent(provider=p, tools=[add])`` keyword arguments map
onto the same options, so there is one code path and one validation, at construction.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from goagent_py.dispatch import DispatchMiddleware
from goagent_py.errors import ConfigurationError
from goagent_py.hooks import Hooks, ToolResult
from goagent_py.memory.base import LongTermMemoryProtocol, ShortTermMemoryProtocol, WritePolicy
from goagent_py.messages import Message, ToolCall
from goagent_py.provider import Provider, ThinkingConfig
from goagent_py.resilience import PerTool, RetryPolicy, check_rate_limit
from goagent_py.tools import Tool

__all__ = [
    "AfterToolCall",
    "AgentOptions",
    "BeforeToolCall",
    "MCPConnector",
    "Option",
    "TransformContext",
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
    "with_max_tokens",
    "with_max_tool_result_chars",
    "with_mcp_connector",
    "with_model",
    "with_name",
    "with_provider",
    "with_rate_limit",
    "with_short_term_memory",
    "with_short_term_trace_tools",
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

BeforeToolCall = Callable[[ToolCall], "str | Awaitable[str | None] | None"]
"""Return ``None`` to let a call run, or a reason (shown to the model) to block it."""

AfterToolCall = Callable[[ToolResult], "ToolResult | Awaitable[ToolResult | None] | None"]
"""Return ``None`` to keep a result, or a replacement :class:`ToolResult`."""

TransformContext = Callable[[list[Message]], "list[Message] | Awaitable[list[Message]]"]
"""Rewrites the message list sent with each request (compaction); the run's history is kept."""

MCPConnector = Callable[[], Awaitable[tuple[Sequence[Tool], Callable[[], Awaitable[None]] | None]]]
"""Connects to tool servers on first use: returns the tools and an async ``close`` (or None)."""

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_EFFORTS = ("low", "medium", "high")


@dataclass(slots=True)
class AgentOptions:
    """The validated settings of an agent. Built by :class:`~goagent_py.Agent` from options."""

    provider: Provider | None = None
    model: str = ""
    tools: list[Tool] = field(default_factory=list)
    system_prompt: str = ""
    max_iterations: int = 10
    short_term_memory: ShortTermMemoryProtocol | None = None
    long_term_memory: LongTermMemoryProtocol | None = None
    long_term_top_k: int = 3
    write_policy: WritePolicy | None = None
    name: str = ""
    hooks: Hooks = field(default_factory=Hooks)
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("goagent_py"))
    tool_timeout: float | None = None
    circuit_breaker: tuple[int, float] | None = None
    dispatch_middlewares: list[DispatchMiddleware] = field(default_factory=list)
    thinking: ThinkingConfig | None = None
    effort: Literal["low", "medium", "high"] | None = None
    max_tokens: int | None = None
    short_term_trace_tools: bool = True
    mcp_connectors: list[MCPConnector] = field(default_factory=list)
    before_tool_call: BeforeToolCall | None = None
    after_tool_call: AfterToolCall | None = None
    tool_execution: Literal["parallel", "sequential"] = "parallel"
    sequential_tools: set[str] = field(default_factory=set)
    max_tool_result_chars: int | None = None
    transform_context: TransformContext | None = None
    tool_retry: RetryPolicy | None = None
    rate_limit: tuple[float, int] | None = None
    rate_limit_per_tool: PerTool = False

    def validate(self) -> None:
        """Check every setting; raise :class:`ConfigurationError` naming the fix."""
        if self.provider is None:
            raise ConfigurationError(
                "no provider configured: pass with_provider(...) (or provider=...), e.g. "
                "AnthropicProvider(), OpenAIProvider(), or ScriptedProvider(...) in tests"
            )
        if not callable(getattr(self.provider, "complete", None)):
            raise ConfigurationError(
                f"provider {self.provider!r} has no complete(request) method: "
                "it must implement the Provider protocol"
            )
        if self.max_iterations <= 0:
            raise ConfigurationError(f"with_max_iterations({self.max_iterations}): must be > 0")
        if self.long_term_top_k <= 0:
            raise ConfigurationError(f"with_long_term_top_k({self.long_term_top_k}): must be > 0")
        if self.name and not _NAME_RE.match(self.name):
            raise ConfigurationError(
                f"invalid agent name {self.name!r}: the name namespaces the agent's memory "
                "sessions, so use 1-128 letters, digits, '_', '-' or '.', starting with a "
                "letter or digit"
            )
        if self.tool_timeout is not None and self.tool_timeout < 0:
            raise ConfigurationError(
                f"with_tool_timeout({self.tool_timeout}): must be >= 0 (0 or None = no timeout)"
            )
        if self.circuit_breaker is not None:
            failures, reset = self.circuit_breaker
            if failures <= 0:
                raise ConfigurationError(
                    f"with_circuit_breaker: max_failures must be > 0, got {failures}"
                )
            if reset <= 0:
                raise ConfigurationError(
                    f"with_circuit_breaker: reset_timeout must be > 0, got {reset}"
                )
        if self.effort is not None and self.effort not in _EFFORTS:
            raise ConfigurationError(
                f"with_effort({self.effort!r}): use one of {', '.join(_EFFORTS)}"
            )
        if self.thinking is not None and self.thinking.budget_tokens < 0:
            raise ConfigurationError(
                f"with_thinking({self.thinking.budget_tokens}): budget must be > 0 "
                "(use with_adaptive_thinking() to let the model decide)"
            )
        if self.max_tokens is not None and self.max_tokens <= 0:
            raise ConfigurationError(f"with_max_tokens({self.max_tokens}): must be > 0")
        if self.max_tool_result_chars is not None and self.max_tool_result_chars <= 0:
            raise ConfigurationError(
                f"with_max_tool_result_chars({self.max_tool_result_chars}): must be > 0"
            )
        if self.tool_execution not in ("parallel", "sequential"):
            raise ConfigurationError(
                f"with_tool_execution({self.tool_execution!r}): use 'parallel' or 'sequential'"
            )
        if self.short_term_memory is not None and not isinstance(
            self.short_term_memory, ShortTermMemoryProtocol
        ):
            raise ConfigurationError(
                "short-term memory must have async messages() and append(*messages), e.g. "
                "ShortTermMemory(...)"
            )
        if self.long_term_memory is not None and not isinstance(
            self.long_term_memory, LongTermMemoryProtocol
        ):
            raise ConfigurationError(
                "long-term memory must have async retrieve(query, top_k=, session=) and "
                "store(messages, session=), e.g. LongTermMemory(...)"
            )
        if self.tool_retry is not None and not isinstance(self.tool_retry, RetryPolicy):
            raise ConfigurationError(
                f"with_tool_retry({self.tool_retry!r}): pass a RetryPolicy(...), "
                "e.g. RetryPolicy(max_attempts=3)"
            )
        if self.rate_limit is not None:
            try:
                check_rate_limit(*self.rate_limit, per_tool=self.rate_limit_per_tool)
            except ConfigurationError as exc:
                raise ConfigurationError(f"with_rate_limit: {exc}") from None
        self.check_tools(self.tools)
        unknown = self.sequential_tools - {t.definition.name for t in self.tools}
        if unknown and not self.mcp_connectors:
            raise ConfigurationError(
                f"with_tool_execution(tools=...) names unknown tools: {', '.join(sorted(unknown))}"
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
            name = t.definition.name
            if name in seen:
                raise ConfigurationError(
                    f"duplicate tool name {name!r}: every tool needs its own name "
                    "(rename one with @tool(name=...))"
                )
            seen.add(name)


class Option:
    """One configuration step for :class:`~goagent_py.Agent`, made by a ``with_*`` function."""

    __slots__ = ("_apply", "name")

    def __init__(self, name: str, apply: Callable[[AgentOptions], None]) -> None:
        self.name = name
        self._apply = apply

    def apply(self, options: AgentOptions) -> None:
        """Apply this option to ``options``."""
        self._apply(options)

    def __repr__(self) -> str:
        return f"<Option {self.name}>"


def _set(name: str, attr: str, value: Any) -> Option:
    return Option(name, lambda o: setattr(o, attr, value))


def with_provider(provider: Provider) -> Option:
    """The model backend (required)."""
    return _set("provider", "provider", provider)


def with_model(model: str) -> Option:
    """The model name sent with every request."""
    return _set("model", "model", model)


def with_tool(tool: Tool) -> Option:
    """Add one tool."""
    return Option("tool", lambda o: o.tools.append(tool))


def with_tools(*tools: Tool) -> Option:
    """Add several tools."""
    return Option("tools", lambda o: o.tools.extend(tools))


def with_system_prompt(prompt: str) -> Option:
    """The system prompt."""
    return _set("system_prompt", "system_prompt", prompt)


def with_max_iterations(n: int) -> Option:
    """The most model calls one run may make (default 10)."""
    return _set("max_iterations", "max_iterations", n)


def with_short_term_memory(memory: ShortTermMemoryProtocol) -> Option:
    """The conversation memory, loaded before and appended after each run."""
    return _set("short_term_memory", "short_term_memory", memory)


def with_long_term_memory(memory: LongTermMemoryProtocol) -> Option:
    """Semantic memory recalled before each run and written after it."""
    return _set("long_term_memory", "long_term_memory", memory)


def with_long_term_top_k(k: int) -> Option:
    """How many memories to recall per run (default 3)."""
    return _set("long_term_top_k", "long_term_top_k", k)


def with_write_policy(policy: WritePolicy) -> Option:
    """What a finished turn leaves in long-term memory (default: store_always)."""
    return _set("write_policy", "write_policy", policy)


def with_name(name: str) -> Option:
    """The agent's name; it also namespaces its long-term memory session."""
    return _set("name", "name", name)


def with_hooks(hooks: Hooks | None) -> Option:
    """The hooks (replaces earlier ones; combine sets with merge_hooks). None means no hooks."""
    if hooks is not None and not isinstance(hooks, Hooks):
        raise ConfigurationError(
            f"with_hooks() takes a Hooks object (combine several with merge_hooks), got {hooks!r}"
        )
    return _set("hooks", "hooks", hooks if hooks is not None else Hooks())


def with_logger(logger: logging.Logger) -> Option:
    """Where the agent logs (default: the "goagent_py" logger)."""
    return _set("logger", "logger", logger)


def with_tool_timeout(seconds: float | None) -> Option:
    """Seconds each tool call may take (None or 0: no limit)."""
    return _set("tool_timeout", "tool_timeout", seconds or None)


def with_circuit_breaker(max_failures: int, reset_timeout: float) -> Option:
    """Open a tool's circuit after ``max_failures`` consecutive failures for ``reset_timeout`` s.

    ``with_circuit_breaker(0, 0)`` leaves the breaker off.
    """
    value = None if (max_failures == 0 and reset_timeout == 0) else (max_failures, reset_timeout)
    return _set("circuit_breaker", "circuit_breaker", value)


def with_dispatch_middleware(*middlewares: DispatchMiddleware) -> Option:
    """Add custom dispatch middlewares (the first registered is the outermost)."""
    return Option("dispatch_middleware", lambda o: o.dispatch_middlewares.extend(middlewares))


def with_tool_retry(policy: RetryPolicy | None) -> Option:
    """Retry failed tool calls under ``policy`` (None: no retry, the default).

    Retries run inside the circuit breaker and the tool timeout: the breaker counts one failure
    per call, and the timeout bounds all its attempts together. ``on_tool_retry`` hooks see each.
    """
    return _set("tool_retry", "tool_retry", policy)


def with_rate_limit(rate: float, burst: int, *, per_tool: PerTool = False) -> Option:
    """Hold tool calls to ``rate`` per second, with up to ``burst`` at once (a token bucket).

    ``per_tool=False`` shares one bucket between every tool; ``True`` gives each tool its own;
    ``{"search": (1.0, 2)}`` gives the named tools their own limits (the rest share one bucket).
    A call waiting for a token still counts against the tool timeout.
    """

    def apply(o: AgentOptions) -> None:
        o.rate_limit = (rate, burst)
        o.rate_limit_per_tool = dict(per_tool) if isinstance(per_tool, Mapping) else per_tool

    return Option("rate_limit", apply)


def with_thinking(budget_tokens: int) -> Option:
    """Extended thinking with a token budget."""
    return _set("thinking", "thinking", ThinkingConfig(budget_tokens))


def with_adaptive_thinking() -> Option:
    """Extended thinking where the model decides the budget."""
    return _set("adaptive_thinking", "thinking", ThinkingConfig(0))


def with_effort(level: Literal["low", "medium", "high"]) -> Option:
    """The effort level ("low", "medium", "high") for providers that support it."""
    return _set("effort", "effort", level)


def with_max_tokens(n: int) -> Option:
    """The output token limit per model call."""
    return _set("max_tokens", "max_tokens", n)


def with_short_term_trace_tools(enabled: bool) -> Option:
    """Store the full tool trace in short-term memory (default) or only [user, final answer]."""
    return _set("short_term_trace_tools", "short_term_trace_tools", enabled)


def with_mcp_connector(connector: MCPConnector) -> Option:
    """Add a connector run on first use; its tools join the agent's and ``aclose`` closes it."""
    return Option("mcp_connector", lambda o: o.mcp_connectors.append(connector))


def with_before_tool_call(fn: BeforeToolCall) -> Option:
    """Approve or block each call: return None to run it, or a reason the model reads."""
    return _set("before_tool_call", "before_tool_call", fn)


def with_after_tool_call(fn: AfterToolCall) -> Option:
    """See each result; return a replacement ToolResult to override it."""
    return _set("after_tool_call", "after_tool_call", fn)


def with_tool_execution(
    mode: Literal["parallel", "sequential"], *, tools: Iterable[str] | None = None
) -> Option:
    """How a turn's calls run: "parallel" (default) or "sequential" (one at a time, in order).

    With ``tools``, only those tools are sequential: a turn that calls any of them runs in order.
    """

    def apply(o: AgentOptions) -> None:
        if tools is None:
            o.tool_execution = mode
        elif mode == "sequential":
            o.sequential_tools.update(tools)
        else:
            o.sequential_tools.difference_update(tools)

    return Option("tool_execution", apply)


def with_max_tool_result_chars(n: int) -> Option:
    """Cut tool results longer than ``n`` characters, with a visible truncation marker."""
    return _set("max_tool_result_chars", "max_tool_result_chars", n)


def with_transform_context(fn: TransformContext) -> Option:
    """Rewrite the messages sent with each request (e.g. compaction); history stays intact."""
    return _set("transform_context", "transform_context", fn)


def _multi(fn: Callable[..., Option]) -> Callable[[Any], Option]:
    def from_value(value: Any) -> Option:
        if isinstance(value, list | tuple):
            return fn(*value)
        return fn(value)

    return from_value


def _adaptive(value: Any) -> Option:
    return with_adaptive_thinking() if value else Option("adaptive_thinking", lambda o: None)


def _rate_limit_keyword(value: Any) -> Option:
    if value is None:
        return Option("rate_limit", lambda o: setattr(o, "rate_limit", None))
    if isinstance(value, Mapping):
        return with_rate_limit(**value)
    if isinstance(value, list | tuple) and len(value) in (2, 3):
        return with_rate_limit(*value[:2], **({"per_tool": value[2]} if len(value) == 3 else {}))
    raise ConfigurationError(
        "rate_limit= takes (rate, burst), (rate, burst, per_tool) or "
        f"{{'rate': ..., 'burst': ..., 'per_tool': ...}}, got {value!r}"
    )


def _tool_execution(value: Any) -> Option:
    if isinstance(value, str):
        return with_tool_execution(value)  # type: ignore[arg-type]
    raise ConfigurationError("tool_execution= takes 'parallel' or 'sequential'")


KEYWORD_OPTIONS: dict[str, Callable[[Any], Option]] = {
    "provider": with_provider,
    "model": with_model,
    "tool": with_tool,
    "tools": _multi(with_tools),
    "system_prompt": with_system_prompt,
    "max_iterations": with_max_iterations,
    "short_term_memory": with_short_term_memory,
    "long_term_memory": with_long_term_memory,
    "long_term_top_k": with_long_term_top_k,
    "write_policy": with_write_policy,
    "name": with_name,
    "hooks": with_hooks,
    "logger": with_logger,
    "tool_timeout": with_tool_timeout,
    "circuit_breaker": _multi(with_circuit_breaker),
    "dispatch_middleware": _multi(with_dispatch_middleware),
    "dispatch_middlewares": _multi(with_dispatch_middleware),
    "thinking": with_thinking,
    "adaptive_thinking": _adaptive,
    "effort": with_effort,
    "max_tokens": with_max_tokens,
    "short_term_trace_tools": with_short_term_trace_tools,
    "mcp_connector": with_mcp_connector,
    "mcp_connectors": _multi(
        lambda *cs: Option("mcp_connectors", lambda o: o.mcp_connectors.extend(cs))
    ),
    "before_tool_call": with_before_tool_call,
    "after_tool_call": with_after_tool_call,
    "tool_execution": _tool_execution,
    "sequential_tools": lambda v: with_tool_execution("sequential", tools=v),
    "max_tool_result_chars": with_max_tool_result_chars,
    "transform_context": with_transform_context,
    "tool_retry": with_tool_retry,
    "rate_limit": _rate_limit_keyword,
}


def build_options(options: Sequence[Option], keywords: dict[str, Any]) -> AgentOptions:
    """Apply ``options`` then ``keywords`` (mapped onto the same options) and validate."""
    settings = AgentOptions()
    steps = list(options)
    for key, value in keywords.items():
        factory = KEYWORD_OPTIONS.get(key)
        if factory is None:
            raise ConfigurationError(
                f"Agent() got an unknown setting {key!r}; known settings: "
                f"{', '.join(sorted(KEYWORD_OPTIONS))}"
            )
        steps.append(factory(value))
    for step in steps:
        if not isinstance(step, Option):
            raise ConfigurationError(
                f"Agent() takes options made by the with_* functions, got {step!r}"
            )
        step.apply(settings)
    settings.validate()
    return settings
