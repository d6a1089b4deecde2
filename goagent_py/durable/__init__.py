"""Durable agent runs on Temporal: runs survive worker crashes and scale across processes.

Install with ``pip install "goagent-py[temporal]"``. The pieces::

    durable = DurableAgent(
        agent,  # an Agent with a name, tools, model and system prompt
        provider="anthropic:claude-sonnet-4-6",
        short_term_memory=lambda session: ShortTermMemory(pg.for_session(session)),
    )
    worker = create_worker(client, [durable])           # worker processes: await worker.run()
    result = await durable.execute(client, "hi", session_id="alice")      # app processes

The loop's decisions run in a workflow; model calls, tool calls, memory and MCP traffic run as
activities named after the agent, its tools and its MCP servers. A tool call runs in its
activity through the agent's own dispatch chain (timeout, breaker, rate limit, middlewares) and
its ``before_tool_call``/``after_tool_call``; retries belong to the engine. See
:mod:`goagent_py.durable.agent` and ``docs/architecture.md`` (section 10).
"""

from goagent_py.errors import MissingExtraError

try:
    import temporalio  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingExtraError("temporalio", "temporal", feature="goagent_py.durable") from exc

from goagent_py.durable._activities import activities_for, create_worker, sandbox_runner
from goagent_py.durable._deps import DepsRegistry, DepsSpec
from goagent_py.durable._mcp import MCPServerSpec
from goagent_py.durable._telemetry import telemetry_interceptor
from goagent_py.durable._wire import (
    MEMORY_ID_KEY,
    DurableRunError,
    PayloadTooLargeError,
    RemoteToolError,
)
from goagent_py.durable._workflow import AgentWorkflow, run_in_workflow
from goagent_py.durable.agent import (
    ABORT_SIGNAL,
    DECIDE_UPDATE,
    EVENTS_UPDATE,
    FOLLOW_UP_SIGNAL,
    PENDING_QUERY,
    STATE_QUERY,
    STEER_SIGNAL,
    WORKFLOW_NAME,
    DurableAgent,
    DurableResult,
    ProviderRegistry,
)

__all__ = [
    "ABORT_SIGNAL",
    "DECIDE_UPDATE",
    "EVENTS_UPDATE",
    "FOLLOW_UP_SIGNAL",
    "MEMORY_ID_KEY",
    "PENDING_QUERY",
    "STATE_QUERY",
    "STEER_SIGNAL",
    "WORKFLOW_NAME",
    "AgentWorkflow",
    "DepsRegistry",
    "DepsSpec",
    "DurableAgent",
    "DurableResult",
    "DurableRunError",
    "MCPServerSpec",
    "PayloadTooLargeError",
    "ProviderRegistry",
    "RemoteToolError",
    "activities_for",
    "create_worker",
    "run_in_workflow",
    "sandbox_runner",
    "telemetry_interceptor",
]
