"""Ollama's native API: chat (``/api/chat``) and embeddings (``/api/embed``).

Wire format: Ollama's ``docs/api.md`` and ``docs/capabilities/{tool-calling,thinking,
streaming}.mdx``, and where the docs are silent the Go types in ``api/types.go`` (see
``tests/fixtures/ollama/README.md``). Unlike the reference port, streaming and non-streaming
share one request builder, so a stream keeps tool-call ids, tool names and images; tool calls are
taken from every chunk (not only the final one) and keep their order and the server's ids.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

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
    OutputMode,
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
    RemoteEmbedder,
    excerpt,
    null_is_absent,
)
from goagent_py.providers._sampling import check_extra_body, check_sampling

__all__ = [
    "OllamaEmbedder",
    "OllamaProvider",
    "build_chat_request",
    "ollama_reachable",
    "parse_chat_response",
]

_PROVIDER = "ollama"
DEFAULT_BASE_URL = "http://localhost:11434"

# extra_body keys that would take over what the provider builds or has an argument for.
_RESERVED_BODY_KEYS = {
    "model": "pass model=... to OllamaProvider or use with_model(...)",
    "messages": "the provider builds them from the conversation",
    "stream": "complete() and stream() set it",
    "options": "pass options={...} (or temperature=, top_p=, stop=) to OllamaProvider",
    "keep_alive": "pass keep_alive=... to OllamaProvider",
}


async def ollama_reachable(
    base_url: str = DEFAULT_BASE_URL,
    timeout: float = 0.5,  # noqa: ASYNC109 - an httpx request timeout, not a task deadline
    *,
    http_client: httpx.AsyncClient | None = None,
) -> bool:
    """Whether an Ollama server answers at ``base_url`` (``GET /api/tags`` within ``timeout``).

    Never raises: any failure (refused, timed out, not Ollama) is ``False``.
    """
    url = f"{base_url.rstrip('/')}/api/tags"
    try:
        if http_client is not None:
            response = await http_client.get(url, timeout=timeout)
        else:
            async with httpx.AsyncClient(timeout=timeout) as client:
                response = await client.get(url)
    except httpx.HTTPError:
        return False
    if not response.is_success:
        return False
    try:
        return isinstance(response.json().get("models"), list)
    except (ValueError, AttributeError):
        return False


# --- request mapping (pure) -------------------------------------------------------------------


def _images(message: Message, where: str) -> list[str]:
    images: list[str] = []
    for block in message.content:
        if isinstance(block, ImageBlock):
            images.append(base64.b64encode(block.data).decode("ascii"))
        elif isinstance(block, DocumentBlock):
            raise UnsupportedContentError(
                "document",
                _PROVIDER,
                f"Ollama's chat API takes text and images only ({where}); extract the text first",
            )
    return images


def _wire_message(message: Message, names: dict[str, str], where: str) -> dict[str, Any]:
    role = str(message.role)
    out: dict[str, Any] = {"role": role, "content": message.text}
    if message.role == Role.ASSISTANT:
        thinking = "".join(b.thinking for b in message.content if isinstance(b, ThinkingBlock))
        if thinking:
            out["thinking"] = thinking
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"index": i, "name": call.name, "arguments": call.arguments},
                }
                for i, call in enumerate(message.tool_calls)
            ]
            names.update((call.id, call.name) for call in message.tool_calls)
    elif message.role == Role.TOOL:
        name = names.get(message.tool_call_id)
        if name:
            out["tool_name"] = name
        if message.tool_call_id:
            out["tool_call_id"] = message.tool_call_id
    images = _images(message, where)
    if images:
        out["images"] = images
    return out


def build_chat_request(
    request: CompletionRequest,
    *,
    model: str = "",
    stream: bool = False,
    keep_alive: str | float | None = None,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``/api/chat`` body for ``request`` (the same for streaming and not).

    Tool results go back as ``role: tool`` messages with the ``tool_name`` of the call they
    answer (looked up by id in the assistant turns before them) and its ``tool_call_id``.

    Args:
        request: the request.
        model: the model to use when ``request.model`` is empty.
        stream: ask for an NDJSON stream (the API defaults to streaming, so this is always sent).
        keep_alive: how long the server keeps the model loaded ("5m", seconds, 0 to unload).
        options: model options (``temperature``, ``num_ctx``...); ``num_predict`` is set from
            ``request.max_tokens``.

    Raises:
        ConfigurationError: no model in the request or as a default.
        UnsupportedContentError: a message holds a document.
    """
    name = request.model or model
    if not name:
        raise ConfigurationError(
            "ollama: model not set; pass model=... to OllamaProvider or use with_model(...)"
        )
    messages: list[dict[str, Any]] = []
    if request.system_prompt:
        messages.append({"role": "system", "content": request.system_prompt})
    names: dict[str, str] = {}
    for i, message in enumerate(request.messages):
        messages.append(_wire_message(message, names, f"message {i}"))
    body: dict[str, Any] = {"model": name, "messages": messages}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.tools
        ]
    if request.output is not None:
        body["format"] = request.output.schema  # structured outputs: a JSON schema as format
    if request.thinking is not None:
        # A level where the caller gave one (GPT-OSS accepts levels only), else on.
        body["think"] = request.effort or True
    body["stream"] = stream
    merged = dict(options or {})
    if request.max_tokens is not None:
        merged["num_predict"] = request.max_tokens
    if merged:
        body["options"] = merged
    if keep_alive is not None:
        body["keep_alive"] = keep_alive
    return body


