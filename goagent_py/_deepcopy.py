"""``copy.deepcopy`` of the framework's own messages, requests and responses, several times
faster.

What ``copy.deepcopy`` makes, exactly: goagent-py's own dataclasses are rebuilt field by field,
plain containers item by item; anything else (and any subclass) goes to ``copy.deepcopy`` with the
same memo, so shared references stay shared. The scripted providers copy every request and
response with it (their copies are the framework's overhead in every benchmark run on them), and
the in-memory stores copy the messages they keep and return.

Immutable values are shared, not rebuilt, as ``copy.deepcopy`` does with strings and tuples of
them: a frozen block or ``Usage`` whose fields are all atomic cannot change, so no copy can tell
(issue 36: rebuilding a frozen dataclass costs one ``object.__setattr__`` per field). The
classes a run sends in every request (``Message``, ``CompletionRequest``, ``ToolDefinition``...)
have a copier each that assigns their fields directly; ``tests/test_scripted_copies.py`` checks
that every field of every class is copied.

The scripted providers record and return *snapshots* (:func:`snapshot_request`,
:func:`snapshot_response`): the same values, nothing mutable shared with the original, but no
memo (a message given twice becomes two equal copies) and a tool definition copied once while it
stays the same object with the same value (records share that copy, across providers too while
the copy itself is unchanged). A definition whose schema is frozen (the tools' generated ones,
:mod:`goagent_py._frozen`) is neither fingerprinted nor copied: its records share the schema.
A request carries every tool's schema and the whole conversation; copied node by node they were
~45% of a benchmark run.
"""

from __future__ import annotations

import copy
import dataclasses
import marshal
from collections.abc import Callable
from typing import Any, TypeVar, cast

