"""Anthropic Messages API provider (``POST /v1/messages``), plain and streaming (SSE).

Wire format: https://docs.anthropic.com/en/api/messages. What this module guarantees beyond a
straight mapping:

- All tool results of a turn go back as ONE user message of ``tool_result`` blocks (the API
  rejects them spread over several messages), each with ``is_error`` taken from
  ``Message.is_error`` (never guessed from the text), and with images and PDFs kept.
- A tool's JSON schema goes out as ``input_schema`` unchanged: ``required`` survives whether it
  came from Python code or from JSON (MCP servers), and so do ``$defs``, ``enum`` and the rest.
- Thinking and redacted thinking come back as :class:`~goagent_py.ThinkingBlock` with their
  signatures and are echoed back unmodified, as the API requires.
- An ``error`` event in a stream that started with HTTP 200 (e.g. ``overloaded_error``) raises
  :class:`~goagent_py.ProviderError` with that ``error_type``; so does a stream that ends before
  ``message_stop``.
- Sampling settings are checked before anything is sent: ``temperature`` in [0, 1] and
  ``top_p`` in (0, 1], not both (Claude models from the 4.5 generation on refuse both; the API
  reference advises changing one); with extended thinking the API takes only ``temperature`` 1
  and ``top_p`` from 0.95 to 1, so a request with thinking and another setting raises
  :class:`~goagent_py.ConfigurationError` rather than costing a round trip for a 400. Models
  that refuse sampling settings outright (Anthropic's migration guide for Claude Opus 4.7) are
  left to the API's 400, since that depends on each request's model.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, cast

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from goagent_py._json_schema import map_schema, recursive_def, walk_schema
from goagent_py._json_text import loads
from goagent_py.errors import ConfigurationError, ProviderError, UnsupportedContentError
from goagent_py.messages import (
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    Role,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    Usage,
)
from goagent_py.provider import (
    CompletionRequest,
    CompletionResponse,
    StreamDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
)
from goagent_py.providers._http import (
    INVALID_ARGUMENTS_KEY,
    HTTPBackend,
    KeySource,
    excerpt,
    key_headers,
    null_is_absent,
    resolve_api_key,
)
from goagent_py.providers._sampling import check_extra_body, check_sampling
from goagent_py.tools import ToolDefinition

__all__ = ["AnthropicProvider"]

_PROVIDER = "anthropic"
_API_VERSION = "2023-06-01"
_REDACTED = "[redacted]"

# extra_body keys that would take over what the provider builds or has an argument for.
_RESERVED_BODY_KEYS = {
    "model": "the model comes from the request (with_model(...))",
    "messages": "the provider builds them from the conversation",
    "stream": "complete() and stream() set it",
    "max_tokens": "pass max_tokens=... to AnthropicProvider (or with_max_tokens(...))",
    "temperature": "pass temperature=... to AnthropicProvider",
    "top_p": "pass top_p=... to AnthropicProvider",
    "stop_sequences": "pass stop=[...] to AnthropicProvider",
}

# With extended thinking on, the API takes temperature 1 only and top_p from 0.95 to 1
# (https://platform.claude.com/docs/en/build-with-claude/extended-thinking, "Feature
# compatibility").
_THINKING_TEMPERATURE = 1.0
_THINKING_MIN_TOP_P = 0.95

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": StopReason.END_TURN,
    "max_tokens": StopReason.MAX_TOKENS,
    "tool_use": StopReason.TOOL_USE,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "refusal": StopReason.REFUSAL,
    "pause_turn": StopReason.PAUSE_TURN,
    # The answer was cut off by the model's context window (API 2025+, SDK 0.119): a truncation
    # like max_tokens, so a cut-off tool call is answered with an error, never run.
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
}


class AnthropicProvider(HTTPBackend):
    """Claude models through the Anthropic Messages API.

    Use it as an async context manager (or call :meth:`aclose`) so its HTTP client is closed; a
    client passed as ``http_client`` is borrowed and left open::

        async with AnthropicProvider() as provider:
            agent = Agent(with_provider(provider), with_model("claude-sonnet-4-6"))

    Args:
        api_key: the API key; defaults to the ``ANTHROPIC_API_KEY`` environment variable. A
            function (sync or async) is called before each request instead: short-lived keys.
        base_url: the API root (a proxy or gateway may stand in).
        http_client: an ``httpx.AsyncClient`` to use instead of creating one.
        max_tokens: the output limit when the request does not set one.
        timeout: the timeout of the created client, in seconds or as ``httpx.Timeout``.
        temperature: the sampling temperature of every request, 0 to 1 (None: the model's
            default, 1). With extended thinking only 1 is allowed.
        top_p: the nucleus-sampling mass of every request, greater than 0 and at most 1 (None:
            not sent). Set ``temperature`` or ``top_p``, not both. With extended thinking only
            0.95 to 1 is allowed.
        stop: stop sequences (``stop_sequences`` on the wire): each a non-empty string with a
            visible character. A match ends the answer with ``StopReason.STOP_SEQUENCE``.
        extra_body: fields merged last into every request body, for API fields this provider
            does not model (e.g. ``{"top_k": 40}`` or ``{"metadata": {"user_id": "u1"}}``). A key
            here replaces what the provider would send (e.g. ``tool_choice``); ``model``,
            ``messages``, ``stream`` and the fields that have an argument above are refused.

    Raises:
        ConfigurationError: no API key was given and ``ANTHROPIC_API_KEY`` is not set, or a
            setting is out of range (the message says which and what is allowed).
    """

    def __init__(
        self,
        api_key: str | KeySource | None = None,
        *,
        base_url: str = "https://api.anthropic.com",
        http_client: httpx.AsyncClient | None = None,
        max_tokens: int = 4096,
        timeout: float | httpx.Timeout | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        stop: Sequence[str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        source = api_key if callable(api_key) else None
        key = (
            ""
            if source is not None
            else resolve_api_key(
                cast("str | None", api_key), "ANTHROPIC_API_KEY", provider=_PROVIDER
            )
        )
        if max_tokens < 1:
            raise ConfigurationError(f"anthropic: max_tokens must be >= 1, got {max_tokens}")
        self._sampling = check_sampling(
            _PROVIDER,
            temperature=temperature,
            top_p=top_p,
            stop=stop,
            max_temperature=1.0,
            stop_needs_non_whitespace=True,
            vendor="Anthropic",
        )
        if self._sampling.temperature is not None and self._sampling.top_p is not None:
            raise ConfigurationError(
                "anthropic: set temperature or top_p, not both: Claude models from the 4.5 "
                "generation on refuse requests with both (the API reference advises changing one)"
            )
        self._extra_body = check_extra_body(_PROVIDER, extra_body, reserved=_RESERVED_BODY_KEYS)
        super().__init__(
            _PROVIDER,
            base_url=base_url,
            http_client=http_client,
            timeout=timeout,
            headers={"anthropic-version": _API_VERSION, **({"x-api-key": key} if key else {})},
            header_source=None
            if source is None
            else key_headers(source, lambda k: {"x-api-key": k}, provider=_PROVIDER),
        )
        self._max_tokens = max_tokens

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """Send ``request`` and return Claude's answer.

        Raises:
            ProviderError: the call failed (status, ``error_type``, body and ``retry_after`` set).
            ConfigurationError: the request has no model or a message the API cannot take.
            UnsupportedContentError: a content block cannot be sent to Claude.
        """
        data = await self.post_json("/v1/messages", self._body(request))
        with self._redacting():
            return parse_response(data)

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        """Stream Claude's answer: text, thinking and tool-call deltas, then :class:`StreamDone`.

        Raises:
            ProviderError: the call failed, the server sent an ``error`` event, or the stream
                ended before ``message_stop``.
        """
        body = self._body(request)
        body["stream"] = True
        assembler = _StreamAssembler()
        with self._redacting():  # an error event may echo what was sent
            async with aclosing(self.stream_sse("/v1/messages", body)) as events:
                async for sse in events:
                    for event in assembler.feed(sse.event, sse.data):
                        yield event
                    if assembler.done:
                        break
            done = StreamDone(assembler.response())
        yield done

    def native_output_problem(self, schema: dict[str, Any]) -> str | None:
        """What in ``schema`` Claude's structured outputs cannot express (recursion, an object
        with ``additionalProperties`` other than false, such as a ``dict[str, X]``), or None.

        Implements :class:`~goagent_py.provider.OutputSchemaLimits`, so an agent that asks for
        ``output_mode="native"`` with such a type is refused when it is built.
        """
        return structured_output_problem(schema)

    def _body(self, request: CompletionRequest) -> dict[str, Any]:
        if request.thinking is not None:
            self._check_thinking()
        body = build_request(request, default_max_tokens=self._max_tokens)
        body.update(self._sampling.fields("stop_sequences"))
        body.update(self._extra_body)
        return body

    def _check_thinking(self) -> None:
        # Refused here, not left to the API: the user set both, and a 400 would only say so
        # after a round trip (and an agent run would end on it just the same).
        temperature, top_p = self._sampling.temperature, self._sampling.top_p
        if temperature is not None and temperature != _THINKING_TEMPERATURE:
            raise ConfigurationError(
                f"anthropic: temperature={temperature:g} cannot be used with extended thinking: "
                "the API takes only temperature 1 while thinking is on; leave temperature unset "
                "(or 1) on AnthropicProvider, or drop with_thinking/with_adaptive_thinking"
            )
        if top_p is not None and top_p < _THINKING_MIN_TOP_P:
            raise ConfigurationError(
                f"anthropic: top_p={top_p:g} cannot be used with extended thinking: the API "
                f"takes only top_p from {_THINKING_MIN_TOP_P:g} to 1 while thinking is on; raise "
                "or unset top_p on AnthropicProvider, or drop with_thinking/with_adaptive_thinking"
            )


# --- request mapping (pure) -------------------------------------------------------------------


# Constraints Claude's structured outputs refuse; the SDK moves them into the description (as
# done here) and the client validates them: the run's output validation still checks them.
_UNSUPPORTED_CONSTRAINTS = (
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "maxItems",
)  # fmt: skip


def structured_output_problem(schema: dict[str, Any]) -> str | None:
    """What in ``schema`` structured outputs cannot express (path first), or None."""
    recursive = recursive_def(schema)
    if recursive is not None:
        return (
            f"$defs.{recursive} refers to itself, and Claude's structured outputs do not "
            "support recursive schemas"
        )
    for path, node in walk_schema(schema):
        if not isinstance(node, dict) or node.get("type") != "object":
            continue
        extra = node.get("additionalProperties", False)
        if extra is not False:
            where = ".".join(map(str, path)) or "(root)"
            return (
                f"{where} is an object with additionalProperties={json.dumps(extra)}, and "
                "Claude's structured outputs need additionalProperties: false on every object "
                "(a dict[str, ...] cannot be expressed: use a model with named fields)"
            )
    return None


def _closed_objects(schema: Any) -> Any:
    """``schema`` as structured outputs take it: ``additionalProperties: false`` on every object
    (required), and the constraints they refuse moved into the description (as the SDK does).
    Only schema objects are changed (:func:`~goagent_py._json_schema.map_schema`): a field
    named ``minimum`` is a field."""
    return map_schema(schema, _closed_object)


def _closed_object(out: dict[str, Any]) -> dict[str, Any]:
    if out.get("type") == "object":
        out.setdefault("additionalProperties", False)
    moved = [k for k in _UNSUPPORTED_CONSTRAINTS if k in out]
    if out.get("minItems", 0) not in (0, 1):
        moved.append("minItems")
    if moved and "type" in out:
        notes = ", ".join(f"{k}: {json.dumps(out.pop(k))}" for k in moved)
        description = out.get("description", "")
        out["description"] = f"{description} ({notes})" if description else f"({notes})"
    return out


def build_request(request: CompletionRequest, *, default_max_tokens: int) -> dict[str, Any]:
    """The JSON body of ``POST /v1/messages`` for ``request`` (without ``stream``)."""
    if not request.model:
        raise ConfigurationError("anthropic: no model set: use with_model('claude-...')")
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens or default_max_tokens,
    }
    if request.system_prompt:
        body["system"] = request.system_prompt
    if request.tools:
        body["tools"] = [_tool(t) for t in request.tools]
    if request.thinking is not None:
        body["thinking"] = (
            {"type": "adaptive"}
            if request.thinking.adaptive
            else {"type": "enabled", "budget_tokens": request.thinking.budget_tokens}
        )
    if request.effort is not None:
        body["output_config"] = {"effort": request.effort}
    if request.output is not None:
        # Structured outputs: the JSON schema under output_config.format (beside effort).
        config = body.setdefault("output_config", {})
        config["format"] = {"type": "json_schema", "schema": _closed_objects(request.output.schema)}
    body["messages"] = _messages(request.messages)
    return body


def _tool(definition: ToolDefinition) -> dict[str, Any]:
    schema = dict(definition.parameters)
    schema.setdefault("type", "object")
    required = schema.get("required")
    # `required` may be a tuple, a list of Any decoded from JSON (MCP), ...: keep it, as a list.
    if required is not None and not isinstance(required, str):
        schema["required"] = [str(name) for name in required]
    return {
        "name": definition.name,
        "description": definition.description,
        "input_schema": schema,
    }


def _messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    for message in messages:
        role, content = _message(message)
        if not content:
            continue  # the API refuses empty content (e.g. an assistant turn with no text)
        if wire and wire[-1]["role"] == role:
            # The API wants alternating roles: fold tool results (and any user text after
            # them) into one user message, and back-to-back messages of one role together.
            wire[-1]["content"].extend(content)
        else:
            wire.append({"role": role, "content": content})
    for entry in wire:
        blocks = entry["content"]
        if len(blocks) == 1 and blocks[0]["type"] == "text":
            entry["content"] = blocks[0]["text"]
    return wire


def _message(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if message.role is Role.USER:
        return "user", [b for b in map(_user_block, message.content) if b is not None]
    if message.role is Role.ASSISTANT:
        return "assistant", _assistant_blocks(message)
    if message.role is Role.TOOL:
        return "user", [_tool_result(message)]
    raise ConfigurationError(
        f"anthropic: a {message.role.value!r}-role message cannot be sent to the model; "
        "only user, assistant and tool messages can (RAG documents go in as context text)"
    )


def _user_block(block: ContentBlock) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        return _image(block)
    if isinstance(block, DocumentBlock):
        return _document(block)
    return None  # thinking belongs to the assistant; a user message never carries it


def _image(block: ImageBlock) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": block.media_type,
            "data": base64.b64encode(block.data).decode("ascii"),
        },
    }


def _document(block: DocumentBlock) -> dict[str, Any]:
    if block.media_type == "application/pdf":
        source = {
            "type": "base64",
            "media_type": "application/pdf",
            "data": base64.b64encode(block.data).decode("ascii"),
        }
    elif block.media_type == "text/plain":
        source = {
            "type": "text",
            "media_type": "text/plain",
            "data": block.data.decode("utf-8", errors="replace"),
        }
    else:  # pragma: no cover - DocumentBlock validates its media type
        raise UnsupportedContentError(f"document ({block.media_type})", _PROVIDER)
    wire: dict[str, Any] = {"type": "document", "source": source}
    if block.title:
        wire["title"] = block.title
    return wire


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ThinkingBlock):
            if block.thinking == _REDACTED:
                blocks.append({"type": "redacted_thinking", "data": block.signature})
            else:
                blocks.append(
                    {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
                )
        elif isinstance(block, TextBlock):
            if block.text:
                blocks.append({"type": "text", "text": block.text})
        else:
            raise UnsupportedContentError(
                block.type, _PROVIDER, "assistant messages can hold only text and thinking"
            )
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        )
    return blocks


def _tool_result(message: Message) -> dict[str, Any]:
    if not message.tool_call_id:
        raise ConfigurationError("anthropic: a tool message has no tool_call_id")
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    blocks = [b for b in map(_user_block, message.content) if b is not None]
    if blocks and all(b["type"] == "text" for b in blocks):
        result["content"] = "\n".join(b["text"] for b in blocks)
    elif blocks:
        result["content"] = blocks
    if message.is_error:
        result["is_error"] = True
    return result


# --- response mapping (pure) ------------------------------------------------------------------


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    _null_is_absent = model_validator(mode="before")(null_is_absent)


class _WireUsage(_Wire):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class _WireMessage(_Wire):
    model: str = ""
    content: list[dict[str, Any]] = []
    stop_reason: str | None = None
    usage: _WireUsage = _WireUsage()


class _WireError(_Wire):
    type: str = ""
    message: str = ""


class _WireEvent(_Wire):
    type: str = ""
    index: int = 0
    message: _WireMessage | None = None
    content_block: dict[str, Any] | None = None
    delta: dict[str, Any] | None = None
    usage: _WireUsage | None = None
    error: _WireError | None = None


def parse_response(data: Any, *, status: int = 200) -> CompletionResponse:
    """A :class:`CompletionResponse` from a ``/v1/messages`` JSON answer.

    Raises:
        ProviderError: the answer is an error object or not a message.
    """
    if isinstance(data, Mapping) and data.get("type") == "error":
        raise _error_event(data.get("error"), status=status)
    try:
        wire = _WireMessage.model_validate(data)
        content: list[ContentBlock] = []
        calls: list[ToolCall] = []
        for raw in wire.content:
            block = _content_block(raw)
            if isinstance(block, ToolCall):
                calls.append(block)
            elif block is not None:
                content.append(block)
    except (ValidationError, KeyError, TypeError, ValueError) as exc:
        text = json.dumps(data, default=str)
        raise ProviderError(
            f"malformed message: {excerpt(text)}", provider=_PROVIDER, status=status, body=text
        ) from exc
    return CompletionResponse(
        message=Message(Role.ASSISTANT, content, tool_calls=calls),
        stop_reason=_stop_reason(wire.stop_reason, has_calls=bool(calls)),
        usage=_usage(wire.usage),
        model=wire.model,
    )


def _content_block(raw: Mapping[str, Any]) -> ContentBlock | ToolCall | None:
    kind = raw.get("type")
    if kind == "text":
        return TextBlock(str(raw["text"]))
    if kind == "thinking":
        return ThinkingBlock(str(raw["thinking"]), str(raw.get("signature") or ""))
    if kind == "redacted_thinking":
        return ThinkingBlock(_REDACTED, str(raw["data"]))
    if kind == "tool_use":
        return ToolCall(str(raw["id"]), str(raw["name"]), _arguments(raw.get("input")))
    return None  # server tool blocks, citations...: nothing the agent acts on


def _arguments(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    return {INVALID_ARGUMENTS_KEY: json.dumps(value)}


def _stop_reason(value: str | None, *, has_calls: bool) -> StopReason:
    # A stop reason this module does not know yet says nothing about the turn: one that made
    # tool calls is a tool turn, one that did not has ended.
    unknown = StopReason.TOOL_USE if has_calls else StopReason.END_TURN
    return _STOP_REASONS.get(value or "", unknown)


def _usage(wire: _WireUsage) -> Usage:
    return Usage(
        input_tokens=wire.input_tokens or 0,
        output_tokens=wire.output_tokens or 0,
        cache_creation_input_tokens=wire.cache_creation_input_tokens or 0,
        cache_read_input_tokens=wire.cache_read_input_tokens or 0,
    )


def _error_event(error: Any, *, status: int) -> ProviderError:
    body = json.dumps({"type": "error", "error": error}, default=str)
    kind = str(error.get("type") or "") if isinstance(error, Mapping) else ""
    message = str(error.get("message") or "") if isinstance(error, Mapping) else str(error)
    return ProviderError(
        f"{kind or 'error'}: {message or 'no message'}",
        provider=_PROVIDER,
        status=status,
        error_type=kind,
        body=body,
    )


class _StreamAssembler:
    """Turns SSE events into stream events and, at ``message_stop``, the whole response."""

    def __init__(self) -> None:
        self.done = False
        self._model = ""
        self._stop: str | None = None
        self._usage = _WireUsage()
        self._blocks: dict[int, dict[str, Any]] = {}  # content index -> block being built
        self._tool_order: dict[int, int] = {}  # content index -> tool-call ordinal
        self._json: dict[int, list[str]] = {}

    def feed(self, event: str, data: str) -> list[StreamEvent]:
        if event == "ping" or not data:
            return []
        try:
            wire = _WireEvent.model_validate_json(data)
        except ValidationError as exc:
            raise ProviderError(
                f"malformed {event} event: {excerpt(data)}",
                provider=_PROVIDER,
                status=200,
                body=data,
            ) from exc
        kind = wire.type or event
        if kind == "error":
            raise _error_event(
                wire.error.model_dump() if wire.error else {"type": "", "message": data},
                status=200,
            )
        if kind == "message_start" and wire.message is not None:
            self._model = wire.message.model
            self._usage = wire.message.usage
        elif kind == "content_block_start" and wire.content_block is not None:
            return self._start(wire.index, dict(wire.content_block))
        elif kind == "content_block_delta" and wire.delta is not None:
            return self._delta(wire.index, wire.delta)
        elif kind == "message_delta":
            if wire.delta is not None and wire.delta.get("stop_reason"):
                self._stop = str(wire.delta["stop_reason"])
            if wire.usage is not None:
                self._merge_usage(wire.usage)
        elif kind == "message_stop":
            self.done = True
        return []  # content_block_stop and unknown events need nothing

    def _start(self, index: int, block: dict[str, Any]) -> list[StreamEvent]:
        self._blocks[index] = block
        kind = block.get("type")
        if kind == "tool_use":
            ordinal = len(self._tool_order)
            self._tool_order[index] = ordinal
            self._json[index] = []
            return [ToolCallStart(ordinal, str(block.get("id", "")), str(block.get("name", "")))]
        if kind == "text" and block.get("text"):
            return [TextDelta(str(block["text"]))]
        if kind == "thinking" and block.get("thinking"):
            return [ThinkingDelta(str(block["thinking"]))]
        return []

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[StreamEvent]:
        block = self._blocks.get(index)
        if block is None:
            raise ProviderError(
                f"stream delta for unknown content block {index}", provider=_PROVIDER, status=200
            )
        kind = delta.get("type")
        if kind == "text_delta":
            text = str(delta.get("text", ""))
            block["text"] = str(block.get("text", "")) + text
            return [TextDelta(text)] if text else []
        if kind == "thinking_delta":
            thinking = str(delta.get("thinking", ""))
            block["thinking"] = str(block.get("thinking", "")) + thinking
            return [ThinkingDelta(thinking)] if thinking else []
        if kind == "signature_delta":
            block["signature"] = str(block.get("signature") or "") + str(delta.get("signature", ""))
            return []
        if kind == "input_json_delta":
            piece = str(delta.get("partial_json", ""))
            self._json.setdefault(index, []).append(piece)
            return [ToolCallDelta(self._tool_order.get(index, 0), piece)] if piece else []
        return []  # citations_delta and future kinds

    def _merge_usage(self, usage: _WireUsage) -> None:
        # message_delta usage is cumulative; it may or may not repeat the input side.
        self._usage = _WireUsage(
            **{
                name: value if value is not None else getattr(self._usage, name)
                for name, value in usage.model_dump().items()
            }
        )

    def response(self) -> CompletionResponse:
        if not self.done:
            raise ProviderError(
                "the stream ended before message_stop (connection dropped or truncated)",
                provider=_PROVIDER,
                status=200,
            )
        content: list[ContentBlock] = []
        calls: list[ToolCall] = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block.get("type") == "tool_use":
                raw = "".join(self._json.get(index, []))
                block["input"] = _parse_streamed_input(raw, block.get("input"))
            item = _content_block(block)
            if isinstance(item, ToolCall):
                calls.append(item)
            elif item is not None:
                content.append(item)
        return CompletionResponse(
            message=Message(Role.ASSISTANT, content, tool_calls=calls),
            stop_reason=_stop_reason(self._stop, has_calls=bool(calls)),
            usage=_usage(self._usage),
            model=self._model,
        )


def _parse_streamed_input(raw: str, initial: Any) -> Any:
    if not raw.strip():
        return initial if isinstance(initial, dict) else {}
    try:
        return loads(raw)
    except ValueError:
        return {INVALID_ARGUMENTS_KEY: raw}
