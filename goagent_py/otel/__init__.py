"""OpenTelemetry for goagent-py: spans and metrics named by the GenAI semantic conventions.

Depends on ``opentelemetry-api`` only (``import goagent_py`` never imports OpenTelemetry; this
module does). Without an SDK configured every call is a no-op. Pass providers explicitly, or set
the global ones with the SDK (``pip install "goagent-py[otel-sdk]"``)::

    from goagent_py import Agent, merge_hooks
    from goagent_py.otel import instrument

    agent = Agent(provider=provider, model="claude-sonnet-4-6",
                  hooks=merge_hooks(instrument(provider=provider), my_hooks))

What a run emits (the span tree; times are the operations' real times)::

    invoke_workflow {flow name}        INTERNAL, a run of an orchestration the agent runs in
                                       (goagent_py.orchestration), if any: see below
    invoke_agent {agent name}          INTERNAL, child of the caller's current span
    ├── search_memory                  long-term recall, then short-term history
    ├── chat {model}                   CLIENT, one per provider call
    ├── execute_tool {tool}            INTERNAL, one per call; parallel calls overlap
    │   │                              events: goagent.tool.retry / .timeout / .circuit_open
    │   └── ...                        spans made inside the tool (httpx, a nested agent...)
    ├── create_memory / upsert_memory  short-term append / long-term store
    └── {operation} {store}            vector-store calls made during the run (instrument_store)

The run span is the current span while the run goes on, so other instrumentation (httpx, a
database driver, :func:`instrument_store`) nests under it; ``chat`` is current during the
provider call, and each ``execute_tool`` span while its call runs (sync tools' worker threads
included), so what a tool does nests under that call. Spans are ended on every exit: success,
provider error, max iterations, cancellation. A cancelled run is recorded as an error on every
span it leaves open (agent, ``chat`` and ``execute_tool`` alike: ERROR status, ``error.type``
the cancellation's class name), as the conventions' "Recording errors" counts an operation
that ended by an exception: it did not complete, and a backend looking for unfinished
operations finds it.

Orchestrations: each run of a flow (``Pipeline``, ``Parallel``, ``Router``, ``Loop``,
``Graph``, ``Handoffs``, ``Supervisor``, a flow called as a tool) is an ``invoke_workflow
{name}`` span with ``gen_ai.workflow.name`` (the flow's ``name``), the parent of the runs of
its agents and of the flows nested in it. The first instrumented run inside opens it, with
its hooks' tracer, at the flow's own start time; the flow ends it (ERROR and ``error.type``
when the flow failed or was cancelled). A flow of plain functions records nothing. Durable
runs: ``goagent_py.durable.create_worker(tracer_provider=...)`` runs these hooks in the
workflow, on Temporal's replay-safe provider, under the span that started the run.

Attributes: ``gen_ai.operation.name``, ``gen_ai.provider.name``, ``gen_ai.request.model``,
``gen_ai.response.model``, ``gen_ai.usage.input_tokens`` (cached input included, as the
convention counts it) / ``output_tokens``, ``gen_ai.response.finish_reasons`` (goagent's
``StopReason`` values; on ``invoke_agent`` the run's ``RunResult.usage``, which includes what
agents called as tools spent: they are counted again on their own nested ``invoke_agent``
spans, as each ``chat`` span is counted in its run's. The GenAI conventions give usage per
operation, and an agent invocation's operation includes its sub-agents' calls; totals come from
the ``chat`` spans or the ``gen_ai.client.token.usage`` metric, or the root ``invoke_agent``
span alone), ``gen_ai.agent.name``, ``gen_ai.workflow.name``, ``gen_ai.tool.name``,
``gen_ai.tool.description`` (what the model request said of the tool, at most 1024
characters; not content: the application's or an MCP server's text), ``gen_ai.tool.call.id``,
``gen_ai.memory.store.id`` (``short_term`` or ``long_term``), ``gen_ai.memory.record.count``,
``error.type`` (for a provider error the vendor's error type from its body, e.g.
``overloaded_error`` even when sent mid-stream after an HTTP 200, else its HTTP status; else the
exception's qualified class name; a failed tool call reports its cause, e.g.
``goagent_py.errors.ToolTimeoutError``) with ERROR status. Names of our own carry the
``goagent.`` prefix.

Metrics: ``gen_ai.client.token.usage`` ({token}, by ``gen_ai.token.type``) and
``gen_ai.client.operation.duration`` (s), both with the convention's bucket boundaries;
``gen_ai.invoke_agent.duration`` and ``gen_ai.execute_tool.duration`` (s, same buckets);
``goagent.tool.errors`` ({error}, by tool and ``error.type``); vector stores record
``db.client.operation.duration`` (s, the database convention's buckets).

Content (prompts, system instructions, completions, tool arguments and results, recalled
memories, exception messages) is recorded only with ``capture_content=True`` or
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``, as JSON strings in the
convention's message schema. Image and document bytes are never recorded (only their media
type and size), and nothing here ever sees an API key. A tool argument whose schema marks it
secret (``writeOnly`` or ``format: password``, as a pydantic ``SecretStr`` parameter is) is
recorded as ``[REDACTED]``, in the call's span and in the messages of later model calls. Each
captured attribute holds at most ``max_content_chars`` characters (32768 by default), and
every value is valid Unicode (a lone surrogate is recorded as U+FFFD), so an exporter never
drops it.

Sources (the GenAI conventions are at "Development" stability; names follow their latest text):

* Spans: https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/ and
  open-telemetry/semantic-conventions-genai ``docs/gen-ai/gen-ai-spans.md`` (inference span
  ``{gen_ai.operation.name} {gen_ai.request.model}``; memory operations ``search_memory``,
  ``create_memory``, ``upsert_memory`` named ``{gen_ai.operation.name}``; ``execute_tool
  {gen_ai.tool.name}`` INTERNAL; opt-in content attributes and "SHOULD NOT capture by default").
* Agent spans: https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-agent-spans/
  (``invoke_agent {gen_ai.agent.name}``, INTERNAL for in-process agents; ``invoke_workflow
  {gen_ai.workflow.name}``, INTERNAL, for a process that groups several agent invocations).
* Metrics: https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-metrics/ (token buckets
  [1, 4, ..., 67108864], duration buckets [0.01, ..., 81.92]; well-known
  ``gen_ai.provider.name`` values); ``gen_ai.invoke_agent.duration`` and
  ``gen_ai.execute_tool.duration`` from the semantic-conventions-genai repository's draft.
* Vector stores: the database client conventions (``db.client.operation.duration``,
  ``db.system.name``, ``db.operation.name``, span name ``{db.operation.name} {target}``).
"""

