"""Writing out exceptions raised by code we do not own (tools, providers, stores, hooks).

An exception's ``__str__`` is foreign code too: one that raises would, inside an f-string
building our own error, replace the error being reported with that second one (or crash the
run where the error only had to be logged). Everything that quotes such an exception goes
through :func:`message_of` or :func:`described`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["described", "error_type", "message_of", "validation_errors"]

_LISTED_ERRORS = 10
_LOC_PART_CHARS = 64


def message_of(error: BaseException) -> str:
    """``str(error)``, or ``"<str() failed: Type>"`` when that raises."""
    try:
        return str(error)
    except Exception as exc:  # any failure of foreign code: described instead
        return f"<str() failed: {type(exc).__name__}>"


def described(error: BaseException) -> str:
    """``"Type: message"`` (``"Type"`` when the message is empty) for ``error``; one whose
    ``__str__`` raises is described (:func:`message_of`), never replaced by that error."""
    text = message_of(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def validation_errors(
    errors: Sequence[Mapping[str, Any]], root: str, *, under: tuple[str, ...] = ()
) -> str:
    """pydantic's errors (``exc.errors(include_url=False)``) as ``"loc: msg; ..."`` for a model
    to read, each location ``under`` a prefix, ``root`` naming an empty one: the first ten, then
    how many more. Every item of a 5,000-item list the model got wrong made 384 KB of feedback
    (about 100,000 tokens) and an exception message as long; a location part the model wrote (a
    dict key) is cut short too."""
    parts = []
    for error in errors[:_LISTED_ERRORS]:
        loc = ".".join(_short(str(p)) for p in (*under, *error.get("loc", ()))) or root
        parts.append(f"{loc}: {error.get('msg', '')}")
    more = len(errors) - _LISTED_ERRORS
    if more > 0:
        parts.append(f"and {more} more errors")
    return "; ".join(parts)


def _short(text: str) -> str:
    return text if len(text) <= _LOC_PART_CHARS else f"{text[:_LOC_PART_CHARS]}..."


def error_type(error: BaseException) -> str:
    """A low-cardinality ``error.type`` for ``error`` (OpenTelemetry's attribute: the one source
    every span and metric of goagent-py records it from).

    A provider error reads as the vendor's error type from its body (``overloaded_error``,
    ``rate_limit_error``...): that is what went wrong, even when it arrived mid-stream after an
    HTTP 200; else as its HTTP status; anything else as its fully qualified class name (a
    builtin's bare: ``TimeoutError``). ``ToolExecutionError`` is unwrapped to its cause: the type
    of what the tool raised. Attributes are read defensively: a foreign exception's property
    that raises is not looked at, never raised from here.
    """
    kind = _attribute(error, "error_type")
    if isinstance(kind, str) and _is_low_cardinality(kind):
        return kind
    status = _attribute(error, "status")
    if isinstance(status, int) and not isinstance(status, bool):
        return str(status)
    cause = _attribute(error, "cause")
    if type(error).__name__ == "ToolExecutionError" and isinstance(cause, BaseException):
        error = cause
    cls = type(error)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def _attribute(error: BaseException, name: str) -> object:
    try:
        return getattr(error, name, None)
    except Exception:  # a property of foreign code that raises: as if it were not there
        return None


_MAX_ERROR_TYPE_CHARS = 64


def _is_low_cardinality(kind: str) -> bool:
    # A vendor's enum value ("overloaded_error", "InternalServerError"), not a sentence that a
    # compatible server put where the type goes: that would make one metric series per message.
    return (
        0 < len(kind) <= _MAX_ERROR_TYPE_CHARS and kind.replace("_", "").replace(".", "").isalnum()
    )
