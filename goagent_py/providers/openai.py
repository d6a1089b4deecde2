"""OpenAI-compatible Chat Completions provider and embeddings embedder.

Speaks ``POST {base_url}/chat/completions`` and ``POST {base_url}/embeddings``
(https://platform.openai.com/docs/api-reference/chat), so it works with OpenAI and with the
servers that copy that API: OpenRouter, vLLM, llama.cpp server, LM Studio, Ollama's ``/v1``.

How our messages map to the wire, where the API has no exact equivalent:

- Tool calls: ``arguments`` is a JSON string on the wire. When the model writes arguments that
  are not a JSON object, the call still reaches the agent as
  ``ToolCall(arguments={"__invalid_arguments__": <raw text>})``: the tool's argument validation
  rejects it and the model reads an error result it can correct, instead of the run crashing.
- Tool results: one ``tool`` message per result. The API has no error flag, so an error result
  whose text does not already say so is sent prefixed with ``"Error: "``. Tool messages carry
  text only, so images from tool results follow in one ``user`` message after the turn's results.
- Documents: a ``text/plain`` :class:`~goagent_py.DocumentBlock` is sent as text (prefixed with
  its title, if any); a PDF raises :class:`~goagent_py.UnsupportedContentError`, since Chat
  Completions servers do not share one way of taking files.
- Thinking: ``reasoning_content`` (vLLM, llama.cpp, DeepSeek) or ``reasoning`` (OpenRouter,
  Ollama) in a reply becomes a :class:`~goagent_py.ThinkingBlock`; thinking is not sent back.
  ``effort`` becomes ``reasoning_effort``; ``CompletionRequest.thinking`` has no equivalent and
  is ignored.
- Sampling: ``temperature`` (0 to 2), ``top_p`` (greater than 0, at most 1) and ``stop`` (at
  most 4 sequences on ``api.openai.com``; compatible servers set their own limits) are checked
  when the provider is built. OpenAI's reasoning models take only the default temperature and
  top_p, and o3/o4-mini take no ``stop``: the API answers 400, which is left to it since it
  depends on the model of each request.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from goagent_py._json_schema import map_schema
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
    OutputFormat,
    OutputMode,
    StreamDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    events_of,
)
from goagent_py.providers._http import (
    INVALID_ARGUMENTS_KEY,
    HTTPBackend,
    KeySource,
    RemoteEmbedder,
    excerpt,
    key_headers,
    null_is_absent,
    resolve_api_key,
)
from goagent_py.providers._sampling import check_extra_body, check_sampling
from goagent_py.tools import ToolDefinition

__all__ = ["OpenAIEmbedder", "OpenAIProvider", "resolve_base_url"]

_PROVIDER = "openai"
_OPENAI_URL = "https://api.openai.com/v1"

_FINISH_REASONS: dict[str, StopReason] = {
    "stop": StopReason.END_TURN,
    "length": StopReason.MAX_TOKENS,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
    "content_filter": StopReason.REFUSAL,
}


# OpenAI's limit on `stop` (the API reference: "Up to 4 sequences").
_MAX_STOP = 4

# extra_body keys that would take over what the provider builds or has an argument for.
_RESERVED_BODY_KEYS = {
    "model": "the model comes from the request (with_model(...))",
    "messages": "the provider builds them from the conversation",
    "stream": "complete() and stream() set it",
    "stream_options": "stream() sets it (the usage of a streamed answer depends on it)",
    "max_tokens": "pass max_tokens=... to OpenAIProvider (or with_max_tokens(...))",
    "max_completion_tokens": "pass max_tokens=... to OpenAIProvider (or with_max_tokens(...))",
    "temperature": "pass temperature=... to OpenAIProvider",
    "top_p": "pass top_p=... to OpenAIProvider",
    "stop": "pass stop=[...] to OpenAIProvider",
}


def _is_openai(base_url: str) -> bool:
    return urlsplit(base_url).hostname == "api.openai.com"


def _api_key(api_key: str | None, base_url: str) -> str:
    # Local servers (vLLM, llama.cpp, LM Studio, Ollama) need no key; OpenAI itself does.
    return resolve_api_key(
        api_key, "OPENAI_API_KEY", provider=_PROVIDER, required=_is_openai(base_url)
    )


def _auth(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"} if key else {}


class OpenAIProvider(HTTPBackend):
    """Chat models through an OpenAI-compatible Chat Completions API.

    The API key is required only for ``api.openai.com``; other servers get it when it is set::

        async with OpenAIProvider(base_url="http://localhost:8080/v1") as provider:
            agent = Agent(with_provider(provider), with_model("qwen3"))

    llama-cpp-python's server (``python -m llama_cpp.server``) with its
    ``chatml-function-calling`` format has two limits: it leaves ``tool`` messages out of the
    prompt (the model never reads a tool result, so offer tools for one round only, e.g. with
    :func:`~goagent_py.small_models.tool_selection.limit_tool_rounds`), and it cannot stream a
    tool call under ``tool_choice="auto"``: it closes the stream without a word (the reason,
    "Automatic streaming tool choice is not supported", is only in its log). Pass
    ``stream_tools=False`` for such servers.

    Args:
        api_key: the API key; defaults to the ``OPENAI_API_KEY`` environment variable. A
            function (sync or async) is called before each request instead: short-lived keys.
        base_url: the API root including ``/v1`` (OpenRouter: ``https://openrouter.ai/api/v1``);
            None reads ``OPENAI_BASE_URL``, as the OpenAI SDK does, else OpenAI's.
        http_client: an ``httpx.AsyncClient`` to use instead of creating one.
        max_tokens: the output limit when the request does not set one (None: server default).
        timeout: the timeout of the created client, in seconds or as ``httpx.Timeout``.
        temperature: the sampling temperature of every request, 0 to 2 (None: not sent, the
            server's default).
        top_p: the nucleus-sampling mass of every request, greater than 0 and at most 1 (None:
            not sent). OpenAI advises changing ``temperature`` or ``top_p``, not both.
        stop: stop sequences, each a non-empty string; at most 4 for ``api.openai.com``.
        extra_body: fields merged last into every request body, for API fields this provider
            does not model (e.g. ``{"seed": 7}``, ``{"response_format": {...}}``, or a server's
            own such as vLLM's ``{"top_k": 20}``), like the OpenAI SDK's ``extra_body``. A key
            here replaces what the provider would send (e.g. ``tool_choice``); ``model``,
            ``messages``, ``stream``, ``stream_options`` and the fields that have an argument
            above are refused.
        stream_tools: False makes :meth:`stream` ask for a whole answer (and replay it as
            events) whenever tools are offered, for servers that cannot stream tool calls.

    Raises:
        ConfigurationError: ``base_url`` is OpenAI's and no key is given or set, or a setting is
            out of range (the message says which and what is allowed).
    """

    default_output_mode: OutputMode = "tool"
    """Typed output goes through a final-result tool unless the agent asks for
    ``output_mode="native"`` (``response_format`` with a ``json_schema``)."""

    def __init__(
        self,
        api_key: str | KeySource | None = None,
        *,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        max_tokens: int | None = None,
        timeout: float | httpx.Timeout | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        stop: Sequence[str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        stream_tools: bool = True,
    ) -> None:
        base_url = resolve_base_url(base_url)
        self._stream_tools = stream_tools
        self._sampling = check_sampling(
            _PROVIDER,
            temperature=temperature,
            top_p=top_p,
            stop=stop,
            max_temperature=2.0,
            max_stop=_MAX_STOP if _is_openai(base_url) else None,
            vendor="OpenAI",
        )
        self._extra_body = check_extra_body(_PROVIDER, extra_body, reserved=_RESERVED_BODY_KEYS)
        super().__init__(
            _PROVIDER,
            base_url=base_url,
            http_client=http_client,
            timeout=timeout,
            headers={} if callable(api_key) else _auth(_api_key(api_key, base_url)),
            header_source=key_headers(api_key, _auth, provider=_PROVIDER)
            if callable(api_key)
            else None,
        )
        self._max_tokens = max_tokens
        # OpenAI deprecated max_tokens (reasoning models refuse it); compatible servers know it.
        self._max_tokens_field = "max_completion_tokens" if _is_openai(base_url) else "max_tokens"

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """Send ``request`` and return the model's answer.

        Raises:
            ProviderError: the call failed (status, ``error_type``, body and ``retry_after`` set).
            ConfigurationError: the request has no model or a message the API cannot take.
            UnsupportedContentError: a content block (e.g. a PDF) cannot be sent.
        """
        body = self._body(request)
        data = await self.post_json("/chat/completions", body)
        with self._redacting():
            return parse_response(data)

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        """Stream the answer: text, reasoning and tool-call deltas, then :class:`StreamDone`.

        Raises:
            ProviderError: the call failed, the server sent an error object, or the stream ended
                before a finish reason.
        """
        if request.tools and not self._stream_tools:
            for event in events_of(await self.complete(request)):
                yield event
            return
        body = self._body(request)
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        assembler = _StreamAssembler()
        produced = False
        with self._redacting():  # an error object mid-stream may echo what was sent
            async with aclosing(self.stream_sse("/chat/completions", body)) as events:
                async for sse in events:
                    if sse.data.strip() == "[DONE]":
                        assembler.done = True
                        break
                    for event in assembler.feed(sse.data):
                        produced = True
                        yield event
            try:
                done = StreamDone(assembler.response())
            except ProviderError as exc:
                if request.tools and not produced:
                    exc.add_note(
                        f"{self.base_url} closed the stream of a request with tools before "
                        "sending anything; servers that cannot stream tool calls do that "
                        "(llama-cpp-python's: 'Automatic streaming tool choice is not "
                        "supported'). Use OpenAIProvider(stream_tools=False)."
                    )
                raise
        yield done

    def _body(self, request: CompletionRequest) -> dict[str, Any]:
        body = build_request(request)
        max_tokens = request.max_tokens or self._max_tokens
        if max_tokens:
            body[self._max_tokens_field] = max_tokens
        body.update(self._sampling.fields("stop"))
        body.update(self._extra_body)
        return body


def resolve_base_url(base_url: str | None) -> str:
    """The API root: ``base_url``, else ``OPENAI_BASE_URL`` (as the OpenAI SDK reads it), else
    OpenAI's. An empty variable counts as unset.
    """
    if base_url is not None:
        return base_url
    return os.environ.get("OPENAI_BASE_URL") or _OPENAI_URL


# --- request mapping (pure) -------------------------------------------------------------------


def build_request(request: CompletionRequest) -> dict[str, Any]:
    """The JSON body of ``POST /chat/completions`` for ``request`` (without output limits)."""
    if not request.model:
        raise ConfigurationError("openai: no model set: use with_model('gpt-...')")
    messages: list[dict[str, Any]] = []
    if request.system_prompt:
        messages.append({"role": "system", "content": request.system_prompt})
    messages.extend(_messages(request.messages))
    body: dict[str, Any] = {"model": request.model, "messages": messages}
    if request.tools:
        body["tools"] = [_tool(t) for t in request.tools]
        # The API's default, said outright: llama-cpp-python's server takes a missing
        # tool_choice as "none" and leaves the tools out of the prompt.
        body["tool_choice"] = "auto"
    if request.effort is not None:
        body["reasoning_effort"] = request.effort
    if request.output is not None:
        body["response_format"] = response_format(request.output)
    return body


def response_format(output: OutputFormat) -> dict[str, Any]:
    """``response_format`` for a JSON schema: strict (the model can only produce schema-valid
    JSON) when the schema allows it, which OpenAI's strict mode needs: every property required
    and ``additionalProperties: false`` on every object (added here)."""
    schema = _closed(output.schema)
    spec: dict[str, Any] = {"name": output.name, "schema": schema if schema else output.schema}
    if output.description:
        spec["description"] = output.description
    spec["strict"] = schema is not None
    return {"type": "json_schema", "json_schema": spec}


class _NotStrict(Exception):
    """A schema strict mode cannot take as it is (raised inside :func:`_closed`)."""


def _closed(schema: Any) -> Any:
    """``schema`` with every object closed, or None when an object has an optional property
    (strict mode would make it required) or takes properties it does not name (a
    ``dict[str, X]``, a model with ``extra="allow"``: closed, it could hold none of them).
    Only schema objects are changed (:func:`~goagent_py._json_schema.map_schema`): a field
    named ``default`` is a field, and example values are data."""
    try:
        return map_schema(schema, _closed_object)
    except _NotStrict:
        return None


def _closed_object(out: dict[str, Any]) -> dict[str, Any]:
    if out.get("type") == "object":
        if set(out.get("properties", {})) != set(out.get("required", [])):
            raise _NotStrict
        if out.get("additionalProperties", False) is not False or "patternProperties" in out:
            raise _NotStrict
        out["additionalProperties"] = False
    return out


def _tool(definition: ToolDefinition) -> dict[str, Any]:
    schema = dict(definition.parameters)
    schema.setdefault("type", "object")
    required = schema.get("required")
    if required is not None and not isinstance(required, str):
        schema["required"] = [str(name) for name in required]
    return {
        "type": "function",
        "function": {
            "name": definition.name,
            "description": definition.description,
            "parameters": schema,
        },
    }


def _messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    pending_images: list[dict[str, Any]] = []  # images from this turn's tool results
    for message in messages:
        if message.role is not Role.TOOL and pending_images:
            wire.append({"role": "user", "content": pending_images})
            pending_images = []
        if message.role is Role.USER:
            wire.append({"role": "user", "content": _user_content(message.content)})
        elif message.role is Role.ASSISTANT:
            assistant = _assistant(message)
            if assistant is not None:
                wire.append(assistant)
        elif message.role is Role.TOOL:
            tool_message, images = _tool_message(message)
            wire.append(tool_message)
            pending_images.extend(images)
        else:
            raise ConfigurationError(
                f"openai: a {message.role.value!r}-role message cannot be sent to the model; "
                "only user, assistant and tool messages can (RAG documents go in as context text)"
            )
    if pending_images:
        wire.append({"role": "user", "content": pending_images})
    return wire


def _part(block: ContentBlock) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        data = base64.b64encode(block.data).decode("ascii")
        return {"type": "image_url", "image_url": {"url": f"data:{block.media_type};base64,{data}"}}
    if isinstance(block, DocumentBlock):
        if block.media_type != "text/plain":
            raise UnsupportedContentError(
                f"document ({block.media_type})",
                _PROVIDER,
                "Chat Completions takes plain-text documents only; extract the PDF's text first",
            )
        text = block.data.decode("utf-8", errors="replace")
        return {"type": "text", "text": f"{block.title}\n\n{text}" if block.title else text}
    return None  # thinking is never sent back


def _user_content(blocks: Sequence[ContentBlock]) -> str | list[dict[str, Any]]:
    parts = [p for p in map(_part, blocks) if p is not None]
    if all(p["type"] == "text" for p in parts):
        # Plain strings are what every compatible server understands.
        return "\n".join(p["text"] for p in parts)
    return parts


def _assistant(message: Message) -> dict[str, Any] | None:
    texts: list[str] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            if block.text:
                texts.append(block.text)
        elif not isinstance(block, ThinkingBlock):
            raise UnsupportedContentError(
                block.type, _PROVIDER, "assistant messages can hold only text"
            )
    if not texts and not message.tool_calls:
        return None
    # "" rather than null next to tool calls: the API allows both, but some compatible servers
    # (llama-cpp-python's, older llama.cpp and SGLang) refuse a null content.
    wire: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts)}
    if message.tool_calls:
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
    return wire


def _tool_message(message: Message) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if not message.tool_call_id:
        raise ConfigurationError("openai: a tool message has no tool_call_id")
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for part in map(_part, message.content):
        if part is None:
            continue
        if part["type"] == "text":
            texts.append(part["text"])
        else:
            images.append(part)
    text = "\n".join(texts)
    if message.is_error and not text.lower().startswith("error"):
        text = f"Error: {text}" if text else "Error"
    if images:
        note = f"[{len(images)} image(s) from this result follow in the next user message]"
        text = f"{text}\n{note}" if text else note
        images = [
            {"type": "text", "text": f"Images returned by tool call {message.tool_call_id}:"},
            *images,
        ]
    return {"role": "tool", "tool_call_id": message.tool_call_id, "content": text}, images


# --- response mapping (pure) ------------------------------------------------------------------


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    _null_is_absent = model_validator(mode="before")(null_is_absent)


class _WireFunction(_Wire):
    name: str | None = None
    arguments: str | dict[str, Any] | None = None


class _WireToolCall(_Wire):
    index: int | None = None
    id: str | None = None
    function: _WireFunction = _WireFunction()


class _WireMessage(_Wire):
    content: str | None = None
    refusal: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[_WireToolCall] | None = None


class _WireChoice(_Wire):
    message: _WireMessage | None = None
    delta: _WireMessage | None = None
    finish_reason: str | None = None


class _WirePromptDetails(_Wire):
    cached_tokens: int | None = None


class _WireUsage(_Wire):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _WirePromptDetails | None = None


class _WireCompletion(_Wire):
    model: str = ""
    choices: list[_WireChoice] = []
    usage: _WireUsage | None = None
    error: dict[str, Any] | str | None = None


def _validate(data: Any, *, status: int) -> _WireCompletion:
    try:
        wire = _WireCompletion.model_validate(data)
    except ValidationError as exc:
        text = json.dumps(data, default=str)
        raise ProviderError(
            f"malformed completion: {excerpt(text)}", provider=_PROVIDER, status=status, body=text
        ) from exc
    if wire.error is not None:
        raise _error_object(wire.error, status=status)
    return wire


def _error_object(error: Mapping[str, Any] | str, *, status: int) -> ProviderError:
    body = json.dumps({"error": error}, default=str)
    if isinstance(error, Mapping):
        kind = str(error.get("type") or error.get("code") or "")
        message = str(error.get("message") or "")
    else:
        kind, message = "", error
    return ProviderError(
        f"{kind or 'error'}: {message or 'no message'}",
        provider=_PROVIDER,
        status=status,
        error_type=kind,
        body=body,
    )


def parse_response(data: Any, *, status: int = 200) -> CompletionResponse:
    """A :class:`CompletionResponse` from a ``/chat/completions`` JSON answer.

    Raises:
        ProviderError: the answer is an error object, has no choices, or is malformed.
    """
    wire = _validate(data, status=status)
    if not wire.choices or wire.choices[0].message is None:
        text = json.dumps(data, default=str)
        raise ProviderError(
            f"completion without a message: {excerpt(text)}",
            provider=_PROVIDER,
            status=status,
            body=text,
        )
    choice = wire.choices[0]
    message = choice.message
    assert message is not None
    content: list[ContentBlock] = []
    thinking = message.reasoning_content or message.reasoning
    if thinking:
        content.append(ThinkingBlock(thinking))
    if message.content:
        content.append(TextBlock(message.content))
    elif message.refusal:
        content.append(TextBlock(message.refusal))
    calls = [
        ToolCall(
            call.id or _new_call_id(),
            call.function.name or "",
            parse_arguments(call.function.arguments),
        )
        for call in message.tool_calls or []
    ]
    stop = _finish_reason(choice.finish_reason, has_calls=bool(calls))
    if message.refusal and not message.content:
        stop = StopReason.REFUSAL
    return CompletionResponse(
        message=Message(Role.ASSISTANT, content, tool_calls=calls),
        stop_reason=stop,
        usage=_usage(wire.usage),
        model=wire.model,
    )


def parse_arguments(raw: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """Tool-call arguments from the model: a JSON object string (or, from some servers, an object).

    Anything that is not a JSON object becomes ``{"__invalid_arguments__": raw}`` so the agent
    answers the model with a validation error instead of crashing. An empty string means no
    arguments.
    """
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    if not raw.strip():
        return {}
    try:
        value = loads(raw)
    except ValueError:
        return {INVALID_ARGUMENTS_KEY: raw}
    return value if isinstance(value, dict) else {INVALID_ARGUMENTS_KEY: raw}


def _new_call_id() -> str:
    # Some local servers omit ids; a result must still name its call.
    return f"call_{uuid.uuid4().hex[:24]}"


def _finish_reason(value: str | None, *, has_calls: bool) -> StopReason:
    if has_calls and value in (None, "stop"):
        return StopReason.TOOL_USE  # servers that report "stop" next to tool calls
    # A finish reason this module does not know says nothing about the turn: one that made tool
    # calls is a tool turn, one that did not has ended.
    unknown = StopReason.TOOL_USE if has_calls else StopReason.END_TURN
    return _FINISH_REASONS.get(value or "stop", unknown)


def _usage(wire: _WireUsage | None) -> Usage:
    if wire is None:
        return Usage()
    cached = (wire.prompt_tokens_details.cached_tokens or 0) if wire.prompt_tokens_details else 0
    # prompt_tokens includes cached tokens; Usage keeps them apart (as Anthropic reports them).
    return Usage(
        input_tokens=max(0, (wire.prompt_tokens or 0) - cached),
        output_tokens=wire.completion_tokens or 0,
        cache_read_input_tokens=cached,
    )


class _StreamAssembler:
    """Turns ``chat.completion.chunk`` objects into stream events and the whole response."""

    def __init__(self) -> None:
        self.done = False
        self._model = ""
        self._text: list[str] = []
        self._refusal: list[str] = []  # OpenAI streams a refusal in delta.refusal
        self._thinking: list[str] = []
        self._finish: str | None = None
        self._usage: _WireUsage | None = None
        self._calls: dict[int, dict[str, Any]] = {}  # wire index -> {ordinal, id, name, args}

    def feed(self, data: str) -> list[StreamEvent]:
        if not data.strip():
            return []
        try:
            raw = loads(data)
        except ValueError as exc:
            raise ProviderError(
                f"malformed stream chunk: {excerpt(data)}",
                provider=_PROVIDER,
                status=200,
                body=data,
            ) from exc
        wire = _validate(raw, status=200)
        self._model = wire.model or self._model
        if wire.usage is not None:
            self._usage = wire.usage
        events: list[StreamEvent] = []
        for choice in wire.choices[:1]:
            if choice.finish_reason:
                self._finish = choice.finish_reason
            delta = choice.delta
            if delta is None:
                continue
            thinking = delta.reasoning_content or delta.reasoning
            if thinking:
                self._thinking.append(thinking)
                events.append(ThinkingDelta(thinking))
            if delta.content:
                self._text.append(delta.content)
                events.append(TextDelta(delta.content))
            elif delta.refusal:
                self._refusal.append(delta.refusal)
                events.append(TextDelta(delta.refusal))
            for call in delta.tool_calls or []:
                events.extend(self._tool_delta(call))
        return events

    def _tool_delta(self, call: _WireToolCall) -> list[StreamEvent]:
        index = call.index
        if index is None:  # servers that leave out the index send one whole call per chunk
            known = [i for i, c in self._calls.items() if call.id and c["id"] == call.id]
            index = known[0] if known else len(self._calls)
        events: list[StreamEvent] = []
        entry = self._calls.get(index)
        if entry is None:
            entry = {
                "ordinal": len(self._calls),
                "id": call.id or _new_call_id(),
                "name": call.function.name or "",
                "args": [],
            }
            self._calls[index] = entry
            events.append(ToolCallStart(entry["ordinal"], entry["id"], entry["name"]))
        elif call.function.name and not entry["name"]:
            entry["name"] = call.function.name
        arguments = call.function.arguments
        piece = json.dumps(arguments) if isinstance(arguments, dict) else (arguments or "")
        if piece:
            entry["args"].append(piece)
            events.append(ToolCallDelta(entry["ordinal"], piece))
        return events

    def response(self) -> CompletionResponse:
        if not self.done and self._finish is None:
            raise ProviderError(
                "the stream ended before a finish reason (connection dropped or truncated)",
                provider=_PROVIDER,
                status=200,
            )
        content: list[ContentBlock] = []
        if self._thinking:
            content.append(ThinkingBlock("".join(self._thinking)))
        # As in a whole response: the text, else the refusal (whose stop is REFUSAL).
        said = self._text or self._refusal
        if said:
            content.append(TextBlock("".join(said)))
        calls = [
            ToolCall(c["id"], c["name"], parse_arguments("".join(c["args"])))
            for c in sorted(self._calls.values(), key=lambda c: int(c["ordinal"]))
        ]
        stop = _finish_reason(self._finish, has_calls=bool(calls))
        if self._refusal and not self._text:
            stop = StopReason.REFUSAL
        return CompletionResponse(
            message=Message(Role.ASSISTANT, content, tool_calls=calls),
            stop_reason=stop,
            usage=_usage(self._usage),
            model=self._model,
        )


# --- embeddings -------------------------------------------------------------------------------


class OpenAIEmbedder(RemoteEmbedder):
    """Text embeddings through an OpenAI-compatible ``/embeddings`` endpoint.

    Implements ``Embedder`` and ``BatchEmbedder``: only text blocks are embedded (joined by
    newlines); images and documents are ignored. Every vector is checked against ``dimensions``
    (or, when that is None, against the first vector this embedder received).

    Args:
        model: the embedding model, e.g. ``"text-embedding-3-small"``.
        api_key: the API key; defaults to ``OPENAI_API_KEY`` (required only for OpenAI itself).
        base_url: the API root including ``/v1``; None reads ``OPENAI_BASE_URL``, else OpenAI's.
        http_client: an ``httpx.AsyncClient`` to use instead of creating one.
        dimensions: the vector size to ask for (models that support it) and to expect.
        batch_size: inputs per request in :meth:`embed_batch` (OpenAI allows up to 2048).
        timeout: the timeout of the created client, in seconds or as ``httpx.Timeout``.

    Raises:
        ConfigurationError: a bad argument, or no key for OpenAI.
    """

    _path = "/embeddings"
    _vendor_url = _OPENAI_URL

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        dimensions: int | None = None,
        batch_size: int = 256,
        timeout: float | httpx.Timeout | None = None,
    ) -> None:
        base_url = resolve_base_url(base_url)
        super().__init__(
            _PROVIDER,
            model=model,
            dimensions=dimensions,
            batch_size=batch_size,
            base_url=base_url,
            http_client=http_client,
            timeout=timeout,
            headers=_auth(_api_key(api_key, base_url)),
        )

    def _body(self, texts: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"input": texts, "model": self._model, "encoding_format": "float"}
        if self._requested_dimensions is not None:
            body["dimensions"] = self._requested_dimensions
        return body

    def _parse(self, data: Any) -> list[list[float]]:
        return self._vectors_by_index(data)
