"""The error tree of goagent-py.

Every error the framework raises derives from :class:`GoAgentError`. Misuse (a bad option, a
missing extra, an invalid media type) is kept apart from failures at run time::

    GoAgentError
    ├── ConfigurationError              misuse, raised as early as possible (at construction)
    │   ├── MissingExtraError           an optional dependency is missing (also an ImportError)
    │   └── InvalidMediaTypeError       unsupported image/document media type (also a ValueError)
    ├── UnsupportedContentError         a provider cannot send this kind of content
    ├── ProviderError                   the model call failed (status, body, Retry-After, cause)
    ├── MaxIterationsError              the iteration budget ran out (iterations, last_thought)
    ├── MemoryStoreError                short-term or long-term memory failed to load or store
    ├── SessionBusyError                a session (or its history lease) is in use by another run
    ├── NoEmbeddableContentError        nothing in the input can be embedded (e.g. image-only text)
    └── ToolError                       base of what a tool call can end in; the model reads these
        ├── ToolNotFoundError           the model named a tool that does not exist
        ├── ToolArgumentsError          the arguments failed validation
        ├── ToolExecutionError          the tool failed; ``cause`` is the error below (or any other)
        ├── ToolPanicError              the tool raised an unexpected exception (traceback kept)
        ├── ToolTimeoutError            the tool ran past its timeout
        ├── ToolBlockedError            ``before_tool_call`` refused the call
        └── CircuitOpenError            the tool's circuit breaker is open

Exceptions here are plain data: attributes, a message, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

__all__ = [
    "CircuitOpenError",
    "ConfigurationError",
    "GoAgentError",
    "InvalidMediaTypeError",
    "MaxIterationsError",
    "MemoryStoreError",
    "MissingExtraError",
    "NoEmbeddableContentError",
    "ProviderError",
    "SessionBusyError",
    "ToolArgumentsError",
    "ToolBlockedError",
    "ToolError",
    "ToolExecutionError",
    "ToolNotFoundError",
    "ToolPanicError",
    "ToolTimeoutError",
    "UnsupportedContentError",
]


class GoAgentError(Exception):
    """Base of every error raised by goagent-py."""


class ConfigurationError(GoAgentError):
    """The framework was used wrongly: a bad option, a bad argument, a missing dependency."""


class MissingExtraError(ConfigurationError, ImportError):
    """An optional dependency is missing; the message names the extra that installs it."""

    def __init__(self, package: str, extra: str, *, feature: str = "") -> None:
        self.package = package
        self.extra = extra
        what = f" for {feature}" if feature else ""
        super().__init__(
            f'{package} is required{what}: install it with pip install "goagent-py[{extra}]"'
        )


class InvalidMediaTypeError(ConfigurationError, ValueError):
    """An image or document block carries a media type that is not supported."""

    def __init__(self, kind: str, media_type: str, allowed: tuple[str, ...]) -> None:
        self.kind = kind
        self.media_type = media_type
        self.allowed = allowed
        super().__init__(
            f"invalid media type: {kind} media type {media_type!r} is not supported; "
            f"use one of {', '.join(allowed)}"
        )


class UnsupportedContentError(GoAgentError):
    """A provider cannot send a content block of this kind."""

    def __init__(self, content_type: str, provider: str, reason: str = "") -> None:
        self.content_type = content_type
        self.provider = provider
        self.reason = reason
        text = f"provider {provider!r} does not support {content_type} content"
        super().__init__(f"{text}: {reason}" if reason else text)


class ProviderError(GoAgentError):
    """A model call failed.

    Attributes:
        provider: the provider's name ("anthropic", "openai", ...), or "" when unknown.
        status: the HTTP status, or None when the request never got an answer.
        error_type: the vendor's error type from the body (e.g. "overloaded_error"), if any.
        body: the response body (text), if any.
        retry_after: seconds the server asked us to wait, if it said so.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int | None = None,
        error_type: str = "",
        body: str = "",
        retry_after: float | None = None,
    ) -> None:
        self.provider = provider
        self.status = status
        self.error_type = error_type
        self.body = body
        self.retry_after = retry_after
        prefix = f"provider {provider!r}" if provider else "provider"
        super().__init__(f"{prefix}: {message}")


