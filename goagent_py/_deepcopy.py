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
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, cast

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

__all__ = ["deepcopy"]

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
    fields = _FIELDS[type(value)]
    atomic = _ATOMIC
    if all(type(getattr(value, name)) in atomic for name in fields):
        return value
    return _rebuilt(value, memo)


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