from __future__ import annotations

import typing

# Runtime names under private aliases and type-only names under TYPE_CHECKING: the module's
# public namespace is exactly ``__all__`` (tests/test_public_api.py checks it).
from goagent_py.errors import ConfigurationError as _ConfigurationError
from goagent_py.otel import _semconv
from goagent_py.otel._content import CAPTURE_ENV
from goagent_py.otel._content import MAX_CONTENT_CHARS as _MAX_CONTENT_CHARS
from goagent_py.otel._content import capture_from_env as _capture_from_env
from goagent_py.otel._hooks import Instrumentation as _Instrumentation
from goagent_py.otel._semconv import provider_name_of
from goagent_py.otel._store import (
    InstrumentedBatchEmbedder,
    InstrumentedEmbedder,
    StoreTelemetry,
)
from goagent_py.otel._store import wrap_embedder as _wrap_embedder
from goagent_py.otel._store import wrap_store as _wrap_store

if typing.TYPE_CHECKING:
    from collections.abc import Callable

    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from goagent_py.hooks import Hooks
    from goagent_py.memory.base import Embedder
    from goagent_py.memory.vector.base import VectorStore
    from goagent_py.memory.vector.observable import ObservableStore
    from goagent_py.otel._hooks import SpanLedger

__all__ = [
    "CAPTURE_ENV",
    "instrument",
    "instrument_embedder",
    "instrument_store",
    "InstrumentedBatchEmbedder",
    "InstrumentedEmbedder",
    "provider_name_of",
    "StoreTelemetry",
]


_MIN_CONTENT_CHARS = 256


def _capture(capture_content: bool | None) -> bool:
    return _capture_from_env() if capture_content is None else capture_content


