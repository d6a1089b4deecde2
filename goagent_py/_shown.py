"""What a run's events carry: copies of the run's messages, calls and request, made once each.

A stream consumer, a session subscriber or a hook reads an event's message; one that changed it
in place (a UI "cleaning" a message it shows, a logger redacting a call's arguments) changed the
run's record: what the model is sent next, what is stored, ``RunResult.messages``. Events carry
copies instead, so the record has one owner, the run (docs/architecture.md, "Events and
hooks").

Each record object is copied once per run, the first time an event carries it; every later
event carrying it carries the same copy (a consumer sees one object per message, as before).
Only a loud run (one that somebody watches) makes events, so a quiet ``Agent.run`` copies
nothing, and a streamed text delta is a ``str``: no copy per delta either.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from goagent_py._deepcopy import deepcopy, snapshot_message
from goagent_py.messages import Message, ToolCall
from goagent_py.provider import CompletionRequest
from goagent_py.results import ToolResult
from goagent_py.tools import ToolDefinition

__all__ = ["Shown"]


class Shown:
    """The copies a run's events carry, by the identity of what they copy."""

    __slots__ = ("_copies",)

    def __init__(self) -> None:
        # id -> (the original, its copy): the original is kept, so an id is never reused
        # for another object while its entry lives (the run's lifetime).
        self._copies: dict[int, tuple[Any, Any]] = {}

    def message(self, message: Message) -> Message:
        """The copy of ``message`` events carry."""
        seen = self._copies.get(id(message))
        if seen is not None and seen[0] is message:
            shown: Message = seen[1]
            return shown
        shown = snapshot_message(message)
        self._copies[id(message)] = (message, shown)
        # Its calls are the calls other events carry (a ToolExecutionStart of a call the
        # model made): one copy of each, whichever event comes first.
        if message.tool_calls:
            for original, call in zip(message.tool_calls, shown.tool_calls, strict=True):
                self._copies.setdefault(id(original), (original, call))
        return shown

    def messages(self, messages: list[Message]) -> list[Message]:
        """Copies of ``messages`` (a new list)."""
        return [self.message(m) for m in messages]

    def call(self, call: ToolCall) -> ToolCall:
        """The copy of ``call`` events carry."""
        seen = self._copies.get(id(call))
        if seen is not None and seen[0] is call:
            shown: ToolCall = seen[1]
            return shown
        shown = ToolCall(call.id, call.name, deepcopy(call.arguments))
        self._copies[id(call)] = (call, shown)
        return shown

    def result(self, result: ToolResult) -> ToolResult:
        """``result`` with a copy of its call and its own content list (blocks are frozen)."""
        return replace(result, call=self.call(result.call), content=list(result.content))

    def results(self, results: list[ToolResult]) -> list[ToolResult]:
        """Copies of ``results`` (a new list)."""
        return [self.result(r) for r in results]

    def definition(self, definition: ToolDefinition) -> ToolDefinition:
        """The copy of a tool's definition a request event carries (its schema is the
        agent's, shared by every run)."""
        seen = self._copies.get(id(definition))
        if seen is not None and seen[0] is definition:
            shown: ToolDefinition = seen[1]
            return shown
        shown = ToolDefinition(
            definition.name, definition.description, deepcopy(definition.parameters)
        )
        self._copies[id(definition)] = (definition, shown)
        return shown

    def request(self, request: CompletionRequest) -> CompletionRequest:
        """``request`` with copies of its messages and tool definitions."""
        return replace(
            request,
            messages=self.messages(request.messages),
            tools=[self.definition(d) for d in request.tools],
        )
