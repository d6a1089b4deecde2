"""The hooks behind :func:`goagent_py.otel.instrument`: one span tree per run.

Per-run state is kept by run id: every hook finds its run by the id the loop gives each hook
call (``current_hook_context``), so concurrent runs never see each other's state, and a stream
read, or closed, from another task than the one that began it still finds its own run. A
``ContextVar`` set by ``on_run_start`` tells whether a hook runs where its run is current. The
run span is made the current OpenTelemetry context for the run, and each ``execute_tool`` span
for its call's task, so spans made by other code (HTTP clients,
:func:`~goagent_py.otel.instrument_store`) nest under the run, or under the tool call that made
them. The context is switched by value, never with attach/detach tokens: a ``Session`` awaits a
merged, async hook in a copy of the run's context and copies its variables back, where a token
made in the copy cannot reset.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import Meter, MeterProvider, get_meter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider
from opentelemetry.util.types import AttributeValue

from goagent_py._describe import message_of
from goagent_py._flow_frames import FlowFrame, add_opener, current_frame
from goagent_py.events import GuardrailChecked
from goagent_py.hooks import (
    Hooks,
    ProviderEvent,
    RunInfo,
    RunResult,
    ToolResult,
    callbacks_of,
    current_hook_context,
)
from goagent_py.messages import ScoredMessage, StopReason, TextBlock, ToolCall, Usage
from goagent_py.otel import _content
from goagent_py.otel import _semconv as sc
from goagent_py.provider import CompletionRequest

_log = logging.getLogger("goagent_py.otel")


@dataclass(slots=True)
class _ToolSpan:
    span: Span
    start_ns: int


@dataclass(slots=True)
class _Run:
    span: Span
    ctx: otel_context.Context
    provider: str
    model: str
    agent: str
    run_id: str
    parent: otel_context.Context | None = None  # what was current before the run
    outer: _Run | None = None  # the run this one runs inside (a sub-agent's parent), if any
    chat: Span | None = None
    chat_attrs: dict[str, AttributeValue] = field(default_factory=dict)
    # Open execute_tool spans by call id (a list, should a model repeat an id within a turn).
    tools: dict[str, list[_ToolSpan]] = field(default_factory=dict)
    # The tools the last model request offered, name -> description (None: no request seen
    # yet). A call of any other name is one the model made up: its name is model-written content.
    offered: dict[str, str] | None = None


class SpanLedger(Protocol):
    """Told of each span the hooks leave open across awaits (a run's, a model call's, a tool
    call's, a flow's) as it starts and as it ends: whoever keeps one can end what a run that
    stopped from outside left open (a durable run's workflow, terminated:
    goagent_py/durable/_telemetry.py)."""

    def opened(self, span: Span) -> None: ...

    def closed(self, span: Span) -> None: ...


def tracer_for(tracer_provider: TracerProvider | None) -> Tracer:
    """goagent-py's tracer from ``tracer_provider`` (the global one when None)."""
    return trace.get_tracer(sc.SCOPE, tracer_provider=tracer_provider, schema_url=sc.SCHEMA_URL)


def meter_for(meter_provider: MeterProvider | None) -> Meter:
    """goagent-py's meter from ``meter_provider`` (the global one when None)."""
    return get_meter(sc.SCOPE, meter_provider=meter_provider, schema_url=sc.SCHEMA_URL)


def set_error(
    span: Span,
    error: BaseException,
    *,
    capture: bool,
    limit: int | None = _content.MAX_CONTENT_CHARS,
) -> str:
    """Mark ``span`` failed; the message (which may quote content) only when capturing.

    Captured, the message and stack trace are redacted (``_redact``) first: a tool's error may
    quote a URL with a key in it, or a credential it was given. ``Span.record_exception`` would
    record them as they are, so the ``exception`` event is built here.
    """
    kind = sc.error_type(error)
    span.set_attribute(sc.ERROR_TYPE, kind)
    if capture:
        message = _content.text(message_of(error), limit)
        stack = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        span.add_event(
            "exception",
            {
                "exception.type": f"{type(error).__module__}.{type(error).__qualname__}",
                "exception.message": message,
                "exception.stacktrace": _content.text(stack, limit),
                "exception.escaped": False,
            },
        )
        span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {message}"))
    else:
        span.add_event("exception", {"exception.type": kind})
        span.set_status(Status(StatusCode.ERROR, kind))
    return kind


