"""``copy.deepcopy`` of the framework's own messages, requests and responses, several times
faster.

What ``copy.deepcopy`` makes, exactly: goagent-py's own dataclasses are rebuilt field by field,
plain containers item by item; anything else (and any subclass) goes to ``copy.deepcopy`` with the
same memo, so shared references stay shared. The scripted providers copy every request and
response with it (their copies are the framework's overhead in every benchmark run on them), and
the in-memory stores copy the messages they keep and return.
"""

from __future__ import annotations

import copy
import dataclasses
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
_SLOTTED = frozenset(
    (
        CompletionRequest,
        CompletionResponse,
        Message,
        TextBlock,
        ImageBlock,
        DocumentBlock,
        ThinkingBlock,
        ToolCall,
        Usage,
        ToolDefinition,
        ThinkingConfig,
    )
)


def deepcopy(value: T) -> T:
    """A deep copy of ``value``: what ``copy.deepcopy(value)`` returns."""
    return cast(T, _copy(value, {}))


def _copy(value: Any, memo: dict[int, Any]) -> Any:
    kind = type(value)
    if kind in _ATOMIC:
        return value
    done = memo.get(id(value), memo)
    if done is not memo:
        return done
    atomic = _ATOMIC
    out: Any
    if kind is list:
        out = memo[id(value)] = []
        for v in value:
            out.append(v if type(v) in atomic else _copy(v, memo))
    elif kind is dict:
        out = memo[id(value)] = {}
        for k, v in value.items():
            out[k if type(k) in atomic else _copy(k, memo)] = (
                v if type(v) in atomic else _copy(v, memo)
            )
    elif kind in _SLOTTED:
        out = memo[id(value)] = object.__new__(kind)
        for name in _FIELDS[kind]:
            v = getattr(value, name)
            object.__setattr__(out, name, v if type(v) in atomic else _copy(v, memo))
    else:
        return copy.deepcopy(value, memo)
    return out


_FIELDS = {kind: tuple(f.name for f in dataclasses.fields(kind)) for kind in _SLOTTED}
