"""What crosses the workflow/activity boundary: plain JSON data, never pickled objects.

Messages travel as the JSON of :func:`~goagent_py.messages.messages_to_json` (a string inside the
payload), requests and responses as dicts of plain fields, errors as ``{type, message,
retryable}`` plus a few typed fields (HTTP status, Retry-After).
"""

from __future__ import annotations

import contextlib
import json
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from goagent_py._metadata_keys import PENDING_KEY
from goagent_py.approvals import Approve, Deny, ToolDecision, ToolOutput
from goagent_py.errors import (
    ConfigurationError,
    ConversationClearedError,
    CorruptedDataError,
    GoAgentError,
    LeaseLostError,
    ProviderError,
    ToolBlockedError,
    ToolError,
    ToolTimeoutError,
)
from goagent_py.memory.base import MEMORY_RECALLED_KEY, MEMORY_TURN_KEY
from goagent_py.messages import ContentBlock, Message, Role, StopReason, ToolCall, Usage
from goagent_py.messages import messages_from_json as _from_json
from goagent_py.messages import messages_to_json as _to_json
from goagent_py.provider import CompletionRequest, CompletionResponse, ThinkingConfig
from goagent_py.tools import ToolDefinition

MEMORY_ID_KEY = "goagent.memory_id"
"""The metadata key of a message's id in a durable run's long-term store: ``<run id>:store:<n>:
<index>``, the same on every attempt, so a store keyed by it (or hashing metadata, like
:class:`~goagent_py.memory.LongTermMemory`) upserts the same rows when the activity is retried.
A memory with ``store_once(key, messages, *, session)`` gets the key ``<run id>:store:<n>``
instead."""

_ANSWER_CONTEXT = (MEMORY_RECALLED_KEY, MEMORY_TURN_KEY)
HISTORY_REF_KEY = "goagent.ref"
"""The metadata key of a stand-in: a history message that stays on the workers (issue 30).

The load activity gives the workflow one stand-in per history message: its role, tool-call ids
and names and tool-result id (what the loop's pairing rules read), no content, and under this
key the digest of the stored message (:func:`history_digest`). The model activity puts the
stored messages back in their place, so neither the load's result nor any model request
carries the history: what the workflow records grows with the number of messages, not their
size. (Since ``run_refs``, the closed turns that lead the window are one stand-in,
:data:`RANGE_REF`, and the run's own stored messages cross as stand-ins too.)"""

DEFAULT_PAYLOAD_LIMIT = 2 * 1024 * 1024
"""Temporal's default limit on one payload (the server refuses bigger blobs)."""


class PayloadTooLargeError(ConfigurationError):
    """A request or result is too big to record in the workflow's history.

    Attributes:
        what: what was too big ("tool 'read' result", "model 'm' response"...).
        size: its size in bytes.
        limit: the limit it broke.
        server: True if the limit is the Temporal server's (below the agent's
            ``payload_limit``), False if it is ``payload_limit`` itself.
    """

    def __init__(self, what: str, size: int, limit: int, *, server: bool = False) -> None:
        self.what = what
        self.size = size
        self.limit = limit
        self.server = server
        if server:
            of, tail = (
                "the Temporal server's blob size limit (payload_limit is set higher than the "
                "server accepts)",
                "",
            )
        else:
            of, tail = "a Temporal payload", ", or raise payload_limit= if your server allows it"
        super().__init__(
            f"{what}: the payload is {size} bytes, over the {limit}-byte limit of {of}; return "
            f"a reference (a path, a URL, a row id) instead of the data{tail}"
        )

    def __reduce__(self) -> Any:
        return self._reduce_with(self.what, self.size, self.limit, server=self.server)


# The answers of server_blob_limit, by client: asked once per client, not once per run.
_BLOB_LIMITS: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


