"""The shape of a dispatch chain's links, shared by the dispatcher and the middlewares.

Kept apart from :mod:`goagent_py.dispatch` so that middlewares living elsewhere (resilience)
can name these types without importing the dispatcher, which imports them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from goagent_py.messages import ContentBlock, ToolCall

__all__ = ["DispatchFunc", "DispatchMiddleware"]

DispatchFunc = Callable[[ToolCall], Awaitable[list[ContentBlock]]]
"""Runs one tool call and returns its content; raises on failure."""

DispatchMiddleware = Callable[[DispatchFunc], DispatchFunc]
"""Wraps a :data:`DispatchFunc` with behaviour of its own (logging, limits, policies...)."""
