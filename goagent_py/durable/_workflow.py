"""The workflow side: the unchanged loop, with a provider, tools and memories made of activities.

Only decisions run here (the loop's state machine, deterministic on replay); every effect is an
activity whose result Temporal records, so a replay after a crash reuses what completed and
re-runs only what had not. Each tool call gets the idempotency key
``<workflow id>:<iteration>:<call id>``, the same on every attempt and every replay.

goagent-py is passed through Temporal's sandbox (see :func:`sandbox_runner`): its modules are
shared with the worker, not re-imported per workflow. The loop's own run id (a uuid) and its
timings are therefore not replay-stable; nothing that reaches a command depends on them.
"""

from __future__ import annotations

import asyncio
import contextvars
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    FailureError,
    is_cancelled_exception,
)

from goagent_py._cancel import run_cancelled
from goagent_py._control import AbortMode, RunControl
from goagent_py._loop import Run
from goagent_py._metadata_keys import DECISIONS_KEY
from goagent_py._prompt import to_messages
from goagent_py._transcript import closing_tail
from goagent_py.agent import Agent
from goagent_py.approvals import (
    Approve,
    Deny,
    ToolDecision,
    check_decisions,
    pending_of,
    same_verdict,
    verdict_of,
)
from goagent_py.dispatch import DispatchFunc
from goagent_py.errors import (
    ApprovalConflictError,
    ApprovalError,
    ApprovalExpiredError,
    ConfigurationError,
    ConversationClearedError,
    GoAgentError,
    GuardrailTripped,
    InvalidInputError,
    MaxIterationsError,
    MemoryStoreError,
    NotPendingError,
    ProviderError,
)
from goagent_py.guardrails import GuardrailContext, GuardrailResult
from goagent_py.hooks import Hooks, ProviderEvent, ToolResult
from goagent_py.memory.base import MessageMatch, MessageUpdate
from goagent_py.messages import (
    ContentBlock,
    Message,
    Role,
    ScoredMessage,
    StopReason,
    TextBlock,
    ToolCall,
)
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.results import PendingCall
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import ToolDefinition

from ._mcp import call_activity, listed_definitions
from ._results import PREVIEW, REFS_KEY, digest_of, marked, reference_of
from ._telemetry import traced, with_telemetry, workflow_hooks
from ._wire import (  # names shared with the client
    ABORT_SIGNAL,
    DECIDE_UPDATE,
    EVENTS_QUERY,
    EVENTS_UPDATE,
    FOLLOW_UP_SIGNAL,
    HISTORY_REF_KEY,
    PENDING_QUERY,
    STATE_QUERY,
    STEER_SIGNAL,
    WORKFLOW_NAME,
    ErrorData,
    PayloadTooLargeError,
    check_size,
    content_from_text,
    content_to_text,
    decision_from_data,
    decision_to_data,
    definition_from_data,
    history_digest,
    messages_from_text,
    messages_to_text,
    request_to_data,
    response_from_data,
    stand_in,
    tool_error_from_data,
    usage_from_data,
    usage_to_data,
)

# The patch marker of the append that closes a loaded history's open tail (review6a).
CLOSING_APPEND_PATCH = "goagent.closing-append"
# The patch marker of input guardrails on steered messages (a guardrail activity per take).
GUARD_TAKEN_PATCH = "goagent.guard-taken"
# The patch marker of queued messages recalled for and stored as the user's words (review17).
SAID_TAKEN_PATCH = "goagent.said-taken"
# The patch marker of a cancellation that closes the wait it landed in (durable11).
CANCEL_CLOSES_WAIT_PATCH = "goagent.cancel-closes-wait"
# The patch marker of steer and follow-up signals refused when their text is empty (durotel16).
BLANK_SIGNAL_PATCH = "goagent.blank-signal-refused"
_NON_RETRYABLE = ("ConfigurationError", "PayloadTooLargeError", "MissingExtraError")
# Carried appends bigger than this are appended before the model call, not carried by it
# (the run's new messages would otherwise cross twice: in the request and in the appends).
_CARRY_WHOLE = 64 * 1024
_EVENT_TEXT = PREVIEW  # characters of a tool result kept in an event (events live in the workflow)
# The call a tool proxy runs: set by the dispatch middleware in the call's own task.
_CALL: contextvars.ContextVar[ToolCall | None] = contextvars.ContextVar(
    "goagent_durable_call", default=None
)


def _limits(config: dict[str, Any]) -> dict[str, int]:
    """The payload limits of what the workflow sends: the agent's, and the server's own (asked
    by the client that started the run; 0: not known)."""
    return {
        "limit": int(config["payload_limit"]),
        "server_limit": int(config.get("server_payload_limit") or 0),
    }


def _error_of(exc: ActivityError) -> ErrorData:
    cause = exc.cause
    if isinstance(cause, ApplicationError) and cause.details:
        detail = cause.details[0]
        if isinstance(detail, dict):
            return ErrorData.from_data(detail)
    if isinstance(cause, FailureError):
        return ErrorData(type(cause).__name__, cause.message, True)
    return ErrorData(type(exc).__name__, str(exc), True)


