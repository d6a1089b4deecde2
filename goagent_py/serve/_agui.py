"""goagent-py events as AG-UI 1.0 events, built with the ``ag-ui-protocol`` package's models.

Every event is an ``ag_ui.core`` model (so the package validates it as it is built) and goes on
the wire as the package serialises it (camelCase, optional fields left out). The mapping
(AG-UI https://docs.ag-ui.com):

=============================  ===============================================================
goagent-py                     AG-UI
=============================  ===============================================================
run begins                     ``RUN_STARTED`` {threadId, runId}
MessageDelta "thinking"        ``REASONING_START`` + ``REASONING_MESSAGE_START`` (first),
                               ``REASONING_MESSAGE_CONTENT``
MessageDelta "text"            ``TEXT_MESSAGE_START`` (first delta), ``TEXT_MESSAGE_CONTENT``
MessageDelta "tool_call"       ``TOOL_CALL_START`` (first delta of a call), ``TOOL_CALL_ARGS``
MessageEnd                     what is still open ends: ``REASONING_MESSAGE_END`` +
                               ``REASONING_END``, ``TEXT_MESSAGE_END``, ``TOOL_CALL_END``
ToolExecutionEnd               ``TOOL_CALL_RESULT`` {toolCallId, content, metadata: {isError,
                               duration}}
MemoryRecall                   ``CUSTOM`` ``goagent.memory_recall`` {memories: [{text, score,
                               id}]}
ToolExecutionStart             ``CUSTOM`` ``goagent.tool_started`` {toolCallId, toolCallName}
MessagesInjected (steering)    ``CUSTOM`` ``goagent.steered`` {messages: [text]}
AgentEnd                       ``RUN_FINISHED`` {result: {stopReason, text, output (a typed
                               run's answer as JSON)}, usage}; an aborted run
                               carries ``outcome: {type: "cancelled"}``
an exception                   ``RUN_ERROR`` {message, code}
=============================  ===============================================================

The events of every delta (text, reasoning, tool call arguments, their starts and ends, tool
results, the custom events) are written as plain dicts in the order the package's models dump
them (issue 36: building a model per event cost ~130 µs a text delta, most of a served turn's
CPU); ``tests/serve/test_serve_agui_wire.py`` checks each against the model it stands for,
field by field and key by key. ``RUN_FINISHED``, ``RUN_ERROR`` and ``MESSAGES_SNAPSHOT`` (once a
run or a request) are still built with the models.

The order is one the protocol accepts: ``RUN_STARTED`` first and exactly one terminal event
last (a failed run's ``AgentEnd`` comes before its exception, so ``RUN_FINISHED`` is held until
the run's stream is over, and a failure sends ``RUN_ERROR`` in its place); one text or reasoning
message open at a time (reasoning ends before the answer's text starts, text ends before a
tool call starts); every ``TOOL_CALL_START`` gets its ``TOOL_CALL_END`` and then exactly one
``TOOL_CALL_RESULT`` (a call the run never finished, an abort, gets an error result before the
terminal event, as the stored transcript does).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any, Protocol

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    FunctionCall,
    MessagesSnapshotEvent,
    ReasoningMessage,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    TokenUsage,
    ToolMessage,
    UserMessage,
)
from ag_ui.core import ToolCall as AguiToolCall

from goagent_py.events import (
    AgentEnd,
    AgentEvent,
    HistoryAppend,
    MemoryRecall,
    MessageDelta,
    MessageEnd,
    MessagesInjected,
    MessageStart,
    ModelRequest,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolsPending,
)
from goagent_py.messages import Message, Role, StopReason, TextBlock, ThinkingBlock, Usage
from goagent_py.serve._approvals import interrupts_of

__all__ = [
    "AGUI_VERSION",
    "AguiMapper",
    "MakeDelta",
    "Sink",
    "Wire",
    "WireList",
    "custom",
    "messages_snapshot",
    "reasoning_content",
    "reasoning_end",
    "reasoning_message_end",
    "reasoning_message_start",
    "reasoning_start",
    "run_started",
    "text_content",
    "text_end",
    "text_start",
    "tool_call_args",
    "tool_call_end",
    "tool_call_result",
    "tool_call_start",
    "wire",
]

AGUI_VERSION = "1.0"
"""The AG-UI protocol version the events follow (``ag-ui-protocol`` 1.x)."""

_UNFINISHED = "the run ended before this call finished"


def wire(
    event: BaseEvent | RunFinishedCancelledOutcome | RunFinishedInterruptOutcome | TokenUsage,
) -> dict[str, Any]:
    """``event`` as its JSON object on the wire (camelCase, optional fields left out)."""
    data: dict[str, Any] = event.model_dump(mode="json", by_alias=True)
    return data


Wire = dict[str, Any]


# -- the hot events, as their models dump them (camelCase, no None fields, the models' key order)


def run_started(thread_id: str, run_id: str) -> Wire:
    """``RUN_STARTED``."""
    return {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id}


def run_finished(
    thread_id: str,
    run_id: str,
    result: dict[str, Any],
    outcome: RunFinishedCancelledOutcome | RunFinishedInterruptOutcome | None = None,
    usage: TokenUsage | None = None,
) -> Wire:
    """``RUN_FINISHED``: what :func:`wire` of the ``RunFinishedEvent`` gives, key for key
    (tests/serve/test_perf15_agui_wire.py), without building and dumping the event's model for
    every run (issue 36: the largest cost of mapping a scripted turn). ``result`` holds plain
    JSON values; a typed answer's ``output`` goes through the model, whose JSON rules it
    follows (a NaN is null)."""
    if "output" in result:
        event = RunFinishedEvent(
            thread_id=thread_id,
            run_id=run_id,
            result=result,
            outcome=outcome,
            usage=None if usage is None else [usage],
        )
        return wire(event)
    out: Wire = {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id, "result": result}
    if outcome is not None:
        out["outcome"] = wire(outcome)
    if usage is not None:
        out["usage"] = [wire(usage)]
    return out


def text_start(message_id: str) -> Wire:
    """``TEXT_MESSAGE_START`` of an assistant message."""
    return {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"}


def text_content(message_id: str, delta: str) -> Wire:
    """``TEXT_MESSAGE_CONTENT``."""
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": delta}


def text_end(message_id: str) -> Wire:
    """``TEXT_MESSAGE_END``."""
    return {"type": "TEXT_MESSAGE_END", "messageId": message_id}


def reasoning_start(message_id: str) -> Wire:
    """``REASONING_START``."""
    return {"type": "REASONING_START", "messageId": message_id}


def reasoning_message_start(message_id: str) -> Wire:
    """``REASONING_MESSAGE_START``."""
    return {"type": "REASONING_MESSAGE_START", "messageId": message_id, "role": "reasoning"}


def reasoning_content(message_id: str, delta: str) -> Wire:
    """``REASONING_MESSAGE_CONTENT``."""
    return {"type": "REASONING_MESSAGE_CONTENT", "messageId": message_id, "delta": delta}


def reasoning_message_end(message_id: str) -> Wire:
    """``REASONING_MESSAGE_END``."""
    return {"type": "REASONING_MESSAGE_END", "messageId": message_id}


def reasoning_end(message_id: str) -> Wire:
    """``REASONING_END``."""
    return {"type": "REASONING_END", "messageId": message_id}


def tool_call_start(call_id: str, name: str) -> Wire:
    """``TOOL_CALL_START``."""
    return {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name}


def tool_call_args(call_id: str, delta: str) -> Wire:
    """``TOOL_CALL_ARGS``."""
    return {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": delta}


def tool_call_end(call_id: str) -> Wire:
    """``TOOL_CALL_END``."""
    return {"type": "TOOL_CALL_END", "toolCallId": call_id}


def tool_call_result(call_id: str, content: str, is_error: bool, duration: float) -> Wire:
    """``TOOL_CALL_RESULT`` with ``metadata: {isError, duration}`` (the message id
    ``tool_<call id>``)."""
    return {
        "type": "TOOL_CALL_RESULT",
        "metadata": {"isError": is_error, "duration": round(duration, 6)},
        "messageId": "tool_" + call_id,
        "toolCallId": call_id,
        "content": content,
        "role": "tool",
    }


def custom(name: str, value: Wire) -> Wire:
    """``CUSTOM`` (``value`` is already plain JSON)."""
    return {"type": "CUSTOM", "name": name, "value": value}


def _text(blocks: list[Any]) -> str:
    return "".join(b.text for b in blocks if isinstance(b, TextBlock))


def _thinking(blocks: list[Any]) -> str:
    return "".join(b.thinking for b in blocks if isinstance(b, ThinkingBlock))


def _token_usage(usage: Usage) -> TokenUsage:
    # AG-UI counts cache reads and writes inside inputTokens (parts of it); ours beside it.
    return TokenUsage(
        input_tokens=usage.total_tokens - usage.output_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        cached_input_tokens=usage.cache_read_input_tokens or None,
        cache_write_input_tokens=usage.cache_creation_input_tokens or None,
    )


def _new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(6)


def messages_snapshot(messages: list[Message]) -> dict[str, Any]:
    """A ``MESSAGES_SNAPSHOT`` event of a stored conversation (AG-UI message shapes)."""
    out: list[Any] = []
    for i, m in enumerate(messages):
        mid = f"m{i}"
        if m.role is Role.USER:
            out.append(UserMessage(id=mid, content=_text(m.content)))
        elif m.role is Role.TOOL:
            text = _text(m.content)
            out.append(
                ToolMessage(
                    id=mid,
                    content=text,
                    tool_call_id=m.tool_call_id,
                    error=text if m.is_error else None,
                )
            )
        else:
            thought = _thinking(m.content)
            if thought:
                out.append(ReasoningMessage(id=mid + "r", content=thought))
            calls = [
                AguiToolCall(
                    id=c.id,
                    function=FunctionCall(name=c.name, arguments=json.dumps(c.arguments)),
                )
                for c in m.tool_calls
            ]
            out.append(
                AssistantMessage(id=mid, content=_text(m.content) or None, tool_calls=calls or None)
            )
    return wire(MessagesSnapshotEvent(messages=out))


MakeDelta = Callable[[str, str], Wire]
"""What builds a delta's event from its target (a message or call id) and its text:
:func:`text_content`, :func:`reasoning_content` or :func:`tool_call_args`."""


class Sink(Protocol):
    """Where :class:`AguiMapper` puts a run's events: whole events, and the deltas of a message
    or a call's arguments (a sink may join consecutive deltas of one target into one event,
    as the served run's event log does: goagent_py/serve/_server.py, ``RunEvents``)."""

    def put_nowait(self, item: Wire) -> None:
        """Take one whole event."""

    def put_delta(self, make: MakeDelta, target: str, delta: str) -> None:
        """Take one delta; ``make(target, delta)`` is its event."""


