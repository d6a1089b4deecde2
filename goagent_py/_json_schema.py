"""Checking a JSON schema before it reaches a model: against the meta-schema, and for what a
vendor's structured output cannot express.

A tool's parameters and an output type's schema go to the vendor as they are; one that is not
JSON Schema (``{"type": "dict"}``, ``{"type": "float"}``) used to fail only there, as a 400 on
the first request. :func:`check_schema` refuses it when the tool or agent is built, naming the
path. ``jsonschema`` is imported on first use, so ``import goagent_py`` stays light; its
validator for the meta-schema is built once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from goagent_py.errors import ConfigurationError

_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")
# What other dialects write, and the JSON Schema type meant (BFCL, Python, Java names).
_HINTS = {
    "dict": "object",
    "map": "object",
    "float": "number",
    "double": "number",
    "int": "integer",
    "long": "integer",
    "str": "string",
    "bool": "boolean",
    "list": "array",
    "tuple": "array",
    "none": "null",
}


@functools.cache
def _meta_validator(dialect: str) -> Any:
    import jsonschema
    from jsonschema.validators import validator_for

    cls = validator_for({"$schema": dialect}, default=jsonschema.Draft202012Validator)
    return cls(cls.META_SCHEMA)


def _path(parts: Any) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(root)"


_STRING = ("description", "title", "$comment", "format", "pattern", "$ref", "$id")
_SCHEMA = (
    "items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else",
    "unevaluatedProperties", "unevaluatedItems",
)  # fmt: skip
_SCHEMA_MAP = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_SCHEMA_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_NUMBER = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_COUNT = (
    "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
)  # fmt: skip
_ANY = ("const", "default")


def _plainly_valid(node: object, depth: int = 0) -> bool:
    """True when ``node`` is certainly valid under the 2020-12 meta-schema, judged by the
    common keywords alone; False means "ask jsonschema" (which is ~100x slower: its
    meta-schema resolves ``$dynamicRef`` at every level, ~5-10 ms a tool schema)."""
    if isinstance(node, bool):
        return True
    if not isinstance(node, Mapping) or depth > 32:
        return False
    for key, value in node.items():
        if key == "type":
            if not (
                value in _TYPES
                or (
                    isinstance(value, list)
                    and value
                    and all(v in _TYPES for v in value)
                    and len(set(value)) == len(value)
                )
            ):
                return False
        elif key in _STRING:
            if not isinstance(value, str):
                return False
        elif key in _SCHEMA_MAP:
            if not isinstance(value, Mapping) or not all(
                _plainly_valid(v, depth + 1) for v in value.values()
            ):
                return False
        elif key in _SCHEMA:
            if not _plainly_valid(value, depth + 1):
                return False
        elif key in _SCHEMA_LIST:
            if not isinstance(value, list) or not value:
                return False
            if not all(_plainly_valid(v, depth + 1) for v in value):
                return False
        elif key == "required":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                return False
            if len(set(value)) != len(value):
                return False
        elif key in _NUMBER:
            if isinstance(value, bool) or not isinstance(value, int | float):
                return False
        elif key in _COUNT:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                return False
        elif key in ("uniqueItems", "readOnly", "writeOnly", "deprecated"):
            if not isinstance(value, bool):
                return False
        elif key == "enum" or key == "examples":
            if not isinstance(value, list):
                return False
        elif key not in _ANY:
            return False
    return True


MAX_DEPTH = 128
"""The deepest nesting of JSON objects and arrays a schema may have (a schema of 64 nested
objects: vendors accept far fewer, OpenAI's strict mode 10). jsonschema's meta-schema check
recurses a few Python frames per level and exhausted the stack at ~300 nested objects, as a
RecursionError from ``tool_func`` (a 500 from serve's ``/v1`` given such a tool)."""


def _too_deep(schema: object) -> tuple[str | int, ...] | None:
    """The path of the first node nested deeper than :data:`MAX_DEPTH`, or None (iterative:
    a recursive walk would hit the same stack limit)."""
    todo: list[tuple[object, tuple[str | int, ...]]] = [(schema, ())]
    while todo:
        node, path = todo.pop()
        if len(path) > MAX_DEPTH:
            return path
        if isinstance(node, Mapping):
            todo.extend((v, (*path, str(k))) for k, v in node.items())
        elif isinstance(node, list):
            todo.extend((v, (*path, i)) for i, v in enumerate(node))
    return None


def schema_problem(schema: object) -> str | None:
    """What makes ``schema`` not a valid JSON Schema (path first), or None when it is one."""
    if not isinstance(schema, Mapping):
        return f"(root): expected a JSON Schema object, got {type(schema).__name__}"
    if "$schema" not in schema and _plainly_valid(schema):
        return None  # (it looks 33 levels deep at most: the walk below is only for the rest)
    deep = _too_deep(schema)
    if deep is not None:
        return f"{_path(deep)}: nested more than {MAX_DEPTH} levels deep"
    dialect = schema.get("$schema")
    validator = _meta_validator(
        dialect if isinstance(dialect, str) else "https://json-schema.org/draft/2020-12/schema"
    )
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(schema))
    if error is None:
        return None
    where = list(error.absolute_path)
    # A bad "type" fails the meta-schema's anyOf with a vague message: name the types instead.
    at_type = where[-1:] == ["type"] or (where[-2:-1] == ["type"] and isinstance(where[-1], int))
    if at_type and isinstance(error.instance, str | list):
        bad = [error.instance] if isinstance(error.instance, str) else error.instance
        unknown = [t for t in bad if t not in _TYPES]
        if unknown:
            hint = _HINTS.get(str(unknown[0]).lower())
            return (
                f"{_path(where)}: {unknown[0]!r} is not a JSON Schema type"
                + (f" (use {hint!r})" if hint else "")
                + f"; the types are {', '.join(_TYPES)}"
            )
    return f"{_path(where)}: {error.message}"


def check_schema(schema: object, *, what: str) -> None:
    """Refuse ``schema`` unless it is a valid JSON Schema.

    Args:
        schema: the schema.
        what: what it is, for the message ("tool 'f' parameters").

    Raises:
        ConfigurationError: it is not valid JSON Schema; the message names the path.
    """
    problem = schema_problem(schema)
    if problem is not None:
        raise ConfigurationError(f"{what} is not valid JSON Schema at {problem}")


_CHECKED: dict[int, object] = {}
_CHECKED_MAX = 4096


def check_parameters_once(definition: object, parameters: object, *, what: str) -> None:
    """:func:`check_schema` for a tool definition, skipped when this very definition object
    passed before (an agent built per request re-checks nothing). The cache holds the
    definitions it names, so an id is never reused while it is there."""
    key = id(definition)
    if _CHECKED.get(key) is definition:
        return
    check_schema(parameters, what=what)
    if len(_CHECKED) >= _CHECKED_MAX:
        _CHECKED.clear()
    _CHECKED[key] = definition


def _children(node: Mapping[str, Any]) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """The sub-schemas directly under ``node`` (a schema object), each with its path below it.

    Only the keywords that hold schemas are entered: a ``properties`` (or ``$defs``...) map by
    its entries, so a field named ``type``, ``minimum`` or ``default`` is a field; the values
    of ``enum``, ``const``, ``default`` and ``examples`` are data."""
    for key, value in node.items():
        if key in _SCHEMA_MAP and isinstance(value, Mapping):
            for name, sub in value.items():
                yield (key, name), sub
        elif key in _SCHEMA_LIST and isinstance(value, list):
            for i, sub in enumerate(value):
                yield (key, i), sub
        elif key in _SCHEMA:
            if isinstance(value, list):  # ``items`` as a list (drafts before 2020-12)
                for i, sub in enumerate(value):
                    yield (key, i), sub
            else:
                yield (key,), value


def walk_schema(
    node: object, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """Every sub-schema of ``node`` with its path (only keywords that hold schemas are
    entered: see :func:`_children`)."""
    yield path, node
    if isinstance(node, Mapping):
        for below, sub in _children(node):
            yield from walk_schema(sub, (*path, *below))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from walk_schema(value, (*path, i))


def map_schema(node: Any, change: Callable[[dict[str, Any]], Any]) -> Any:
    """``node`` rebuilt with ``change`` applied to every schema object in it, innermost first
    (``change`` gets a new dict whose sub-schemas are changed already; what it returns takes
    the object's place). The keywords entered are those of :func:`_children`; every other
    value (data, strings, numbers) is kept as it is."""
    if isinstance(node, list):
        return [map_schema(v, change) for v in node]
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SCHEMA_MAP and isinstance(value, Mapping):
            out[key] = {name: map_schema(sub, change) for name, sub in value.items()}
        elif (key in _SCHEMA_LIST or key in _SCHEMA) and isinstance(value, list):
            out[key] = [map_schema(sub, change) for sub in value]
        elif key in _SCHEMA:
            out[key] = map_schema(value, change)
        else:
            out[key] = value
    return change(out)


def _refs(node: Mapping[str, Any]) -> dict[str, set[str]]:
    """Each ``$defs`` entry and the ``$defs`` entries it refers to."""
    graph: dict[str, set[str]] = {}
    for name, body in (node.get("$defs") or {}).items():
        graph[name] = {
            str(v).removeprefix("#/$defs/")
            for _, sub in walk_schema(body, ())
            if isinstance(sub, Mapping)
            for k, v in sub.items()
            if k == "$ref" and str(v).startswith("#/$defs/")
        }
    return graph


def recursive_def(schema: Mapping[str, Any]) -> str | None:
    """The name of a ``$defs`` entry that refers back to itself (directly or not), or None."""
    graph = _refs(schema)
    for start in graph:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            name = todo.pop()
            if name == start:
                return start
            if name not in seen:
                seen.add(name)
                todo.extend(graph.get(name, ()))
    for path, node in walk_schema(schema, ()):
        if isinstance(node, Mapping) and node.get("$ref") == "#" and path:
            return "(root)"
    return None


def first_keyword(schema: Mapping[str, Any], keywords: tuple[str, ...]) -> str | None:
    """The path of the first of ``keywords`` used anywhere in ``schema``, or None."""
    for path, node in walk_schema(schema, ()):
        if isinstance(node, Mapping):
            for key in keywords:
                if key in node:
                    return _path((*path, key))
    return None
