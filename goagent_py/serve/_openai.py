"""The OpenAI-compatible endpoints: ``/v1/chat/completions`` and ``/v1/responses``.

Both read the run's AG-UI events (:mod:`goagent_py.serve._agui`) as :class:`Step` values and
write them in the API's own shape, streaming or not:

- **The agent's own tools** (run on the server) are reported as they finish. Chat Completions
  has no place for a call the server made, so the content carries it the way Open WebUI writes
  and renders its own server-side calls: a ``<details type="tool_calls" done="true" id name
  arguments result>`` block (a collapsible card there, readable HTML elsewhere). The Responses
  API has an item for a tool a server ran: ``mcp_call`` (``server_label`` ``"goagent"``).
- **The client's tools** (``tools`` in the request) are offered to the model beside the
  agent's; a call to one ends the response with standard ``tool_calls`` (``finish_reason``
  ``"tool_calls"``; a ``function_call`` item in Responses) and the run waits: the next request's
  tool results (``role: "tool"`` messages, ``function_call_output`` items) continue it. A new
  user message instead aborts the waiting run (its calls get error results) and starts anew.
- **Calls that wait for approval** (a tool that requires it) end the run with its record
  stored; they come back the same way as the client's calls, and the next request's tool
  messages (``"approved"``, ``"denied: <reason>"``) are the decisions that resume the stored
  run (:mod:`goagent_py.serve._approvals`), after a restart too.
- **``response_format``** (``json_schema``, ``json_object``; Responses: ``text.format``) becomes
  the run's typed output: the answer is JSON valid for the schema (checked with ``jsonschema``,
  an invalid answer goes back to the model), sent as the message's content.
"""

from __future__ import annotations

import asyncio
import hashlib
import html
import json
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import JSONResponse, Response

from goagent_py._json_schema import schema_problem
from goagent_py.agent import Agent
from goagent_py.approvals import record_of
from goagent_py.errors import ApprovalError, ConfigurationError
from goagent_py.output import FINAL_RESULT_TOOL
from goagent_py.serve._approvals import decisions_from_results, pending_json, wire_id
from goagent_py.serve._server import (
    PARKED_DROPPED,
    HttpError,
    Live,
    Run,
    Server,
    error_body,
    prompt_text,
)
from goagent_py.serve._sse import LastChunk, RunStream, sse_frame
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import Tool, tool_func

__all__ = ["OpenAIRequest", "Step", "chat_completions", "responses"]

SERVER_LABEL = "goagent"


@dataclass(slots=True)
class Step:
    """One thing a /v1 client is told: ``kind`` is text, reasoning, tool (a server call that
    finished), client_call, parked (waiting for the client's results), done or error; or idle:
    every step ready so far has come, the next waits for the run (a stream writes the frames
    it holds then, one chunk for all, issue 36)."""

    kind: str
    text: str = ""
    call: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)
    code: str = ""  # an error's: the exception's class name (AG-UI's RUN_ERROR code)

    def failure(self) -> HttpError:
        """An error step as the HTTP error a /v1 client gets: a guardrail's trip is a 400
        with code ``content_filter`` (what OpenAI says when its own filter refuses), the
        rest a 500."""
        if self.code == "GuardrailTripped":
            return HttpError(400, self.text, code="content_filter")
        return HttpError(500, self.text)


@dataclass(slots=True)
class OpenAIRequest:
    """What the two APIs ask, in one shape."""

    thread: str
    prompt: str
    model: str
    stream: bool
    results: dict[str, str]  # the client's tool results, by call id
    tools: list[tuple[str, str, dict[str, Any]]]  # the client's tools: name, description, schema
    schema: tuple[str, dict[str, Any]] | None  # response_format: name, JSON schema
    tools_echo: list[Any]
    include_usage: bool = False  # stream_options.include_usage (Chat Completions)


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts: text / input_text / output_text
        return "".join(
            str(p.get("text", ""))
            for p in value
            if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text")
        )
    return ""


