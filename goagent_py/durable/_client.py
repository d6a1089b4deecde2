"""The app side of a durable run: awaiting its result, streaming its events, deciding the
calls it waits on."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from temporalio.exceptions import ApplicationError

from goagent_py.approvals import ToolDecision
from goagent_py.errors import (
    ApprovalConflictError,
    ApprovalExpiredError,
    ConfigurationError,
    GoAgentError,
    GuardrailTripped,
    MaxIterationsError,
    NotPendingError,
)
from goagent_py.messages import ToolCall
from goagent_py.results import PendingCall

from ._results import expanded
from ._wire import (
    DECIDE_UPDATE,
    EVENTS_QUERY,
    EVENTS_UPDATE,
    PENDING_QUERY,
    DurableResult,
    DurableRunError,
    ErrorData,
    decision_to_data,
)


async def result_of(handle: Any, memory_of: Callable[[str], Any] | None = None) -> DurableResult:
    """Await a durable run's handle; a failure raises the matching goagent-py error.

    ``memory_of`` (``session_id -> short-term memory``, the workers' factory) puts back the
    content of the run's messages that crossed by reference (a big tool result, a big thinking
    block), as the workers do: the caller gets what the model read, not the reference.
    """
    from temporalio.client import WorkflowFailureError

    try:
        data = await handle.result()
    except WorkflowFailureError as exc:
        cause = exc.cause
        if isinstance(cause, ApplicationError) and cause.details:
            detail = cause.details[0]
            error = ErrorData.from_data(detail) if isinstance(detail, dict) else None
            if error is not None:
                if error.type == "MaxIterationsError":
                    raise MaxIterationsError(
                        int(error.extra.get("iterations", 0)),
                        str(error.extra.get("last_thought", "")),
                    ) from exc
                if error.type == "GuardrailTripped" and "guardrail" in error.extra:
                    raise GuardrailTripped(
                        str(error.extra["guardrail"]),
                        str(error.extra.get("kind", "")),
                        str(error.extra.get("reason", "")),
                    ) from exc
                raise DurableRunError(error.type, error.message) from exc
        raise DurableRunError(type(cause).__name__, str(cause)) from exc
    result = DurableResult.from_data(data)
    session = data.get("session_id")
    if memory_of is not None and session is not None:
        memory = memory_of(str(session))
        if memory is not None:
            result.messages = await expanded(memory, str(session), result.messages)
    return result


async def stream_events(handle: Any) -> AsyncIterator[dict[str, Any]]:
    """The events of a running durable run, as they happen, until it ends (long-polling
    workflow updates: no polling interval, no sleeps)."""
    from temporalio.client import WorkflowQueryFailedError, WorkflowUpdateFailedError
    from temporalio.service import RPCError

    seen = 0
    while True:
        try:
            batch = await handle.execute_update(EVENTS_UPDATE, seen)
        except (WorkflowUpdateFailedError, RPCError):
            # The run ended before this update reached it (its last step and its end can be
            # one workflow task): what it did since is read from its state, once.
            try:
                batch = await handle.query(EVENTS_QUERY, seen)
            except (WorkflowQueryFailedError, RPCError):
                return  # no worker answers: the run's result holds the messages
            batch["done"] = True
        for event in batch["events"]:
            yield event
        seen += len(batch["events"])
        if batch["done"]:
            return


async def pending_of_run(handle: Any) -> list[PendingCall]:
    """The calls a durable run waits on (the pending query); none once it ended."""
    from temporalio.client import WorkflowQueryFailedError
    from temporalio.service import RPCError

    try:
        data = await handle.query(PENDING_QUERY)
    except (WorkflowQueryFailedError, RPCError):  # a run started before approvals existed
        return []
    return [
        PendingCall(
            ToolCall(str(c["id"]), str(c["name"]), dict(c.get("arguments") or {})),
            "external" if c.get("kind") == "external" else "approval",
            None if c.get("deadline") is None else float(c["deadline"]),
            token=str(c.get("token") or ""),
            resolved=str(c.get("resolved") or ""),
        )
        for c in data.get("calls", [])
    ]


def _refusal(error: ErrorData) -> GoAgentError:
    """The goagent-py error of a refused decision."""
    if error.type == "ApprovalExpiredError" and "call_id" in error.extra:
        return ApprovalExpiredError(
            str(error.extra["call_id"]),
            float(error.extra["deadline"]),
            applied=str(error.extra.get("applied", "")),
        )
    if error.type == "ApprovalConflictError":
        return ApprovalConflictError(error.message)
    if error.type == "ConfigurationError":
        return ConfigurationError(error.message)
    return NotPendingError(error.message)


async def decide_run(handle: Any, decisions: Mapping[str, ToolDecision]) -> list[str]:
    """Send decisions to a durable run (the decide update); the ids that still wait.

    Raises:
        NotPendingError, ApprovalConflictError, ApprovalExpiredError, ConfigurationError: the
            run refused them (nothing of them was recorded); NotPendingError also when the
            run has finished.
    """
    from temporalio.client import WorkflowUpdateFailedError
    from temporalio.service import RPCError

    if not isinstance(decisions, Mapping) or not decisions:
        raise ConfigurationError(
            "decide() takes the decisions as a dict: {call_id: Approve() | Deny(...) | "
            "ToolOutput(...)}"
        )
    data = {str(i): decision_to_data(d) for i, d in decisions.items()}
    # Decisions that each name their wait are the same request when sent again: Temporal
    # answers an update whose id it has seen with the first one's outcome.
    update_id = None
    if all(d.get("token") for d in data.values()):
        digest = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()
        update_id = f"goagent.decide:{digest[:32]}"
    try:
        out = await handle.execute_update(DECIDE_UPDATE, data, id=update_id)
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        if isinstance(cause, ApplicationError) and cause.details:
            detail = cause.details[0]
            if isinstance(detail, dict):
                raise _refusal(ErrorData.from_data(detail)) from exc
        raise NotPendingError(
            f"the durable run {handle.id!r} refused the decisions: {cause}"
        ) from exc
    except RPCError as exc:  # the workflow has completed (or never existed)
        raise NotPendingError(
            f"the durable run {handle.id!r} has finished (or does not exist): nothing waits "
            f"for a decision ({exc.message})"
        ) from exc
    return [str(i) for i in out.get("waiting", [])]
