"""Spans for durable runs: the same span tree as a plain run, made where the loop runs.

The loop of a durable run runs in its workflow, so the telemetry hooks of
:func:`goagent_py.otel.instrument` run there too, given to the workflow's agent by the worker
(:func:`~goagent_py.durable.create_worker` with ``tracer_provider=``): ``invoke_agent``, a
``chat`` span per model call, an ``execute_tool`` span per tool call, memory and guardrail
spans, exactly as a plain run makes them. Temporal replays a workflow's history whenever a
worker picks a run up again (another worker after a crash, or the same one after evicting it
from its cache), and the loop's hooks run again then. Two things keep a replay from recording
anything twice: the tracer provider must be Temporal's replay-safe one
(``temporalio.contrib.opentelemetry.create_tracer_provider()``: span ids drawn from the
workflow's deterministic random, so a span started again has the id it had, and no span ended
while history is replayed), and metrics go through Temporal's ``ReplaySafeMeterProvider`` (no
recording while history is replayed).

The run is linked to the trace of the code that started it: :meth:`DurableAgent.start` writes
the current span's W3C ``traceparent`` (never baggage, which may carry anything) into the
workflow's input, and the workflow makes it the parent of the run's ``invoke_agent`` span.
"""

from __future__ import annotations

import contextvars
import logging
import time
from typing import Any

# At import, outside any workflow: imported in Temporal's sandbox (a workflow runner that does
# not pass OpenTelemetry through) these would be copies with context variables of their own,
# which the telemetry hooks never read.
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from temporalio import activity as temporal_activity
from temporalio import worker as temporal_worker
from temporalio import workflow as temporal_workflow

from goagent_py.errors import ConfigurationError
from goagent_py.hooks import HOOK_NAMES, Hooks

from ._span_ledger import SpanLedger
from ._wire import WORKFLOW_NAME

__all__ = [
    "ACTIVITY_TRACE_KEY",
    "TRACE_KEY",
    "WorkflowTelemetry",
    "caller_trace",
    "enter_trace",
    "telemetry_for",
    "telemetry_interceptor",
    "traced",
    "with_telemetry",
    "workflow_hooks",
]

_log = logging.getLogger("goagent_py.durable")

TRACE_KEY = "trace"
"""Where the workflow's input carries the caller's trace context (W3C trace context)."""

ACTIVITY_TRACE_KEY = "_trace"
"""Where an activity's input carries the trace context of the span it runs under (the
``chat`` span of a model call, the ``execute_tool`` span of a tool call), in a traced run."""

# The telemetry hooks of the workflow running here (set by the worker's interceptor).
_HOOKS: contextvars.ContextVar[Hooks | None] = contextvars.ContextVar(
    "goagent_durable_telemetry", default=None
)


def caller_trace() -> dict[str, str] | None:
    """The current span's W3C trace context (``traceparent``, ``tracestate``), or None when no
    span is current."""
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _propagator().inject(carrier)
    return carrier or None


def workflow_hooks() -> Hooks | None:
    """The telemetry hooks for the run in the workflow running here, or None."""
    return _HOOKS.get()


def with_telemetry(hooks: Hooks, telemetry: Hooks) -> Hooks:
    """``hooks`` and then ``telemetry`` on every event, called in place. Both sets are sync,
    and the merge stays sync: ``merge_hooks`` makes an async hook, which a run with a control
    (a workflow's always has one) awaits in a task of its own, and the extra steps of the
    workflow's event loop could change the order in which parallel calls schedule their
    activities, so that a history recorded without telemetry would not replay with it.

    The telemetry is called only in this workflow run: a run whose workflow the worker
    dropped without evicting it (one the server closed from outside: terminated, timed out)
    is closed by the garbage collector, wherever it runs, and its loop's ending there is no
    end of the run's work: its spans stay open for the sweep that ends them with the reason
    (_span_ledger.py)."""
    merged = Hooks()
    here = _workflow_run()
    for name in HOOK_NAMES:
        told = getattr(telemetry, name)
        if told is not None and here is not None:
            told = _only_in(here, told)
        callbacks = [c for c in (getattr(hooks, name), told) if c is not None]
        if len(callbacks) == 1:
            setattr(merged, name, callbacks[0])
        elif callbacks:
            setattr(merged, name, _in_turn(name, callbacks))
    return merged