def _thread_name(request_headers: Any, body: dict[str, Any]) -> str:
    # The server owns history: the thread is named by the "user" field (or a header). A user
    # that is not a string is refused as OpenAI does: 0, false or {} fell back to the shared
    # "default" thread or were named by their str().
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise HttpError(400, f"user must be a string, got {type(user).__name__}")
    return str(request_headers.get("x-goagent-thread") or user or "default")


def _stream(body: dict[str, Any]) -> bool:
    # bool("false") is True: a string streamed where OpenAI answers 400.
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise HttpError(400, f"stream must be true or false, got {json.dumps(stream)}")
    return bool(stream)


def thread_id_of(name: str) -> str:
    """The server thread a request's thread name (``user`` or ``X-Goagent-Thread``) names, one
    per name: a plain name (up to 40 letters, digits, ``-``, ``_``) as ``openai-<name>``; any
    other as a readable part and ``.`` and a SHA-256 of the whole name (a plain name has no
    ``.``), so two names never share a conversation."""
    if 0 < len(name) <= 40 and all(c.isalnum() or c in "-_" for c in name):
        return "openai-" + name
    readable = "".join(c for c in name if c.isascii() and (c.isalnum() or c in "-_"))[:24]
    return f"openai-{readable}.{hashlib.sha256(name.encode()).hexdigest()[:32]}"


def _schema_of(name: Any, schema: Any, where: str) -> tuple[str, dict[str, Any]]:
    if not isinstance(schema, dict):
        raise HttpError(400, f"{where}.schema must be a JSON Schema object")
    return (str(name or "output"), schema)


def _tool(spec: Any, index: int, *, nested: bool) -> tuple[str, str, dict[str, Any]]:
    where = f"tools[{index}]"
    if not isinstance(spec, dict) or spec.get("type") != "function":
        raise HttpError(400, f'{where}: only {{"type": "function"}} tools are supported')
    fn = spec.get("function") if nested else spec
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
        raise HttpError(400, f"{where}: a function tool needs a name")
    params = fn.get("parameters") or {"type": "object", "properties": {}}
    if not isinstance(params, dict):
        raise HttpError(400, f"{where}.parameters must be a JSON Schema object")
    return fn["name"], str(fn.get("description") or ""), params


def parse_chat(headers: Any, body: dict[str, Any], default_model: str) -> OpenAIRequest:
    """A Chat Completions request."""
    chat = body.get("messages")
    if not isinstance(chat, list) or not all(isinstance(m, dict) for m in chat):
        raise HttpError(400, "messages must be a list of message objects")
    results: dict[str, str] = {}
    for m in reversed(chat):  # the trailing tool messages answer the calls the run waits on
        if m.get("role") != "tool":
            break
        results[str(m.get("tool_call_id", ""))] = _text_of(m.get("content"))
    prompt = ""
    if not results:
        prompt = next(
            (_text_of(m.get("content")) for m in reversed(chat) if m.get("role") == "user"), ""
        )
        prompt = prompt_text(prompt, "no user message with text content")
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise HttpError(400, "tools must be a list")
    schema = None
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict):
            raise HttpError(400, "response_format.json_schema must be an object")
        schema = _schema_of(spec.get("name"), spec.get("schema"), "response_format.json_schema")
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        schema = ("json_object", {"type": "object"})
    elif fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
        raise HttpError(400, "response_format: use json_schema, json_object or text")
    options = body.get("stream_options")
    return OpenAIRequest(
        thread=_thread_name(headers, body),
        prompt=prompt,
        model=str(body.get("model") or default_model),
        stream=_stream(body),
        results=results,
        tools=[_tool(t, i, nested=True) for i, t in enumerate(tools)],
        schema=schema,
        tools_echo=tools,
        include_usage=isinstance(options, dict) and bool(options.get("include_usage")),
    )


