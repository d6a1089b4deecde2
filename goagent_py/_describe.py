"""Writing out exceptions raised by code we do not own (tools, providers, stores, hooks).

An exception's ``__str__`` is foreign code too: one that raises would, inside an f-string
building our own error, replace the error being reported with that second one (or crash the
run where the error only had to be logged). Everything that quotes such an exception goes
through :func:`message_of` or :func:`described`.
"""

from __future__ import annotations

__all__ = ["described", "message_of"]


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