class WireList(list[Wire]):
    """A :class:`Sink` that keeps every event as it is mapped, each delta an event of its own."""

    def put_nowait(self, item: Wire) -> None:
        self.append(item)

    def put_delta(self, make: MakeDelta, target: str, delta: str) -> None:
        self.append(make(target, delta))


class AguiMapper:
    """Turns one run's events into AG-UI events (stateful: the open message and calls), put in
    ``out`` (a :class:`Sink`; by default a :class:`WireList`, read as ``mapper.out``).

    ``RUN_STARTED`` goes first, once the run has begun: with the first event it maps, or at
    the run's first ``HistoryAppend`` or ``ModelRequest``, or with :meth:`finished`,
    :meth:`error` or :meth:`begin` (issue 36: made before, it was alone in its write and the
    run waited for that write).
    """

    def __init__(self, thread_id: str, run_id: str, out: Sink | None = None) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.out: Sink = WireList() if out is None else out
        # Until the run begins these put RUN_STARTED first (then they are the sink's own).
        self._begun = False
        self._put: Callable[[Wire], None] = self._first_put
        self._put_delta: Callable[[MakeDelta, str, str], None] = self._first_put_delta
        self._text_id = ""  # the open text message, "" when none
        self._reasoning_id = ""  # the open reasoning message (and its span)
        self._calls: dict[str, str] = {}  # calls started in this message: id -> name
        self._unanswered: dict[str, str] = {}  # ended calls without a result yet: id -> name
        self._finished: Wire | None = None  # RUN_FINISHED, once the run's AgentEnd is mapped
        self._interrupts: list[Any] = []  # the waiting calls' interrupts (serve/_approvals)
        # The answer's text in pieces, joined once at the end: ``+=`` on an attribute copies
        # the whole text at every delta (a long answer's deltas made the mapping quadratic).
        self._texts: list[str] = []

    def begin(self) -> None:
        """Put ``RUN_STARTED`` if it is not out yet (the run has begun)."""
        if not self._begun:
            self._begun = True
            self._put = self.out.put_nowait
            self._put_delta = self.out.put_delta
            self._put(run_started(self.thread_id, self.run_id))

    def _first_put(self, item: Wire) -> None:
        self.begin()
        self._put(item)

    def _first_put_delta(self, make: MakeDelta, target: str, delta: str) -> None:
        self.begin()
        self._put_delta(make, target, delta)

    def error(self, message: str, code: str) -> None:
        """What ends a failed run: what is still open closed, then ``RUN_ERROR``."""
        self._close_all()
        self._put(wire(RunErrorEvent(message=message, code=code)))

    def finished(self) -> None:
        """What ends a run whose stream ended without an error: what is still open closed, then
        ``RUN_FINISHED`` (its ``AgentEnd`` result, held by :meth:`map`)."""
        final = self._finished or run_finished(
            self.thread_id, self.run_id, {"stopReason": None, "text": "".join(self._texts)}
        )
        self._close_all()
        self._put(final)

    def not_taken(self, texts: list[str]) -> None:
        """``CUSTOM`` ``goagent.not_taken``: the messages sent to steer this run that it never
        took (``{"messages": [...]}``), for the client to give back to the person."""
        self._put(custom("goagent.not_taken", {"messages": list(texts)}))

    def following(self, stored: int, message: str) -> Wire:
        """``CUSTOM`` ``goagent.following``, after ``RUN_STARTED`` in a stream that follows the
        run from elsewhere (that stream's own, not the run's: returned, not put): the run goes
        on from the first ``stored`` messages of the thread's transcript and runs ``message``
        ("" for decisions)."""
        return custom("goagent.following", {"stored": stored, "message": message})

    def resuming(self, calls: dict[str, str]) -> None:
        """This run goes on with ``calls`` (id -> name) a previous run left waiting: their
        results are this run's ``TOOL_CALL_RESULT`` events."""
        self._unanswered.update(calls)

    def map(self, event: AgentEvent) -> None:
        """Put the AG-UI events of one goagent-py event (often none). Nested agents' events
        (a non-empty ``path``) are left out: the page shows the top-level conversation."""
        if event.path:
            return
        kind = event.__class__
        handle = _HANDLERS.get(kind)
        if handle is None:
            handle = _HANDLERS[kind] = _handler_of(kind)
        handle(self, event)

    # -- one event each (_HANDLERS) -----------------------------------------------------------

    def _ignore(self, event: Any) -> None:
        pass

    def _run_begins(self, event: Any) -> None:
        # The run has stored the person's message or calls the model: it has begun.
        if not self._begun:
            self.begin()

    def _message_start(self, event: MessageStart) -> None:
        if event.role is Role.ASSISTANT:
            self._close_message()

    def _message_end(self, event: MessageEnd) -> None:
        if event.message.role is Role.ASSISTANT:
            self._end(event.message)

    def _tool_started(self, event: ToolExecutionStart) -> None:
        value = {"toolCallId": event.call.id, "toolCallName": event.call.name}
        self._put(custom("goagent.tool_started", value))

    def _tool_ended(self, event: ToolExecutionEnd) -> None:
        result = event.result
        if self._unanswered.pop(result.call.id, None) is None:
            return  # a call this stream never announced (cannot be: kept safe)
        content = _text(result.content)
        self._put(tool_call_result(result.call.id, content, result.is_error, result.duration))

    def _recalled(self, event: MemoryRecall) -> None:
        memories = [
            {"text": m.message.text, "score": round(float(m.score), 4), "id": m.id}
            for m in event.memories
        ]
        self._put(custom("goagent.memory_recall", {"memories": memories}))

    def _injected(self, event: MessagesInjected) -> None:
        if event.queue == "steering":
            # Steers the run took: a tab that follows the run from elsewhere shows them (the
            # tab that sent them shows them already).
            texts = [m.text for m in event.messages]
            self._put(custom("goagent.steered", {"messages": texts}))

    def _pending(self, event: ToolsPending) -> None:
        self._unanswered.clear()  # the calls wait for decisions: no result in this run
        self._interrupts = interrupts_of(event.calls)

    def _agent_end(self, event: AgentEnd) -> None:
        final = event.result
        aborted = final.stop_reason is StopReason.ABORTED
        outcome: Any = RunFinishedCancelledOutcome() if aborted else None
        if final.stop_reason is StopReason.DEFERRED and self._interrupts:
            outcome = RunFinishedInterruptOutcome(interrupts=self._interrupts)
        summary: dict[str, Any] = {
            "stopReason": final.stop_reason.value if final.stop_reason else None,
            "text": final.text,
        }
        if final.output is not None and not isinstance(final.output, str):
            from pydantic_core import to_jsonable_python

            summary["output"] = to_jsonable_python(final.output)  # a typed run's answer
        usage = _token_usage(final.usage) if final.usage.total_tokens else None
        self._finished = run_finished(self.thread_id, self.run_id, summary, outcome, usage)

    # -- the assistant message as it streams ------------------------------------------------

    def _delta(self, event: MessageDelta) -> None:
        kind = event.kind
        if kind == "text":
            if self._reasoning_id:
                self._close_reasoning()
            if not self._text_id:
                self._text_id = _new_id("msg_")
                self._put(text_start(self._text_id))
            self._texts.append(event.delta)
            self._put_delta(text_content, self._text_id, event.delta)
        elif kind == "thinking":
            if self._text_id:
                self._close_text()
            if not self._reasoning_id:
                self._reasoning_id = _new_id("reasoning_")
                self._put(reasoning_start(self._reasoning_id))
                self._put(reasoning_message_start(self._reasoning_id))
            self._put_delta(reasoning_content, self._reasoning_id, event.delta)
        elif event.call_id:
            self._close_reasoning()
            self._close_text()
            if event.call_id not in self._calls:
                self._calls[event.call_id] = event.name
                self._put(tool_call_start(event.call_id, event.name))
            self._put_delta(tool_call_args, event.call_id, event.delta)

    def _end(self, message: Message) -> None:
        streamed = bool(self._text_id or self._reasoning_id or self._calls)
        self._close_reasoning()
        self._close_text()
        if not streamed:
            # Not streamed (a provider without streaming): the whole message at once.
            thought = _thinking(message.content)
            if thought:
                rid = _new_id("reasoning_")
                self._put(reasoning_start(rid))
                self._put(reasoning_message_start(rid))
                self._put_delta(reasoning_content, rid, thought)
                self._put(reasoning_message_end(rid))
                self._put(reasoning_end(rid))
            if message.text:
                mid = _new_id("msg_")
                self._texts.append(message.text)
                self._put(text_start(mid))
                self._put_delta(text_content, mid, message.text)
                self._put(text_end(mid))
        for call in message.tool_calls:
            if call.id not in self._calls:
                self._put(tool_call_start(call.id, call.name))
                self._put_delta(tool_call_args, call.id, json.dumps(call.arguments))
            self._put(tool_call_end(call.id))
            self._unanswered[call.id] = call.name
        # Calls streamed but not in the final message (a provider that dropped one) end too.
        for call_id in self._calls:
            if call_id not in self._unanswered:
                self._put(tool_call_end(call_id))
                self._unanswered[call_id] = self._calls[call_id]
        self._calls = {}

    def _close_reasoning(self) -> None:
        if self._reasoning_id:
            rid, self._reasoning_id = self._reasoning_id, ""
            self._put(reasoning_message_end(rid))
            self._put(reasoning_end(rid))

    def _close_text(self) -> None:
        if self._text_id:
            mid, self._text_id = self._text_id, ""
            self._put(text_end(mid))

    def _close_message(self) -> None:
        self._close_reasoning()
        self._close_text()
        for call_id in self._calls:
            self._put(tool_call_end(call_id))
            self._unanswered[call_id] = self._calls[call_id]
        self._calls = {}

    def _close_all(self) -> None:
        self._close_message()
        for call_id in list(self._unanswered):
            self._put(tool_call_result(call_id, _UNFINISHED, True, 0.0))
        self._unanswered = {}


_Handler = Callable[[AguiMapper, Any], None]

_HANDLERS: dict[type, _Handler] = {
    MessageDelta: AguiMapper._delta,
    MessageStart: AguiMapper._message_start,
    MessageEnd: AguiMapper._message_end,
    HistoryAppend: AguiMapper._run_begins,
    ModelRequest: AguiMapper._run_begins,
    ToolExecutionStart: AguiMapper._tool_started,
    ToolExecutionEnd: AguiMapper._tool_ended,
    MemoryRecall: AguiMapper._recalled,
    MessagesInjected: AguiMapper._injected,
    ToolsPending: AguiMapper._pending,
    AgentEnd: AguiMapper._agent_end,
}
"""What each kind of event does to the mapping, by its class (one lookup an event, issue 36:
a chain of ``isinstance`` tests was most of the mapping's own time); an event of a class not
here is looked up once by its bases (:func:`_handler_of`) and its class added."""


def _handler_of(kind: type) -> _Handler:
    for base in kind.__mro__[1:]:
        found = _HANDLERS.get(base)
        if found is not None:
            return found
    return AguiMapper._ignore