class _Calls:
    """What the proxies of one run share: the config, the current iteration and call."""

    def __init__(
        self,
        config: dict[str, Any],
        run_id: str,
        events: list[dict[str, Any]] | None = None,
        deps: dict[str, Any] | None = None,
    ) -> None:
        self.config = config
        # The run's deps spec as plain data (the workers resolve it; see _deps.py), or None.
        self.deps = deps
        self.agent = str(config["agent"])
        self.run_id = run_id
        self.iteration = 0
        # Derived only from recorded results, so a replay rebuilds the same list.
        self.events: list[dict[str, Any]] = events if events is not None else []
        self.call = _CALL
        # The content a worker recorded for a failed call, by call id (it may differ from the
        # error's text: the worker's after_tool_call can replace it).
        self.failed_content: dict[str, list[ContentBlock]] = {}
        # The start of each result that crossed by reference, by call id (for its event).
        self.previews: dict[str, str] = {}
        # The digest of each result a tool activity stored and answered by reference, by call
        # id (from its recorded answer): only these tool messages are marked as references.
        self.refs: dict[str, str] = {}
        # The approval checks the workers made for the calls of the current message, by call
        # id: (the model's arguments, the validated ones or None when they failed validation,
        # whether the call waits).
        self.checked: dict[str, tuple[dict[str, Any], dict[str, Any] | None, bool]] = {}
        # The file each checked call's path led to on the worker (a file tool's: what an
        # approval covers, PendingCall.resolved), by call id; "" for another tool.
        self.resolved: dict[str, str] = {}
        # The (path, file) each approved call is bound to, sent with its tool activity: the
        # worker refuses it when the path now leads elsewhere (approve15).
        self.bound: dict[str, tuple[str, str]] = {}
        # The calls holding a place in a file's line, by the path they name, in call order:
        # a queued tool's call runs its activity after those before it (see _ToolProxy.reserve).
        self.lines: dict[str, list[asyncio.Future[None]]] = {}
        self.ahead: dict[str, list[asyncio.Future[None]]] = {}
        self.checks = set(config.get("approval_checks", ()))
        self.last_message: Message | None = None
        self.short_term: _ShortTermProxy | None = None  # set by _agent_for

    async def prepare(self, call: ToolCall) -> dict[str, Any] | None:
        """The loop's ``prepare_arguments`` in the workflow: a call of a tool that may need a
        person is validated and checked on a worker (``goagent.approval.<agent>``, recorded,
        once per call), so the wait lists validated arguments and the worker's predicate or
        policy decides. Other calls (and edited ones) pass unchanged: their tool activity
        validates them."""
        if call.name not in self.checks and "*" not in self.checks:
            return None
        if call.id not in self.checked:
            data: dict[str, Any] = {
                "tool": call.name,
                "call_id": call.id,
                "arguments": call.arguments,
                "run_id": self.run_id,
                "iteration": self.iteration,
            }
            if self.last_message is not None:
                data["message"] = messages_to_text([self.last_message])
            check_size(data, f"tool {call.name!r} approval check", **_limits(self.config))
            try:
                out = await self.activity(f"goagent.approval.{self.agent}", data, "tool_timeout")
            except ActivityError as exc:
                error = _error_of(exc)
                # Fail closed, as a plain run's check that raises: the call waits.
                out = {"arguments": call.arguments, "wait": True, "error": error.message}
            self.checked[call.id] = (dict(call.arguments), out["arguments"], bool(out["wait"]))
            self.resolved[call.id] = str(out.get("resolved") or "")  # none in older histories
        raw, validated, _ = self.checked[call.id]
        return validated if call.arguments == raw else None

    def needs_approval(self, call: ToolCall, run: Any) -> bool:
        """The loop's approval policy in the workflow: what the worker's check said."""
        found = self.checked.get(call.id)
        return found is not None and found[2]

    def after_tool_call(self, result: ToolResult) -> ToolResult | None:
        """Give a failed call the content its activity recorded."""
        content = self.failed_content.pop(result.call.id, None)
        return None if content is None else replace(result, content=content)

    def marked(self, messages: Sequence[Message]) -> list[Message]:
        """``messages`` with the tool messages whose content a tool activity answered by
        reference marked so (the workers and the client put the content back); a tool's own
        output that reads like a reference is not marked, and stays data."""
        out: list[Message] = []
        for m in messages:
            digest = self.refs.get(m.tool_call_id) if m.role is Role.TOOL else None
            fits = digest is not None and digest_of(m.content) == digest
            if fits and digest is not None and REFS_KEY not in m.metadata:
                m = marked(m, digest)
            out.append(m)
        return out

    def on_iteration_start(self, iteration: int) -> None:
        self.iteration = iteration
        self.events.append({"type": "turn_start", "iteration": iteration})

    def on_provider_response(self, iteration: int, event: ProviderEvent) -> None:
        if event.message is None:
            return
        self.last_message = event.message
        # The checks belong to the calls of one message: a later message's call may reuse an
        # id (local models' servers number calls per turn) and must be checked, and may wait,
        # again; a call cached by its id alone ran unasked (review9c).
        self.checked = {}
        self.resolved = {}
        self.events.append(
            {
                "type": "message",
                "iteration": iteration,
                "text": event.message.text,
                "tool_calls": [c.name for c in event.message.tool_calls],
                "stop_reason": None if event.stop_reason is None else str(event.stop_reason),
            }
        )

    def on_tool_result(self, result: ToolResult) -> None:
        text = self.previews.pop(result.call.id, None)
        if text is None:
            text = "".join(b.text for b in result.content if isinstance(b, TextBlock))
        self.events.append(
            {
                "type": "tool_result",
                "iteration": self.iteration,
                "tool": result.call.name,
                "call_id": result.call.id,
                "is_error": result.error is not None,
                "text": text[:_EVENT_TEXT],
            }
        )

    def middleware(self, next_call: DispatchFunc) -> DispatchFunc:
        """Tell the tool proxy which call it runs (the Tool protocol passes only arguments)."""

        async def run(call: ToolCall) -> list[ContentBlock]:
            token = self.call.set(call)
            try:
                return await next_call(call)
            finally:
                if workflow.in_workflow():
                    self.call.reset(token)
                # else: a run its worker dropped unevicted (closed from outside, on a worker
                # of yours), closed by the garbage collector in whatever context it runs in:
                # nothing of ours to restore there.

        return run

    async def activity(
        self, name: str, data: dict[str, Any], timeout_key: str, *, local: bool = False
    ) -> Any:
        """Run activity ``name``; ``local``: as a local activity where the run's config allows
        it (it runs on the worker that runs the workflow task, without a round trip through
        the server, and is recorded when that task completes)."""
        c = self.config
        heartbeat = c.get("heartbeat_timeout")
        data = traced(data)
        try:
            if local and c.get("local_memory_activities"):
                try:
                    return await self._execute_local(name, data, c, timeout_key)
                except FailureError as exc:
                    if isinstance(exc, ActivityError):
                        raise
                    # A local activity's final failure reaches the workflow bare, not in an
                    # ActivityError as an activity's does: wrapped, every caller reads it as
                    # it reads an activity's (store12: a refused append failed the run).
                    raise _wrapped(name, exc) from exc
            return await self._execute(name, data, c, timeout_key, heartbeat)
        except ActivityError as exc:
            # An abort (or a cancelled workflow) reaches an awaited activity as an ActivityError;
            # the loop must see a cancellation, not a tool or model failure to carry on from.
            if is_cancelled_exception(exc):
                raise run_cancelled(f"{name} was cancelled") from exc
            raise

    async def _execute(
        self, name: str, data: dict[str, Any], c: dict[str, Any], timeout_key: str, heartbeat: Any
    ) -> Any:
        return await workflow.execute_activity(
            name,
            data,
            start_to_close_timeout=timedelta(seconds=float(c[timeout_key])),
            heartbeat_timeout=None if heartbeat is None else timedelta(seconds=float(heartbeat)),
            retry_policy=_retry_policy(c),
        )

    async def _execute_local(
        self, name: str, data: dict[str, Any], c: dict[str, Any], timeout_key: str
    ) -> Any:
        return await workflow.execute_local_activity(
            name,
            data,
            start_to_close_timeout=timedelta(seconds=float(c[timeout_key])),
            retry_policy=_retry_policy(c),
        )


def _wrapped(name: str, failure: FailureError) -> ActivityError:
    """``failure`` (a local activity's, as it arrives) in the ActivityError an activity's
    failure arrives in (its cause: the failure, as :func:`_error_of` reads it)."""
    return ActivityError(
        f"local activity {name} failed",
        scheduled_event_id=0,
        started_event_id=0,
        identity="",
        activity_type=name,
        activity_id="",
        retry_state=None,
    )


def _retry_policy(c: dict[str, Any]) -> RetryPolicy:
    return RetryPolicy(
        # Runs started before retry_interval existed waited 1 s.
        initial_interval=timedelta(seconds=float(c.get("retry_interval", 1.0))),
        maximum_interval=timedelta(seconds=float(c["max_retry_delay"])),
        maximum_attempts=int(c["max_attempts"]),
        non_retryable_error_types=_NON_RETRYABLE,
    )


class _ModelProxy:
    """A provider whose ``complete`` is the activity ``goagent.model.<agent>``."""

    def __init__(self, calls: _Calls, session_id: str) -> None:
        self._calls = calls
        self._session = session_id
        # What telemetry names the provider (``gen_ai.provider.name``; otel's
        # ``provider_name_of`` reads it): the provider of the run's spec, by the prefix the
        # workers' registry builds it under ("anthropic:...", "openai:..."), never this proxy.
        self.provider_name = spec_provider(str(calls.config["provider"]))

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        calls = self._calls
        if calls.refs:
            request = replace(request, messages=calls.marked(request.messages))
        # The history's messages are stand-ins: the activity reads them from the session.
        data = {
            "provider": calls.config["provider"],
            "request": request_to_data(request),
            "session_id": self._session,
        }
        what = f"model {request.model!r} request"
        memory = calls.short_term
        if memory is not None and memory.generation is not None:
            data["generation"] = memory.generation  # its history was read at that one
        # The run's appends since the last model call ride on this one (keyed: a retry is
        # harmless); what the activity did not apply, the workflow appends itself, in order.
        carried = [] if memory is None else memory.take()
        if memory is not None and memory.refs:
            if carried:
                try:
                    check_size(carried, what, _CARRY_WHOLE)
                except PayloadTooLargeError:
                    # Big new messages (a tool read a file): stored first, by local activity
                    # (its input is not recorded), so they cross here as stand-ins, not twice.
                    await memory.append_now(carried)
                    carried = []
            # The run's own stored messages are stand-ins too (not those carried here: a
            # worker of a version before carried appends does not apply them).
            data["request"] = request_to_data(memory.by_reference(request))
            if calls.config.get("block_refs"):  # a big thinking block stays on the workers
                data["refs"] = True
        if carried:
            try:
                check_size({**data, "appends": carried}, what, **_limits(calls.config))
                data["appends"] = carried
            except PayloadTooLargeError:  # too big to ride along: appended on their own
                assert memory is not None
                await memory.append_now(carried)
                carried = []
                if memory.refs:  # now stored: stand-ins the activity reads back
                    data["request"] = request_to_data(memory.by_reference(request))
        if not carried:
            check_size(data, what, **_limits(calls.config))
        try:
            out = await calls.activity(f"goagent.model.{calls.agent}", data, "model_timeout")
        except BaseException as exc:
            if memory is not None:  # appended when the run ends, in order (keyed)
                memory.give_back(carried)
            if not isinstance(exc, ActivityError):
                raise
            error = _error_of(exc)
            raise ProviderError(
                f"model {request.model!r} failed ({error.type}): {error.message}",
                provider=calls.config["provider"],
                status=error.status,
                error_type=str(error.extra.get("error_type", "")),
                retry_after=error.retry_after,
            ) from None
        if memory is not None:
            applied = int(out.get("appended", 0))
            memory.applied(carried[:applied])
            await memory.append_now(carried[applied:])
        return response_from_data(out)