def parse_responses(headers: Any, body: dict[str, Any], default_model: str) -> OpenAIRequest:
    """A Responses API request."""
    given = body.get("input")
    results: dict[str, str] = {}
    prompt = ""
    if isinstance(given, str):
        prompt = given
    elif isinstance(given, list) and all(isinstance(i, dict) for i in given):
        for item in reversed(given):
            if item.get("type") != "function_call_output":
                break
            output = item.get("output")
            results[str(item.get("call_id", ""))] = (
                output if isinstance(output, str) else _text_of(output)
            )
        if not results:
            prompt = next(
                (_text_of(i.get("content")) for i in reversed(given) if i.get("role") == "user"),
                "",
            )
    else:
        raise HttpError(400, "input must be a string or a list of input items")
    if not results:
        prompt = prompt_text(prompt, "no user message with text content in input")
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise HttpError(400, "tools must be a list")
    schema = None
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = _schema_of(fmt.get("name"), fmt.get("schema"), "text.format")
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        schema = ("json_object", {"type": "object"})
    return OpenAIRequest(
        thread=_thread_name(headers, body),
        prompt=prompt,
        model=str(body.get("model") or default_model),
        stream=_stream(body),
        results=results,
        tools=[_tool(t, i, nested=False) for i, t in enumerate(tools)],
        schema=schema,
        tools_echo=tools,
    )


# -- the run -------------------------------------------------------------------------------


def schema_type(name: str, schema: dict[str, Any]) -> Any:
    """An output type whose JSON schema is ``schema`` and whose values are checked against it
    (``jsonschema``), for ``output_type=``.

    Raises:
        HttpError: 400, ``schema`` is not valid JSON Schema.
    """
    from jsonschema import validators
    from pydantic_core import core_schema

    # The package's own check (its depth bound first: jsonschema's recursed past the stack on
    # a deeply nested schema, a 500), the same one every tool's parameters get.
    problem = schema_problem(schema)
    if problem is not None:
        raise HttpError(400, f"the response format's schema is not valid JSON Schema: {problem}")
    checker = validators.validator_for(schema)(schema)

    def check(value: Any) -> Any:
        errors = sorted(checker.iter_errors(value), key=lambda e: list(map(str, e.path)))
        if errors:
            raise ValueError(
                "; ".join(
                    f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}" for e in errors[:5]
                )
            )
        return value

    class _Schema:
        @classmethod
        def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
            return core_schema.no_info_plain_validator_function(check)

        @classmethod
        def __get_pydantic_json_schema__(cls, core: Any, handler: Any) -> dict[str, Any]:
            return dict(schema)

    _Schema.__name__ = "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:64]
    return _Schema


def _client_tool(
    live: Live, name: str, description: str, parameters: dict[str, Any], timeout: float
) -> Tool:
    async def wait_for_client(arguments: dict[str, Any]) -> str:
        del arguments  # the client has them (the response that ended with this call)
        context = current_tool_context()
        assert context is not None  # a tool runs inside a call
        loop = asyncio.get_running_loop()
        call_id = context.call.id
        pending = live.client_calls.setdefault(call_id, loop.create_future())
        try:
            return await asyncio.wait_for(asyncio.shield(pending), timeout)
        except TimeoutError:
            raise RuntimeError(  # the model reads it as the call's error result
                f"the client did not send this call's result within {timeout:g} s"
            ) from None
        finally:
            # Taken: a later call with this id (local models' servers number calls per turn)
            # waits for its own result, not this one's (review9c).
            if live.client_calls.get(call_id) is pending:
                del live.client_calls[call_id]

    return tool_func(
        name, description or f"{name} (run by the client)", parameters, wait_for_client
    )


def _adapter(
    server: Server, request: OpenAIRequest, client: tuple[str, str]
) -> Callable[[Live], Agent | None]:
    """The agent of one request's run: the thread's, with the client's tools and output type.
    Its own tools' dispatch (circuit breakers, rate limits) is the thread agent's, across
    requests; the client's tools count in breakers and limits of ``client`` (the user and the
    thread), kept by the thread's agent (docs/serve.md, "Client tools")."""

    def adapt(live: Live) -> Agent | None:
        if not request.tools and request.schema is None:
            return None
        agent = live.session.agent
        settings: dict[str, Any] = {}
        tools: list[Tool] = []
        if request.tools:
            own = {t.definition.name for t in agent.tools}
            clash = sorted(own & {name for name, _, _ in request.tools})
            if clash:
                raise HttpError(
                    400, f"tools: {', '.join(clash)} is the agent's own tool; rename yours"
                )
            wait = server.client_tool_timeout
            tools = [_client_tool(live, *spec, wait) for spec in request.tools]
        if request.schema is not None:
            settings["output_type"] = schema_type(*request.schema)
        try:
            return agent._sharing_tools(client_tools=tools, client=client, **settings)
        except ConfigurationError as exc:
            raise HttpError(400, str(exc)) from exc

    return adapt


