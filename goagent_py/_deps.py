"""The run's deps, typed: the one check behind every ``deps_as`` (hooks' ``RunContext``, a tool's
``ToolContext``, an output validator's ``OutputContext``)."""

from __future__ import annotations

from typing import Any, TypeVar, get_origin

D = TypeVar("D")


def deps_as(deps: Any, kind: type[D]) -> D:
    """``deps`` as a ``kind`` (a parameterized generic, ``dict[str, int]``, is checked by its
    class: ``dict``).

    Raises:
        TypeError: ``deps`` is not a ``kind`` (the message names both and says what to pass),
            or ``kind`` is a type ``isinstance`` cannot check (a plain ``Protocol``).
    """
    checked: Any = get_origin(kind) or kind
    try:
        matches = isinstance(deps, checked)
    except TypeError:
        raise TypeError(
            f"deps_as({getattr(kind, '__name__', kind)!s}): isinstance cannot check this type; "
            "pass a class (a dataclass, a pydantic model) or a @runtime_checkable Protocol"
        ) from None
    if not matches:
        name = getattr(checked, "__name__", str(checked))
        raise TypeError(
            f"this run's deps are {type(deps).__name__}, not {name}: pass "
            f"deps={name}(...) to the run (agent.run, session.prompt or session.continue_)"
        )
    return deps  # type: ignore[no-any-return]
