"""The worker side: the activities that do the effects, and a worker that runs them.

Retries belong to the engine: an activity turns a failure into an ``ApplicationError`` that says
whether retrying can help (misuse and 4xx but 408/409/429 cannot) and, when the server sent a
Retry-After, when to try again (capped at the agent's ``max_retry_delay``). A tool's own
exception is data for the model, so it is not retried, except connection errors and timeouts.
A result too big to record fails at once, naming the tool or model.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from goagent_py.errors import ConfigurationError
from goagent_py.messages import ToolCall
from goagent_py.tool_context import ToolContext, _current
from goagent_py.tools import Tool

from ._wire import (
    ErrorData,
    PayloadTooLargeError,
    check_size,
    content_from_text,
    content_to_text,
    error_to_data,
    messages_from_text,
    messages_to_text,
    request_from_data,
    response_to_data,
)
from .agent import DurableAgent, ProviderRegistry

T = TypeVar("T")
Activity = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def _application_error(error: ErrorData, what: str, max_delay: float) -> ApplicationError:
    delay = None
    if error.retry_after is not None and error.retryable:
        delay = timedelta(seconds=max(0.0, min(error.retry_after, max_delay)))
    return ApplicationError(
        f"{what}: {error.message}",
        error.to_data(),
        type=error.type,
        non_retryable=not error.retryable,
        next_retry_delay=delay,
    )


async def _heartbeating(work: Awaitable[T]) -> T:
    """Await ``work`` while heartbeating, so a dead worker is noticed within the heartbeat
    timeout instead of the (long) start-to-close timeout."""
    timeout = activity.info().heartbeat_timeout
    if not timeout:
        return await work
    interval = max(timeout.total_seconds() / 3, 0.05)

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(interval)

    beater = asyncio.create_task(beat())
    try:
        return await work
    finally:
        beater.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beater


def _named(name: str, fn: Activity) -> Callable[..., Any]:
    async def run(data: dict[str, Any]) -> dict[str, Any]:
        return await fn(data)

    run.__name__ = run.__qualname__ = name.replace(".", "_")
    return activity.defn(name=name)(run)


class _AgentActivities:
    def __init__(self, durable: DurableAgent, registry: ProviderRegistry) -> None:
        self.durable = durable
        self.registry = registry
        config = durable.config()
        self.limit = int(config["payload_limit"])
        self.max_delay = float(config["max_retry_delay"])
        self.tools: dict[str, Tool] = {t.definition.name: t for t in durable.agent.tools}

    def _fail(self, exc: BaseException, what: str) -> ApplicationError:
        return _application_error(error_to_data(exc), what, self.max_delay)

    async def model(self, data: dict[str, Any]) -> dict[str, Any]:
        request = request_from_data(data["request"])
        what = f"model {request.model!r}"
        try:
            provider = self.registry.resolve(str(data["provider"]))
            response = await _heartbeating(provider.complete(request))
            out = response_to_data(response)
            check_size(out, f"{what} response", self.limit)
        except Exception as exc:
            raise self._fail(exc, what) from exc
        return out

    def tool(self, name: str) -> Activity:
        async def run(data: dict[str, Any]) -> dict[str, Any]:
            what = f"tool {name!r}"
            tool = self.tools[name]
            call = ToolCall(str(data["call_id"]), name, dict(data["arguments"]))
            context = ToolContext(
                call=call, run_id=str(data["run_id"]), iteration=int(data["iteration"])
            )
            token = _current.set(context)
            try:
                content = await _heartbeating(tool.execute(dict(call.arguments)))
                out = {"content": content_to_text(content)}
                check_size(out, f"{what} result", self.limit)
            except PayloadTooLargeError as exc:
                raise self._fail(exc, what) from exc
            except Exception as exc:
                error = error_to_data(exc)
                # A tool's exception is data for the model: retry only what a retry can cure.
                retry = isinstance(exc, ConnectionError | TimeoutError)
                error = ErrorData(error.type, error.message, retry, extra=error.extra)
                raise _application_error(error, what, self.max_delay) from exc
            finally:
                _current.reset(token)
            return out

        return run

    async def load(self, data: dict[str, Any]) -> dict[str, Any]:
        memory = self.durable.short_term_memory(str(data["session_id"]))
        try:
            messages = [] if memory is None else await memory.messages()
            out = {"messages": messages_to_text(messages)}
            check_size(out, "short-term memory load", self.limit)
        except Exception as exc:
            raise self._fail(exc, "short-term memory load") from exc
        return out

    async def append(self, data: dict[str, Any]) -> dict[str, Any]:
        memory = self.durable.short_term_memory(str(data["session_id"]))
        try:
            messages = messages_from_text(data["messages"])
            if memory is None:
                return {"stored": False}
            storage = getattr(memory, "storage", None)
            append_once = getattr(storage, "append_once", None)
            if append_once is not None:  # a retried write is recognised by its key
                return {"stored": bool(await append_once(str(data["key"]), messages))}
            await memory.append(*messages)
        except Exception as exc:
            raise self._fail(exc, "short-term memory append") from exc
        return {"stored": True}

    async def recall(self, data: dict[str, Any]) -> dict[str, Any]:
        memory = self.durable.long_term_memory
        try:
            found = []
            if memory is not None:
                # top_k None (newer agents): the memory's own default.
                top_k = data.get("top_k")
                options: dict[str, Any] = {
                    "top_k": None if top_k is None else int(top_k),
                    "session": str(data["session"]),
                }
                found = await memory.retrieve(content_from_text(data["query"]), **options)
            out = {
                "messages": messages_to_text([s.message for s in found]),
                "scores": [s.score for s in found],
                "ids": [s.id for s in found],
            }
            check_size(out, "long-term memory recall", self.limit)
        except Exception as exc:
            raise self._fail(exc, "long-term memory recall") from exc
        return out

    async def store(self, data: dict[str, Any]) -> dict[str, Any]:
        memory = self.durable.long_term_memory
        try:
            if memory is not None:
                await memory.store(messages_from_text(data["messages"]), session=data["session"])
        except Exception as exc:
            raise self._fail(exc, "long-term memory store") from exc
        return {}

    def all(self) -> list[Callable[..., Any]]:
        n = self.durable.name
        out = [
            _named(f"goagent.model.{n}", self.model),
            _named(f"goagent.memory.load.{n}", self.load),
            _named(f"goagent.memory.append.{n}", self.append),
            _named(f"goagent.memory.recall.{n}", self.recall),
            _named(f"goagent.memory.store.{n}", self.store),
        ]
        out.extend(_named(f"goagent.tool.{n}.{t}", self.tool(t)) for t in self.tools)
        return out


def activities_for(
    agents: Iterable[DurableAgent], registry: ProviderRegistry
) -> list[Callable[..., Any]]:
    """The activities of ``agents`` (model, tools, memory), to register on a worker."""
    out: list[Callable[..., Any]] = []
    names: set[str] = set()
    for durable in agents:
        if durable.name in names:
            raise ConfigurationError(f"two durable agents are named {durable.name!r}")
        names.add(durable.name)
        out.extend(_AgentActivities(durable, registry).all())
    return out


def sandbox_runner() -> Any:
    """Temporal's sandboxed workflow runner with goagent-py (and pydantic) passed through."""
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    restrictions = SandboxRestrictions.default.with_passthrough_modules(
        "goagent_py", "pydantic", "pydantic_core", "annotated_types", "typing_extensions"
    )
    return SandboxedWorkflowRunner(restrictions=restrictions)