def end_span(span: Span, end_ns: int | None = None) -> None:
    """End ``span``; a span processor that raises (its own bug) is logged, never raised into
    the hook: the hook still restores the context and ends the other spans it has to."""
    try:
        span.end(end_time=end_ns)
    except Exception:
        _log.warning("a span processor failed when %r ended", _span_name(span), exc_info=True)


def _span_name(span: Span) -> str:
    return str(getattr(span, "name", "") or type(span).__name__)


def _span_ns(seconds: float) -> int:
    return max(0, int(seconds * 1e9))


class Instrumentation:
    """Turns one agent's hook calls into spans and metrics (see :func:`instrument`)."""

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None,
        meter_provider: MeterProvider | None,
        capture_content: bool,
        provider_name: str,
        max_content_chars: int | None = _content.MAX_CONTENT_CHARS,
        clock: Callable[[], int] | None = None,
        ledger: SpanLedger | None = None,
    ) -> None:
        self.tracer = tracer_for(tracer_provider)
        # Where "now" comes from, in ns since the epoch. A durable run's hooks run in its
        # workflow, which Temporal replays: there the clock is the workflow's (the history's
        # time), so a span made again on a replay starts when its work really started, not
        # when the replay ran (goagent_py/durable/_telemetry.py).
        self._history = clock is not None
        self._now: Callable[[], int] = clock if clock is not None else time.time_ns
        self._ledger = ledger
        meter = meter_for(meter_provider)
        self.capture = capture_content
        self.limit = max_content_chars
        # With capture on: every tool whose schema ever marked an argument secret, by name, for
        # as long as the hooks live. A conversation carries a call into later model calls, of
        # later runs too, after the agent's tools may have changed: it stays masked.
        self._secrets: dict[str, list[object]] = {}
        # The secrecy key of each schema remembered (_content.secrecy_key): a tool whose schema
        # changes in what bears on no secret (an enum of what there is now) is one schema, not
        # one more per run for the hooks' life.
        self._secret_keys: set[tuple[str, str]] = set()
        self.provider = provider_name
        self._run: ContextVar[_Run | None] = ContextVar("goagent_otel_run", default=None)
        self._open: dict[str, _Run] = {}  # the runs begun and not ended, by run id
        self.token_usage = meter.create_histogram(
            sc.METRIC_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=sc.TOKEN_BUCKETS,
        )
        self.operation_duration = meter.create_histogram(
            sc.METRIC_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=sc.DURATION_BUCKETS,
        )
        self.agent_duration = meter.create_histogram(
            sc.METRIC_INVOKE_AGENT_DURATION,
            unit="s",
            description="Duration of an agent run.",
            explicit_bucket_boundaries_advisory=sc.DURATION_BUCKETS,
        )
        self.tool_duration = meter.create_histogram(
            sc.METRIC_TOOL_DURATION,
            unit="s",
            description="Duration of a tool call.",
            explicit_bucket_boundaries_advisory=sc.DURATION_BUCKETS,
        )
        self.tool_errors = meter.create_counter(
            sc.METRIC_TOOL_ERRORS, unit="{error}", description="Tool calls that failed."
        )

    def _opened(self, span: Span) -> Span:
        if self._ledger is not None:
            self._ledger.opened(span)
        return span

    def _end(self, span: Span, end_ns: int | None = None) -> None:
        end_span(span, end_ns)
        if self._ledger is not None:
            self._ledger.closed(span)

    def hooks(self) -> Hooks:
        """The hook set (all sync: nothing here awaits)."""
        return Hooks(
            on_run_start=self.on_run_start,
            on_run_end=self.on_run_end,
            on_provider_request=self.on_provider_request,
            on_provider_response=self.on_provider_response,
            on_tool_call=self.on_tool_call,
            on_tool_result=self.on_tool_result,
            on_tool_retry=self.on_tool_retry,
            on_tool_timeout=self.on_tool_timeout,
            on_circuit_open=self.on_circuit_open,
            on_short_term_load=self.on_short_term_load,
            on_short_term_append=self.on_short_term_append,
            on_long_term_retrieve=self.on_long_term_retrieve,
            on_long_term_store=self.on_long_term_store,
            on_guardrail=self.on_guardrail,
        )

    # -- run -----------------------------------------------------------------------------------

    def on_run_start(self, info: RunInfo) -> None:
        """Open ``invoke_agent {name}`` under the caller's current span and make it current."""
        provider = self.provider
        if provider == sc.PROVIDER_OTHER and info.provider is not None:
            provider = sc.provider_name_of(info.provider)
        attrs: dict[str, AttributeValue] = {
            sc.OPERATION: sc.OP_INVOKE_AGENT,
            sc.PROVIDER: provider,
            sc.RUN_ID: info.run_id,
        }
        if info.agent_name:
            attrs[sc.AGENT_NAME] = info.agent_name
        if info.model:
            attrs[sc.REQUEST_MODEL] = info.model
        if self.capture:
            attrs[sc.INPUT_MESSAGES] = _content.user_input(info.content, self.limit)
        outer = self._run.get()
        if outer is not None and self._open.get(outer.run_id) is not outer:
            # A stream of an earlier run in this task was dropped unclosed and ended elsewhere
            # (the event loop's async-generator finalizer runs in another context): its span
            # (or its chat span) may still be current here. Put back what was current before.
            self._run.set(None)
            if _belongs_to(trace.get_current_span(), outer.span):
                _make_current(outer.parent or otel_context.Context())
            outer = None
        name = f"invoke_agent {info.agent_name}" if info.agent_name else "invoke_agent"
        before = otel_context.get_current()
        frame = current_frame()
        # Directly inside a flow: under its invoke_workflow span (opened now if no run of it
        # was instrumented before).
        parent = before if frame is None else self._in_flow(frame, before)
        span = self._opened(
            self.tracer.start_span(
                name,
                context=parent,
                kind=SpanKind.INTERNAL,
                attributes=attrs,
                start_time=self._now(),
            )
        )
        ctx = trace.set_span_in_context(span, parent)
        run = _Run(
            span=span,
            ctx=ctx,
            provider=provider,
            model=info.model,
            agent=info.agent_name,
            run_id=info.run_id,
            parent=before,
            outer=outer,
        )
        _make_current(ctx)
        self._run.set(run)
        self._open[info.run_id] = run

    # -- workflows -----------------------------------------------------------------------------

    def _in_flow(self, frame: FlowFrame, current: otel_context.Context) -> otel_context.Context:
        """The parent of an operation starting in ``current`` inside ``frame``'s flow: the
        flow's span when nothing was made current since the flow started (the flow's own
        code ran it); else what was (a span the caller's code opened inside the flow, an
        agent's tool call that runs another flow...), which is already in the trace."""
        if not _same_span(trace.get_current_span(current), _origin(frame)):
            return current
        span = self._workflow_span(frame)
        return current if span is None else trace.set_span_in_context(span, current)

    def _workflow_span(self, frame: FlowFrame) -> Span | None:
        """``invoke_workflow {name}`` for ``frame``, opened on first use at the flow's start,
        under the span current where the flow started (itself in its enclosing flow); None
        once the flow has ended (a run it left behind: nothing would end the span)."""
        started = _started(frame)
        with frame.lock:
            if frame.span is not None:
                span: Span = frame.span
                return span
            if frame.ended:
                return None
            parent = started if frame.parent is None else self._in_flow(frame.parent, started)
            attrs: dict[str, AttributeValue] = {
                sc.OPERATION: sc.OP_INVOKE_WORKFLOW,
                sc.WORKFLOW_NAME: frame.name,
            }
            if self.capture:
                attrs[sc.INPUT_MESSAGES] = _content.user_input([TextBlock(frame.input)], self.limit)
            span = self.tracer.start_span(
                f"{sc.OP_INVOKE_WORKFLOW} {frame.name}",
                context=parent,
                kind=SpanKind.INTERNAL,
                attributes=attrs,
                start_time=frame.start_ns,
            )
            frame.span = self._opened(span)
            frame.on_end(lambda text, error: self._end_workflow(span, text, error))
            return span

    def _end_workflow(self, span: Span, text: str | None, error: BaseException | None) -> None:
        if error is not None:
            self._error(span, error)
        else:
            if self.capture and text is not None:
                span.set_attribute(sc.OUTPUT_MESSAGES, _content.output_text(text, self.limit))
            span.set_status(Status(StatusCode.OK))
        self._end(span, self._now())

    def _find(self, result: RunResult) -> tuple[_Run | None, bool]:
        """The run ``result`` ends, and whether we are in its context.

        By its run id, never by what is current here: a stream may be closed from another
        task (a stop handler, another run's tool call, the event loop's async-generator
        finalizer), where the run current is another one, or none.
        """
        run = self._open.get(result.run_id)
        return run, run is not None and self._run.get() is run

    def _current(self) -> _Run | None:
        """The run the running hook was called for: by the run id the loop gives every hook
        (``current_hook_context``), so a stream read in another task than the one that began
        it still finds its run; the context's run outside a hook call."""
        hooked = current_hook_context()
        if hooked is not None:
            return self._open.get(hooked.run_id)
        return self._run.get()

    def on_run_end(self, result: RunResult) -> None:
        """End every span the run still has open, then the run span; restore the context."""
        run, same_context = self._find(result)
        if run is None:
            _log.debug("on_run_end without a run span (instrumentation added mid-run?)")
            return
        self._open.pop(run.run_id, None)
        end_ns = self._now()
        if run.chat is not None:
            interrupted = result.error or _unfinished(result, "the model call")
            self._end_chat(run, interrupted, end_ns)
        self._end_open_tools(run, result, end_ns)
        span = run.span
        usage = result.usage
        span.set_attribute(sc.INPUT_TOKENS, _input_tokens(usage))
        span.set_attribute(sc.OUTPUT_TOKENS, usage.output_tokens)
        span.set_attribute(sc.RUN_ITERATIONS, result.iterations)
        span.set_attribute(sc.RUN_TOOL_CALLS, result.tool_calls)
        metric: dict[str, AttributeValue] = {
            sc.OPERATION: sc.OP_INVOKE_AGENT,
            sc.PROVIDER: run.provider,
        }
        if run.model:
            metric[sc.REQUEST_MODEL] = run.model
        if run.agent:
            metric[sc.AGENT_NAME] = run.agent
        if result.error is not None:
            metric[sc.ERROR_TYPE] = self._error(span, result.error)
        else:
            if self.capture:
                output = _content.output_text(result.text, self.limit)
                span.set_attribute(sc.OUTPUT_MESSAGES, output)
            span.set_status(Status(StatusCode.OK))
        self._end(span, end_ns)
        self.agent_duration.record(result.duration, metric)
        if same_context:
            # Put back what was current before the run, by value: this hook may run in a copy of
            # the run's context (a Session awaits a merged, async hook in a task of its own and
            # copies the variables it set back), where a token of the run's start cannot reset.
            self._run.set(run.outer)
            _make_current(run.parent or otel_context.Context())

    # -- model ---------------------------------------------------------------------------------

    def on_provider_request(self, iteration: int, request: CompletionRequest) -> None:
        """Open ``chat {model}`` as a child of the run span, current while the call runs."""
        run = self._current()
        if run is None:
            return
        if run.chat is not None:  # a response that never came (should not happen)
            self._end_chat(run, RuntimeError("no provider response"), self._now())
        model = request.model or run.model
        attrs: dict[str, AttributeValue] = {sc.OPERATION: sc.OP_CHAT, sc.PROVIDER: run.provider}
        if model:
            attrs[sc.REQUEST_MODEL] = model
        run.chat_attrs = dict(attrs)
        run.offered = {t.name: t.description for t in request.tools}
        if request.max_tokens is not None:
            attrs[sc.REQUEST_MAX_TOKENS] = request.max_tokens
        if self.capture:
            self._learn_secrets(request)
            attrs[sc.INPUT_MESSAGES] = _content.input_messages(
                request.messages, self.limit, self._secrets
            )
            if request.system_prompt:
                attrs[sc.SYSTEM_INSTRUCTIONS] = _content.system_instructions(
                    request.system_prompt, self.limit
                )
        name = f"chat {model}" if model else "chat"
        span = self._opened(
            self.tracer.start_span(
                name,
                context=run.ctx,
                kind=SpanKind.CLIENT,
                attributes=attrs,
                start_time=self._now(),
            )
        )
        run.chat = span
        if self._run.get() is run:  # only where the run is current (see _current)
            _make_current(trace.set_span_in_context(span, run.ctx))

    def on_provider_response(self, iteration: int, event: ProviderEvent) -> None:
        """End the ``chat`` span with the response's model, usage and finish reason."""
        run = self._current()
        if run is None or run.chat is None:
            return
        span = run.chat
        end_ns = self._now()
        metric = dict(run.chat_attrs)
        if event.model:
            # The server's word: valid text, of a model name's size.
            model = _content.cap(_content.clean(str(event.model)), _MAX_NAME_CHARS)
            span.set_attribute(sc.RESPONSE_MODEL, model)
            metric[sc.RESPONSE_MODEL] = model
        if event.error is not None:
            metric[sc.ERROR_TYPE] = sc.error_type(event.error)
            self._end_chat(run, event.error, end_ns)
            self.operation_duration.record(event.duration, metric)
            return
        usage = event.usage
        input_tokens = _input_tokens(usage)
        span.set_attribute(sc.INPUT_TOKENS, input_tokens)
        span.set_attribute(sc.OUTPUT_TOKENS, usage.output_tokens)
        if usage.cache_read_input_tokens:
            span.set_attribute(sc.CACHE_READ_TOKENS, usage.cache_read_input_tokens)
        if usage.cache_creation_input_tokens:
            span.set_attribute(sc.CACHE_CREATION_TOKENS, usage.cache_creation_input_tokens)
        if event.stop_reason is not None:
            # The convention's values, as gen_ai.output.messages on this span says them.
            span.set_attribute(sc.FINISH_REASONS, [sc.finish_reason(event.stop_reason)])
        self.operation_duration.record(event.duration, metric)
        # A provider that reports no usage at all reports nothing (the convention forbids
        # guessing); a real call always has input tokens.
        if usage.total_tokens:
            self.token_usage.record(input_tokens, {**metric, sc.TOKEN_TYPE: "input"})
            self.token_usage.record(usage.output_tokens, {**metric, sc.TOKEN_TYPE: "output"})
        if self._run.get() is run:
            _make_current(run.ctx)
        run.chat = None
        span.set_status(Status(StatusCode.OK))
        if self.capture and event.message is not None:
            # Recorded and ended now, not at the run's end: a run that then hangs or dies still
            # shows the calls it made, with their answers.
            output = _content.output_message(
                event.message, event.stop_reason, self.limit, self._secrets
            )
            span.set_attribute(sc.OUTPUT_MESSAGES, output)
        self._end(span, end_ns)

    def _learn_secrets(self, request: CompletionRequest) -> None:
        for t in request.tools:
            known = self._secrets.get(t.name)
            if known is not None and any(t.parameters is k for k in known):
                continue  # the same schema object as before (most tools, every turn)
            if not _content.has_secrets(t.parameters):
                continue
            # Each distinct schema once (a tool of the same name with another schema: what any
            # of them marks is masked), distinct in what bears on secrecy.
            key = (t.name, _content.secrecy_key(t.parameters))
            if key not in self._secret_keys:
                self._secret_keys.add(key)
                self._secrets.setdefault(t.name, []).append(t.parameters)

    def _end_chat(self, run: _Run, error: BaseException, end_ns: int) -> None:
        span = run.chat
        if span is None:
            return
        if self._run.get() is run:
            _make_current(run.ctx)
        run.chat = None
        self._error(span, error)
        self._end(span, end_ns)

    def _error(self, span: Span, error: BaseException) -> str:
        return set_error(span, error, capture=self.capture, limit=self.limit)

    # -- tools ---------------------------------------------------------------------------------

    def on_tool_call(self, call: ToolCall) -> None:
        """Open ``execute_tool {tool}`` under the run span and make it current for the call.

        The loop fires this hook in the call's own task, so the tool (its worker thread too)
        runs with the span current and spans made inside it are its children, while sibling
        calls never see it. Nothing detaches it: the attachment ends with the task's context.
        """
        run = self._current()
        if run is None:
            return
        start_ns = self._now()
        span = self._start_tool_span(run, call, start_ns)
        run.tools.setdefault(call.id, []).append(_ToolSpan(span, start_ns))
        otel_context.attach(trace.set_span_in_context(span, run.ctx))

    def _tool_name(self, run: _Run | None, call: ToolCall) -> str:
        """The name spans and metrics carry for ``call``: its tool's, or ``_OTHER`` for a name
        no request offered (the model wrote it: content, which may quote a key, and a metric
        series per made-up name)."""
        if run is None or run.offered is None or call.name in run.offered:
            return call.name
        return sc.OTHER

    def _start_tool_span(self, run: _Run | None, call: ToolCall, start_ns: int) -> Span:
        name = self._tool_name(run, call)
        attrs: dict[str, AttributeValue] = {
            sc.OPERATION: sc.OP_EXECUTE_TOOL,
            sc.TOOL_NAME: name,
            sc.TOOL_TYPE: "function",
        }
        if name != call.name and self.capture:
            attrs[sc.TOOL_REQUESTED_NAME] = _content.text(call.name, _MAX_NAME_CHARS)
        description = run.offered.get(name) if run is not None and run.offered else None
        if isinstance(description, str) and description:
            # The convention's Recommended attribute: what the application (or an MCP server)
            # told the model the tool does, not content; valid text of a bounded size.
            attrs[sc.TOOL_DESCRIPTION] = _content.cap(
                _content.clean(description), _MAX_DESCRIPTION_CHARS
            )
        if call.id:
            # Written by the model's server: valid text, of an id's size.
            attrs[sc.TOOL_CALL_ID] = _content.cap(_content.clean(str(call.id)), _MAX_NAME_CHARS)
        if self.capture:
            attrs[sc.TOOL_CALL_ARGUMENTS] = _content.dumps(
                _content.arguments(call, self._secrets), self.limit
            )
        return self._opened(
            self.tracer.start_span(
                f"execute_tool {name}" if name != sc.OTHER else sc.OP_EXECUTE_TOOL,
                context=run.ctx if run is not None else None,
                kind=SpanKind.INTERNAL,
                attributes=attrs,
                start_time=start_ns,
            )
        )

    @staticmethod
    def _open_tool(run: _Run | None, call_id: str, *, take: bool = False) -> _ToolSpan | None:
        if run is None:
            return None
        spans = run.tools.get(call_id)
        if not spans:
            return None
        if not take:
            return spans[0]
        tool = spans.pop(0)
        if not spans:
            del run.tools[call_id]
        return tool

    def _event(self, call: ToolCall, name: str, attributes: dict[str, AttributeValue]) -> None:
        # By call id, not by tool name: parallel calls of one tool overlap in time.
        tool = self._open_tool(self._current(), call.id)
        if tool is not None:
            tool.span.add_event(name, attributes, timestamp=self._now())

    def on_tool_retry(
        self, call: ToolCall, attempt: int, error: BaseException, delay: float
    ) -> None:
        """A retry, as an event of the call's span."""
        self._event(
            call,
            sc.EVENT_TOOL_RETRY,
            {
                "goagent.tool.retry.attempt": attempt,
                "goagent.tool.retry.delay": delay,
                sc.ERROR_TYPE: sc.error_type(error),
            },
        )

    def on_tool_timeout(self, call: ToolCall, timeout: float) -> None:
        """A timeout, as an event of the call's span."""
        self._event(call, sc.EVENT_TOOL_TIMEOUT, {"goagent.tool.timeout": timeout})

    def on_circuit_open(self, call: ToolCall, open_until: datetime) -> None:
        """A circuit-breaker rejection, as an event of the call's span."""
        self._event(
            call, sc.EVENT_CIRCUIT_OPEN, {"goagent.tool.circuit.open_until": open_until.isoformat()}
        )

    def on_tool_result(self, result: ToolResult) -> None:
        """End the call's ``execute_tool`` span at the call's real end time.

        The hook fires once every call of the turn is done, so the end is the call's own start
        plus its duration, not now. A blocked call (no start time: it never ran) ends where its
        span started.
        """
        run = self._current()
        call = result.call
        tool = self._open_tool(run, call.id, take=True)
        if tool is None:  # no on_tool_call opened it (instrumentation added mid-turn?)
            started = result.started_at
            known = started is not None and not self._history  # the history has no wall clock
            start_ns = sc.to_ns(started) if started is not None and known else self._now()
            tool = _ToolSpan(self._start_tool_span(run, call, start_ns), start_ns)
        span = tool.span
        end_ns = tool.start_ns + _span_ns(result.duration)
        if self._history:
            # The loop's duration and start are read from the process's clocks, which a replay
            # does not give back: the call ended by the time the workflow learned its result.
            end_ns = max(end_ns, self._now())
        elif result.started_at is not None:
            end_ns = max(end_ns, sc.to_ns(result.started_at) + _span_ns(result.duration))
        metric: dict[str, AttributeValue] = {
            sc.OPERATION: sc.OP_EXECUTE_TOOL,
            sc.TOOL_NAME: self._tool_name(run, call),
        }
        if result.error is not None:
            kind = self._error(span, result.error)
            metric[sc.ERROR_TYPE] = kind
            self.tool_errors.add(1, metric)
        else:
            if self.capture:
                output = _content.tool_result(result.content, self.limit)
                span.set_attribute(sc.TOOL_CALL_RESULT, output)
            span.set_status(Status(StatusCode.OK))
        self._end(span, end_ns)
        self.tool_duration.record(result.duration, metric)

    def _end_open_tools(self, run: _Run, result: RunResult, end_ns: int) -> None:
        """End the spans of calls that never got a result (the run was cancelled meanwhile)."""
        interrupted = result.error or _unfinished(result, "the tool call")
        for tools in run.tools.values():
            for tool in tools:
                self._error(tool.span, interrupted)
                self._end(tool.span, max(end_ns, tool.start_ns))
        run.tools.clear()

    # -- guardrails ----------------------------------------------------------------------------

    def on_guardrail(self, event: GuardrailChecked) -> None:
        """One span per guardrail decision, in the run's trace; a trip is an error status."""
        run = self._current()
        end_ns = self._now()
        span = self.tracer.start_span(
            f"guardrail {event.name}",
            context=run.ctx if run is not None else None,
            kind=SpanKind.INTERNAL,
            attributes={
                "goagent.guardrail.name": event.name,
                "goagent.guardrail.kind": event.kind,
                "goagent.guardrail.tripped": event.tripped,
            },
            start_time=end_ns - _span_ns(event.duration),
        )
        if event.tripped:
            # The reason may quote what it judged (a model guardrail's is model text): content.
            reason = _content.text(event.reason, self.limit) if self.capture else "tripped"
            span.set_status(Status(StatusCode.ERROR, reason))
        else:
            span.set_status(Status(StatusCode.OK))
        self._end(span, end_ns)

    # -- memory --------------------------------------------------------------------------------

    def _memory(
        self,
        operation: str,
        store: str,
        count: int,
        duration: float,
        error: BaseException | None,
        extra: dict[str, AttributeValue] | None = None,
    ) -> None:
        run = self._current()
        end_ns = self._now()
        attrs: dict[str, AttributeValue] = {
            sc.OPERATION: operation,
            sc.MEMORY_STORE_ID: store,
            sc.MEMORY_RECORD_COUNT: count,
        }
        if extra:
            attrs.update(extra)
        span = self.tracer.start_span(
            operation,
            context=run.ctx if run is not None else None,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=end_ns - _span_ns(duration),
        )
        if error is not None:
            self._error(span, error)
        else:
            span.set_status(Status(StatusCode.OK))
        self._end(span, end_ns)

    def on_short_term_load(self, count: int, duration: float, error: BaseException | None) -> None:
        """``search_memory`` on the short-term store (the history loaded)."""
        self._memory(sc.OP_SEARCH_MEMORY, "short_term", count, duration, error)

    def on_short_term_append(
        self, count: int, duration: float, error: BaseException | None
    ) -> None:
        """``create_memory`` on the short-term store (the turn appended)."""
        self._memory(sc.OP_CREATE_MEMORY, "short_term", count, duration, error)

    def on_long_term_retrieve(
        self, results: list[ScoredMessage], duration: float, error: BaseException | None
    ) -> None:
        """``search_memory`` on the long-term store (what was recalled)."""
        extra: dict[str, AttributeValue] | None = None
        if self.capture and results:
            extra = {sc.MEMORY_RECORDS: _content.memory_records(results, self.limit)}
        self._memory(sc.OP_SEARCH_MEMORY, "long_term", len(results), duration, error, extra)

    def on_long_term_store(self, count: int, duration: float, error: BaseException | None) -> None:
        """``upsert_memory`` on the long-term store (what the write policy kept)."""
        self._memory(sc.OP_UPSERT_MEMORY, "long_term", count, duration, error)


