"""Counting the messages the framework deep-copies (its one deep copy, ``goagent_py/_deepcopy``),
for the tests that prove a search or a consolidation copies only what it hands out."""

from __future__ import annotations

from typing import Any

import pytest

from goagent_py.messages import Message


def count_message_copies(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A one-item list counting the messages deep-copied from now on (undone with
    ``monkeypatch``); set ``[0] = 0`` to count from a later point."""
    from goagent_py import _deepcopy

    count = [0]
    copier = _deepcopy._COPIERS[Message]

    def counting(value: Any, memo: dict[int, Any]) -> Any:
        count[0] += 1
        return copier(value, memo)

    monkeypatch.setitem(_deepcopy._COPIERS, Message, counting)
    return count