async def server_blob_limit(client: Any) -> int:
    """The largest payload ``client``'s server accepts (its namespace's
    ``blob_size_limit_error``), or 0 if it does not say (older servers) or cannot be asked.
    The answer is kept for the client's lifetime (a new client asks again); a failed ask is
    not kept."""
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest

    try:
        known = _BLOB_LIMITS.get(client)
    except TypeError:  # an object that takes no weak reference: asked each time
        known = None
    if known is not None:
        return known
    try:
        described = await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=client.namespace)
        )
        limit = int(described.namespace_info.limits.blob_size_limit_error)
    except Exception:  # the check is a courtesy: never fail a run because it cannot be made
        return 0
    with contextlib.suppress(TypeError):  # an object that takes no weak reference: ask again
        _BLOB_LIMITS[client] = limit
    return limit


def check_size(data: Any, what: str, limit: int, *, server_limit: int = 0) -> None:
    """Raise :class:`PayloadTooLargeError` if ``data``'s JSON is over ``limit`` bytes, or over
    ``server_limit`` (the server's own limit; 0: not known) when that is lower."""
    size = len(json.dumps(data, separators=(",", ":")).encode())
    if 0 < server_limit < limit and size > server_limit:
        raise PayloadTooLargeError(what, size, server_limit, server=True)
    if size > limit:
        raise PayloadTooLargeError(what, size, limit)


def messages_to_text(messages: Sequence[Message]) -> str:
    """Messages as JSON text (bytes as base64)."""
    return _to_json(list(messages)).decode()


def messages_from_text(text: str) -> list[Message]:
    """Messages from :func:`messages_to_text`'s JSON (only goagent-py's own types)."""
    return _from_json(text)


def history_digest(message: Message) -> str:
    """A stored message's digest: the reference a stand-in carries."""
    import hashlib

    return hashlib.sha256(_to_json([message])).hexdigest()


RANGE_REF = "range:"
"""A stand-in's reference that stands for a closed run of history messages (issue 30):
``range:<count>:<digest of the first>:<digest of the digests>``. A worker of a version before
ranges finds no stored message with that digest and fails the call (``CorruptedDataError``),
never sends a different conversation."""


def range_digest(digests: Sequence[str]) -> str:
    """The digest of a run of messages, from their digests (:func:`history_digest`)."""
    import hashlib

    return hashlib.sha256("".join(digests).encode()).hexdigest()


def range_stand_in(digests: Sequence[str]) -> Message:
    """One stand-in for the messages whose digests are ``digests`` (a closed run of turns)."""
    ref = f"{RANGE_REF}{len(digests)}:{digests[0]}:{range_digest(digests)}"
    return Message(Role.USER, [], metadata={HISTORY_REF_KEY: ref})


def stand_in(message: Message, digest: str) -> Message:
    """The workflow's stand-in for a history message (see :data:`HISTORY_REF_KEY`).

    A message whose calls wait for decisions keeps its calls' arguments and its wait
    (``goagent.pending``): the loop refuses a new prompt on it, and a resume runs those calls.
    An answer keeps what it recorded of its turn (the memories it was given, the turn's id:
    ``goagent_py._recall``), which the next turn hands with its facts."""
    waiting = message.metadata.get(PENDING_KEY)
    metadata: dict[str, Any] = {HISTORY_REF_KEY: digest}
    if waiting is not None:
        metadata[PENDING_KEY] = waiting
    for key in _ANSWER_CONTEXT:
        if key in message.metadata:
            metadata[key] = message.metadata[key]
    return Message(
        message.role,
        [],
        tool_calls=[
            ToolCall(c.id, c.name, dict(c.arguments) if waiting else {}) for c in message.tool_calls
        ],
        tool_call_id=message.tool_call_id,
        is_error=message.is_error,
        metadata=metadata,
    )


def content_to_text(content: Sequence[ContentBlock]) -> str:
    """Content blocks as JSON text (inside one user message)."""
    return messages_to_text([Message(Role.USER, list(content))])


def content_from_text(text: str) -> list[ContentBlock]:
    """Content blocks from :func:`content_to_text`'s JSON."""
    (message,) = messages_from_text(text)
    return list(message.content)