def _workflow_run() -> tuple[str, str] | None:
    if not temporal_workflow.in_workflow():
        return None
    info = temporal_workflow.info()
    return info.workflow_id, info.run_id


def _only_in(run: tuple[str, str], callback: Any) -> Any:
    def in_run(*args: Any) -> None:
        if _workflow_run() == run:
            callback(*args)

    return in_run


def _unless_released(hooks: Hooks, ledger: SpanLedger) -> Hooks:
    """``hooks``, each skipped in a workflow run whose spans the ledger ended (closed from
    outside, then evicted: the eviction cancels the loop, whose ends would touch them)."""
    guarded = Hooks()
    for name in HOOK_NAMES:
        callback = getattr(hooks, name)
        if callback is not None:
            setattr(guarded, name, _skip_released(ledger, callback))
    return guarded


def _skip_released(ledger: SpanLedger, callback: Any) -> Any:
    def unless_released(*args: Any) -> Any:
        if not ledger.released(_workflow_run()):
            return callback(*args)
        return None

    return unless_released


def _in_turn(name: str, callbacks: list[Any]) -> Any:
    def each(*args: Any) -> None:
        for callback in callbacks:
            try:
                callback(*args)
            except Exception:  # a hook's failure never fails the run (as merge_hooks logs it)
                _log.exception("hook %s raised; the run goes on", name)

    return each


