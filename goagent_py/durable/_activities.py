"""The worker side: the activities that do the effects, and a worker that runs them.

Retries belong to the engine: an activity turns a failure into an ``ApplicationError`` that says
whether retrying can help (misuse and 4xx but 408/409/429 cannot) and, when the server sent a
Retry-After, when to try again (capped at the agent's ``max_retry_delay``). A tool call runs as
the loop runs one (validation, ``before_tool_call``, the agent's dispatch chain without its
retry layer, ``after_tool_call``); its failure is data for the model, recorded as the
activity's result, except what a retry can cure (a connection error or a timeout raised inside
the tool, an MCP server out of reach). A result too big to record fails at once, naming the
tool or model.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
from collections import ChainMap
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import asdict, replace
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from goagent_py._call_gates import (
    after_call,
    checked_arguments,
    gate_reason,
    let_go,
    moved_reason,
    prepared_call,
    resolved_path,
    take_place,
    with_arguments,
)
from goagent_py._describe import described
from goagent_py._generation import expect_generation, generation_read
from goagent_py._metadata_keys import CLAIM_KEY, DECISIONS_KEY, PENDING_KEY
from goagent_py._recall import handed
from goagent_py._transcript import error_result, repair_transcript, truncate_content
from goagent_py.approvals import RunContext, record_of, waits_under
from goagent_py.dispatch import Dispatcher, error_text, timeout_middleware
from goagent_py.errors import (
    ConfigurationError,
    ConversationClearedError,
    CorruptedDataError,
    ToolArgumentsError,
    ToolBlockedError,
    ToolExecutionError,
    ToolTimeoutError,
)
from goagent_py.guardrails import GuardrailContext, decide
from goagent_py.mcp.errors import (
    MCPConnectionError,
    MCPServerRestartedError,
    MCPToolUnavailableError,
)
from goagent_py.memory.base import (
    MEMORY_FOLLOWS_KEY,
    MEMORY_RECALLED_KEY,
    MEMORY_TURN_KEY,
    UpdatableMemory,
)
from goagent_py.memory.consolidation import collect_consolidations
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.messages import (
    ContentBlock,
    Message,
    Role,
    TextBlock,
    ToolCall,
    Usage,
    build_codec,
)
from goagent_py.resilience._retry import _transient_verdict
from goagent_py.results import ToolResult
from goagent_py.tool_context import ToolContext, _current
from goagent_py.tools import Tool

from ._deps import NO_DEPS, DepsRegistry, resolve_data
from ._mcp import MCPServers, call_activity, list_activity
from ._results import (
    PREVIEW,
    RESULT_WHOLE,
    expanded,
    reference_text,
    store_result,
    thinking_by_reference,
)
from ._telemetry import enter_trace
from ._wire import (
    HISTORY_REF_KEY,
    MEMORY_ID_KEY,
    RANGE_REF,
    ErrorData,
    PayloadTooLargeError,
    check_size,
    content_from_text,
    content_to_text,
    definition_to_data,
    error_to_data,
    history_digest,
    messages_from_text,
    messages_to_text,
    range_digest,
    range_stand_in,
    request_from_data,
    response_to_data,
    server_blob_limit,
    stand_in,
    tool_error_to_data,
    usage_to_data,
)
from .agent import DurableAgent, ProviderRegistry

T = TypeVar("T")
# How long a workflow task waits on a worker's sticky queue before any worker may take it: the
# part of crash recovery that Temporal's 10 s default made the longest (issue 36).
_STICKY_TIMEOUT = timedelta(seconds=1)
Activity = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


_RANGE_MIN = 64  # fewer leading messages than this stay one stand-in each
# What the workflow's loop hands with a turn's user message (goagent_py._recall.handed).
_TURN_CONTEXT = (MEMORY_RECALLED_KEY, MEMORY_FOLLOWS_KEY, MEMORY_TURN_KEY)


def _last_prompt(messages: list[Message]) -> int:
    """Where the last turn of ``messages`` begins (its user prompt); 0 when none does."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role is Role.USER and not messages[i].tool_call_id:
            return i
    return 0


def _closed_prefix(messages: list[Message]) -> int:
    """How many leading messages of ``messages`` one range stand-in may take: closed turns
    (every call answered right after it, no result without its call, nothing waiting), ending
    where a user's prompt begins, so the loop's transcript rules have nothing to do there and
    the model reads exactly what a plain run sends. 0: too few to be worth it."""
    repaired = repair_transcript(messages)
    same = 0
    for a, b in zip(messages, repaired, strict=False):
        if a != b or PENDING_KEY in a.metadata:
            break
        same += 1
    k = same

    # The whole window counts as closed only if the repair added nothing after it.
    def boundary(k: int) -> bool:
        if k == len(messages):
            return len(repaired) == k
        return messages[k].role is Role.USER and not messages[k].tool_call_id

    tries = 8  # each a repair of the prefix: a window this odd keeps its stand-ins
    while k > 0:
        if boundary(k):
            if repair_transcript(messages[:k]) == messages[:k]:
                break
            tries -= 1
            if not tries:
                return 0
        k -= 1
    return k if k >= _RANGE_MIN else 0


def _range_in(ref: str, stored: list[Message], digests: list[str]) -> list[Message] | None:
    """The stored messages a range reference stands for, or None if they are not in
    ``stored`` (in order, unchanged)."""
    count_text, first, whole = ref[len(RANGE_REF) :].split(":")
    count = int(count_text)
    for i, digest in enumerate(digests):
        run = digests[i : i + count]
        if digest == first and len(run) == count and range_digest(run) == whole:
            return stored[i : i + count]
    return None