async def begin(server: Server, user: str, request: OpenAIRequest) -> Run:
    """The run answering ``request``: the waiting one its tool results continue, or a new one."""
    thread_id = thread_id_of(request.thread)
    if await server.threads.get(user, thread_id) is None:
        await server.threads.create(user, f"OpenAI API ({request.thread})"[:200], thread_id)
    live = await server.live_of(user, thread_id)
    waiting = live.run if live.run is not None and live.run.parked else None
    if request.results and waiting is None and live.dropped_calls & request.results.keys():
        raise HttpError(409, PARKED_DROPPED.format(limit=server.max_parked_runs))
    if request.results and waiting is None:
        # The calls wait in the stored record (a tool that requires approval): the tool
        # messages are the decisions (serve/_approvals.py), and a new run resumes it.
        if live.run is not None:  # its record is being written: read it only after
            raise HttpError(409, "a run is in progress in this thread; decide after it")
        memory = live.session.agent.options.short_term_memory
        assert memory is not None  # a served thread always has its SQLite memory
        stored = await record_of(memory)  # the whole record, as the resume checks it
        try:
            decisions = decisions_from_results(stored, request.results)
            resumed = await server.start_run(user, thread_id, "", decisions=decisions)
        except ApprovalError as exc:
            raise HttpError(409, str(exc)) from exc
        except ConfigurationError as exc:
            raise HttpError(400, str(exc)) from exc
        for call in pending_json(stored):  # their results name them in this response
            resumed.seen_calls[call["id"]] = [call["name"], json.dumps(call["arguments"])]
        return resumed
    if request.results:
        assert waiting is not None
        missing = [c for c in waiting.waiting_for if c not in request.results]
        if missing:
            raise HttpError(400, f"send a tool result for every call: missing {', '.join(missing)}")
        loop = asyncio.get_running_loop()
        for call_id in waiting.waiting_for:
            pending = live.client_calls.setdefault(call_id, loop.create_future())
            if not pending.done():
                pending.set_result(request.results[call_id])
        waiting.parked = False
        waiting.waiting_for = []
        waiting.readers.add(waiting)  # this request's stream reads it now
        return waiting
    adapt = _adapter(server, request, (user, thread_id))
    run = await server.start_run(user, thread_id, request.prompt, adapt=adapt)
    run.client_tools = frozenset(name for name, _, _ in request.tools)
    run.typed = request.schema is not None
    return run