# --- response mapping (pure) ------------------------------------------------------------------


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    _null_is_absent = model_validator(mode="before")(null_is_absent)


class _WireFunction(_Wire):
    name: str = ""
    arguments: dict[str, Any] | str | None = None


class _WireToolCall(_Wire):
    id: str = ""
    function: _WireFunction = _WireFunction()


class _WireMessage(_Wire):
    role: str = "assistant"
    content: str = ""
    thinking: str = ""
    tool_calls: list[_WireToolCall] = []


class _WireChunk(_Wire):
    model: str = ""
    message: _WireMessage | None = None
    done: bool = False
    done_reason: str = ""
    prompt_eval_count: int = 0
    eval_count: int = 0
    error: str | dict[str, Any] | None = None


# Ollama's errors are bare strings ({"error": "..."}); the server sends one as an NDJSON line
# after the HTTP 200 when generation fails mid-stream (docs/api/errors.mdx). Its text is all
# there is to tell "busy" from "failed", so it gets the error type a typed API would have sent.
_BUSY_WORDS = ("server busy", "overloaded", "maximum pending requests", "try again")
_RATE_WORDS = ("rate limit", "too many requests")


def _error_type(message: str) -> str:
    """The error type of an untyped error sent with HTTP 200 (mid-stream), from its text."""
    text = message.lower()
    if any(word in text for word in _RATE_WORDS):
        return "rate_limit_error"
    if any(word in text for word in _BUSY_WORDS):
        return "overloaded_error"
    return "server_error"  # the generation failed on the server, as a 500 would say


def _chunk(data: Any, *, status: int | None) -> _WireChunk:
    if isinstance(data, dict) and data.get("error"):
        error = data["error"]
        message = error if isinstance(error, str) else json.dumps(error)
        raise ProviderError(
            message,
            provider=_PROVIDER,
            status=status,
            error_type=_error_type(message) if status == 200 else "",
            body=json.dumps(data),
        )
    try:
        return _WireChunk.model_validate(data)
    except ValidationError as exc:
        text = json.dumps(data, default=str)
        raise ProviderError(
            f"unexpected response shape: {excerpt(text)}",
            provider=_PROVIDER,
            status=status,
            body=text,
        ) from exc


def _arguments(value: dict[str, Any] | str | None) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    if not value.strip():
        return {}
    try:
        parsed = loads(value)
    except json.JSONDecodeError:
        return {INVALID_ARGUMENTS_KEY: value}
    return parsed if isinstance(parsed, dict) else {INVALID_ARGUMENTS_KEY: value}


def _tool_call(call: _WireToolCall, index: int) -> ToolCall:
    # Servers before ids existed send none: synthesize a stable one from the call's position.
    return ToolCall(
        call.id or f"ollama-tool-{index}", call.function.name, _arguments(call.function.arguments)
    )


