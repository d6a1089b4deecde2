"""JSON values that cannot change: the schemas goagent-py builds itself and shares.

A tool's JSON schema is made once per function and then sent in every request of every run
(the model reads it each turn). Until it was frozen, each snapshot a scripted provider recorded
had to prove the schema unchanged (a marshal of it, three a benchmark run: issue 36's largest
single piece of a test double's cost) or copy it, and a caller that changed
``tool.definition.parameters`` changed the cached schema of every tool made from the function.
The same holds for every schema built once and handed to many holders: the ``prompt`` schema
of every sub-agent, flow and A2A tool, and a typed output's schema (sent in every run).

:func:`freeze` makes a deep, immutable twin of a JSON value: :class:`FrozenDict` and
:class:`FrozenList` are ``dict`` and ``list`` (``isinstance``, ``==``, JSON encoders, pydantic
and ``dict(...)`` see plain containers) whose every change raises ``TypeError``; strings,
numbers, booleans and ``None`` are kept. Because only :func:`freeze` makes them, and only
around values it froze, a :class:`FrozenDict` is immutable all the way down, so holders share
it instead of copying it (the scripted providers' records, :mod:`goagent_py._deepcopy`'s
snapshots). ``copy.copy`` and ``copy.deepcopy`` give plain, mutable copies (what a caller who
copies a schema means to change), and pickling keeps the frozen type.
"""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["FrozenDict", "FrozenList", "freeze", "thaw"]

_LEAVES = frozenset((str, int, float, bool, type(None)))


def _refused(what: object) -> NoReturn:
    raise TypeError(
        f"this {type(what).__name__} is part of a JSON schema goagent-py built once and shares "
        "with every tool or run that uses it, so it cannot be changed: change a copy "
        "(copy.deepcopy(definition.parameters)) and give it to ToolDefinition or tool_func"
    )


class FrozenDict(dict[str, Any]):
    """A ``dict`` of frozen JSON values that refuses every change (made by :func:`freeze`)."""

    __slots__ = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _refused(self)  # filled once, by :func:`freeze`, through ``dict.update``

    def __setitem__(self, key: str, value: Any) -> None:
        _refused(self)

    def __delitem__(self, key: str) -> None:
        _refused(self)

    def __ior__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        _refused(self)

    def clear(self) -> None:
        _refused(self)

    def pop(self, *args: Any) -> Any:
        _refused(self)

    def popitem(self) -> tuple[str, Any]:
        _refused(self)

    def setdefault(self, *args: Any) -> Any:
        _refused(self)

    def update(self, *args: Any, **kwargs: Any) -> None:
        _refused(self)

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return thaw(self)  # type: ignore[no-any-return]

    def __reduce__(self) -> tuple[Any, ...]:
        return (freeze, (thaw(self),))


class FrozenList(list[Any]):
    """A ``list`` of frozen JSON values that refuses every change (made by :func:`freeze`)."""

    __slots__ = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _refused(self)  # filled once, by :func:`freeze`, through ``list.extend``

    def __setitem__(self, index: Any, value: Any) -> None:
        _refused(self)

    def __delitem__(self, index: Any) -> None:
        _refused(self)

    def __iadd__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        _refused(self)

    def __imul__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        _refused(self)

    def append(self, value: Any) -> None:
        _refused(self)

    def extend(self, values: Any) -> None:
        _refused(self)

    def insert(self, index: Any, value: Any) -> None:
        _refused(self)

    def remove(self, value: Any) -> None:
        _refused(self)

    def pop(self, *args: Any) -> Any:
        _refused(self)

    def clear(self) -> None:
        _refused(self)

    def sort(self, *args: Any, **kwargs: Any) -> None:
        _refused(self)

    def reverse(self) -> None:
        _refused(self)

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return thaw(self)  # type: ignore[no-any-return]

    def __reduce__(self) -> tuple[Any, ...]:
        return (freeze, (thaw(self),))


def freeze(value: Any) -> Any:
    """A frozen twin of the JSON value ``value`` (``dict`` with ``str`` keys, ``list``,
    ``tuple`` as a list, strings, numbers, booleans, ``None``); ``value`` itself, unfrozen,
    when it holds anything else (then nothing can be shared: its holders copy it as before)."""
    try:
        return _frozen(value)
    except _NotJson:
        return value


class _NotJson(Exception):
    pass


def _frozen(value: Any) -> Any:
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind is dict or kind is FrozenDict:
        out = dict.__new__(FrozenDict)
        for k, v in value.items():
            if type(k) is not str:
                raise _NotJson
            dict.__setitem__(out, k, _frozen(v))
        return out
    if kind is list or kind is tuple or kind is FrozenList:
        items = list.__new__(FrozenList)
        list.extend(items, [_frozen(v) for v in value])
        return items
    raise _NotJson


def thaw(value: Any) -> Any:
    """A plain, mutable deep copy of a frozen JSON value."""
    kind = type(value)
    if kind is FrozenDict or kind is dict:
        return {k: thaw(v) for k, v in value.items()}
    if kind is FrozenList or kind is list:
        return [thaw(v) for v in value]
    return value