from goagent_py._frozen import FrozenDict
from goagent_py._records import tool_call
from goagent_py.messages import (
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
from goagent_py.provider import CompletionRequest, CompletionResponse, ThinkingConfig
from goagent_py.tools import ToolDefinition

__all__ = [
    "deepcopy",
    "message_copier",
    "snapshot_message",
    "snapshot_request",
    "snapshot_response",
]

T = TypeVar("T")

_ATOMIC = frozenset((str, int, float, bool, bytes, type(None), Role, StopReason))
# Frozen dataclasses that are shared as they are when every field holds an atomic value.
_IMMUTABLE = frozenset((TextBlock, ImageBlock, DocumentBlock, ThinkingBlock, Usage, ThinkingConfig))
_SLOTTED = frozenset((*_IMMUTABLE, CompletionRequest, CompletionResponse, Message, ToolCall))
_new = object.__new__
_set = object.__setattr__

Copier = Callable[[Any, dict[int, Any]], Any]


def deepcopy(value: T) -> T:
    """A deep copy of ``value``: what ``copy.deepcopy(value)`` returns."""
    return cast(T, _copy(value, {}))


def _copy(value: Any, memo: dict[int, Any]) -> Any:
    kind = type(value)
    if kind in _ATOMIC:
        return value
    copier = _COPIERS.get(kind)
    if copier is not None:
        return copier(value, memo)
    if kind in _IMMUTABLE:
        return _frozen(value, memo)
    done = memo.get(id(value), memo)
    if done is not memo:
        return done
    return copy.deepcopy(value, memo)


def _list(value: list[Any], memo: dict[int, Any]) -> list[Any]:
    done = memo.get(id(value))
    if done is not None:
        return cast(list[Any], done)
    out: list[Any] = []
    memo[id(value)] = out
    atomic = _ATOMIC
    for v in value:
        out.append(v if type(v) in atomic else _copy(v, memo))
    return out


def _dict(value: dict[Any, Any], memo: dict[int, Any]) -> dict[Any, Any]:
    done = memo.get(id(value))
    if done is not None:
        return cast(dict[Any, Any], done)
    out: dict[Any, Any] = {}
    memo[id(value)] = out
    atomic = _ATOMIC
    for k, v in value.items():
        out[k if type(k) in atomic else _copy(k, memo)] = v if type(v) in atomic else _copy(v, memo)
    return out


def _frozen(value: Any, memo: dict[int, Any]) -> Any:
    """A frozen dataclass of atomic fields is itself; otherwise it is rebuilt field by field."""
    atomic = _ATOMIC
    for name in _FIELDS[type(value)]:  # a loop, not all(<generator>): this runs per block
        if type(getattr(value, name)) not in atomic:
            return _rebuilt(value, memo)
    return value


def _rebuilt(value: Any, memo: dict[int, Any]) -> Any:
    done = memo.get(id(value), memo)
    if done is not memo:
        return done
    out = memo[id(value)] = _new(type(value))
    atomic = _ATOMIC
    for name in _FIELDS[type(value)]:
        v = getattr(value, name)
        _set(out, name, v if type(v) in atomic else _copy(v, memo))
    return out


def _message(value: Message, memo: dict[int, Any]) -> Message:
    done = memo.get(id(value))
    if done is not None:
        return cast(Message, done)
    out: Message = _new(Message)
    v: Any  # each field in turn
    memo[id(value)] = out
    out.role = v if type(v := value.role) in _ATOMIC else _copy(v, memo)
    out.content = v if type(v := value.content) in _ATOMIC else _copy(v, memo)
    out.tool_calls = v if type(v := value.tool_calls) in _ATOMIC else _copy(v, memo)
    out.tool_call_id = v if type(v := value.tool_call_id) in _ATOMIC else _copy(v, memo)
    out.is_error = v if type(v := value.is_error) in _ATOMIC else _copy(v, memo)
    out.metadata = v if type(v := value.metadata) in _ATOMIC else _copy(v, memo)
    return out


def _tool_call(value: ToolCall, memo: dict[int, Any]) -> ToolCall:
    done = memo.get(id(value))
    if done is not None:
        return cast(ToolCall, done)
    out: ToolCall = _new(ToolCall)
    v: Any  # each field in turn
    memo[id(value)] = out
    _set(out, "id", v if type(v := value.id) in _ATOMIC else _copy(v, memo))
    _set(out, "name", v if type(v := value.name) in _ATOMIC else _copy(v, memo))
    _set(out, "arguments", v if type(v := value.arguments) in _ATOMIC else _copy(v, memo))
    return out


def _tool_definition(value: ToolDefinition, memo: dict[int, Any]) -> ToolDefinition:
    done = memo.get(id(value))
    if done is not None:
        return cast(ToolDefinition, done)
    out: ToolDefinition = _new(ToolDefinition)
    v: Any  # each field in turn
    memo[id(value)] = out
    _set(out, "name", v if type(v := value.name) in _ATOMIC else _copy(v, memo))
    _set(out, "description", v if type(v := value.description) in _ATOMIC else _copy(v, memo))
    _set(out, "parameters", v if type(v := value.parameters) in _ATOMIC else _copy(v, memo))
    return out


def _request(value: CompletionRequest, memo: dict[int, Any]) -> CompletionRequest:
    done = memo.get(id(value))
    if done is not None:
        return cast(CompletionRequest, done)
    out: CompletionRequest = _new(CompletionRequest)
    v: Any  # each field in turn
    memo[id(value)] = out
    out.model = v if type(v := value.model) in _ATOMIC else _copy(v, memo)
    out.system_prompt = v if type(v := value.system_prompt) in _ATOMIC else _copy(v, memo)
    out.messages = v if type(v := value.messages) in _ATOMIC else _copy(v, memo)
    out.tools = v if type(v := value.tools) in _ATOMIC else _copy(v, memo)
    out.thinking = v if type(v := value.thinking) in _ATOMIC else _copy(v, memo)
    out.effort = v if type(v := value.effort) in _ATOMIC else _copy(v, memo)
    out.max_tokens = v if type(v := value.max_tokens) in _ATOMIC else _copy(v, memo)
    out.output = v if type(v := value.output) in _ATOMIC else _copy(v, memo)
    return out


def _response(value: CompletionResponse, memo: dict[int, Any]) -> CompletionResponse:
    done = memo.get(id(value))
    if done is not None:
        return cast(CompletionResponse, done)
    out: CompletionResponse = _new(CompletionResponse)
    v: Any  # each field in turn
    memo[id(value)] = out
    out.message = v if type(v := value.message) in _ATOMIC else _copy(v, memo)
    out.stop_reason = v if type(v := value.stop_reason) in _ATOMIC else _copy(v, memo)
    out.usage = v if type(v := value.usage) in _ATOMIC else _copy(v, memo)
    out.model = v if type(v := value.model) in _ATOMIC else _copy(v, memo)
    return out


_COPIERS: dict[type, Copier] = {
    list: _list,
    dict: _dict,
    Message: _message,
    ToolCall: _tool_call,
    ToolDefinition: _tool_definition,
    CompletionRequest: _request,
    CompletionResponse: _response,
}
_FIELDS = {kind: tuple(f.name for f in dataclasses.fields(kind)) for kind in _SLOTTED}


# -- snapshots (issue 36) ---------------------------------------------------------------------

Recorded = dict[int, tuple[ToolDefinition, ToolDefinition, bytes]]
"""A provider's tool definitions seen so far: ``id(definition)`` -> (it, its copy, the
fingerprint of the value copied)."""


def snapshot_request(request: CompletionRequest, recorded: Recorded) -> CompletionRequest:
    """``request`` with the same values, sharing nothing mutable with it: new message lists,
    messages, calls and dicts; frozen blocks of atomic fields shared. A tool definition that is
    the object ``recorded`` holds, with an equal value, gives the copy made before."""
    if type(request) is not CompletionRequest:
        return deepcopy(request)
    memo: dict[int, Any] = {}
    out: CompletionRequest = _new(CompletionRequest)
    v: Any  # each field in turn
    out.model = v if type(v := request.model) in _ATOMIC else _copy(v, memo)
    out.system_prompt = v if type(v := request.system_prompt) in _ATOMIC else _copy(v, memo)
    messages = request.messages
    if type(messages) is list:
        out.messages = [_message_snapshot(m, memo) for m in messages]
    else:
        out.messages = _copy(messages, memo)
    tools = request.tools
    if type(tools) is list and len(tools) == 1:  # one tool: no comprehension to set up
        out.tools = [_recorded_tool(tools[0], recorded)]
    elif type(tools) is list:
        out.tools = [_recorded_tool(d, recorded) for d in tools]
    else:
        out.tools = _copy(tools, memo)
    out.thinking = v if type(v := request.thinking) in _ATOMIC else _copy(v, memo)
    out.effort = v if type(v := request.effort) in _ATOMIC else _copy(v, memo)
    out.max_tokens = v if type(v := request.max_tokens) in _ATOMIC else _copy(v, memo)
    out.output = v if type(v := request.output) in _ATOMIC else _copy(v, memo)
    return out


def snapshot_response(response: CompletionResponse) -> CompletionResponse:
    """``response`` with the same values, sharing nothing mutable with it (see
    :func:`snapshot_request`)."""
    if type(response) is not CompletionResponse:
        return deepcopy(response)
    memo: dict[int, Any] = {}
    out: CompletionResponse = _new(CompletionResponse)
    v: Any  # each field in turn
    out.message = _message_snapshot(response.message, memo)
    out.stop_reason = v if type(v := response.stop_reason) in _ATOMIC else _copy(v, memo)
    usage = response.usage
    # Frozen, and of ints in every response a provider makes: shared as it is.
    if not (
        type(usage) is Usage
        and type(usage.input_tokens) is int
        and type(usage.output_tokens) is int
        and type(usage.cache_creation_input_tokens) is int
        and type(usage.cache_read_input_tokens) is int
    ):
        usage = _copy(usage, memo)
    out.usage = usage
    out.model = v if type(v := response.model) in _ATOMIC else _copy(v, memo)
    return out


# Copies of tool definitions made by any provider, for the next provider that records the same
# definition (a test or benchmark makes a fresh scripted provider per run, with the agent's
# tools unchanged): ``id(definition)`` -> (it, its copy, the fingerprint of both). Bounded: it
# holds the definitions alive.
_SHARED: Recorded = {}
_SHARED_MAX = 256


def _recorded_tool(definition: ToolDefinition, recorded: Recorded) -> ToolDefinition:
    if (
        type(definition.parameters) is FrozenDict
        and type(definition) is ToolDefinition
        and type(definition.name) is str
        and type(definition.description) is str
    ):
        return _recorded_frozen(definition, recorded)
    seen = recorded.get(id(definition))
    fingerprint = _fingerprint(definition)
    # The same object (not a new one at a reused address) with the same value, types included
    # (``==`` holds 1, 1.0 and True equal; the model reads 1, 1.0 and true): its copy holds.
    if seen is not None and seen[0] is definition:
        if fingerprint and fingerprint == seen[2] and _same_strings(definition, seen[1]):
            return seen[1]
    else:
        shared = _SHARED.get(id(definition)) if fingerprint else None
        # Another provider's copy, when neither the definition nor that copy (which its records
        # hold) changed since it was made.
        if (
            shared is not None
            and shared[0] is definition
            and fingerprint == shared[2]
            and _same_strings(definition, shared[1])
            and _fingerprint(shared[1]) == fingerprint
        ):
            recorded[id(definition)] = shared
            return shared[1]
    copied: ToolDefinition = _copy(definition, {})
    recorded[id(definition)] = entry = (definition, copied, fingerprint)
    if fingerprint:
        if len(_SHARED) >= _SHARED_MAX:
            _SHARED.clear()
        _SHARED[id(definition)] = entry
    return copied


def _recorded_frozen(definition: ToolDefinition, recorded: Recorded) -> ToolDefinition:
    """The record of a definition whose schema is frozen (the tools' generated ones): a record
    of its own sharing the schema, which cannot change (:mod:`goagent_py._frozen`), and the
    strings; nothing to fingerprint or copy. The record made before (by this provider or
    another) is given again while it and the definition hold the same three objects (either
    may be changed past its frozenness, ``object.__setattr__``)."""
    key = id(definition)
    seen = recorded.get(key) or _SHARED.get(key)
    if seen is not None and seen[0] is definition:
        kept = seen[1]
        if (
            kept.parameters is definition.parameters
            and kept.name is definition.name
            and kept.description is definition.description
        ):
            recorded[key] = seen
            return kept
    kept = _new(ToolDefinition)
    _set(kept, "name", definition.name)
    _set(kept, "description", definition.description)
    _set(kept, "parameters", definition.parameters)
    recorded[key] = entry = (definition, kept, b"")
    if len(_SHARED) >= _SHARED_MAX:
        _SHARED.clear()
    _SHARED[key] = entry
    return kept


def _fingerprint(definition: ToolDefinition) -> bytes:
    """The value of the definition's parameters as bytes that tell types apart (marshal, format
    2: no references that would depend on reference counts); its name and description, strings
    the copy shares, are compared by identity (:func:`_same_strings`). Empty when the
    parameters hold a value marshal cannot write (then it is copied on every request), for a
    name or description that is not a ``str``, and for a subclass, whose fields may be more."""
    if (
        type(definition) is not ToolDefinition
        or type(definition.name) is not str
        or type(definition.description) is not str
    ):
        return b""
    try:
        return marshal.dumps(definition.parameters, 2)
    except ValueError:
        return b""


def _same_strings(definition: ToolDefinition, copied: ToolDefinition) -> bool:
    """Whether the copy holds the definition's own name and description (strings, shared by
    the copy when it was made: the same objects mean the same values)."""
    return definition.name is copied.name and definition.description is copied.description


def snapshot_message(message: Message) -> Message:
    """``message`` with the same value, sharing nothing mutable with it (frozen blocks of
    atomic fields shared): a copy its holder may change without changing ``message``."""
    return _message_snapshot(message, {})


def message_copier(message: Message) -> Callable[[Message], Message]:
    """The cheapest function that makes :func:`snapshot_message` of ``message`` for as long as
    ``message`` is not changed: a caller that keeps a message to itself and hands out copies of
    it (the SQLite storage's decoded rows) picks the copier once, when it keeps the message.

    Issue 36: the served chat's storage handed out a copy of every message of a conversation on
    each of its two reads a turn; most are plain (role, text blocks, no calls, no metadata), and
    a copy that knows it needs no look at their fields costs less than half.
    """
    if _is_plain(message):
        return _plain_copy
    return snapshot_message


def _is_plain(message: Message) -> bool:
    """A message whose copy is new lists and an empty dict around the same values: its own
    class, fields of their own types, blocks that cannot change, no calls, no metadata."""
    if not (
        type(message) is Message
        and type(message.role) is Role
        and type(message.content) is list
        and type(message.tool_calls) is list
        and not message.tool_calls
        and type(message.tool_call_id) is str
        and type(message.is_error) is bool
        and type(message.metadata) is dict
        and not message.metadata
    ):
        return False
    block: Any  # any block
    for block in message.content:
        kind = type(block)
        if kind is TextBlock:
            if type(block.text) is not str:
                return False
        elif kind not in _IMMUTABLE or _frozen(block, {}) is not block:
            return False
    return True


def _plain_copy(message: Message) -> Message:
    """:func:`snapshot_message` of a message :func:`_is_plain` accepted (and unchanged since)."""
    out: Message = _new(Message)
    out.role = message.role
    out.content = message.content.copy()
    out.tool_calls = []
    out.tool_call_id = message.tool_call_id
    out.is_error = message.is_error
    out.metadata = {}
    return out


def _message_snapshot(message: Message, memo: dict[int, Any]) -> Message:
    if type(message) is not Message:
        return cast(Message, _copy(message, memo))
    out: Message = _new(Message)
    atomic = _ATOMIC
    v: Any  # each field in turn
    out.role = v if type(v := message.role) in atomic else _copy(v, memo)
    content = message.content
    if type(content) is not list:
        out.content = _copy(content, memo)
    elif not content:  # a call's message: no comprehension to set up either
        out.content = []
    elif len(content) == 1:  # one block, the common case: no comprehension to set up
        b = content[0]
        out.content = [b if type(b) is TextBlock and type(b.text) is str else _copy(b, memo)]
    else:
        # A text block of a str is the common case: shared without a look at its fields.
        out.content = [
            b if type(b) is TextBlock and type(b.text) is str else _copy(b, memo) for b in content
        ]
    calls = message.tool_calls
    if type(calls) is not list:
        out.tool_calls = _copy(calls, memo)
    elif not calls:
        out.tool_calls = []
    elif len(calls) == 1:
        out.tool_calls = [_call_snapshot(calls[0], memo)]
    else:
        out.tool_calls = [_call_snapshot(c, memo) for c in calls]
    out.tool_call_id = v if type(v := message.tool_call_id) in atomic else _copy(v, memo)
    out.is_error = v if type(v := message.is_error) in atomic else _copy(v, memo)
    metadata = message.metadata
    out.metadata = {} if type(metadata) is dict and not metadata else _copy(metadata, memo)
    return out


def _call_snapshot(call: ToolCall, memo: dict[int, Any]) -> ToolCall:
    """A new call with its own arguments: the model's JSON, flat in the common case."""
    if type(call) is not ToolCall or type(call.id) is not str or type(call.name) is not str:
        return cast(ToolCall, _copy(call, memo))
    arguments = call.arguments
    if type(arguments) is dict:
        atomic = _ATOMIC
        for k, v in arguments.items():
            if type(k) not in atomic or type(v) not in atomic:
                arguments = _dict(arguments, memo)
                break
        else:
            arguments = arguments.copy()
    else:
        arguments = _copy(arguments, memo)
    return tool_call(call.id, call.name, arguments)