def instrument(
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    *,
    capture_content: bool | None = None,
    provider_name: str | None = None,
    provider: object | None = None,
    max_content_chars: int | None = _MAX_CONTENT_CHARS,
) -> Hooks:
    """Hooks that trace and measure every run of the agent they are given to.

    Merge them with your own hooks via :func:`~goagent_py.merge_hooks`. One hook set may serve
    several agents and any number of concurrent runs.

    Args:
        tracer_provider: where spans go (the global provider when None).
        meter_provider: where metrics go (the global provider when None).
        capture_content: record prompts, completions and tool arguments/results. None reads
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (``true`` opts in), now.
        provider_name: ``gen_ai.provider.name`` (wins over ``provider``).
        provider: the agent's provider, to derive ``gen_ai.provider.name`` from (see
            :func:`provider_name_of`). Hooks never see the provider, so without this or
            ``provider_name`` the name is derived per run from the agent's provider.
        max_content_chars: the most characters one captured attribute holds (a prompt, the
            messages of a model call, a tool's arguments or result, an error's message). JSON
            stays JSON: its strings are cut, each cut said in it, and a model call's oldest
            messages are left out first (they are on the earlier calls' spans). None: no bound.

    Returns:
        The hooks.

    Raises:
        ConfigurationError: ``max_content_chars`` is not None or an int of at least 256.
    """
    if max_content_chars is not None and (
        isinstance(max_content_chars, bool)
        or not isinstance(max_content_chars, int)
        or max_content_chars < _MIN_CONTENT_CHARS
    ):
        raise _ConfigurationError(
            f"max_content_chars must be None (no bound) or an int of at least "
            f"{_MIN_CONTENT_CHARS}, not {max_content_chars!r}"
        )
    if provider_name is None:
        provider_name = (
            provider_name_of(provider) if provider is not None else _semconv.PROVIDER_OTHER
        )
    return _Instrumentation(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_content=_capture(capture_content),
        provider_name=provider_name,
        max_content_chars=max_content_chars,
    ).hooks()


def _instrument_on_clock(
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    clock: Callable[[], int],
    *,
    capture_content: bool | None,
    ledger: SpanLedger | None = None,
) -> Hooks:
    """:func:`instrument` with every time read from ``clock`` (ns since the epoch) and the
    spans left open across awaits told to ``ledger``: a durable run's, whose workflow Temporal
    replays, or closes from outside (goagent_py/durable/_telemetry.py)."""
    return _Instrumentation(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_content=_capture(capture_content),
        provider_name=_semconv.PROVIDER_OTHER,
        clock=clock,
        ledger=ledger,
    ).hooks()


def instrument_store(
    store: VectorStore,
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    system: str | None = None,
    collection: str = "",
    observer: object | None = None,
    capture_content: bool | None = None,
) -> ObservableStore:
    """Wrap a vector store so each call is a span and a ``db.client.operation.duration`` point.

    Built on :class:`~goagent_py.memory.vector.observable.ObservableStore`: the result is a
    ``BulkVectorStore`` / ``CountableStore`` exactly when ``store`` is. Spans are children of
    the span current around the call (inside an instrumented run, the run span, or the
    ``execute_tool`` span of the tool call that made it).

    Args:
        store: the store to wrap.
        tracer_provider: where spans go (the global provider when None).
        meter_provider: where metrics go (the global provider when None).
        system: ``db.system.name`` (derived from the store's class when None).
        collection: ``db.collection.name`` (table, collection), if any.
        observer: another observer to report to as well.
        capture_content: record exception messages (None reads the environment variable).

    Returns:
        The wrapped store.
    """
    return _wrap_store(
        store,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        system=system,
        collection=collection,
        observer=observer,
        capture_content=_capture(capture_content),
    )


def instrument_embedder(
    embedder: Embedder,
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    model: str | None = None,
    provider_name: str | None = None,
    capture_content: bool | None = None,
) -> InstrumentedEmbedder:
    """Wrap an embedder so each call is an ``embeddings {model}`` span.

    The result is a ``BatchEmbedder`` exactly when ``embedder`` is; calls also record
    ``gen_ai.client.operation.duration`` with ``gen_ai.operation.name=embeddings``.

    Args:
        embedder: the embedder to wrap.
        tracer_provider: where spans go (the global provider when None).
        meter_provider: where metrics go (the global provider when None).
        model: ``gen_ai.request.model`` (the embedder's ``model`` attribute when None).
        provider_name: ``gen_ai.provider.name`` (derived from the embedder's class when None).
        capture_content: record exception messages (None reads the environment variable).

    Returns:
        The wrapped embedder.
    """
    return _wrap_embedder(
        embedder,
        model=model,
        provider_name=provider_name,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_content=_capture(capture_content),
    )