def spec_provider(spec: str) -> str:
    """The provider a spec names (``"anthropic:claude-..."`` -> ``"anthropic"``): its prefix,
    which :class:`~goagent_py.durable.ProviderRegistry` resolves it by."""
    return spec.partition(":")[0] or spec


class _ToolProxy:
    """A tool whose ``execute`` is an activity: ``goagent.tool.<agent>.<tool>`` for the agent's
    own tools, ``goagent.mcp.call.<agent>.<server>`` for an MCP server's."""

    def __init__(
        self, calls: _Calls, definition: ToolDefinition, activity: str | None = None
    ) -> None:
        self._calls = calls
        self._definition = definition
        self._activity = activity or f"goagent.tool.{calls.agent}.{definition.name}"
        # A tool the client runs: its calls wait for the client's output (ToolOutput).
        self.external = definition.name in calls.config.get("external_tools", ())

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    def resolved_for(self, call: ToolCall) -> str:
        """The file ``call``'s path led to when a worker checked it for approval (the files
        are the workers'): what the wait records (``_call_gates.resolved_path``)."""
        return self._calls.resolved.get(call.id, "")

    def reserve(self, call: ToolCall) -> Callable[[], None] | None:
        """Take ``call``'s place in its path's line (the loop calls this at the start of each
        call's task, in the order the model gave the calls: ``_call_gates.take_place``): its
        activity is started once the calls before it on that path have ended, so two writes
        to one file in one batch reach the worker's write queue in call order, as in a plain
        run. Only for a tool that queues its calls on the workers (``queued_tools``)."""
        calls = self._calls
        path = call.arguments.get("path")
        if self._definition.name not in calls.config.get("queued_tools", ()):
            return None
        if not isinstance(path, str) or not path:
            return None
        # One line per file as the workflow can tell (it has no files to resolve against):
        # "plan.md", "./plan.md" and "docs/../plan.md" are one line. Two names that only the
        # worker's files make one (a symlink) are ordered by the worker's own write queue.
        path = posixpath.normpath(path)
        line = calls.lines.setdefault(path, [])
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        calls.ahead[call.id] = list(line)
        line.append(mine)

        def release() -> None:
            calls.ahead.pop(call.id, None)
            if not mine.done():
                mine.set_result(None)
            if mine in line:
                line.remove(mine)
            if not line and calls.lines.get(path) is line:
                del calls.lines[path]

        return release

    def bind_file(self, call: ToolCall, path: str, approved: str) -> None:
        """Send ``call``'s binding to the file it was approved on with its activity: the
        worker checks it where the file is (``_call_gates.moved_reason``)."""
        self._calls.bound[call.id] = (path, approved)

    async def execute(self, args: dict[str, Any]) -> list[ContentBlock]:
        calls = self._calls
        name = self._definition.name
        call = calls.call.get() or ToolCall("", name, args)
        ahead = calls.ahead.pop(call.id, None)
        if ahead:  # the calls before it on its file: they end first (see reserve)
            await asyncio.gather(*ahead)
        data: dict[str, Any] = {
            "tool": name,
            "call_id": call.id,
            "arguments": args,
            "run_id": calls.run_id,
            "iteration": calls.iteration,
        }
        if calls.deps is not None:
            data["deps"] = calls.deps
        # Whether the run checked the call for approval (or a person decided it): a worker
        # whose definition makes an unasked call wait does not run it (durable11).
        data["asked"] = call.id in calls.checked
        bound = calls.bound.pop(call.id, None)
        if bound is not None:  # an activity input only: no new command, replays as before
            data["bound"] = list(bound)
        memory = calls.short_term
        if calls.config.get("block_refs") and memory is not None and memory.refs:
            # A big result is stored on the workers; its reference crosses (issue 30).
            data["refs"] = True
            data["session_id"] = memory.session_id
            if memory.generation is not None:  # a result stored after a clear is refused
                data["generation"] = memory.generation
        if calls.config.get("gate_sees_message"):
            # The worker's before_tool_call takes (call, assistant message): send the message.
            data["message"] = messages_to_text(_assistant_message(call.id))
        check_size(data, f"tool {name!r} arguments", **_limits(calls.config))
        try:
            out = await calls.activity(self._activity, data, "tool_timeout")
        except ActivityError as exc:
            raise tool_error_from_data(name, _error_of(exc)) from None
        ctx = current_tool_context()
        if ctx is not None and ctx.call.id == call.id:  # what the tool told its context
            if out.get("terminate"):
                ctx.terminate()
            if "details" in out:
                ctx.set_details(out["details"])
            if out.get("usage"):
                ctx.add_usage(usage_from_data(out["usage"]))
        if "preview" in out and call.id:
            calls.previews[call.id] = str(out["preview"])
            # A run recorded before "ref" (dur7) answered a reference with its preview.
            digest = out.get("ref") or digest_of(content_from_text(out["content"]))
            if digest is not None:
                calls.refs[call.id] = str(digest)
        error = out.get("error")
        if error is not None:  # an error for the model, recorded as the call's outcome
            if call.id:
                calls.failed_content[call.id] = content_from_text(out["content"])
            raise tool_error_from_data(name, ErrorData.from_data(error))
        return content_from_text(out["content"])


def _assistant_message(call_id: str) -> list[Message]:
    """The assistant message that made the call ``call_id`` (from the run's transcript)."""
    ctx = current_tool_context()
    for message in reversed(ctx.transcript() if ctx is not None else []):
        if message.role == Role.ASSISTANT and any(c.id == call_id for c in message.tool_calls):
            return [message]
    return []