class MaxIterationsError(GoAgentError):
    """The agent used its whole iteration budget without reaching a final answer."""

    def __init__(self, iterations: int, last_thought: str) -> None:
        self.iterations = iterations
        self.last_thought = last_thought
        super().__init__(
            f"agent reached max iterations ({iterations}): last thought: {last_thought}"
        )


class MemoryStoreError(GoAgentError):
    """Short-term or long-term memory could not be loaded or stored."""


class SessionBusyError(GoAgentError):
    """A session (or a session's history lease) is in use by another run.

    Attributes:
        session_id: the busy session ("" when not known).
        holder: who holds it (a lease owner or a durable run's id; "" when not known).
    """

    def __init__(self, message: str, *, session_id: str = "", holder: str = "") -> None:
        # Keyword-only extras: the default pickling (args + __dict__) round-trips them.
        super().__init__(message)
        self.session_id = session_id
        self.holder = holder


class NoEmbeddableContentError(GoAgentError, ValueError):
    """The embedder found nothing it can embed in the input (e.g. only images, for a text model)."""


class ToolError(GoAgentError):
    """Base of the errors a tool call can end in. The model reads their text."""

    tool_name: str


class ToolNotFoundError(ToolError):
    """The model asked for a tool that is not registered."""

    def __init__(self, tool_name: str, available: tuple[str, ...] = ()) -> None:
        self.tool_name = tool_name
        self.available = available
        names = ", ".join(available) if available else "none"
        super().__init__(f"tool not found: {tool_name!r}; available tools: {names}")


class ToolArgumentsError(ToolError):
    """The model's arguments for a tool failed validation."""

    def __init__(self, tool_name: str, details: str) -> None:
        self.tool_name = tool_name
        self.details = details
        super().__init__(f"invalid arguments for tool {tool_name!r}: {details}")


class ToolExecutionError(ToolError):
    """A tool call failed; ``cause`` is the underlying error (also ``__cause__``)."""

    def __init__(self, tool_name: str, arguments: Mapping[str, Any], cause: BaseException) -> None:
        self.tool_name = tool_name
        self.arguments = dict(arguments)
        self.cause = cause
        # A cause that already names this tool says it best ("tool 'x' timed out after 5s").
        if isinstance(cause, ToolError) and getattr(cause, "tool_name", None) == tool_name:
            super().__init__(str(cause))
        else:
            super().__init__(f"tool {tool_name!r} failed: {cause}")
        self.__cause__ = cause


class ToolPanicError(ToolError):
    """A tool raised an unexpected exception; the traceback is kept for logs, not for the model."""

    def __init__(self, tool_name: str, value: BaseException, traceback: str) -> None:
        self.tool_name = tool_name
        self.value = value
        self.traceback = traceback
        super().__init__(f"tool {tool_name!r} raised {type(value).__name__}: {value}")


class ToolTimeoutError(ToolError):
    """A tool ran past the agent's tool timeout and was cancelled (or abandoned, if sync)."""

    def __init__(self, tool_name: str, timeout: float) -> None:
        self.tool_name = tool_name
        self.timeout = timeout
        super().__init__(f"tool {tool_name!r} timed out after {timeout:g}s")


class ToolBlockedError(ToolError):
    """``before_tool_call`` refused the call; ``reason`` is shown to the model."""

    def __init__(self, tool_name: str, reason: str) -> None:
        self.tool_name = tool_name
        self.reason = reason
        super().__init__(f"tool {tool_name!r} was not run: {reason}")


class CircuitOpenError(ToolError):
    """The tool failed repeatedly; calls are refused until ``open_until`` (UTC)."""

    def __init__(self, tool_name: str, open_until: datetime) -> None:
        self.tool_name = tool_name
        self.open_until = open_until
        super().__init__(
            f"tool {tool_name!r} is unavailable: circuit breaker open until "
            f"{open_until.isoformat(timespec='seconds')} after repeated failures"
        )
