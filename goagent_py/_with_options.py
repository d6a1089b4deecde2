"""``Option`` and the ``with_*`` functions: each builds one configuration step for an Agent.

A step sets (or adds to) one setting of :class:`~goagent_py.options.AgentOptions`; what the
settings may hold, the order rules and the one validation live in :mod:`goagent_py.options`,
which re-exports every name here (import them from there, or from ``goagent_py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal

from goagent_py.dispatch import CircuitBreakerConfig, DispatchMiddleware, RateLimitConfig
from goagent_py.hooks import Hooks
from goagent_py.memory.base import LongTermMemoryProtocol, ShortTermMemoryProtocol, WritePolicy
from goagent_py.provider import Provider, ThinkingConfig
from goagent_py.resilience import PerTool, RetryPolicy
from goagent_py.tools import Tool

if TYPE_CHECKING:
    from goagent_py.mcp import MCPConnection

    # For annotations only: options.py imports this module, so this one never imports it back
    # at run time (no import circle, whichever module is imported first).
    from goagent_py.options import (
        AfterToolCall,
        AgentOptions,
        BeforeToolCall,
        Label,
        MCPConnector,
        PrepareArguments,
        PrepareTurn,
        ShouldStop,
        TransformContext,
    )

__all__ = [
    "Option",
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


def with_circuit_breaker(max_failures: int = 5, reset_timeout: float = 30.0) -> Option:
    """Open a tool's circuit after ``max_failures`` consecutive failures for ``reset_timeout`` s.

    Raises:
        ConfigurationError: a value is not > 0.
    """
    config = CircuitBreakerConfig(max_failures, reset_timeout)
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


def with_mcp_server(*servers: MCPConnection) -> Option:
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
    """Cut tool results longer than ``n`` characters, with a visible truncation marker."""
    return _set("max_tool_result_chars", n)


def with_transform_context(fn: TransformContext) -> Option:
    """Rewrite the messages sent with each request; the run's history stays intact."""
    return _set("transform_context", fn)