def _stop_reason(done_reason: str, has_tool_calls: bool) -> StopReason:
    if has_tool_calls:
        return StopReason.TOOL_USE
    if done_reason == "length":
        return StopReason.MAX_TOKENS
    return StopReason.END_TURN


def _response(
    thinking: str, text: str, calls: list[ToolCall], final: _WireChunk
) -> CompletionResponse:
    content: list[ContentBlock] = []
    if thinking:
        content.append(ThinkingBlock(thinking))
    if text:
        content.append(TextBlock(text))
    return CompletionResponse(
        Message(Role.ASSISTANT, content, tool_calls=calls),
        _stop_reason(final.done_reason, bool(calls)),
        Usage(input_tokens=final.prompt_eval_count, output_tokens=final.eval_count),
        model=final.model,
    )


def parse_chat_response(data: Any, *, status: int | None = 200) -> CompletionResponse:
    """A :class:`CompletionResponse` from a non-streamed ``/api/chat`` answer.

    Raises:
        ProviderError: the body is an ``{"error": ...}`` object or has no message.
    """
    chunk = _chunk(data, status=status)
    if chunk.message is None:
        raise ProviderError(
            f"response has no message: {excerpt(json.dumps(data, default=str))}",
            provider=_PROVIDER,
            status=status,
            body=json.dumps(data, default=str),
        )
    calls = [_tool_call(c, i) for i, c in enumerate(chunk.message.tool_calls)]
    return _response(chunk.message.thinking, chunk.message.content, calls, chunk)


