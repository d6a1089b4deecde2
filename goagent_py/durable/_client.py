"""The app side of a durable run: awaiting its result and streaming its events."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from temporalio.exceptions import ApplicationError

from goagent_py.errors import MaxIterationsError

from ._wire import EVENTS_QUERY, EVENTS_UPDATE, DurableResult, DurableRunError, ErrorData


async def result_of(handle: Any) -> DurableResult:
    """Await a durable run's handle; a failure raises the matching goagent-py error."""
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
                raise DurableRunError(error.type, error.message) from exc
        raise DurableRunError(type(cause).__name__, str(cause)) from exc
    return DurableResult.from_data(data)


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