def _application_error(error: ErrorData, what: str, max_delay: float) -> ApplicationError:
    delay = None
    if error.retry_after is not None and error.retryable:
        delay = timedelta(seconds=max(0.0, min(error.retry_after, max_delay)))
    # A message that names what failed already (a PayloadTooLargeError's does) is not named twice.
    message = error.message if error.message.startswith(what) else f"{what}: {error.message}"
    return ApplicationError(
        message,
        error.to_data(),
        type=error.type,
        non_retryable=not error.retryable,
        next_retry_delay=delay,
    )


async def _heartbeating(work: Awaitable[T]) -> T:
    """Await ``work`` while heartbeating, so a dead worker is noticed within the heartbeat
    timeout instead of the (long) start-to-close timeout. Every activity that is given a
    heartbeat timeout (model, tools, memory, MCP) does its work through this: one that does not
    beat fails each attempt whose work outlasts the timeout."""
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


def _retryable(error: BaseException) -> bool:
    """A tool's failure is data for the model, not retried, except what a retry can cure: what
    the tool marks transient (:class:`TransientError`, read as ``tool_retry`` reads it: the
    tool's word wins, so a tool whose call may have had its effect says it is not safe to
    retry), else a connection error or a timeout raised inside the tool, and an MCP server out
    of reach. The agent's own tool timeout is final, as in a plain run (it bounds the call)."""
    cause = error.cause if isinstance(error, ToolExecutionError) else None
    if cause is None:
        return False
    verdict = _transient_verdict(cause)
    if verdict is not None:
        return verdict
    if isinstance(cause, MCPServerRestartedError):
        return False  # a call that may have run, on a tool that is not idempotent
    return isinstance(cause, ConnectionError | TimeoutError | MCPConnectionError)


async def _unstick() -> None:
    """After a retried attempt of an activity: send the run's next workflow task to its task
    queue, where any worker takes it, not to the sticky queue of the worker that ran its last
    one. The attempt before may have died with its worker (a SIGKILL, a lost machine), and
    the next workflow task would then wait out the sticky schedule-to-start timeout for it. A
    live worker loses only its cached copy of this run (the next task replays it). A courtesy:
    never fails the call."""
    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.workflowservice.v1 import ResetStickyTaskQueueRequest

    info = activity.info()
    try:
        client = activity.client()
        await client.workflow_service.reset_sticky_task_queue(
            ResetStickyTaskQueueRequest(
                namespace=client.namespace,
                execution=WorkflowExecution(
                    workflow_id=info.workflow_id or "", run_id=info.workflow_run_id or ""
                ),
            )
        )
    except Exception as exc:
        activity.logger.debug("resetting the run's sticky task queue failed: %s", exc)


def _named(name: str, fn: Activity) -> Callable[..., Any]:
    async def run(data: dict[str, Any]) -> dict[str, Any]:
        enter_trace(data)  # a traced run: what this activity does nests under its span
        info = activity.info()
        if info.attempt < 2 or info.is_local or not info.workflow_id:
            return await fn(data)
        try:
            return await fn(data)
        finally:
            await _unstick()

    run.__name__ = run.__qualname__ = name.replace(".", "_")
    return activity.defn(name=name)(run)


# What the model reads for a call this worker's definition makes wait, that the run let through
# without asking (the app that started it had another definition of the agent).
_UNASKED = (
    "this tool requires a person's approval on the worker, and this run did not ask for it "
    "(the app that started the run has another definition of the agent: deploy the same "
    "definition to the app and the workers); the call was not run"
)


