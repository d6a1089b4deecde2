"""The run's deps, typed: the one check behind every ``deps_as`` (hooks' ``RunContext``, a tool's
``ToolContext``, an output validator's ``OutputContext``)."""

from __future__ import annotations

from typing import Any, TypeVar

D = TypeVar("D")


def deps_as(deps: Any, kind: type[D]) -> D:
    """``deps`` as a ``kind``.

    Raises:
        TypeError: ``deps`` is not a ``kind`` (the message names both and says what to pass).
    """
    if not isinstance(deps, kind):
        raise TypeError(
            f"this run's deps are {type(deps).__name__}, not {kind.__name__}: pass "
            f"deps={kind.__name__}(...) to the run (agent.run, session.prompt or "
            "session.continue_)"
        )
    return deps