def traced(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` for an activity of a traced run, with the trace context of the span current
    here (what the activity does, a provider's HTTP call, nests under it); as it is untraced."""
    if _HOOKS.get() is None:
        return data
    carrier = caller_trace()
    return data if carrier is None else {**data, ACTIVITY_TRACE_KEY: carrier}


def enter_trace(data: object) -> None:
    """In an activity: take the trace context :func:`traced` put in ``data`` out of it, and
    make it current (by value, in the activity's own task)."""
    if not isinstance(data, dict) or ACTIVITY_TRACE_KEY not in data:
        return
    parent = _extract(data.pop(ACTIVITY_TRACE_KEY))
    if parent is not None:
        otel_context.attach(parent)


def _extract(carrier: object) -> Any:
    if not isinstance(carrier, dict):
        return None
    plain = {str(k): str(v) for k, v in carrier.items() if isinstance(v, str)}
    return _propagator().extract(plain)


def _propagator() -> Any:
    # W3C trace context only: baggage may carry anything, and it is recorded in the history.
    return TraceContextTextMapPropagator()


class WorkflowTelemetry(temporal_worker.Interceptor):
    """A worker interceptor that gives the workflows it runs the telemetry hooks and the
    caller's trace context (see the module docstring)."""

    def __init__(self, hooks: Hooks, ledger: SpanLedger) -> None:
        self.hooks = _unless_released(hooks, ledger)
        self.ledger = ledger

    def intercept_activity(
        self, next: temporal_worker.ActivityInboundInterceptor
    ) -> temporal_worker.ActivityInboundInterceptor:
        ledger = self.ledger

        class _Activity(temporal_worker.ActivityInboundInterceptor):
            async def execute_activity(self, input: temporal_worker.ExecuteActivityInput) -> Any:
                # The worker's loop and client, where a traced run's activities run: the
                # sweep of runs closed from outside runs there (_span_ledger.py).
                ledger.watch(temporal_activity.client())
                return await super().execute_activity(input)

        return _Activity(next)

    def workflow_interceptor_class(
        self, input: temporal_worker.WorkflowInterceptorClassInput
    ) -> type[temporal_worker.WorkflowInboundInterceptor]:
        hooks = self.hooks

        class _Inbound(temporal_worker.WorkflowInboundInterceptor):
            async def execute_workflow(self, input: temporal_worker.ExecuteWorkflowInput) -> Any:
                parent = None
                if temporal_workflow.info().workflow_type == WORKFLOW_NAME:
                    # The library's workflow carries its caller's trace in its input; a
                    # workflow of yours has its own input (whatever is current in it is
                    # the parent: Temporal's TracingInterceptor's workflow span, if used).
                    data = input.args[0] if input.args else None
                    parent = _extract(data.get(TRACE_KEY)) if isinstance(data, dict) else None
                token = _HOOKS.set(hooks)
                if parent is not None:
                    # By value, in the workflow's own task (nothing to detach: it ends with it).
                    otel_context.attach(parent)
                try:
                    result = await super().execute_workflow(input)
                except GeneratorExit:
                    # A run its worker dropped unevicted, closed by the garbage collector in
                    # whatever context it runs in: nothing of ours to restore there.
                    raise
                except BaseException:
                    _HOOKS.reset(token)
                    raise
                _HOOKS.reset(token)
                return result

        return _Inbound


def telemetry_interceptor(
    tracer_provider: Any, *, meter_provider: Any = None, capture_content: bool | None = None
) -> temporal_worker.Interceptor:
    """The interceptor that traces the durable runs of a worker you build yourself, as
    :func:`~goagent_py.durable.create_worker` with ``tracer_provider=`` traces its own: the
    runs ``durable.run`` makes inside your workflows (and any of the library's workflow)::

        Worker(client, task_queue=..., workflows=[ReportWorkflow],
               activities=activities_for([durable], registry),
               interceptors=[telemetry_interceptor(create_tracer_provider())])

    Args:
        tracer_provider: Temporal's replay-safe provider
            (``temporalio.contrib.opentelemetry.create_tracer_provider()``).
        meter_provider: the runs' GenAI metrics (wrapped in Temporal's
            ``ReplaySafeMeterProvider``); None: none.
        capture_content: record content in the spans, as ``instrument(capture_content=...)``.

    Raises:
        ConfigurationError: ``tracer_provider`` is not replay-safe, or the OpenTelemetry SDK
            is not installed.
    """
    return telemetry_for(tracer_provider, meter_provider, capture_content)


def telemetry_for(
    tracer_provider: Any, meter_provider: Any, capture_content: bool | None
) -> WorkflowTelemetry:
    """The interceptor for a worker whose runs are traced with ``tracer_provider``.

    Raises:
        ConfigurationError: ``tracer_provider`` is not replay-safe.
    """
    try:
        from opentelemetry.metrics import NoOpMeterProvider
        from temporalio.contrib.opentelemetry import (
            ReplaySafeMeterProvider,
            ReplaySafeTracerProvider,
        )
    except ImportError as exc:  # the SDK is what makes a provider replay-safe
        raise ConfigurationError(
            "create_worker(tracer_provider=...) needs the OpenTelemetry SDK: pip install "
            '"goagent-py[otel-sdk]"'
        ) from exc
    from goagent_py.otel import _instrument_on_clock

    if not isinstance(tracer_provider, ReplaySafeTracerProvider):
        raise ConfigurationError(
            "tracer_provider=...: a durable run's spans are made in its "
            "workflow, which Temporal replays; give a replay-safe provider (from "
            "temporalio.contrib.opentelemetry import create_tracer_provider; provider = "
            "create_tracer_provider(); provider.add_span_processor(...)), or another provider "
            f"would record every replayed span again (got {type(tracer_provider).__name__})"
        )
    if meter_provider is None:
        meter_provider = NoOpMeterProvider()  # never the global one: replays would record
    elif not isinstance(meter_provider, ReplaySafeMeterProvider):
        meter_provider = ReplaySafeMeterProvider(meter_provider)
    from goagent_py.otel._content import capture_from_env

    capture = capture_from_env() if capture_content is None else capture_content
    ledger = SpanLedger(capture=capture)
    hooks = _instrument_on_clock(
        tracer_provider, meter_provider, _history_ns, capture_content=capture, ledger=ledger
    )
    return WorkflowTelemetry(hooks, ledger)


def _history_ns() -> int:
    """Now, for a span made in a workflow: the workflow's time (the start of the workflow task
    running, as the history records it), so a span made again on a replay carries the time
    its work really started, as Temporal's own workflow spans do; the wall clock elsewhere."""
    if temporal_workflow.in_workflow():
        return temporal_workflow.time_ns()
    return time.time_ns()