class _AgentActivities:
    def __init__(
        self, durable: DurableAgent, registry: ProviderRegistry, deps: DepsRegistry = NO_DEPS
    ) -> None:
        self.durable = durable
        self.registry = registry
        self.deps = deps
        config = durable.config()
        self.limit = int(config["payload_limit"])
        self.server_limit: int | None = None  # the server's blob size limit, asked once
        self.max_delay = float(config["max_retry_delay"])
        self.options = o = durable.agent.options
        self.tools: dict[str, Tool] = {t.definition.name: t for t in durable.agent.tools}
        self.mcp = MCPServers(durable.mcp_servers)
        # The agent's own chain (timeout, breaker, rate limit, middlewares) for every call,
        # function and MCP tools alike; no retry layer: the engine retries the activity.
        self.dispatcher = Dispatcher(
            ChainMap(self.tools, self.mcp.tools),
            timeout=o.tool_timeout,
            circuit_breaker=o.circuit_breaker,
            rate_limit=o.rate_limit,
            middlewares=o.dispatch_middlewares,
            logger=o.logger,
        )

    def _fail(self, exc: BaseException, what: str) -> ApplicationError:
        return _application_error(error_to_data(exc), what, self.max_delay)

    async def _check_size(self, data: Any, what: str) -> None:
        """:func:`check_size` against ``payload_limit`` and the server's own limit: a result
        over what the server accepts fails at once, naming what produced it, instead of being
        refused by the server on every attempt with a generic error."""
        if self.server_limit is None:
            try:
                client = activity.client()
            except RuntimeError:  # an activity run without a worker's client (a test harness)
                client = None
            self.server_limit = 0 if client is None else await server_blob_limit(client)
        check_size(data, what, self.limit, server_limit=self.server_limit)

    async def _history(
        self, session_id: str, messages: list[Message], generation: int | None = None
    ) -> list[Message]:
        """``messages`` with each stand-in replaced by the stored message it stands for.

        Raises:
            ConversationClearedError: the conversation was cleared since the run loaded it at
                ``generation`` (docs/sessions.md "A conversation cleared under a run"): what
                the stand-ins stand for is gone, so the run cannot go on.
            CorruptedDataError: a stand-in's message is no longer stored (the history was
                rewritten under the run): the run fails loudly rather than send a different
                conversation.
        """
        wanted = {m.metadata[HISTORY_REF_KEY] for m in messages if HISTORY_REF_KEY in m.metadata}
        if not wanted:
            return messages
        memory = self.durable.short_term_memory(session_id)
        found: dict[str, Message] = {}
        ranges: dict[str, list[Message]] = {}
        sources: list[Any] = [] if memory is None else [memory.messages]
        storage = getattr(memory, "storage", None)
        if storage is not None:  # the window may have moved on since the load
            sources.append(storage.load)
        for source in sources:
            stored = await _heartbeating(source())
            now = generation_read(storage)
            if generation is not None and now is not None and now != generation:
                raise ConversationClearedError(  # not retried: the history is gone
                    f"session {session_id!r}: the conversation was cleared (by another "
                    "process or task) while this durable run was in flight; the history it "
                    "loaded is no longer stored, so the run cannot go on, and nothing more of "
                    "it is stored (start a new run: it goes on from what the conversation "
                    "holds now)",
                    session_id=session_id,
                )
            digests = [history_digest(m) for m in stored]
            for m, digest in zip(stored, digests, strict=True):
                if digest in wanted:
                    found[digest] = m
            for ref in wanted:
                if ref.startswith(RANGE_REF) and ref not in ranges:
                    run = _range_in(ref, stored, digests)
                    if run is not None:
                        ranges[ref] = run
                        found[ref] = stored[0]  # counted as found; put back from ranges
            if len(found) == len(wanted):
                break
        missing = len(wanted) - len(found)
        if missing:
            raise CorruptedDataError(  # not retried: a retry reads the same rows
                f"session {session_id!r}: {missing} message(s) of the history this run loaded "
                "are no longer stored (was the history rewritten under a running durable run?)"
            )
        out: list[Message] = []
        for m in messages:
            ref = m.metadata.get(HISTORY_REF_KEY, "")
            if ref in ranges:
                out.extend(ranges[ref])
            else:
                out.append(found.get(ref, m))
        return out

    async def model(self, data: dict[str, Any]) -> dict[str, Any]:
        request = request_from_data(data["request"])
        what = f"model {request.model!r}"
        # The run's appends since its last model call, first (keyed: a retry skips them).
        appended = await self._carried(data) if "appends" in data else None
        try:
            if "session_id" in data:
                session = str(data["session_id"])
                generation = data.get("generation")
                history = await self._history(
                    session, request.messages, None if generation is None else int(generation)
                )
                memory = self.durable.short_term_memory(session)
                history = await _heartbeating(expanded(memory, session, history))  # big results
                request = replace(request, messages=history)
            provider = self.registry.resolve(str(data["provider"]))
            response = await _heartbeating(provider.complete(request))
            if data.get("refs"):  # a big thinking block: stored, its reference returned
                session = str(data["session_id"])
                memory = self.durable.short_term_memory(session)
                message = await _heartbeating(
                    thinking_by_reference(
                        memory, session, response.message, generation=data.get("generation")
                    )
                )
                response = replace(response, message=message)
            out = response_to_data(response)
            await self._check_size(out, f"{what} response")
        except Exception as exc:
            raise self._fail(exc, what) from exc
        if appended is not None:
            out["appended"] = appended
        return out

    async def _carried(self, data: dict[str, Any]) -> int:
        """Apply the appends a model call carries, in order; how many were applied. The first
        that fails stops them: the workflow appends the rest itself (with its retries), so a
        storage's failure is what it was before, a warning, never the model call's."""
        memory = self.durable.short_term_memory(str(data["session_id"]))
        done = 0
        for append in data["appends"]:
            try:
                await self._append(memory, append)
            except Exception as exc:
                self.options.logger.warning("short-term memory append failed: %s", exc)
                break
            done += 1
        return done

    def tool(self, name: str) -> Activity:
        async def run(data: dict[str, Any]) -> dict[str, Any]:
            return await self._call(data)

        return run

    def mcp_list(self, server: str) -> Activity:
        async def run(data: dict[str, Any]) -> dict[str, Any]:
            what = f"MCP server {server!r}"
            try:
                tools = await _heartbeating(self.mcp.list(server))
                out = {"tools": [definition_to_data(t.definition) for t in tools]}
                await self._check_size(out, f"{what} tool list")
            except Exception as exc:
                error = error_to_data(exc)
                # A server that cannot be reached may come back; a bad listing will not.
                retry = isinstance(exc, MCPConnectionError) or error.retryable
                error = ErrorData(error.type, error.message, retry)
                raise _application_error(error, what, self.max_delay) from exc
            return out

        return run

    def mcp_call(self, server: str) -> Activity:
        async def run(data: dict[str, Any]) -> dict[str, Any]:
            name = str(data["tool"])
            try:
                found = await _heartbeating(self.mcp.find(server, name))
            except Exception as exc:  # the server cannot be reached: the engine retries
                error = ErrorData(type(exc).__name__, str(exc), True)
                raise _application_error(error, f"tool {name!r}", self.max_delay) from exc
            if found is None:
                offered = tuple(
                    t.definition.name
                    for t in self.mcp.tools.values()
                    if getattr(getattr(t, "connection", None), "name", None) == server
                )
                missing = MCPToolUnavailableError(server, name, offered)
                return {
                    "content": content_to_text([TextBlock(error_text(missing))]),
                    "error": tool_error_to_data(missing, False).to_data(),
                }
            return await self._call(data)

        return run

    async def _call(self, data: dict[str, Any]) -> dict[str, Any]:
        """One tool call, as the loop makes it: ``prepare_arguments``, validate,
        ``before_tool_call``, the dispatch chain, ``after_tool_call``. An error for the model is
        returned as data (the call's recorded outcome); one a retry can cure is raised for the
        engine to retry."""
        name = str(data["tool"])
        what = f"tool {name!r}"
        call = ToolCall(str(data["call_id"]), name, dict(data["arguments"]))
        used: list[Usage] = []
        try:
            deps = await resolve_data(self.deps, data.get("deps"))
        except ConfigurationError as exc:  # checked when the run started: rare, and final
            raise self._fail(exc, what) from exc
        context = ToolContext(
            call=call,
            run_id=str(data["run_id"]),
            iteration=int(data["iteration"]),
            usage_sink=used.append,
            deps=deps,
        )
        token = _current.set(context)
        try:
            result = await _heartbeating(self._run_call(call, data))
        finally:
            _current.reset(token)
        out: dict[str, Any] = {"content": content_to_text(result.content)}
        if data.get("refs") and len(out["content"]) > RESULT_WHOLE:
            try:
                out.update(
                    await self._by_reference(
                        result.content, str(data["session_id"]), data.get("generation")
                    )
                )
            except Exception as exc:  # the storage failed: the engine retries
                raise self._fail(exc, f"{what} result store") from exc
        if result.error is not None:
            retry = _retryable(result.error)
            error = tool_error_to_data(result.error, retry)
            if retry:
                raise _application_error(error, what, self.max_delay) from result.error
            out["error"] = error.to_data()
        out.update(self._outcome(context, used, what))
        try:
            await self._check_size(out, f"{what} result")
        except PayloadTooLargeError as exc:
            raise self._fail(exc, what) from exc
        return out

    async def _by_reference(
        self, content: list[ContentBlock], session_id: str, generation: Any = None
    ) -> dict[str, Any]:
        """A big result stored beside the session: its reference, and a preview for the run's
        events (issue 30). Truncated first as the loop would (``max_tool_result_chars``); the
        result whole if it is small then or the session's storage cannot hold it."""
        limit = self.options.max_tool_result_chars
        if limit is not None:
            content = truncate_content(list(content), limit)
        text = content_to_text(content)
        memory = self.durable.short_term_memory(session_id)
        digest = None
        if len(text) > RESULT_WHOLE:
            digest = await _heartbeating(
                store_result(memory, session_id, content, text, generation=generation)
            )
        if digest is None:
            return {"content": text}
        preview = "".join(b.text for b in content if isinstance(b, TextBlock))
        # "ref" (set only here) is what makes the workflow mark the message as a reference.
        return {
            "content": content_to_text([TextBlock(reference_text(digest))]),
            "preview": preview[:PREVIEW],
            "ref": digest,
        }

    def _outcome(self, context: ToolContext, used: list[Usage], what: str) -> dict[str, Any]:
        """What the tool told its context, for the workflow's: terminate, details (if they are
        JSON), and tokens spent on its behalf."""
        out: dict[str, Any] = {}
        if context.outcome.get("terminate"):
            out["terminate"] = True
        if "details" in context.outcome:
            try:
                json.dumps(context.outcome["details"])
                out["details"] = context.outcome["details"]
            except (TypeError, ValueError):
                self.options.logger.warning("%s: details that are not JSON are dropped", what)
        if used:
            out["usage"] = usage_to_data(sum(used, Usage()))
        return out

    async def _run_call(self, call: ToolCall, data: dict[str, Any]) -> ToolResult:
        """One call, holding its place in its tool's line (a file's write queue: see
        :func:`take_place`) from before anything can delay it until it ends, as in a plain
        run: the approved file is checked, and written, in that place."""
        release = take_place(self.dispatcher.tool(call.name), call)
        try:
            return await self._run_checked(call, data)
        finally:
            if release is not None:
                let_go(release, self.options.logger)

    async def _run_checked(self, call: ToolCall, data: dict[str, Any]) -> ToolResult:
        o = self.options
        if o.prepare_arguments is not None:
            # As in a plain run: the repair comes first, and its failure is the model's to read.
            try:
                call = await prepared_call(o.prepare_arguments, call)
            except ToolArgumentsError as exc:
                return await self._after(error_result(call, exc))
        shown = call
        try:
            validated = checked_arguments(self.dispatcher.tool(call.name), call)
        except ToolArgumentsError as exc:
            return await self._after(error_result(call, exc))
        if validated is not None:
            shown = with_arguments(call, validated)
        if data.get("asked") is False and await self._unasked(shown, data):
            return await self._after(error_result(call, ToolBlockedError(call.name, _UNASKED)))
        reason: str | None = None
        bound = data.get("bound")
        if isinstance(bound, list) and len(bound) == 2:  # approved on the file it led to
            tool = self.dispatcher.tool(call.name)
            reason = moved_reason(tool, call, validated, str(bound[0]), str(bound[1]))
        if reason is None and o.before_tool_call is not None:

            def message() -> Message:
                found = messages_from_text(str(data.get("message", "[]")))
                return found[0] if found else Message(Role.ASSISTANT, [])

            # Fail closed, as in a plain run: a broken approval check blocks the call.
            reason = await gate_reason(
                o.before_tool_call,
                o.before_tool_call_sees_message,
                shown,
                message,
                o.logger,
                sees_run=o.before_tool_call_sees_run,
            )
        if reason is not None:
            return await self._after(error_result(call, ToolBlockedError(call.name, reason)))
        return await self._after(await self._dispatch_in_time(call))

    async def _unasked(self, call: ToolCall, data: dict[str, Any]) -> bool:
        """Whether ``call``, which the run did not check for approval (its app's definition of
        the agent did not mark the tool: an older or different deploy), needs a person by this
        worker's definition: then it must not run unasked (durable11)."""
        o = self.options
        tool = self.dispatcher.tool(call.name)
        if getattr(tool, "external", False) is True:
            return True  # the client runs it: never here
        if getattr(tool, "requires_approval", False) is False and o.requires_approval is None:
            return False
        return await self._needs_approval(tool, call, data)

    async def _dispatch_in_time(self, call: ToolCall) -> ToolResult:
        """The call through the agent's chain, given up on a little before the activity's own
        start-to-close timeout (``DurableAgent(tool_timeout=...)``) with a final
        :class:`ToolTimeoutError` the model reads, as the agent's ``tool_timeout`` gives one. Left
        to the engine, that timeout is retried: a slow but alive tool would run again (a sync
        tool's first thread still running). A worker that died is still retried (its heartbeat
        stops, or nothing answers before the timeout)."""
        limit = activity.info().start_to_close_timeout
        if not limit:
            return await self.dispatcher.execute(call)
        seconds = limit.total_seconds()
        # The time left for the result to reach the server before its timer fires.
        within = max(seconds * 0.8, seconds - 5.0)

        async def run(tc: ToolCall) -> list[ContentBlock]:
            result = await self.dispatcher.execute(tc)
            out.append(result)
            return result.content

        out: list[ToolResult] = []
        try:
            await timeout_middleware(within)(run)(call)
        except ToolTimeoutError:
            return error_result(call, ToolTimeoutError(call.name, seconds))
        return out[0]

    async def _after(self, result: ToolResult) -> ToolResult:
        after = self.options.after_tool_call
        if after is None:
            return result
        return await after_call(after, result, self.options.logger)

    async def approval(self, data: dict[str, Any]) -> dict[str, Any]:
        """Whether a call waits for a person, and its validated arguments (None when they
        fail validation: the call then does not wait and gets its error when it runs). The
        tool's ``requires_approval`` (a flag or a predicate of the arguments) and the agent's
        policy decide, as in a plain run; a check that raises makes the call wait."""
        o = self.options
        call = ToolCall(str(data["call_id"]), str(data["tool"]), dict(data["arguments"]))
        try:
            if o.prepare_arguments is not None:
                call = await prepared_call(o.prepare_arguments, call)
            tool = self.dispatcher.tool(call.name)
            validated = checked_arguments(tool, call)
            if validated is not None:
                call = with_arguments(call, validated)
        except ToolArgumentsError:
            return {"arguments": None, "wait": False}
        out = {"arguments": call.arguments, "wait": await self._needs_approval(tool, call, data)}
        if out["wait"]:
            # The file its path leads to here, what an approval covers (approve15).
            out["resolved"] = resolved_path(tool, call)
        try:
            json.dumps(out)
        except (TypeError, ValueError):  # validated into objects that are not JSON
            out["arguments"] = dict(data["arguments"])
        return out

    async def _needs_approval(self, tool: Any, call: ToolCall, data: dict[str, Any]) -> bool:
        """Whether this worker's definition makes ``call`` (validated) wait for a person: the
        tool's ``requires_approval`` (flag or predicate), then the agent's policy. A check that
        raises says yes (fail closed, as in a plain run)."""
        o = self.options
        flag = getattr(tool, "requires_approval", False)
        try:
            need = bool(flag(dict(call.arguments)) if callable(flag) else flag)
            if not need and o.requires_approval is not None:
                found = messages_from_text(str(data.get("message", "[]")))
                context = RunContext(
                    message=found[0] if found else Message(Role.ASSISTANT, []),
                    run_id=str(data.get("run_id", "")),
                    iteration=int(data.get("iteration", 0)),
                )
                verdict = o.requires_approval(call, context)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
                need = bool(verdict)
        except Exception as exc:
            o.logger.warning("the approval check raised; the call waits: %s", exc)
            need = True
        return need

    async def settle(self, data: dict[str, Any]) -> dict[str, Any]:
        """The claim of a durable run's decisions on the stored wait: a compare-and-set in the
        storage's transaction (the message must still be the one the run loaded, waiting). A
        retry of a settle that took effect finds its own decisions and answers the same."""
        memory = self.durable.short_term_memory(str(data["session_id"]))
        ref, token = str(data["ref"]), str(data["token"])
        decisions = dict(data["decisions"])
        ids = [str(i) for i in data["call_ids"]]
        # This claim's own id (a run recorded before it sends none): only the message it
        # settled is this claim's, not one another decider settled with the same decisions.
        claim = str(data.get("claim") or "")
        try:
            if not isinstance(memory, UpdatableMemory):
                raise ConfigurationError(
                    f"durable approvals need a short-term memory that can update a stored "
                    f"message on the workers, got {type(memory).__name__} (use ShortTermMemory "
                    "with SQLiteStorage or PostgresStorage)"
                )

            waits = waits_under(token)

            def match(m: Message) -> bool:
                return waits(m) and history_digest(m) == ref

            def update(m: Message) -> Message:
                metadata = {k: v for k, v in m.metadata.items() if k != PENDING_KEY}
                metadata[DECISIONS_KEY] = decisions
                if claim:
                    metadata[CLAIM_KEY] = claim
                return replace(m, metadata=metadata)

            def ours(m: Message) -> bool:
                if claim:
                    return m.metadata.get(CLAIM_KEY) == claim
                return (
                    m.metadata.get(DECISIONS_KEY) == decisions
                    and [c.id for c in m.tool_calls] == ids
                )

            if data.get("generation") is not None:  # fenced by the run's load (approve14)
                expect_generation(getattr(memory, "storage", None), int(data["generation"]))
            found = await _heartbeating(memory.update_where(match, update))
            if found is None:
                # In the whole record: a window may have cut the settled message off
                # (approve15).
                found = next(
                    (m for m in reversed(await _heartbeating(record_of(memory))) if ours(m)),
                    None,
                )
        except Exception as exc:
            raise self._fail(exc, "short-term memory settle") from exc
        if found is None:
            return {"found": False}
        return {"found": True, "ref": history_digest(found)}

    async def guardrail(self, data: dict[str, Any]) -> dict[str, Any]:
        """One of the agent's guardrails on a durable run's prompt or answer; its verdict (a
        guardrail that raises trips, as in a plain run)."""
        o = self.options
        kind = str(data["kind"])
        guards = o.input_guardrails if kind == "input" else o.output_guardrails
        index = int(data["index"])
        if index >= len(guards):
            raise self._fail(
                ConfigurationError(
                    f"this worker's agent has no {kind} guardrail number {index + 1}: deploy "
                    "the same agent definition to the app and the workers"
                ),
                "guardrail",
            )
        prompt = messages_from_text(str(data["prompt"])) if "prompt" in data else []
        text = str(data.get("text", ""))
        context = GuardrailContext(kind=kind, agent=o.name, messages=prompt, text=text)  # type: ignore[arg-type]
        value: Any = prompt if kind == "input" else text
        verdict = await _heartbeating(decide(guards[index], value, context))
        info = verdict.info
        try:
            json.dumps(info)
        except (TypeError, ValueError):
            info = repr(info)
        return {"tripped": verdict.tripped, "reason": verdict.reason, "info": info}

    async def load(self, data: dict[str, Any]) -> dict[str, Any]:
        memory = self.durable.short_term_memory(str(data["session_id"]))
        try:
            messages = [] if memory is None else await _heartbeating(memory.messages())
            # By reference (issue 30): the history stays here; the workflow gets stand-ins,
            # and (where the run asks for it) one for the closed turns that lead the window.
            digests = [history_digest(m) for m in messages]
            # The last turn is never in the range: its answer's stand-in carries what the
            # next turn's facts follow (goagent_py._recall: the memories it used, its turn).
            closed = _closed_prefix(messages[: _last_prompt(messages)]) if data.get("ranges") else 0
            shown = [range_stand_in(digests[:closed])] if closed else []
            shown += [stand_in(m, d) for m, d in zip(messages, digests, strict=True)][closed:]
            out = {
                "messages": messages_to_text(shown),
                # Whether a repeated append of this session is harmless (keyed, or nothing is
                # stored): then the workflow may append by local activity (issue 36).
                "keyed": memory is None
                or getattr(getattr(memory, "storage", None), "append_once", None) is not None,
                # Whether there is anything to append to (none: the workflow sends no appends).
                "stores": memory is not None,
            }
            # The generation read (docs/sessions.md "A conversation cleared under a run"):
            # the workflow sends it with each append, whose activity writes from it, so a
            # clear by anyone since is not written over (store12).
            generation = generation_read(getattr(memory, "storage", None))
            if generation is not None:
                out["generation"] = generation
            await self._check_size(out, "short-term memory load")
        except Exception as exc:
            raise self._fail(exc, "short-term memory load") from exc
        return out

    async def append(self, data: dict[str, Any]) -> dict[str, Any]:
        memory = self.durable.short_term_memory(str(data["session_id"]))
        try:
            return {"stored": await self._append(memory, data)}
        except Exception as exc:
            raise self._fail(exc, "short-term memory append") from exc

    async def _append(self, memory: Any, data: dict[str, Any]) -> bool:
        """One append of a run; whether it stored anything (not: no memory, or its key was
        applied already)."""
        messages = messages_from_text(data["messages"])
        if memory is None:
            return False
        session = str(data["session_id"])
        messages = await _heartbeating(expanded(memory, session, messages))  # stored whole
        storage = getattr(memory, "storage", None)
        if data.get("generation") is not None:  # fenced by the run's load (see load)
            expect_generation(storage, int(data["generation"]))
        append_once = getattr(storage, "append_once", None)
        if append_once is not None:  # a retried write is recognised by its key
            return bool(await _heartbeating(append_once(str(data["key"]), messages)))
        await _heartbeating(memory.append(*messages))
        return True

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
                query = content_from_text(data["query"])
                found = await _heartbeating(memory.retrieve(query, **options))
            out = {
                "messages": messages_to_text([s.message for s in found]),
                "scores": [s.score for s in found],
                "ids": [s.id for s in found],
            }
            await self._check_size(out, "long-term memory recall")
        except Exception as exc:
            raise self._fail(exc, "long-term memory recall") from exc
        return out

    async def store(self, data: dict[str, Any]) -> dict[str, Any]:
        """Store a turn in long-term memory. A memory with a decider consolidates here, in
        the activity: what it decided is the activity's result, so the run's history records
        it (``consolidations``: one report per consolidation, as plain data)."""
        memory = self.durable.long_term_memory
        with collect_consolidations() as reports:
            await self._store(memory, data)
        return {"consolidations": [asdict(r) for r in reports]} if reports else {}

    async def _store(self, memory: Any, data: dict[str, Any]) -> None:
        try:
            if memory is not None:
                messages = await self._chosen(messages_from_text(data["messages"]))
                if messages is None:
                    return
                session = str(data["session"])
                key = data.get("key")
                store_once = getattr(memory, "store_once", None)
                if key and store_once is not None:  # the memory de-duplicates by key itself
                    await _heartbeating(store_once(str(key), messages, session=session))
                else:
                    if key and not isinstance(memory, LongTermMemory):
                        # Each message's id, the same on every attempt: a retried store upserts
                        # the rows the failed attempt wrote (see MEMORY_ID_KEY). LongTermMemory
                        # ids hash the message already (the same on every attempt), and a key
                        # per turn would store the same text twice, as a plain run does not.
                        messages = [
                            replace(m, metadata={**m.metadata, MEMORY_ID_KEY: f"{key}:{i}"})
                            for i, m in enumerate(messages)
                        ]
                    await _heartbeating(memory.store(messages, session=session))
        except Exception as exc:
            raise self._fail(exc, "long-term memory store") from exc

    async def _chosen(self, turn: list[Message]) -> list[Message] | None:
        """What the agent's write policy keeps of ``turn`` (the workflow sends the user's
        messages of a turn, the prompt and any steering taken before its answer, and the
        answer: the policy is user code, so it runs here), each user message handed with its
        context as a plain run hands it (:func:`handed`), the answer kept once. None: the
        policy keeps nothing, or failed (logged, as in a plain run: nothing is stored)."""
        policy = self.options.write_policy
        users = [m for m in turn if m.role is Role.USER]
        answers = [m for m in turn if m.role is Role.ASSISTANT]
        if policy is None or not users or len(answers) != 1:
            return turn
        kept: list[Message] = []
        policy_kept: list[Message] = []  # as the policy returned them (the answer: one object)
        for said in users:
            context = {k: v for k, v in said.metadata.items() if k in _TURN_CONTEXT}
            plain = replace(said, metadata={k: v for k, v in said.metadata.items()
                                            if k not in _TURN_CONTEXT})  # fmt: skip
            try:
                chosen = policy(plain, answers[0])
                if inspect.isawaitable(chosen):
                    chosen = await _heartbeating(chosen)
            except Exception as exc:
                self.options.logger.warning(
                    "write policy failed; nothing stored: %s", described(exc)
                )
                return None
            if chosen is None:
                continue
            fresh = [m for m in chosen if not any(m is k for k in policy_kept)]
            policy_kept.extend(fresh)
            turn_id = context.pop(MEMORY_TURN_KEY, None)
            kept.extend(handed(fresh, context, turn_id if isinstance(turn_id, str) else None))
        return kept or None

    async def check_deps(self, data: dict[str, Any]) -> dict[str, Any]:
        """Resolve the run's deps spec once, when the run starts (the live deps are dropped)."""
        try:
            await _heartbeating(resolve_data(self.deps, data["deps"]))
        except Exception as exc:
            raise self._fail(exc, "deps") from exc
        return {}

    def all(self) -> list[Callable[..., Any]]:
        n = self.durable.name
        out = [
            _named(f"goagent.deps.{n}", self.check_deps),
            _named(f"goagent.model.{n}", self.model),
            _named(f"goagent.memory.load.{n}", self.load),
            _named(f"goagent.memory.append.{n}", self.append),
            _named(f"goagent.memory.recall.{n}", self.recall),
            _named(f"goagent.memory.store.{n}", self.store),
            _named(f"goagent.memory.settle.{n}", self.settle),
            _named(f"goagent.approval.{n}", self.approval),
            _named(f"goagent.guardrail.{n}", self.guardrail),
        ]
        out.extend(_named(f"goagent.tool.{n}.{t}", self.tool(t)) for t in self.tools)
        for server in self.mcp.specs:
            out.append(_named(list_activity(n, server), self.mcp_list(server)))
            out.append(_named(call_activity(n, server), self.mcp_call(server)))
        return out