async def steps(server: Server, run: Run) -> AsyncIterator[Step]:
    """The run's AG-UI events as :class:`Step` values, until it ends or waits for the client
    (leaving early otherwise aborts the run, as a closed tab does)."""
    calls, client = run.seen_calls, run.client_tools
    waiting: list[str] = []
    over = False
    try:
        while True:
            if run.queue.empty():
                yield _IDLE
            item = await run.queue.get()
            if item is None:
                over = True
                return
            kind = item["type"]
            if kind == "TEXT_MESSAGE_CONTENT":
                yield Step("text", item["delta"])
            elif kind == "REASONING_MESSAGE_CONTENT":
                yield Step("reasoning", item["delta"])
            elif kind == "TOOL_CALL_START":
                calls[item["toolCallId"]] = [item["toolCallName"], ""]
            elif kind == "TOOL_CALL_ARGS":
                calls[item["toolCallId"]][1] += item["delta"]
            elif kind == "TOOL_CALL_END":
                name, arguments = calls[item["toolCallId"]]
                if name in client:
                    waiting.append(item["toolCallId"])
                    call = {"id": item["toolCallId"], "name": name, "arguments": arguments or "{}"}
                    yield Step("client_call", call=call)
            elif kind == "TOOL_CALL_RESULT":
                name, arguments = calls.get(item["toolCallId"], ["", ""])
                if name in client or name == FINAL_RESULT_TOOL:
                    continue  # the client has its own results; final_result is the answer
                call = {
                    "id": item["toolCallId"],
                    "name": name,
                    "arguments": arguments or "{}",
                    "output": item["content"] if isinstance(item["content"], str) else "",
                    "error": bool(item.get("metadata", {}).get("isError")),
                }
                yield Step("tool", call=call)
            elif kind == "CUSTOM" and item.get("name") == "goagent.tool_started" and waiting:
                # Every call of the message has ended: the client runs its own, the run waits.
                server.park(run, waiting)
                over = True
                yield Step("parked")
                return
            elif kind == "RUN_FINISHED":
                for asked in (item.get("outcome") or {}).get("interrupts", []):
                    # A call that waits for a decision: the client's tool call to answer (the
                    # run is over; "done" says tool_calls, serve/_approvals.py).
                    meta = asked.get("metadata") or {}
                    # Its id carries the wait's token: the tool message that answers it can
                    # carry nothing else, and the call's id alone may be reused.
                    call = {
                        "id": wire_id(
                            asked.get("toolCallId") or asked["id"], meta.get("token", "")
                        ),
                        "name": meta.get("toolName", ""),
                        "arguments": json.dumps(meta.get("arguments") or {}),
                    }
                    yield Step("client_call", call=call)
                result = dict(item.get("result") or {})
                result["usage"] = (item.get("usage") or [{}])[0]
                yield Step("done", result=result)
            elif kind == "RUN_ERROR":
                yield Step("error", item["message"], code=str(item.get("code") or ""))
    finally:
        if not over:
            server.leave(run, run)


_IDLE = Step("idle")


def _data(payload: dict[str, Any]) -> bytes:
    return sse_frame(json.dumps(payload))


def details(call: dict[str, Any]) -> str:
    """A server-side call as Open WebUI writes and renders it in a message's content."""
    try:
        arguments = json.loads(call["arguments"])
    except ValueError:
        arguments = call["arguments"]
    esc = html.escape
    return (
        f'\n<details type="tool_calls" done="true" id="{esc(call["id"])}" '
        f'name="{esc(call["name"])}" arguments="{esc(json.dumps(arguments))}" '
        f'result="{esc(json.dumps(call["output"], ensure_ascii=False))}">\n'
        "<summary>Tool Executed</summary>\n</details>\n"
    )


def _tokens(result: dict[str, Any]) -> tuple[int, int, int]:
    """A finished run's input, output and cached input tokens (zeros before it finished)."""
    usage = result.get("usage") or {}
    return (
        int(usage.get("inputTokens", 0)),
        int(usage.get("outputTokens", 0)),
        int(usage.get("cachedInputTokens", 0)),
    )