class OllamaProvider(HTTPBackend):
    """Models served by Ollama, through its native chat API (``/api/chat``).

    Supports tools, images (vision models), thinking (``think``; the reasoning comes back as a
    :class:`~goagent_py.ThinkingBlock`) and NDJSON streaming. Documents are refused with
    :class:`~goagent_py.UnsupportedContentError`.

    Args:
        model: the model when the request names none (e.g. ``"qwen3"``).
        base_url: the server's address.
        http_client: an ``httpx.AsyncClient`` to use instead of creating one.
        timeout: the timeout of the created client, in seconds or as ``httpx.Timeout``.
        keep_alive: how long the server keeps the model loaded after a call ("5m", seconds).
        options: model options sent with every call (``num_ctx``, ``top_k``, ``seed``...).
        temperature: the sampling temperature, >= 0; sent as ``options.temperature``.
        top_p: the nucleus-sampling mass, greater than 0 and at most 1; sent as
            ``options.top_p``.
        stop: stop sequences, each a non-empty string; sent as ``options.stop``.
        extra_body: fields merged last into every ``/api/chat`` body, for API fields this
            provider does not model (e.g. ``{"format": "json"}``). A key here replaces what the
            provider would send (e.g. ``think``); ``model``, ``messages``, ``stream``,
            ``options`` and ``keep_alive`` are refused (they have arguments above).

    Raises:
        ConfigurationError: a setting is out of range, is given both as an argument and in
            ``options`` (``temperature=0.2`` and ``options={"temperature": 0.5}``: which one
            was meant cannot be told, so neither wins), or ``extra_body`` sets a refused key.
    """

    default_output_mode: OutputMode = "tool"
    """Typed output goes through a final-result tool unless the agent asks for
    ``output_mode="native"`` (the schema sent as ``format``)."""

    def __init__(
        self,
        model: str = "",
        *,
        base_url: str = DEFAULT_BASE_URL,
        http_client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        keep_alive: str | float | None = None,
        options: dict[str, Any] | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        stop: Sequence[str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        sampling = check_sampling(
            _PROVIDER, temperature=temperature, top_p=top_p, stop=stop, max_temperature=None
        )
        merged = dict(options or {})
        for key, value in sampling.fields("stop").items():
            if key in merged:
                raise ConfigurationError(
                    f"ollama: {key} is given twice, as {key}={value!r} and as "
                    f"options[{key!r}]={merged[key]!r}; keep one of them"
                )
            merged[key] = value
        self._extra_body = check_extra_body(_PROVIDER, extra_body, reserved=_RESERVED_BODY_KEYS)
        super().__init__(_PROVIDER, base_url=base_url, http_client=http_client, timeout=timeout)
        self._model = model
        self._keep_alive = keep_alive
        self._options = merged

    def _body(self, request: CompletionRequest, *, stream: bool) -> dict[str, Any]:
        body = build_chat_request(
            request,
            model=self._model,
            stream=stream,
            keep_alive=self._keep_alive,
            options=self._options,
        )
        body.update(self._extra_body)
        return body

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """Send ``request`` and return the model's answer.

        Raises:
            ConfigurationError: no model.
            UnsupportedContentError: a message holds a document.
            ProviderError: the call failed (status, body and Retry-After set), or the server
                answered with an ``{"error": ...}`` object.
        """
        data = await self.post_json("/api/chat", self._body(request, stream=False))
        with self._redacting():
            return parse_chat_response(data)

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        """Stream the answer: thinking and text deltas, each tool call whole, then done.

        Tool calls are taken from every chunk, in order, with the server's ids (or
        ``ollama-tool-<i>`` when it sends none).

        Raises:
            ConfigurationError: no model.
            UnsupportedContentError: a message holds a document.
            ProviderError: the call failed, an ``{"error": ...}`` line arrived mid-stream, or
                the stream ended before its ``done`` chunk.
        """
        body = self._body(request, stream=True)
        thinking: list[str] = []
        text: list[str] = []
        calls: list[ToolCall] = []
        async for data in self.stream_ndjson("/api/chat", body):
            with self._redacting():
                chunk = _chunk(data, status=200)
            message = chunk.message
            if message is not None:
                if message.thinking:
                    thinking.append(message.thinking)
                    yield ThinkingDelta(message.thinking)
                if message.content:
                    text.append(message.content)
                    yield TextDelta(message.content)
                for wire_call in message.tool_calls:
                    index = len(calls)
                    call = _tool_call(wire_call, index)
                    calls.append(call)
                    yield ToolCallStart(index, call.id, call.name)
                    yield ToolCallDelta(index, json.dumps(call.arguments))
            if chunk.done:
                yield StreamDone(_response("".join(thinking), "".join(text), calls, chunk))
                return
        raise ProviderError(
            "stream ended before the final (done) chunk", provider=_PROVIDER, status=200
        )


# --- embeddings -------------------------------------------------------------------------------


class _WireEmbed(_Wire):
    embeddings: list[list[float]]


class OllamaEmbedder(RemoteEmbedder):
    """Text embeddings from a model served by Ollama (``/api/embed``, batched).

    Implements ``Embedder`` and ``BatchEmbedder``: text blocks are joined by newlines, other
    blocks are ignored. Every vector is checked against ``dimensions`` (or, when that is None,
    against the first vector received).

    Args:
        model: the embedding model, e.g. ``"all-minilm"`` or ``"nomic-embed-text"``.
        base_url: the server's address.
        http_client: an ``httpx.AsyncClient`` to use instead of creating one.
        dimensions: the vector size to ask for (models that support it) and to expect.
        batch_size: inputs per request in :meth:`embed_batch`.
        keep_alive: how long the server keeps the model loaded after a call.
        timeout: the timeout of the created client, in seconds or as ``httpx.Timeout``.

    Raises:
        ConfigurationError: an empty model or a bad size.
    """

    _path = "/api/embed"
    _vendor_url = DEFAULT_BASE_URL

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        http_client: httpx.AsyncClient | None = None,
        dimensions: int | None = None,
        batch_size: int = 64,
        keep_alive: str | float | None = None,
        timeout: float | httpx.Timeout | None = None,
    ) -> None:
        super().__init__(
            _PROVIDER,
            model=model,
            dimensions=dimensions,
            batch_size=batch_size,
            base_url=base_url,
            http_client=http_client,
            timeout=timeout,
        )
        self._keep_alive = keep_alive

    def _body(self, texts: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self._model, "input": texts}
        if self._requested_dimensions is not None:
            body["dimensions"] = self._requested_dimensions
        if self._keep_alive is not None:
            body["keep_alive"] = self._keep_alive
        return body

    def _parse(self, data: Any) -> list[list[float]]:
        if isinstance(data, dict) and data.get("error"):
            raise ProviderError(
                str(data["error"]), provider=_PROVIDER, status=200, body=json.dumps(data)
            )
        return _WireEmbed.model_validate(data).embeddings