def activities_for(
    agents: Iterable[DurableAgent],
    registry: ProviderRegistry,
    *,
    deps: DepsRegistry | None = None,
) -> list[Callable[..., Any]]:
    """The activities of ``agents`` (model, tools, memory, MCP, the deps check), to register on
    a worker; ``deps`` resolves the runs' deps specs (None: runs with a spec are refused).

    With your own worker, MCP servers stay connected until the process ends; a worker from
    :func:`create_worker` closes them when it stops.
    """
    return [a for group in _groups(agents, registry, deps) for a in group.all()]


def _groups(
    agents: Iterable[DurableAgent], registry: ProviderRegistry, deps: DepsRegistry | None = None
) -> list[_AgentActivities]:
    out: list[_AgentActivities] = []
    names: set[str] = set()
    for durable in agents:
        if durable.name in names:
            raise ConfigurationError(f"two durable agents are named {durable.name!r}")
        names.add(durable.name)
        out.append(_AgentActivities(durable, registry, deps or NO_DEPS))
    return out


class _Worker(Worker):
    """A worker that closes its agents' MCP connections when it stops, and, traced, ends the
    spans of the runs the server closed from outside and evicts those runs first."""

    _groups: list[_AgentActivities]
    _telemetry: Any = None  # the WorkflowTelemetry of a traced worker
    _swept = False  # the runs closed from outside ended as the worker stopped

    async def shutdown(self) -> None:
        # Before Temporal's shutdown, while the worker can still evict: the runs the server
        # closed from outside (terminated, timed out) end their spans and are evicted, so
        # their loops end on their own workflow threads, not wherever the garbage collector
        # drops them once the worker is gone (_span_ledger.py).
        if self.is_running:
            await self._end_closed_runs()
            self._evict_held()
        await super().shutdown()

    def _evict_held(self) -> None:
        """Evict every run this worker still holds, traced or not (before Temporal's shutdown,
        which hands out the evictions before it ends the workflow worker's polls): each run's
        loop then ends on its own workflow thread, in its own context, as any eviction ends
        it. A run the server closed from outside is never evicted by Temporal, and once the
        worker was dropped the garbage collector closed its coroutines wherever it ran next:
        their ``finally`` blocks raised and logged there (a context variable reset in another
        context, a memory append with no event loop). A run still going on is replayed by the
        next worker that picks it up, as after any eviction."""
        for run_id in list(getattr(self._workflow_worker, "_running_workflows", None) or ()):
            self._evict(run_id)

    async def _end_closed_runs(self) -> None:
        if self._telemetry is None or self._swept:
            return
        self._swept = True  # once: shutdown() sweeps, then run() ends
        try:
            await self._telemetry.ledger.stop(self.client)
        except Exception as exc:  # telemetry never hides why the worker stopped
            logging.getLogger("goagent_py.durable").warning(
                "ending the spans of closed runs failed: %s", exc
            )

    def _evict(self, run_id: str) -> None:
        # Temporal's Worker has no public eviction: its core worker's, which it evicts with.
        try:
            self._bridge_worker.request_workflow_eviction(run_id)
        except Exception as exc:  # a run the worker no longer holds, a core shutting down
            logging.getLogger("goagent_py.durable").debug(
                "could not evict workflow run %s: %s", run_id, exc
            )

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            # Stopped without shutdown() (its task cancelled): the spans still end here.
            await self._end_closed_runs()
            for group in self._groups:
                try:
                    await group.mcp.aclose()
                except Exception as exc:  # closing must not hide why the worker stopped
                    group.options.logger.warning("closing MCP servers failed: %s", exc)


