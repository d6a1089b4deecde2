"""Names and constants of the OpenTelemetry semantic conventions that goagent-py emits.

Kept in one place so a revision of the (still "Development") GenAI conventions is one diff.
Sources are cited in :mod:`goagent_py.otel`'s docstring.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

# error.type is derived where errors are described: the compactor, below this layer, records it.
from goagent_py._describe import error_type as error_type
from goagent_py.messages import StopReason

SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"
SCOPE = "goagent_py"

# -- GenAI attributes --------------------------------------------------------------------------
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
TOKEN_TYPE = "gen_ai.token.type"
AGENT_NAME = "gen_ai.agent.name"
WORKFLOW_NAME = "gen_ai.workflow.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_DESCRIPTION = "gen_ai.tool.description"
MEMORY_STORE_ID = "gen_ai.memory.store.id"
MEMORY_RECORD_COUNT = "gen_ai.memory.record.count"
EMBEDDINGS_DIMENSION = "gen_ai.embeddings.dimension.count"
ERROR_TYPE = "error.type"

# Opt-in content attributes (recorded only when content capture is on).
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
MEMORY_RECORDS = "gen_ai.memory.records"

# -- GenAI operation names ---------------------------------------------------------------------
OP_INVOKE_AGENT = "invoke_agent"
OP_INVOKE_WORKFLOW = "invoke_workflow"
OP_CHAT = "chat"
OP_EXECUTE_TOOL = "execute_tool"
OP_EMBEDDINGS = "embeddings"
OP_SEARCH_MEMORY = "search_memory"
OP_CREATE_MEMORY = "create_memory"
OP_UPSERT_MEMORY = "upsert_memory"

# -- Database attributes (vector stores are database clients) ----------------------------------
DB_SYSTEM = "db.system.name"
DB_OPERATION = "db.operation.name"
DB_COLLECTION = "db.collection.name"
DB_BATCH_SIZE = "db.operation.batch.size"
DB_RETURNED_ROWS = "db.response.returned_rows"

# -- goagent-py's own attributes and events (no convention covers them) -----------------------
RUN_ID = "goagent.run.id"
RUN_ITERATIONS = "goagent.run.iterations"
RUN_TOOL_CALLS = "goagent.run.tool_calls"
VECTOR_ID = "goagent.vector.id"
VECTOR_TOP_K = "goagent.vector.top_k"
VECTOR_WRITTEN = "goagent.vector.written"  # a guarded write: False when the scope had changed
EVENT_TOOL_RETRY = "goagent.tool.retry"
EVENT_TOOL_TIMEOUT = "goagent.tool.timeout"
EVENT_CIRCUIT_OPEN = "goagent.tool.circuit_open"

# -- Metrics -----------------------------------------------------------------------------------
METRIC_TOKEN_USAGE = "gen_ai.client.token.usage"
METRIC_OPERATION_DURATION = "gen_ai.client.operation.duration"
METRIC_INVOKE_AGENT_DURATION = "gen_ai.invoke_agent.duration"
METRIC_TOOL_DURATION = "gen_ai.execute_tool.duration"
METRIC_TOOL_ERRORS = "goagent.tool.errors"
METRIC_DB_DURATION = "db.client.operation.duration"

TOKEN_BUCKETS: tuple[float, ...] = (
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
)
DURATION_BUCKETS: tuple[float, ...] = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
DB_DURATION_BUCKETS: tuple[float, ...] = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10)

# The output-messages schema's finish_reason vocabulary.
FINISH_REASON: dict[StopReason, str] = {
    StopReason.END_TURN: "stop",
    StopReason.STOP_SEQUENCE: "stop",
    StopReason.MAX_TOKENS: "length",
    StopReason.TOOL_USE: "tool_call",
    StopReason.REFUSAL: "content_filter",
    StopReason.ERROR: "error",
    StopReason.PAUSE_TURN: "pause_turn",
}


def finish_reason(stop_reason: StopReason) -> str:
    """The convention's finish reason for ``stop_reason`` (``gen_ai.response.finish_reasons``
    and the output messages' ``finish_reason`` say the same; ours where it has none)."""
    return FINISH_REASON.get(stop_reason, str(stop_reason))


# Provider class stems (lower case, no underscores) -> the convention's well-known values.
_WELL_KNOWN_PROVIDERS: dict[str, str] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "azureopenai": "azure.ai.openai",
    "azureaiinference": "azure.ai.inference",
    "bedrock": "aws.bedrock",
    "awsbedrock": "aws.bedrock",
    "gemini": "gcp.gemini",
    "vertexai": "gcp.vertex_ai",
    "cohere": "cohere",
    "deepseek": "deepseek",
    "groq": "groq",
    "mistral": "mistral_ai",
    "mistralai": "mistral_ai",
    "perplexity": "perplexity",
    "xai": "x_ai",
    "watsonx": "ibm.watsonx.ai",
}

OTHER = "_OTHER"
"""The conventions' catch-all value (a provider, or a tool no request offered)."""
PROVIDER_OTHER = OTHER
"""``gen_ai.provider.name`` when the provider is unknown (the convention's catch-all)."""
TOOL_REQUESTED_NAME = "goagent.tool.requested_name"
"""The name a model wrote for a tool no request offered (content: only when capturing)."""

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def snake_case(name: str) -> str:
    """``LlamaCpp`` -> ``llama_cpp``."""
    return _CAMEL_BOUNDARY.sub("_", name).lower()


def provider_name_of(provider: object) -> str:
    """The ``gen_ai.provider.name`` for a provider (or embedder) object.

    A non-empty ``provider_name`` attribute wins; otherwise the class name without its
    ``Provider``/``Embedder`` suffix, mapped to the convention's well-known value where there is
    one (``AnthropicProvider`` -> ``"anthropic"``, ``OpenAIProvider`` -> ``"openai"``) and
    snake-cased where there is not (``LlamaCppProvider`` -> ``"llama_cpp"``).

    Args:
        provider: the provider instance.

    Returns:
        The provider name.
    """
    explicit = getattr(provider, "provider_name", None)
    if isinstance(explicit, str) and explicit:
        return explicit
    inner = getattr(provider, "inner", None)  # wrappers such as retry_provider
    if inner is not None and inner is not provider:
        return provider_name_of(inner)
    cls = type(provider).__name__
    stem = cls.removesuffix("Provider").removesuffix("Embedder") or cls
    return _WELL_KNOWN_PROVIDERS.get(stem.lower().replace("_", ""), snake_case(stem))


def to_ns(moment: datetime) -> int:
    """Nanoseconds since the epoch, exact (no float rounding)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