class _ShortTermProxy:
    """Short-term memory whose reads and writes are activities (the worker applies the window).

    Where the run's config allows it (``local_memory_activities``), the load is a local
    activity (a read: running it again is harmless), and so is an append when the load said the
    worker's storage applies a keyed append once (``append_once``, or no storage): a local
    activity runs again if its workflow task fails, and only a keyed write makes that harmless.

    Where the config also says ``carry_appends``, a keyed append waits for the run's next model
    call, whose activity applies it (by its key) before it calls the model: a step costs no
    append of its own. What no model call carried is appended by local activity when the run
    ends (:meth:`flush`), and before a claim; a worker without short-term memory (the load
    says so) is sent no appends at all.
    """

    def __init__(self, calls: _Calls, session_id: str) -> None:
        self._calls = calls
        self._session = self.session_id = session_id
        self._appends = 0
        # From the load's recorded result: the same on replay.
        self._keyed = False
        self._stores = True
        self._carry = bool(calls.config.get("carry_appends"))
        self._waiting: list[dict[str, Any]] = []  # appends for the next model call to carry
        self._loaded: list[Message] = []
        # Whether the run's own messages cross by reference (issue 30; a run started without
        # the key replays as it ran), the digests of those stored (each from a recorded
        # result: the same on replay), and of each append, by its key.
        self.refs = bool(calls.config.get("run_refs"))
        self._stored: set[str] = set()
        self._digests: dict[str, list[str]] = {}
        self._known: dict[int, tuple[Message, str]] = {}  # id -> (message, digest)
        # The results that close the calls the loaded history ends on (the loop appends them
        # first, since review6a): a run that began before that replays without the append.
        self._closing: list[Message] = []
        # The clear counter of the conversation the run loaded (docs/sessions.md "A
        # conversation cleared under a run"), from the load's recorded result: sent with each
        # append and model call, whose activities refuse to write over (or read back from) a
        # clear made since. Only activity inputs change: no new command, no patch marker.
        self.generation: int | None = None
        # A resume's: the clear counter when its run stopped to wait (approve14). Its claim
        # is fenced by it: a clear during the wait refuses the decision, refill or not.
        self.waited_at: int | None = None
        calls.short_term = self

    async def messages(self) -> list[Message]:
        data: dict[str, Any] = {"session_id": self._session}
        if self.refs:  # the closed turns that lead the window: one stand-in (issue 30)
            data["ranges"] = True
        out = await self._memory("load", data, local=True)
        self._keyed = bool(out.get("keyed", False))
        self._stores = bool(out.get("stores", True))
        generation = out.get("generation")  # a worker before store12 sends none: unfenced
        self.generation = None if generation is None else int(generation)
        self._loaded = messages_from_text(out["messages"])
        self._closing = closing_tail(self._loaded)
        return list(self._loaded)

    def _digest(self, message: Message) -> str:
        found = self._known.get(id(message))
        if found is not None and found[0] is message:
            return found[1]
        digest = history_digest(message)
        self._known[id(message)] = (message, digest)  # held: its id is not reused meanwhile
        return digest

    def applied(self, appends: list[dict[str, Any]]) -> None:
        """``appends`` are stored (an activity said so): their messages may be stand-ins."""
        for data in appends:
            self._stored.update(self._digests.get(str(data["key"]), ()))

    def by_reference(self, request: CompletionRequest) -> CompletionRequest:
        """``request`` with each message of this run that a recorded result says is stored
        as a stand-in (the model activity reads it back): what crosses does not grow with the
        run's bytes, only with its messages since the last call."""
        known = self._stored
        if not known:
            return request
        messages: list[Message] = []
        for m in request.messages:
            if HISTORY_REF_KEY not in m.metadata:
                digest = self._digest(m)
                if digest in known:
                    m = stand_in(m, digest)
            messages.append(m)
        return replace(request, messages=messages)

    def lean(self, messages: Sequence[Message]) -> list[Message]:
        """``messages`` with the stored ones as stand-ins (a result too big to record)."""
        return [
            stand_in(m, d)
            if HISTORY_REF_KEY not in m.metadata and (d := self._digest(m)) in self._stored
            else m
            for m in messages
        ]

    def give_back(self, appends: list[dict[str, Any]]) -> None:
        """Put taken appends back, before any made since."""
        self._waiting[:0] = appends

    def take(self) -> list[dict[str, Any]]:
        """The appends waiting for a model call to carry them (taken: the caller applies them,
        or hands back what was not applied to :meth:`append_now`)."""
        waiting, self._waiting = self._waiting, []
        return waiting

    async def append_now(self, appends: list[dict[str, Any]]) -> None:
        """Append ``appends`` here, in order, by local activity (keyed: one a worker applied
        already is skipped). A failure is logged, as the loop logs a failed append. A
        cancellation hands the one it reached, and the rest, back to wait (the run's end appends
        them; keyed, so one that was applied before the cancellation is skipped then)."""
        for i, data in enumerate(appends):
            try:
                await self._memory("append", data, local=True)
                self.applied([data])
            except MemoryStoreError as exc:  # its message names the append already
                workflow.logger.warning("%s", exc)
            except BaseException:
                self.give_back(appends[i:])
                raise

    async def flush(self) -> None:
        """Append what no model call carried (the run's last messages)."""
        await self.append_now(self.take())

    async def update_where(self, match: MessageMatch, update: MessageUpdate) -> Message | None:
        """The claim of a resume, on the worker's storage: the newest loaded stand-in that
        ``match`` accepts is changed here (its wait settled), and the worker replaces the
        stored message it stands for, if that still waits (``goagent.memory.settle``: a
        compare-and-set in the storage's transaction). Returns the stand-in of the stored
        result (its new digest), or None when the stored message was settled by someone else."""
        found = next((m for m in reversed(self._loaded) if match(m)), None)
        if found is None:
            return None
        await self.flush()
        changed = update(found)
        token, _ = pending_of(found)
        data = {
            "session_id": self._session,
            "ref": found.metadata.get(HISTORY_REF_KEY, ""),
            "token": token,
            "decisions": changed.metadata.get(DECISIONS_KEY, {}),
            "call_ids": [c.id for c in found.tool_calls],
            # Whose claim it is (the same on every retry and replay): a retry that finds the
            # wait settled takes it as its own only if this claim settled it (durable11).
            "claim": f"{self._calls.run_id}:claim:{token}",
        }
        fence = self.waited_at if self.waited_at is not None else self.generation
        if fence is not None:  # a clear since the wait (or the run's load) refuses the claim
            data["generation"] = fence
        out = await self._memory("settle", data, local=False)
        if not out.get("found"):
            return None
        metadata = {HISTORY_REF_KEY: out["ref"], DECISIONS_KEY: data["decisions"]}
        return replace(found, metadata=metadata)

    async def append(self, *messages: Message) -> None:
        if not workflow.in_workflow():
            # A run its worker dropped unevicted (closed from outside), closed by the garbage
            # collector: its workflow is gone and nothing can be stored from here (the next
            # run of the session closes the turn it left open).
            return
        if self._closing and not self._appends and list(messages) == self._closing:
            self._closing = []
            # A history recorded before the loop closed an open tail has no marker here and
            # no append: replayed, the run goes on as it ran (the tail stays open in storage).
            if not workflow.patched(CLOSING_APPEND_PATCH):
                return
        if self._calls.refs:
            messages = tuple(self._calls.marked(messages))
        # The n-th append of the run (a loop may append once per run, or message by message):
        # the key lets a storage with append_once skip a retried write, and only that.
        self._appends += 1
        key = f"{self._calls.run_id}:persist:{self._appends}"
        data: dict[str, Any] = {
            "session_id": self._session,
            "messages": messages_to_text(messages),
            "key": key,
        }
        if self.generation is not None:
            data["generation"] = self.generation
        check_size(data, "short-term memory append", **_limits(self._calls.config))
        if self._carry and not self._stores:
            return  # the workers keep no history (the load said so)
        if self.refs:  # a result by reference is stored expanded: it stays a reference here
            self._digests[key] = [history_digest(m) for m in messages if not reference_of(m)]
        if self._carry and self._keyed:
            self._waiting.append(data)
            return
        await self._memory("append", data, local=self._keyed)
        self.applied([data])

    async def _memory(self, op: str, data: dict[str, Any], *, local: bool) -> Any:
        calls = self._calls
        try:
            return await calls.activity(
                f"goagent.memory.{op}.{calls.agent}", data, "tool_timeout", local=local
            )
        except ActivityError as exc:
            error = _error_of(exc)
            what = f"short-term memory {op}"
            message = error.message.removeprefix(f"{what}: ")  # named once, here
            if error.type == "ConversationClearedError":  # what a plain run's append raises
                raise ConversationClearedError(
                    f"{what} failed: {message}", session_id=self._session
                ) from None
            raise MemoryStoreError(f"{what} failed: {message}") from None