def create_worker(
    client: Any,
    agents: Sequence[DurableAgent],
    *,
    registry: ProviderRegistry | None = None,
    task_queue: str | None = None,
    **worker_options: Any,
) -> Any:
    """A Temporal worker that runs ``agents``' workflows and activities::

        worker = create_worker(client, [durable], registry=ProviderRegistry.default())
        await worker.run()

    Args:
        client: a connected ``temporalio.client.Client``.
        agents: the durable agents this worker serves (all on one task queue).
        registry: builds providers from specs (default: :meth:`ProviderRegistry.default`).
        task_queue: the task queue (default: the agents' own, which must agree).
        **worker_options: passed to ``temporalio.worker.Worker``.
    """
    from temporalio.worker import Worker

    from ._workflow import AgentWorkflow

    if not agents:
        raise ConfigurationError("create_worker: give at least one DurableAgent")
    queues = {a.task_queue for a in agents}
    if task_queue is None:
        if len(queues) != 1:
            raise ConfigurationError(
                f"create_worker: the agents use several task queues {sorted(queues)}; "
                "pass task_queue= or run one worker per queue"
            )
        task_queue = queues.pop()
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentWorkflow],
        activities=activities_for(agents, registry or ProviderRegistry.default()),
        workflow_runner=worker_options.pop("workflow_runner", None) or sandbox_runner(),
        **worker_options,
    )
