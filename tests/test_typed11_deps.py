"""``deps_as`` with the types people write: a parameterized generic is checked by its class,
and a type ``isinstance`` cannot check is refused with what to pass instead
(docs/typed-output.md, "Dependencies for tools")."""

from __future__ import annotations

from typing import Protocol

import pytest

from goagent_py import HookContext
from goagent_py.output import OutputContext


class Named(Protocol):
    name: str


def test_a_parameterized_generic_is_checked_by_its_class() -> None:
    """``deps_as(dict[str, int])`` raised "isinstance() argument 2 cannot be a parameterized
    generic", naming neither the deps nor what to do."""
    ctx = OutputContext(deps={"a": 1})
    assert ctx.deps_as(dict[str, int]) == {"a": 1}
    with pytest.raises(TypeError, match="this run's deps are dict, not list"):
        ctx.deps_as(list[int])


def test_a_type_isinstance_cannot_check_is_refused_with_what_to_pass() -> None:
    with pytest.raises(TypeError, match=r"deps_as.*cannot check.*pass a class"):
        HookContext("r", deps=object()).deps_as(Named)  # type: ignore[type-abstract]