def chat_usage(result: dict[str, Any]) -> dict[str, Any]:
    """Chat Completions' ``usage`` of a run's result."""
    given, made, cached = _tokens(result)
    return {
        "prompt_tokens": given,
        "completion_tokens": made,
        "total_tokens": given + made,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def _finish(result: dict[str, Any]) -> str:
    reason = result.get("stopReason")
    return {"max_tokens": "length", "deferred": "tool_calls"}.get(str(reason), "stop")


def _answer(run: Run, result: dict[str, Any]) -> str | None:
    """A typed run's answer as JSON (None for a plain run, or a typed run that has none)."""
    if not run.typed or "output" not in result:
        return None
    return json.dumps(result["output"])


# -- Chat Completions ----------------------------------------------------------------------


async def chat_completions(server: Server, user: str, request: OpenAIRequest) -> Response:
    """Answer a Chat Completions request, streaming or not."""
    run = await begin(server, user, request)
    cid = f"chatcmpl-{run.run_id}-{secrets.token_hex(3)}"
    created = int(time.time())
    typed = run.typed

    def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": request.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    if request.stream:

        async def frames() -> AsyncIterator[bytes]:
            # The frames of the steps ready at once are held and written as one chunk when
            # the run has nothing more ready (an idle step); the last ones end the response.
            held = [_data(chunk({"role": "assistant", "content": ""}, None))]
            finish, index = "stop", 0
            error: HttpError | None = None
            usage = chat_usage({})
            async for step in steps(server, run):
                if step.kind == "idle":
                    if held:
                        yield b"".join(held)
                        held.clear()
                elif step.kind == "text" and not typed:
                    held.append(_data(chunk({"content": step.text}, None)))
                elif step.kind == "reasoning":
                    held.append(_data(chunk({"reasoning_content": step.text}, None)))
                elif step.kind == "tool":
                    held.append(_data(chunk({"content": details(step.call)}, None)))
                elif step.kind == "client_call":
                    call = step.call
                    fn = {"name": call["name"], "arguments": call["arguments"]}
                    delta = {"index": index, "id": call["id"], "type": "function", "function": fn}
                    index += 1
                    held.append(_data(chunk({"tool_calls": [delta]}, None)))
                elif step.kind == "parked":
                    finish = "tool_calls"
                elif step.kind == "done":
                    finish, usage = _finish(step.result), chat_usage(step.result)
                    answer = _answer(run, step.result)
                    if answer is not None:
                        held.append(_data(chunk({"content": answer}, None)))
                elif step.kind == "error":
                    error = step.failure()
                    if error.code == "content_filter":
                        finish = "content_filter"
            if error is not None:
                _, body = error_body(error.status, error.message, path="/v1/", code=error.code)
                held.append(_data(body))
            held.append(_data(chunk({}, finish)))
            if request.include_usage:
                held.append(_data({**chunk({}, None), "choices": [], "usage": usage}))
            held.append(sse_frame("[DONE]"))
            yield LastChunk(b"".join(held))

        return RunStream(server, run, frames())
    content: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    finish, error, usage = "stop", "", chat_usage({})
    failure = HttpError(500, "")
    async for step in steps(server, run):
        if step.kind == "text" and not typed:
            content.append(step.text)
        elif step.kind == "reasoning":
            reasoning.append(step.text)
        elif step.kind == "tool":
            content.append(details(step.call))
        elif step.kind == "client_call":
            fn = {"name": step.call["name"], "arguments": step.call["arguments"]}
            calls.append({"id": step.call["id"], "type": "function", "function": fn})
        elif step.kind == "parked":
            finish = "tool_calls"
        elif step.kind == "done":
            finish, usage = _finish(step.result), chat_usage(step.result)
            answer = _answer(run, step.result)
            if answer is not None:
                content.append(answer)
        elif step.kind == "error":
            error = step.text
            failure = step.failure()
    if error:
        raise failure
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
    if calls:
        message["tool_calls"] = calls
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    return JSONResponse(
        {
            "id": cid,
            "object": "chat.completion",
            "created": created,
            "model": request.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }
    )


# -- Responses -----------------------------------------------------------------------------


class _ResponseBuilder:
    """The output items of one Responses API response, and its stream events as they form."""

    def __init__(self, request: OpenAIRequest, run: Run, rid: str) -> None:
        self.request = request
        self.run = run
        self.rid = rid
        self.created = int(time.time())
        self.output: list[dict[str, Any]] = []
        self.sequence = 0
        self._text: dict[str, Any] | None = None  # the message item being written
        # Its text in pieces, joined when the item is read: ``+=`` on the part's text copied
        # the whole text at every delta (a long answer's deltas made the stream quadratic).
        self._pieces: list[str] = []
        self.usage: dict[str, Any] | None = None  # once the run has finished

    def response(self, status: str, error: dict[str, Any] | None = None) -> dict[str, Any]:
        if self._text is not None:  # a message still being written: its text so far
            self._text["content"][0]["text"] = "".join(self._pieces)
        return {
            "id": self.rid,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.request.model,
            "output": self.output if status != "in_progress" else [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": self.request.tools_echo,
            "error": error,
            "incomplete_details": None,
            "usage": self.usage,
        }

    def event(self, kind: str, **fields: Any) -> dict[str, Any]:
        self.sequence += 1
        return {"type": kind, "sequence_number": self.sequence - 1, **fields}

    def text(self, delta: str) -> list[dict[str, Any]]:
        out = []
        if self._text is None:
            self._text = {
                "id": "msg_" + secrets.token_hex(8),
                "type": "message",
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            self.output.append(self._text)
            index = len(self.output) - 1
            out.append(
                self.event(
                    "response.output_item.added",
                    output_index=index,
                    item=dict(self._text, content=[]),
                )
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            self._text["content"].append(part)
            out.append(
                self.event(
                    "response.content_part.added",
                    item_id=self._text["id"],
                    output_index=index,
                    content_index=0,
                    part=dict(part),
                )
            )
        self._pieces.append(delta)
        out.append(
            self.event(
                "response.output_text.delta",
                item_id=self._text["id"],
                output_index=len(self.output) - 1,
                content_index=0,
                delta=delta,
                logprobs=[],
            )
        )
        return out

    def close_text(self) -> list[dict[str, Any]]:
        item, self._text = self._text, None
        if item is None:
            return []
        index = self.output.index(item)
        item["status"] = "completed"
        part = item["content"][0]
        part["text"] = "".join(self._pieces)
        self._pieces = []
        ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
        return [
            self.event("response.output_text.done", **ids, text=part["text"], logprobs=[]),
            self.event("response.content_part.done", **ids, part=part),
            self.event("response.output_item.done", output_index=index, item=item),
        ]

    def item(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        out = self.close_text()
        self.output.append(item)
        index = len(self.output) - 1
        return [
            *out,
            self.event("response.output_item.added", output_index=index, item=item),
            self.event("response.output_item.done", output_index=index, item=item),
        ]

    def step(self, step: Step) -> list[dict[str, Any]]:
        if step.kind == "text" and not self.run.typed:
            return self.text(step.text)
        if step.kind == "tool":
            call = step.call
            return self.item(
                {
                    "id": "mcp_" + call["id"],
                    "type": "mcp_call",
                    "server_label": SERVER_LABEL,
                    "name": call["name"],
                    "arguments": call["arguments"],
                    "output": call["output"],
                    "error": call["output"] if call["error"] else None,
                    "status": "failed" if call["error"] else "completed",
                }
            )
        if step.kind == "client_call":
            call = step.call
            return self.item(
                {
                    "id": "fc_" + call["id"],
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": call["name"],
                    "arguments": call["arguments"],
                    "status": "completed",
                }
            )
        if step.kind == "done":
            given, made, cached = _tokens(step.result)
            self.usage = {
                "input_tokens": given,
                "input_tokens_details": {"cached_tokens": cached},
                "output_tokens": made,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": given + made,
            }
            answer = _answer(self.run, step.result)
            out = self.text(answer) if answer is not None else []
            return out + self.close_text()
        if step.kind == "parked":
            return self.close_text()
        return []


async def responses(server: Server, user: str, request: OpenAIRequest) -> Response:
    """Answer a Responses API request, streaming or not."""
    run = await begin(server, user, request)
    build = _ResponseBuilder(request, run, f"resp_{run.run_id[4:]}{secrets.token_hex(3)}")
    if request.stream:

        async def frames() -> AsyncIterator[bytes]:
            def frame(event: dict[str, Any]) -> bytes:
                return sse_frame(json.dumps(event), event["type"])

            # As Chat Completions does: the frames of the steps ready at once in one chunk.
            held = [
                frame(build.event("response.created", response=build.response("in_progress"))),
                frame(build.event("response.in_progress", response=build.response("in_progress"))),
            ]
            error: HttpError | None = None
            async for step in steps(server, run):
                if step.kind == "idle":
                    if held:
                        yield b"".join(held)
                        held.clear()
                    continue
                if step.kind == "error":
                    error = step.failure()
                held.extend(frame(event) for event in build.step(step))
            held.extend(frame(event) for event in build.close_text())
            if error is not None:
                code = error.code or "server_error"
                failed = build.response("failed", {"code": code, "message": error.message})
                held.append(frame(build.event("response.failed", response=failed)))
            else:
                done = build.response("completed")
                held.append(frame(build.event("response.completed", response=done)))
            yield LastChunk(b"".join(held))

        return RunStream(server, run, frames())
    error: HttpError | None = None
    async for step in steps(server, run):
        if step.kind == "error":
            error = step.failure()
        build.step(step)
    build.close_text()
    if error is not None:
        raise error
    return JSONResponse(build.response("completed"))
