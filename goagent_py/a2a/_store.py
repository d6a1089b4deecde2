"""A bounded in-memory A2A task store: the SDK's ``InMemoryTaskStore`` keeps every task a
client ever started, so a client sending messages in a loop grew the server without end.

This one keeps at most ``max_tasks``; a new task past that drops the least recently saved tasks
that are not running (finished, canceled, failed, rejected: a ``GetTask`` for one is then "task
not found"). A running task is never dropped: the runner's ``max_running`` refuses new runs
first (docs/a2a.md).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from goagent_py.a2a._sdk import require

__all__ = ["bounded_task_store"]


def bounded_task_store(max_tasks: int, running: Callable[[str], bool]) -> Any:
    """A ``TaskStore`` keeping at most ``max_tasks`` tasks; ``running(task_id)`` says which
    ones may not be dropped (the runner's own record of its runs)."""
    tasks: Any = require("a2a.server.tasks")

    class _BoundedTaskStore(tasks.TaskStore):  # type: ignore[misc]
        def __init__(self) -> None:
            self._inner = tasks.InMemoryTaskStore()
            # task id -> the context it was saved with (delete resolves its owner from it),
            # least recently saved first
            self._saved: OrderedDict[str, Any] = OrderedDict()

        async def save(self, task: Any, context: Any) -> None:
            await self._inner.save(task, context)
            self._saved[task.id] = context
            self._saved.move_to_end(task.id)
            await self._drop_past_the_limit()

        async def _drop_past_the_limit(self) -> None:
            excess = len(self._saved) - max_tasks
            if excess <= 0:
                return
            idle = [t for t in self._saved if not running(t)][:excess]
            for task_id in idle:
                await self._inner.delete(task_id, self._saved.pop(task_id))

        async def get(self, task_id: str, context: Any) -> Any:
            return await self._inner.get(task_id, context)

        async def list(self, params: Any, context: Any) -> Any:
            return await self._inner.list(params, context)

        async def delete(self, task_id: str, context: Any) -> None:
            await self._inner.delete(task_id, context)
            self._saved.pop(task_id, None)

    return _BoundedTaskStore()