class _LongTermProxy:
    """Long-term memory whose recall and store are activities."""

    def __init__(self, calls: _Calls) -> None:
        self._calls = calls
        self._stores = 0

    async def retrieve(
        self, query: list[ContentBlock], *, top_k: int, session: str = ""
    ) -> list[ScoredMessage]:
        data = {"query": content_to_text(query), "top_k": top_k, "session": session}
        out = await self._memory("recall", data)
        found = messages_from_text(out["messages"])
        return [
            ScoredMessage(m, float(s), str(i))
            for m, s, i in zip(found, out["scores"], out["ids"], strict=True)
        ]

    async def store(self, messages: list[Message], *, session: str = "") -> None:
        # The n-th store of the run: its key (the same on every retry and replay) gives each
        # message a deterministic id, so a retried store upserts instead of duplicating.
        self._stores += 1
        key = f"{self._calls.run_id}:store:{self._stores}"
        data = {"messages": messages_to_text(messages), "session": session, "key": key}
        await self._memory("store", data)

    async def _memory(self, op: str, data: dict[str, Any]) -> Any:
        calls = self._calls
        try:
            return await calls.activity(f"goagent.memory.{op}.{calls.agent}", data, "tool_timeout")
        except ActivityError as exc:
            error = _error_of(exc)
            raise MemoryStoreError(f"long-term memory {op} failed: {error.message}") from None


class _GuardrailProxy:
    """A guardrail whose check is the activity ``goagent.guardrail.<agent>``: the worker runs
    its own guardrail (user code, often a model call) and records the verdict."""

    def __init__(self, calls: _Calls, kind: str, index: int, name: str) -> None:
        self._calls = calls
        self._kind = kind
        self._index = index
        self.name = name

    async def __call__(self, value: Any, ctx: GuardrailContext) -> GuardrailResult:
        calls = self._calls
        data: dict[str, Any] = {"kind": self._kind, "index": self._index, "text": ctx.text}
        if self._kind == "input":
            data["prompt"] = messages_to_text(value)
        check_size(data, f"guardrail {self.name!r} input", **_limits(calls.config))
        try:
            out = await calls.activity(f"goagent.guardrail.{calls.agent}", data, "tool_timeout")
        except ActivityError as exc:  # fail closed, as a plain run's guardrail that raises
            error = _error_of(exc)
            return GuardrailResult(True, f"the check failed ({error.type}): {error.message}")
        return GuardrailResult(bool(out["tripped"]), str(out["reason"]), out.get("info"))


def _agent_for(
    config: dict[str, Any],
    calls: _Calls,
    session_id: str,
    mcp: Sequence[tuple[str, ToolDefinition]] = (),
) -> Agent:
    thinking = config.get("thinking")
    tools = [_ToolProxy(calls, definition_from_data(t)) for t in config["tools"]]
    tools += [_ToolProxy(calls, d, call_activity(calls.agent, server)) for server, d in mcp]
    settings: dict[str, Any] = {
        "provider": _ModelProxy(calls, session_id),
        "model": config["model"],
        "name": config["agent"],
        "system_prompt": config.get("system_prompt", ""),
        "max_iterations": config["max_iterations"],
        "tools": tools,
        # The worker's before_tool_call decides; the loop here ends the run on a denial.
        "stop_on_denied": bool(config.get("stop_on_denied", False)),
        "short_term_trace_tools": config["short_term_trace_tools"],
        "tool_execution": config["tool_execution"],
        "dispatch_middlewares": [calls.middleware],
        "after_tool_call": calls.after_tool_call,
        "hooks": Hooks(
            on_iteration_start=calls.on_iteration_start,
            on_provider_response=calls.on_provider_response,
            on_tool_result=calls.on_tool_result,
        ),
    }
    telemetry = workflow_hooks()  # the worker's (create_worker(tracer_provider=...)), if any
    if telemetry is not None:
        settings["hooks"] = with_telemetry(settings["hooks"], telemetry)
    if calls.checks or config.get("external_tools"):
        # Which calls wait is decided on the workers (the tools' predicates, the agent's
        # policy): see _Calls.prepare. The deadline is the workflow's (Run.clock).
        settings["prepare_arguments"] = calls.prepare
        settings["requires_approval"] = calls.needs_approval
        if config.get("approval_timeout") is not None:
            settings["approval_timeout"] = float(config["approval_timeout"])
    for kind in ("input", "output"):
        names = config.get(f"{kind}_guardrails") or []
        if names:
            settings[f"{kind}_guardrails"] = [
                _GuardrailProxy(calls, kind, i, n) for i, n in enumerate(names)
            ]
    if config.get("short_term"):
        settings["short_term_memory"] = _ShortTermProxy(calls, session_id)
    if config.get("long_term"):
        settings["long_term_memory"] = _LongTermProxy(calls)
    if thinking is not None:  # a budget, or 0 for adaptive thinking
        if int(thinking):
            settings["thinking"] = int(thinking)
        else:
            settings["adaptive_thinking"] = True
    for key in ("effort", "max_tokens", "max_tool_result_chars", "long_term_top_k"):
        if config.get(key) is not None:
            settings[key] = config[key]
    if "max_tool_result_chars" in config:  # None is a choice here: no cap (the default caps)
        settings["max_tool_result_chars"] = config["max_tool_result_chars"]
    agent = Agent(**settings)
    # Per-tool sequential execution is not a keyword; set it as the agent's options hold it.
    agent.options.sequential_tools.update(config.get("sequential_tools", ()))
    return agent


async def _prepared(
    config: dict[str, Any],
    session_id: str,
    run_id: str | None,
    events: list[dict[str, Any]] | None,
    deps: dict[str, Any] | None = None,
) -> tuple[_Calls, Agent]:
    if not workflow.in_workflow():
        raise ConfigurationError(
            f"the durable agent {config.get('agent')!r} can only run inside a Temporal "
            "workflow: start it with 'await durable.execute(client, prompt)' from your app "
            "(and run a worker with create_worker), not directly"
        )
    calls = _Calls(config, run_id or workflow.info().workflow_id, events, deps)
    if deps is not None:
        await _check_deps(calls, deps)
    # The MCP servers' tools, listed once per run: the list is recorded in the history, so a
    # replay builds the same tools (and a changed server does not change a run in flight).
    mcp = await listed_definitions(calls, list(config.get("mcp_servers", ())), _mcp_failure)
    return calls, _agent_for(config, calls, session_id, mcp)


async def _check_deps(calls: _Calls, deps: dict[str, Any]) -> None:
    """Have a worker resolve the run's deps spec once before anything else: a spec no worker
    can resolve ends the run here, before a model call or a stored message."""
    try:
        await calls.activity(f"goagent.deps.{calls.agent}", {"deps": deps}, "tool_timeout")
    except ActivityError as exc:
        error = _error_of(exc)
        raise ConfigurationError(error.message) from None


async def _outcome(run: Run, calls: _Calls) -> dict[str, Any]:
    """Run ``run`` to its end (its deadlines and wait tokens replay-safe); its result as data."""
    run.clock = lambda: workflow.now().timestamp()
    run.new_token = lambda: workflow.uuid4().hex
    try:
        async for _ in run.events():
            pass
    except (GoAgentError, asyncio.CancelledError):
        # A failed or cancelled run stored its interrupted turn: append what still waits.
        if calls.short_term is not None:
            await calls.short_term.flush()
        raise
    if calls.short_term is not None:
        await calls.short_term.flush()
    result = run.result
    assert result is not None
    # Marked: the client puts a big result back (DurableAgent.execute and result).
    new = calls.marked(result.messages)
    messages = messages_to_text(new)
    memory = calls.short_term
    if memory is not None and memory.refs:
        try:
            check_size({"messages": messages}, "run result", **_limits(calls.config))
        except PayloadTooLargeError:  # the stored ones are in the session: stand-ins here
            messages = messages_to_text(memory.lean(new))
    out: dict[str, Any] = {
        "text": result.text,
        "stop_reason": None if result.stop_reason is None else str(result.stop_reason),
        "iterations": result.iterations,
        "usage": usage_to_data(result.usage),
        "tool_calls": result.tool_calls,
        "messages": messages,
        "run_id": calls.run_id,
        # Where the client reads a result that crossed by reference (DurableAgent.result).
        "session_id": None if memory is None else memory.session_id,
        "aborted": result.stop_reason == StopReason.ABORTED,
        "pending": [
            {
                "id": p.id,
                "name": p.name,
                "arguments": p.arguments,
                "kind": p.kind,
                "deadline": p.deadline,
                "token": p.token,
                # The file a file tool's path led to: what an approval covers (approve15).
                **({"resolved": p.resolved} if p.resolved else {}),
            }
            for p in result.pending
        ],
    }
    if result.pending and memory is not None and memory.generation is not None:
        # The conversation's clear counter when the run stopped to wait: its resume's claim
        # is fenced by it, so a clear during the wait (and a refill) refuses the decision.
        out["generation"] = memory.generation
    return out