def definition_to_data(definition: ToolDefinition) -> dict[str, Any]:
    """A tool definition as a dict."""
    return {
        "name": definition.name,
        "description": definition.description,
        "parameters": definition.parameters,
    }


def definition_from_data(data: dict[str, Any]) -> ToolDefinition:
    """A tool definition from :func:`definition_to_data`."""
    return ToolDefinition(data["name"], data["description"], data["parameters"])


def request_to_data(request: CompletionRequest) -> dict[str, Any]:
    """A completion request as plain data."""
    return {
        "model": request.model,
        "system_prompt": request.system_prompt,
        "messages": messages_to_text(request.messages),
        "tools": [definition_to_data(t) for t in request.tools],
        "thinking": None if request.thinking is None else request.thinking.budget_tokens,
        "effort": request.effort,
        "max_tokens": request.max_tokens,
    }


def request_from_data(data: dict[str, Any]) -> CompletionRequest:
    """A completion request from :func:`request_to_data`."""
    thinking = data.get("thinking")
    return CompletionRequest(
        model=data["model"],
        system_prompt=data.get("system_prompt", ""),
        messages=messages_from_text(data["messages"]),
        tools=[definition_from_data(t) for t in data.get("tools", [])],
        thinking=None if thinking is None else ThinkingConfig(int(thinking)),
        effort=data.get("effort"),
        max_tokens=data.get("max_tokens"),
    )


def usage_to_data(usage: Usage) -> dict[str, int]:
    """Token counts as a dict."""
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
    }


def usage_from_data(data: dict[str, Any]) -> Usage:
    """Token counts from :func:`usage_to_data`."""
    return Usage(**{k: int(v) for k, v in data.items()})


def response_to_data(response: CompletionResponse) -> dict[str, Any]:
    """A completion response as plain data."""
    return {
        "message": messages_to_text([response.message]),
        "stop_reason": str(response.stop_reason),
        "usage": usage_to_data(response.usage),
        "model": response.model,
    }


def response_from_data(data: dict[str, Any]) -> CompletionResponse:
    """A completion response from :func:`response_to_data`."""
    (message,) = messages_from_text(data["message"])
    return CompletionResponse(
        message=message,
        stop_reason=StopReason(data["stop_reason"]),
        usage=usage_from_data(data["usage"]),
        model=data.get("model", ""),
    )


_NON_RETRYABLE_STATUS = range(400, 500)
_RETRYABLE_STATUS = (408, 409, 429)


