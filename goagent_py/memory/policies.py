"""Window policies: which part of the stored conversation goes into the next request.

A policy is applied when short-term memory is read, never when it is written: the full
conversation stays in storage and the window only decides what the model sees. Policies are
sync and pure: ``apply(messages)`` returns a new list and never mutates its input.

Every policy works on *groups*, not messages: an assistant message that asks for tool calls
forms one group with the tool-result messages right after it, and every other message is a group
of its own. Windows cut only between groups, so a tool call is never separated from its results,
and a window never starts on a tool result whose call was cut off (providers reject those). A
tool result that follows no tool call at all (an "orphan", e.g. from a damaged history) is never
kept at the start of a window either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from goagent_py.errors import ConfigurationError
from goagent_py.memory.tokens import HeuristicEstimator, TokenEstimator
from goagent_py.messages import Message, Role

__all__ = ["FixedWindow", "NoOp", "Policy", "TokenWindow", "message_groups"]


@runtime_checkable
class Policy(Protocol):
    """Chooses the window of history to send; implement it for your own compaction."""

    def apply(self, messages: Sequence[Message]) -> list[Message]:
        """The messages to send, oldest first; a new list, the input left untouched."""
        ...


def message_groups(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """Split ``messages`` into groups, as ``(start, end)`` slices in order (one pass, O(n)).

    An assistant message with tool calls and the tool messages right after it are one group;
    any other message (including a tool message with no call before it) is a group of its own.
    """
    groups: list[tuple[int, int]] = []
    i, n = 0, len(messages)
    while i < n:
        end = i + 1
        if messages[i].role == Role.ASSISTANT and messages[i].tool_calls:
            while end < n and messages[end].role == Role.TOOL:
                end += 1
        groups.append((i, end))
        i = end
    return groups


def _is_orphan(messages: Sequence[Message], group: tuple[int, int]) -> bool:
    return messages[group[0]].role == Role.TOOL


def _from_group(
    messages: Sequence[Message], groups: list[tuple[int, int]], first: int
) -> list[Message]:
    # Never open the window on an orphan tool result.
    while first < len(groups) and _is_orphan(messages, groups[first]):
        first += 1
    if first >= len(groups):
        return []
    return list(messages[groups[first][0] :])


class NoOp:
    """Keeps the whole history."""

    def apply(self, messages: Sequence[Message]) -> list[Message]:
        """A copy of ``messages`` (a new list holding the same messages)."""
        return list(messages)

    def __repr__(self) -> str:
        return "NoOp()"


class FixedWindow:
    """Keeps the last ``n`` groups (messages, with each tool call counted with its results).

    Without tool calls this is the last ``n`` messages. ``FixedWindow(0)`` keeps nothing.

    Args:
        n: how many groups to keep (>= 0).
    """

    def __init__(self, n: int) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ConfigurationError(f"FixedWindow(n={n!r}): n must be an integer >= 0")
        self.n = n

    def apply(self, messages: Sequence[Message]) -> list[Message]:
        """The last ``n`` groups of ``messages`` (fewer if the first one would be an orphan)."""
        if self.n == 0 or not messages:
            return []
        groups = message_groups(messages)
        return _from_group(messages, groups, max(0, len(groups) - self.n))

    def __repr__(self) -> str:
        return f"FixedWindow({self.n})"


class TokenWindow:
    """Keeps the newest groups that fit in ``max_tokens``, as counted by ``estimator``.

    The newest group is always kept, even when it alone is over budget (an empty window would
    lose the question being answered). Older groups are added newest first until the next one
    does not fit; the walk stops there, so the window is always a contiguous tail of the
    history. The estimator counts every part of a message: text, thinking, tool calls (names
    and JSON arguments), tool results, images and documents.

    Args:
        max_tokens: the budget (> 0).
        estimator: how to count; defaults to :class:`~goagent_py.memory.tokens.HeuristicEstimator`.
    """

    def __init__(self, max_tokens: int, *, estimator: TokenEstimator | None = None) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
            raise ConfigurationError(
                f"TokenWindow(max_tokens={max_tokens!r}): max_tokens must be a positive integer"
            )
        self.max_tokens = max_tokens
        self.estimator: TokenEstimator = (
            estimator if estimator is not None else HeuristicEstimator()
        )

    def apply(self, messages: Sequence[Message]) -> list[Message]:
        """The newest groups of ``messages`` that fit in the budget (the newest one always)."""
        if not messages:
            return []
        groups = message_groups(messages)

        def cost(group: tuple[int, int]) -> int:
            return sum(self.estimator.count(messages[i]) for i in range(*group))

        # The newest group that is not an orphan tool result is kept whatever it costs.
        last = len(groups) - 1
        while last >= 0 and _is_orphan(messages, groups[last]):
            last -= 1
        if last < 0:
            return []
        # Costs are computed newest first and only until the budget runs out.
        budget = self.max_tokens - sum(cost(g) for g in groups[last:])
        first = last
        while first > 0:
            needed = cost(groups[first - 1])
            if needed > budget:
                break
            budget -= needed
            first -= 1
        return _from_group(messages, groups, first)

    def __repr__(self) -> str:
        return f"TokenWindow({self.max_tokens}, estimator={self.estimator!r})"