def sandbox_runner() -> Any:
    """Temporal's sandboxed workflow runner with goagent-py (and pydantic) passed through."""
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    # opentelemetry too: the telemetry hooks (goagent_py.otel) hold its context variables, and
    # a copy imported in the sandbox would have context variables of its own.
    restrictions = SandboxRestrictions.default.with_passthrough_modules(
        "goagent_py",
        "pydantic",
        "pydantic_core",
        "annotated_types",
        "typing_extensions",
        "opentelemetry",
    )
    return SandboxedWorkflowRunner(restrictions=restrictions)


def create_worker(
    client: Any,
    agents: Sequence[DurableAgent],
    *,
    registry: ProviderRegistry | None = None,
    task_queue: str | None = None,
    deps: DepsRegistry | None = None,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    capture_content: bool | None = None,
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
        deps: the resolvers of the runs' deps specs (:class:`~goagent_py.durable.DepsRegistry`;
            None: a run started with ``deps=`` fails before its first model call).
        tracer_provider: trace the runs this worker runs, as :func:`goagent_py.otel.instrument`
            traces a plain run (``invoke_agent``, ``chat``, ``execute_tool``, memory spans),
            each under the span that was current where the run was started. Must be
            Temporal's replay-safe provider
            (``temporalio.contrib.opentelemetry.create_tracer_provider()``), so a replayed
            history records nothing twice (docs/scaling-out.md, "Tracing durable runs").
            None: no spans.
        meter_provider: the runs' GenAI metrics (wrapped in Temporal's
            ``ReplaySafeMeterProvider``); None: none (never the global provider, which would
            record every replayed operation again). Only with ``tracer_provider``.
        capture_content: record content in the spans, as ``instrument(capture_content=...)``.
        **worker_options: passed to ``temporalio.worker.Worker``. Its
            ``sticky_queue_schedule_to_start_timeout`` defaults to 1 s here (Temporal's own
            default is 10 s): a workflow task waiting for a worker that died goes to another
            worker after that long. A call that was in flight on the dead worker is retried
            elsewhere, and its retry sends the run's next workflow task to any worker at once,
            so such a run continues within ``heartbeat_timeout + retry_interval`` and its own
            work (docs/scaling-out.md, "Recovery after a worker crash"). A busier worker may see
            more of its tasks move to another worker (which then replays the run's history):
            raise it for long histories on loaded workers.
    """
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
    groups = _groups(agents, registry or ProviderRegistry.default(), deps)
    if tracer_provider is not None:
        from ._telemetry import telemetry_for

        telemetry = telemetry_for(tracer_provider, meter_provider, capture_content)
        worker_options["interceptors"] = [*worker_options.get("interceptors", ()), telemetry]
    elif meter_provider is not None or capture_content is not None:
        raise ConfigurationError(
            "create_worker: meter_provider= and capture_content= go with tracer_provider="
        )
    worker_options.setdefault("sticky_queue_schedule_to_start_timeout", _STICKY_TIMEOUT)
    # Built here, not in the first workflow task that decodes messages: a cold build there
    # ran past Temporal's 2 s deadlock check on a busy machine and failed the task.
    build_codec()
    worker = _Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentWorkflow],
        activities=[a for group in groups for a in group.all()],
        workflow_runner=worker_options.pop("workflow_runner", None) or sandbox_runner(),
        **worker_options,
    )
    worker._groups = groups
    if tracer_provider is not None:
        worker._telemetry = telemetry
        telemetry.ledger.evict = worker._evict
    return worker