@dataclass(slots=True, frozen=True)
class ErrorData:
    """An error as data: its type name, message, whether retrying can help, and extras.

    Attributes:
        type: the exception's class name (``"ProviderError"``).
        message: its text.
        retryable: False for misuse and client errors (4xx but 408/409/429).
        status: the HTTP status of a provider error, if any.
        retry_after: seconds the server asked to wait, if it said so.
    """

    type: str
    message: str
    retryable: bool
    status: int | None = None
    retry_after: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_data(self) -> dict[str, Any]:
        """As a JSON-ready dict."""
        return {
            "type": self.type,
            "message": self.message,
            "retryable": self.retryable,
            "status": self.status,
            "retry_after": self.retry_after,
            "extra": self.extra,
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> ErrorData:
        """From :meth:`to_data`'s dict."""
        return cls(
            type=str(data.get("type", "Exception")),
            message=str(data.get("message", "")),
            retryable=bool(data.get("retryable", True)),
            status=data.get("status"),
            retry_after=data.get("retry_after"),
            extra=dict(data.get("extra") or {}),
        )


def error_to_data(exc: BaseException) -> ErrorData:
    """Classify ``exc``: configuration errors, corrupted stored data, a lost lease and 4xx (but
    408/409/429) are not retryable."""
    if isinstance(exc, ProviderError):
        retryable = not (
            exc.status in _NON_RETRYABLE_STATUS and exc.status not in _RETRYABLE_STATUS
        )
        return ErrorData(
            "ProviderError",
            str(exc),
            retryable,
            status=exc.status,
            retry_after=exc.retry_after,
            extra={"provider": exc.provider, "error_type": exc.error_type},
        )
    if isinstance(
        exc, ConfigurationError | CorruptedDataError | LeaseLostError | ConversationClearedError
    ):
        # Misuse, a stored row that cannot be read, a session another run took over, a write
        # on a conversation cleared since it was read: the same on every attempt.
        return ErrorData(type(exc).__name__, str(exc), False)
    return ErrorData(type(exc).__name__, str(exc), True)


class DurableRunError(GoAgentError):
    """A durable run failed; ``type`` names the error raised inside the workflow.

    Attributes:
        type: the inner error's class name (``"ProviderError"``, ``"MaxIterationsError"``...).
        detail: the inner error's message.
    """

    def __init__(self, type: str, detail: str) -> None:
        self.type = type
        self.detail = detail
        super().__init__(f"durable run failed with {type}: {detail}")

    def __reduce__(self) -> Any:
        return self._reduce_with(self.type, self.detail)


class RemoteToolError(ToolError):
    """A tool failed in its activity; the message is the worker's own error message (what the
    model reads, as in a plain run).

    Attributes:
        tool_name: the tool.
        type: the error's class name on the worker (``"ToolExecutionError"``, ``"MCPToolError"``).
        retryable: whether the engine could retry it (True only when the retries ran out).
    """

    def __init__(
        self, message: str, *, tool_name: str = "", type: str = "", retryable: bool = False
    ) -> None:
        self.tool_name = tool_name
        self.type = type
        self.retryable = retryable
        super().__init__(message)

    def __reduce__(self) -> Any:
        return self._reduce_with(
            self.args[0] if self.args else "",
            tool_name=self.tool_name,
            type=self.type,
            retryable=self.retryable,
        )


def tool_error_to_data(error: BaseException, retryable: bool) -> ErrorData:
    """A tool call's error as data, with what :func:`tool_error_from_data` needs to rebuild it."""
    extra: dict[str, Any] = {}
    if isinstance(error, ToolTimeoutError):
        extra = {"timeout": error.timeout}
    elif isinstance(error, ToolBlockedError):
        extra = {"reason": error.reason}
    return ErrorData(type(error).__name__, str(error), retryable, extra=extra)


def tool_error_from_data(tool_name: str, error: ErrorData) -> ToolError:
    """The error a workflow's tool proxy raises for a failed activity: a timeout or a blocked
    call as its own type (the loop tells a denied call by its type), anything else as a
    :class:`RemoteToolError` with the worker's message."""
    if error.type == "ToolTimeoutError" and "timeout" in error.extra:
        return ToolTimeoutError(tool_name, float(error.extra["timeout"]))
    if error.type == "ToolBlockedError" and "reason" in error.extra:
        return ToolBlockedError(tool_name, str(error.extra["reason"]))
    return RemoteToolError(
        error.message, tool_name=tool_name, type=error.type, retryable=error.retryable
    )


# -- names and results shared by the workflow, the client and DurableAgent ------------------

WORKFLOW_NAME = "goagent.run"
"""The workflow type that runs one agent turn."""
STEER_SIGNAL = "goagent.steer"
"""Signal: a steering message for the running turn (queued; delivered between turns)."""
FOLLOW_UP_SIGNAL = "goagent.follow_up"
"""Signal: a follow-up prompt, run in the same workflow once the current prompt is answered."""
ABORT_SIGNAL = "goagent.abort"
"""Signal: stop the run now; the in-flight activity is cancelled, nothing more is persisted."""
EVENTS_UPDATE = "goagent.events"
"""Update: the run's events after an index, waiting for the next (see ``DurableAgent.events``)."""
STATE_QUERY = "goagent.state"
"""Query: the run's state (status, iteration, tool calls, queued signals)."""
EVENTS_QUERY = "goagent.events_after"
"""Query: the run's events after an index, without waiting (what an events stream reads when
the run ended before its next update reached it)."""
DECIDE_UPDATE = "goagent.decide"
"""Update: decisions for calls that wait (``{call id: decision data}``); refused, with the
reason, when a call does not wait, was decided already or is past its deadline."""
PENDING_QUERY = "goagent.pending"
"""Query: the calls that wait for a decision (id, tool, validated arguments, kind, deadline)."""


def decision_to_data(decision: ToolDecision) -> dict[str, Any]:
    """An :class:`~goagent_py.approvals.Approve`, ``Deny`` or ``ToolOutput`` as JSON data.

    Raises:
        ConfigurationError: ``decision`` is none of them.
    """
    out: dict[str, Any]
    if isinstance(decision, Approve):
        out = {"decision": "approve", "arguments": decision.arguments, "always": decision.always}
    elif isinstance(decision, Deny):
        out = {"decision": "deny", "message": decision.message, "stop": decision.stop}
    elif isinstance(decision, ToolOutput):
        out = {
            "decision": "output",
            "content": content_to_text(decision.blocks()),
            "is_error": decision.is_error,
        }
    else:
        out = {}
    if out:
        if not isinstance(decision.token, str):
            raise ConfigurationError(
                f"a decision's token must be the str of PendingCall.token, got "
                f"{type(decision.token).__name__}"
            )
        if decision.token:  # the wait it is for (absent: any wait its call id names)
            out["token"] = decision.token
        return out
    raise ConfigurationError(
        f"a decision must be Approve(), Deny(message) or ToolOutput(...), got "
        f"{type(decision).__name__}"
    )


def decision_from_data(data: Mapping[str, Any]) -> ToolDecision:
    """The decision :func:`decision_to_data` wrote."""
    kind = data.get("decision")
    token = str(data.get("token") or "")
    if kind == "approve":
        arguments = data.get("arguments")
        return Approve(
            arguments=None if arguments is None else dict(arguments),
            always=bool(data.get("always", False)),
            token=token,
        )
    if kind == "deny":
        return Deny(str(data.get("message", "")), stop=bool(data.get("stop", False)), token=token)
    if kind == "output":
        return ToolOutput(
            content_from_text(str(data["content"])), bool(data.get("is_error")), token=token
        )
    raise ConfigurationError(f"unknown decision {kind!r}: approve, deny or output")


@dataclass(slots=True)
class DurableResult:
    """The outcome of a durable run (what ``RunResult`` holds, as data).

    Attributes:
        text: the final answer ("" if aborted).
        stop_reason: why the model stopped, or None if aborted before any answer.
        iterations: model calls made.
        usage: tokens used.
        tool_calls: tool calls made.
        messages: the run's new messages (user prompt, assistant turns, tool results).
        run_id: the workflow id (the prefix of every idempotency key of the run).
        aborted: True if an abort signal stopped the run.
        runs: prompts answered: 1 plus the follow-ups that arrived while it ran (the numbers
            above add them all up; ``text`` is the last answer).
        unprocessed_follow_ups: follow-ups that arrived too late (or before an abort).
    """

    text: str
    stop_reason: StopReason | None
    iterations: int
    usage: Usage
    tool_calls: int
    messages: list[Message] = field(default_factory=list)
    run_id: str = ""
    aborted: bool = False
    runs: int = 1
    unprocessed_follow_ups: list[str] = field(default_factory=list)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> DurableResult:
        """From the workflow's result."""
        reason = data.get("stop_reason")
        return cls(
            text=str(data.get("text", "")),
            stop_reason=StopReason(reason) if reason else None,
            iterations=int(data.get("iterations", 0)),
            usage=usage_from_data(data.get("usage", {})),
            tool_calls=int(data.get("tool_calls", 0)),
            messages=messages_from_text(data.get("messages", "[]")),
            run_id=str(data.get("run_id", "")),
            aborted=bool(data.get("aborted", False)),
            runs=int(data.get("runs", 1)),
            unprocessed_follow_ups=list(data.get("unprocessed_follow_ups", [])),
        )