async def run_in_workflow(
    config: dict[str, Any],
    content: Sequence[ContentBlock],
    session_id: str,
    run_id: str | None,
    events: list[dict[str, Any]] | None = None,
    control: Any = None,
    deps: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the loop in the current workflow; returns the result as data.

    ``events`` (if given) receives the run's events as plain dicts, as they happen;
    ``control`` (a ``RunControl``, where the loop has one) takes steering messages into it;
    ``deps`` is a deps spec as data (``DepsSpec.to_data()``), resolved on the workers (a spec
    no worker can resolve raises ``ConfigurationError`` before the first model call).
    A run that stops on calls waiting for decisions has stop reason ``deferred`` and lists
    them under ``pending``; :func:`resume_in_workflow` goes on with the decisions.

    Raises:
        ConfigurationError: not inside a Temporal workflow.
    """
    calls, agent = await _prepared(config, session_id, run_id, events, deps)
    # One run of the unchanged loop; the control carries the steer signal into it.
    run = await agent.start_run(list(content), streaming=False, control=control)
    return await _outcome(run, calls)


async def resume_in_workflow(
    config: dict[str, Any],
    decisions: dict[str, ToolDecision],
    session_id: str,
    run_id: str,
    *,
    decided_at: float,
    events: list[dict[str, Any]] | None = None,
    control: Any = None,
    deps: dict[str, Any] | None = None,
    waited_at: int | None = None,
) -> dict[str, Any]:
    """Go on with the session's waiting calls in the current workflow, with ``decisions``
    (taken at ``decided_at``, the workflow's time): the claim settles the stored wait on a
    worker, then the batch runs and the loop goes on; the result as data.

    Raises:
        ApprovalConflictError: the stored wait was settled by someone else (a plain resume).
    """
    calls, agent = await _prepared(config, session_id, run_id, events, deps)
    if calls.short_term is not None:  # ``waited_at``: the generation the wait was stored at
        calls.short_term.waited_at = waited_at
    # The decide update's validator matched the decisions to the wait (its token, the ids of
    # its earlier waits); the claim compares the stored wait's own token.
    run = await agent.start_resume(
        decisions, streaming=False, control=control, now=decided_at, matched=True
    )
    if run.resume is not None:
        # The decided batch was checked when it was made: its calls run without asking again
        # (their tool activities validate them, an edit included).
        # (Only those the run checked or a person decided: a call of the batch whose tool
        # the run's settings do not check was not asked about, and its worker says.)
        for call in run.resume.message.tool_calls:
            if call.id in decisions or call.name in calls.checks or "*" in calls.checks:
                calls.checked[call.id] = (dict(call.arguments), None, False)
    return await _outcome(run, calls)


def _mcp_failure(server: str, exc: BaseException) -> BaseException:
    """A server whose tools could not be listed fails the run (a GoAgentError, not a retried
    workflow task)."""
    from goagent_py.mcp.errors import MCPConnectionError

    error = _error_of(exc) if isinstance(exc, ActivityError) else ErrorData("Error", str(exc), True)
    if error.type == "ConfigurationError":  # e.g. two of its tools map to one name
        return ConfigurationError(f"MCP server {server!r}: {error.message}")
    return MCPConnectionError(server, f"listing its tools failed ({error.type}): {error.message}")


_ABORT_MODES = ("now", "after_tools", "after_turn")


class _WorkflowControl(RunControl):
    """A ``RunControl`` for the workflow's event loop: signals run on that loop, in the run's
    own thread, so an abort wakes the run directly (Temporal's workflow loop has no
    ``is_closed`` or ``call_soon_threadsafe``, which the thread-safe path asks for)."""

    def abort(self, mode: AbortMode = "now", reason: str = "") -> None:
        self.abort_mode = mode
        self.abort_reason = reason
        if self._wake is not None:
            self._wake()

    def guards_taken(self) -> bool:
        # A history recorded before steered messages were checked has no guardrail activity
        # there: replayed, the run goes on as it ran.
        return workflow.patched(GUARD_TAKEN_PATCH)

    def said_taken(self) -> bool:
        # A history recorded before taken messages were recalled for and stored has no recall
        # or store activity of theirs: replayed, the run goes on as it ran.
        return workflow.patched(SAID_TAKEN_PATCH)


def _new_control(abort: tuple[str, str] | None = None) -> Any:
    """A ``RunControl`` for one run of the loop: the steer signal pushes into its queue, the
    abort signal pulls its lever. ``abort`` (mode, reason) is an abort that arrived before the
    run began (before a worker picked the workflow up): the run starts aborted, so the loop
    stops it before its first model call and records it as any abort."""
    control = _WorkflowControl()
    if abort is not None:
        mode, reason = abort
        control.abort(mode, reason)  # type: ignore[arg-type]  # the signal checked it
    return control


def _merge(results: list[dict[str, Any]], unprocessed: list[str]) -> dict[str, Any]:
    """One result for the workflow: the last run's answer, every run's messages and counts."""
    last = dict(results[-1])
    usage: dict[str, int] = {}
    for r in results:
        for key, value in r["usage"].items():
            usage[key] = usage.get(key, 0) + int(value)
    messages = [m for r in results for m in messages_from_text(r["messages"])]
    last.update(
        iterations=sum(int(r["iterations"]) for r in results),
        tool_calls=sum(int(r["tool_calls"]) for r in results),
        usage=usage,
        messages=messages_to_text(messages),
        runs=len(results),
        unprocessed_follow_ups=list(unprocessed),
        run_id=results[0]["run_id"],
    )
    return last


def _failure(exc: GoAgentError) -> ApplicationError:
    extra: dict[str, Any] = {}
    if isinstance(exc, MaxIterationsError):
        extra = {"iterations": exc.iterations, "last_thought": exc.last_thought}
    elif isinstance(exc, GuardrailTripped):
        extra = {"guardrail": exc.guardrail, "kind": exc.kind, "reason": exc.reason}
    data = ErrorData(type(exc).__name__, str(exc), False, extra=extra)
    return ApplicationError(str(exc), data.to_data(), type=data.type, non_retryable=True)


def _approval_extra(exc: Exception) -> dict[str, Any]:
    if isinstance(exc, ApprovalExpiredError):
        return {"call_id": exc.call_id, "deadline": exc.deadline, "applied": exc.applied}
    return {}


@workflow.defn(name=WORKFLOW_NAME)
class AgentWorkflow:
    """One durable run of an agent; signals steer or abort it, a query reports its state."""

    def __init__(self) -> None:
        self._steering: list[str] = []
        self._follow_ups: list[str] = []
        self._abort_reason: str | None = None
        self._abort: tuple[str, str] | None = None  # (mode, reason) of the abort signal
        self._refused: list[str] = []  # signals that asked for something that does not exist
        self._status = "starting"
        self._events: list[dict[str, Any]] = []
        self._control: Any = None
        self._steered = 0  # steering messages handed to a run's control
        # Calls that wait for decisions (by id, as the query lists them), the decisions taken
        # so far (as data), and the calls whose deadline applied the default decision.
        self._waiting: dict[str, dict[str, Any]] = {}
        self._decided: dict[str, dict[str, Any]] = {}
        self._settled: set[str] = set()  # calls decided in earlier waits of this workflow
        self._decided_at = 0.0
        self._expired: dict[str, tuple[float, str]] = {}
        # The token of the wait now ("" when none, or a wait listed before tokens), and each
        # earlier wait's calls and expired calls by its token: a decision that carries the
        # token of a wait that is over is refused, not taken by a later call with its id.
        self._token = ""
        self._past: dict[str, tuple[set[str], dict[str, tuple[float, str]]]] = {}
        # What the decide update took, by the wait's token and the call's id: the same
        # decision sent again (a retried request whose first attempt went through) is taken
        # as done, not refused as a second one.
        self._given: dict[str, dict[str, dict[str, Any]]] = {}
        self._cancelled = False  # the run was cancelled while it waited for decisions

    @workflow.run
    async def run(self, data: dict[str, Any]) -> dict[str, Any]:
        """Run the agent on ``data`` (``config``, ``content``, ``session_id``), then on each
        follow-up prompt that arrived meanwhile (each a run of its own in the same session)."""
        config = data["config"]
        content = content_from_text(data["content"])
        session = str(data.get("session_id", "default"))
        deps = data.get("deps")  # a spec as data, or None (runs started before deps specs)
        workflow_id = workflow.info().workflow_id
        self._status = "running"
        results: list[dict[str, Any]] = []
        try:
            while True:
                # Each run of the workflow gets its own prefix for its idempotency keys.
                run_id = workflow_id if not results else f"{workflow_id}.{len(results)}"
                self._control = _new_control(self._abort)
                for text in self._steering[self._steered :]:  # arrived between runs
                    self._steer(text)
                results.append(
                    await run_in_workflow(
                        config, content, session, run_id, self._events, self._control, deps
                    )
                )
                while results[-1]["stop_reason"] == StopReason.DEFERRED.value:
                    decisions, decided_at = await self._decisions(results[-1]["pending"], config)
                    self._control = _new_control(self._abort)
                    results.append(
                        await resume_in_workflow(
                            config,
                            decisions,
                            session,
                            f"{workflow_id}.{len(results)}",
                            decided_at=decided_at,
                            events=self._events,
                            control=self._control,
                            deps=deps,
                            waited_at=results[-1].get("generation"),
                        )
                    )
                    if self._cancelled:  # the wait is closed in the record: end cancelled
                        raise run_cancelled("the run was cancelled")
                # An abort ends the workflow: follow-ups still queued stay unprocessed.
                if not self._follow_ups or self._abort is not None:
                    break
                content = [TextBlock(self._follow_ups.pop(0))]
        except GoAgentError as exc:
            self._status = "failed"
            await workflow.wait_condition(workflow.all_handlers_finished)
            raise _failure(exc) from exc
        # The workflow's own cancellation propagates (it is not an abort: nothing to report).
        self._status = "aborted" if results[-1]["aborted"] else "completed"
        # Let event streams waiting in update handlers get their last batch.
        await workflow.wait_condition(workflow.all_handlers_finished)
        merged = _merge(results, self._follow_ups)
        if config.get("run_refs"):
            # A result over the server's limit fails every workflow task that completes the
            # run, and the server retries that task forever: the run would never end. (Each
            # run's result lists its stored messages as stand-ins when it is over the limit
            # alone; several follow-ups can still add up.) Fail it, saying why.
            try:
                check_size(merged, "the workflow's result", **_limits(config))
            except PayloadTooLargeError as exc:
                self._status = "failed"
                raise _failure(exc) from exc
        return merged

    async def _decisions(
        self, pending: list[dict[str, Any]], config: dict[str, Any]
    ) -> tuple[dict[str, ToolDecision], float]:
        """Wait, holding no worker, until every waiting call is decided (the decide update),
        the deadline passes (the default decision for the rest) or an abort comes (a denial
        that ends the run, for the rest). Returns the decisions and when they were taken."""
        self._waiting = {p["id"]: p for p in pending}
        self._decided = {}
        self._token = next((str(p["token"]) for p in pending if p.get("token")), "")
        self._given[self._token] = {}  # (a wait listed without a token: no earlier one's)
        expired: dict[str, tuple[float, str]] = {}
        self._status = "waiting"
        self._events.append({"type": "pending", "calls": list(pending)})
        deadlines = [float(p["deadline"]) for p in pending if p.get("deadline") is not None]
        deadline = min(deadlines) if deadlines else None

        def done() -> bool:
            return self._abort is not None or all(i in self._decided for i in self._waiting)

        decided_at: float | None = None
        try:
            if deadline is None:
                await workflow.wait_condition(done)
            else:
                left = max(deadline - workflow.now().timestamp(), 0.0)
                await workflow.wait_condition(done, timeout=timedelta(seconds=left))
        except asyncio.CancelledError:
            # Temporal's cancellation of the run (handle.cancel()): the wait is closed as an
            # abort closes it (its calls denied, the record valid), then the run ends
            # cancelled; left in the record, it would refuse every later run of the session.
            # A history recorded before this (durable11) ended at the cancellation.
            if not workflow.patched(CANCEL_CLOSES_WAIT_PATCH):
                raise
            self._cancelled = True
        except TimeoutError:
            assert deadline is not None
            default = str(config.get("approval_default") or "deny")
            for call_id, p in self._waiting.items():
                if call_id in self._decided:
                    continue
                if default == "approve" and p["kind"] != "external":
                    self._decided[call_id] = decision_to_data(Approve())
                else:
                    message = (
                        f"No decision came before the deadline; the call was not run "
                        f"(the default decision: {default})."
                    )
                    self._decided[call_id] = decision_to_data(Deny(message))
                self._expired[call_id] = expired[call_id] = (deadline, default)
            # The default is decided at the deadline, not after it.
            decided_at = min(self._decided_at or deadline, deadline - 1e-3)
        if self._abort is not None or self._cancelled:
            reason = (
                "The run was cancelled before a decision"
                if self._abort is None
                else f"The run was aborted before a decision: {self._abort[1]}"
            )
            for call_id in self._waiting:
                self._decided.setdefault(call_id, decision_to_data(Deny(reason, stop=True)))
        # The validator checked each decision's token against this wait: the claim below
        # compares the stored wait's own.
        decisions = {
            i: replace(decision_from_data(self._decided[i]), token="") for i in self._waiting
        }
        self._settled.update(self._waiting)
        if self._token:
            self._past[self._token] = (set(self._waiting), expired)
        self._token = ""
        self._waiting = {}
        self._status = "running"
        if decided_at is None:
            decided_at = self._decided_at or workflow.now().timestamp()
        return decisions, decided_at

    @workflow.update(name=DECIDE_UPDATE)
    def decide(self, decisions: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Take decisions for waiting calls (``{call id: decision data}``; some or all of
        them); the run goes on once every waiting call is decided. Returns the calls that
        still wait."""
        fresh = {i: d for i, d in decisions.items() if not self._repeat(i, d)}
        for call_id, data in fresh.items():
            self._decided[call_id] = dict(data)
            self._given.setdefault(self._token, {})[call_id] = dict(data)
        if fresh:  # a decision sent again changes nothing, not even when it was taken
            self._decided_at = workflow.now().timestamp()
        return {"waiting": [i for i in self._waiting if i not in self._decided]}

    @decide.validator
    def _check_decisions(self, decisions: dict[str, dict[str, Any]]) -> None:
        """Refuse, before anything is recorded, a decision that cannot be applied: a call that
        does not wait (or a finished wait), one decided already (the first decision wins), one
        past its deadline, a decision of the wrong kind."""
        try:
            self._refusal(decisions)
        except (ApprovalError, ConfigurationError) as exc:
            data = ErrorData(type(exc).__name__, str(exc), False, extra=_approval_extra(exc))
            raise ApplicationError(str(exc), data.to_data(), type=data.type) from None

    def _refusal(self, decisions: dict[str, dict[str, Any]]) -> None:
        if not isinstance(decisions, dict) or not decisions:
            raise ConfigurationError("decide(): give at least one decision, {call_id: decision}")
        if self._waiting and (self._abort is not None or self._cancelled):
            # The wait ends with the abort (its calls denied, none run): a decision that came
            # with it, before the wait was closed, must not run a call.
            raise NotPendingError(
                "the run was aborted (or cancelled) while its calls waited: they are denied "
                "and none of them runs; nothing waits for a decision"
            )
        for call_id, data in decisions.items():
            token = str(data.get("token") or "") if isinstance(data, dict) else ""
            waiting = call_id in self._waiting
            if waiting and not token and call_id in self._settled:
                # Local models' servers number calls per turn (Ollama's ollama-tool-0): a
                # decision by id alone may be a late one for the earlier call (durable11).
                raise ApprovalConflictError(
                    f"call {call_id!r} waits now, and a call decided in an earlier wait of "
                    "this run had the same id, so a decision by id alone may be a late one "
                    "for that call: send the decision with the token of the wait it is for "
                    "(list the calls with durable.pending(handle), then decide with "
                    "Approve(token=call.token) or Deny(message, token=call.token))"
                )
            if self._repeat(call_id, data):
                continue  # taken already: the update changes nothing
            if token and token != self._token:
                self._stale(call_id, token)
            # A call decided (or expired) in an earlier wait is refused unless a call of the
            # wait now has its id: local models' servers number calls per turn (review9c).
            if call_id in self._expired and not waiting:
                deadline, default = self._expired[call_id]
                raise ApprovalExpiredError(call_id, deadline, applied=default)
            if (call_id in self._settled and not waiting) or (call_id in self._decided and waiting):
                raise ApprovalConflictError(
                    f"call {call_id!r} was already decided (the first decision wins); the run "
                    "goes on with it"
                )
            if call_id not in self._waiting:
                raise NotPendingError(
                    f"no call with id {call_id!r} waits for a decision in this run; the "
                    f"waiting calls are {sorted(self._waiting) or 'none'}"
                )
        parsed = {i: decision_from_data(d) for i, d in decisions.items() if not self._repeat(i, d)}
        named = [p for p in self._pending_calls() if p.id in parsed]
        check_decisions(named, parsed, now=workflow.now().timestamp())

    def _repeat(self, call_id: str, data: Any) -> bool:
        """Whether ``data`` is the decision the decide update took already for ``call_id`` in
        the wait it names (its token; by id alone, the wait now, or the one earlier wait
        whose call had the id): a retried request whose first attempt went through."""
        if not isinstance(data, dict):
            return False
        token = str(data.get("token") or "")
        if not token:
            if call_id in self._waiting:
                token = self._token
            else:
                earlier = [t for t, (ids, _) in self._past.items() if call_id in ids]
                if len(earlier) != 1:
                    return False  # none, or the id was reused: it cannot say which
                token = earlier[0]
        taken = self._given.get(token, {}).get(call_id)
        if taken is None:
            return False
        try:  # the rule every resume follows (approvals.same_verdict)
            return same_verdict(verdict_of(decision_from_data(taken)), decision_from_data(data))
        except (ConfigurationError, KeyError, TypeError, ValueError):
            return False  # not a decision: the validator says why

    def _stale(self, call_id: str, token: str) -> None:
        """Refuse a decision for ``call_id`` that names the wait ``token``, not the one now."""
        past = self._past.get(token)
        if past is None or call_id not in past[0]:
            raise NotPendingError(
                f"no call with id {call_id!r} waits under the token {token!r} in this run; "
                f"the waiting calls are {sorted(self._waiting) or 'none'}"
            )
        if call_id in past[1]:
            deadline, default = past[1][call_id]
            raise ApprovalExpiredError(call_id, deadline, applied=default)
        later = (
            f"; the call that waits now under this id is a later one (its token is {self._token!r})"
            if call_id in self._waiting
            else ""
        )
        raise ApprovalConflictError(
            f"call {call_id!r} of the wait {token!r} was already decided (the first decision "
            f"wins); the run went on with it{later}"
        )

    def _pending_calls(self) -> list[PendingCall]:
        return [
            PendingCall(
                ToolCall(p["id"], p["name"], dict(p["arguments"])),
                p["kind"],
                p.get("deadline"),
                token=str(p.get("token") or ""),
                resolved=str(p.get("resolved") or ""),
            )
            for p in self._waiting.values()
        ]

    @workflow.query(name=PENDING_QUERY)
    def pending(self) -> dict[str, Any]:
        """The calls that wait for a decision (those decided already are left out)."""
        return {
            "status": self._status,
            "calls": [p for i, p in self._waiting.items() if i not in self._decided],
        }

    @workflow.signal(name=STEER_SIGNAL)
    def steer(self, text: str) -> None:
        """Steer the running prompt: the message reaches the model at the loop's next drain
        point (where the loop has a steering queue; otherwise it is only recorded). An empty
        message is refused (listed under ``refused`` by the state query), as a session's
        ``steer`` refuses one."""
        if self._blank(text, "steer"):
            return
        self._steering.append(text)
        self._steer(text)

    def _blank(self, text: str, signal: str) -> bool:
        """Whether ``text`` breaks the rule every prompt follows (``to_messages``: not text,
        or only whitespace); such a signal is refused, since a signal cannot raise to its
        sender. (Histories from before the rule replay as they ran: the patch.)"""
        try:
            to_messages(text, f"the {signal} signal")
        except (InvalidInputError, ConfigurationError) as exc:
            if workflow.patched(BLANK_SIGNAL_PATCH):
                self._refused.append(str(exc))
                return True
        return False

    def _steer(self, text: str) -> None:
        if self._control is not None:
            self._control.push("steering", Message(Role.USER, [TextBlock(text)]))
            self._steered = len(self._steering)

    @workflow.signal(name=FOLLOW_UP_SIGNAL)
    def follow_up(self, text: str) -> None:
        """Queue a follow-up prompt: it runs when the current prompt is answered (an empty
        one is refused, listed under ``refused`` by the state query)."""
        if self._blank(text, "follow_up"):
            return
        self._follow_ups.append(text)

    @workflow.signal(name=ABORT_SIGNAL)
    def abort(self, reason: str = "", mode: str = "now") -> None:
        """Stop the run as a session's abort stops one (``mode``: ``"now"``, ``"after_tools"``
        or ``"after_turn"``): the loop ends it with stop reason ``aborted``, keeps what
        finished, answers every open call with an error result and stores the turn closed.
        An abort that arrives before a worker picked the run up stops it before its first
        model call. A mode that does not exist is refused (listed under ``refused`` by the
        state query) and changes nothing: a signal cannot raise to its sender."""
        if mode not in _ABORT_MODES:
            self._refused.append(
                f"abort mode {mode!r} does not exist; use one of {', '.join(_ABORT_MODES)}"
            )
            return
        if self._abort is not None:
            return  # the first abort decides
        self._abort = (mode, reason or "aborted")
        self._abort_reason = self._abort[1]
        if self._control is not None:
            self._control.abort(mode, self._abort[1])

    @workflow.update(name=EVENTS_UPDATE)
    async def events(self, after: int) -> dict[str, Any]:
        """The run's events from index ``after`` on, waiting until there is one or it ended."""
        await workflow.wait_condition(lambda: len(self._events) > after or self._finished())
        return {"events": self._events[after:], "done": self._finished()}

    @workflow.query(name=EVENTS_QUERY)
    def events_after(self, after: int) -> dict[str, Any]:
        """The run's events from index ``after`` on, as they are (also once the run ended)."""
        return {"events": self._events[after:], "done": self._finished()}

    def _finished(self) -> bool:
        return self._status not in ("starting", "running", "waiting")

    @workflow.query(name=STATE_QUERY)
    def state(self) -> dict[str, Any]:
        """The run's status and its queued signals."""
        return {
            "status": self._status,
            "events": len(self._events),
            "steering": list(self._steering),
            "follow_ups": list(self._follow_ups),
            "abort_reason": self._abort_reason,
            "refused": list(self._refused),
            "pending": [i for i in self._waiting if i not in self._decided],
        }