class _Unfinished(Exception):
    """Why an operation a run left open did not finish, when the run ended without an error."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.error_type = kind  # error.type (sc.error_type reads it)


def _unfinished(result: RunResult, what: str) -> _Unfinished:
    if result.stop_reason == StopReason.ABORTED:
        # The user stopped it (Session.abort): an aborted tool call reads ToolAbortedError.
        return _Unfinished("aborted", f"{what} was aborted")
    return _Unfinished(sc.OTHER, f"{what} did not finish")


_MAX_NAME_CHARS = 256  # an id or a name from outside (a call id, a response model)
_MAX_DESCRIPTION_CHARS = 1024  # a tool's description (an MCP server's may be pages long)


def _belongs_to(current: Span, run_span: Span) -> bool:
    """Whether ``current`` is ``run_span`` or one of its direct children (chat, tool)."""
    if current is run_span:
        return True
    parent = getattr(current, "parent", None)
    return parent is not None and parent.span_id == run_span.get_span_context().span_id


def _open_flow(frame: FlowFrame) -> Callable[[], None] | None:
    """As a flow starts: its ``invoke_workflow`` span, made current for all the flow runs
    (its agents, the spans its steps open with the application's tracer), by the telemetry of
    the first instrumented agent it holds; None (the span opens with the first instrumented
    run inside, if any) when it holds none."""
    telemetry = _telemetry_of(frame)
    if telemetry is None:
        return None
    span = telemetry._workflow_span(frame)
    if span is None:
        return None
    before = otel_context.get_current()
    _make_current(trace.set_span_in_context(span, before))
    return lambda: _make_current(before)


def _telemetry_of(frame: FlowFrame) -> Instrumentation | None:
    for hooks in frame.hook_sets():
        start = getattr(hooks, "on_run_start", None)
        if start is None:
            continue
        for callback in callbacks_of(start):
            owner = getattr(callback, "__self__", None)
            if isinstance(owner, Instrumentation):
                return owner
    return None


add_opener(_open_flow)


def _started(frame: FlowFrame) -> otel_context.Context:
    """The OpenTelemetry context that was current where ``frame``'s flow started."""
    with frame.lock:
        if frame.started is None:
            frame.started = frame.context.run(otel_context.get_current)
        started: otel_context.Context = frame.started
        return started


def _origin(frame: FlowFrame) -> Span:
    """The span that was current where ``frame``'s flow started."""
    return trace.get_current_span(_started(frame))


def _same_span(a: Span, b: Span) -> bool:
    return a is b or a.get_span_context() == b.get_span_context()


def _input_tokens(usage: Usage) -> int:
    # The convention counts cached input tokens as input tokens; Usage keeps them apart.
    return usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens


def _make_current(ctx: otel_context.Context) -> None:
    """Make ``ctx`` the current OpenTelemetry context, by value, with no token to reset.

    A hook may run in a copy of the run's context whose variables are copied back (see
    :meth:`Instrumentation.on_run_end`); a token is only good in the context that made it, so
    every switch here (run, chat, restore) sets the value instead.
    """
    otel_context.attach(ctx)
