"""The A2A client's error, in the goagent-py error tree::

GoAgentError
└── A2AError        a remote agent could not be reached, or its task did not complete
"""

from __future__ import annotations

from typing import Any

from goagent_py.errors import GoAgentError

__all__ = ["A2AError"]


class A2AError(GoAgentError):
    """A remote A2A agent could not be reached, or its task ended without completing.

    Attributes:
        agent: the agent's URL (or name, once its card is known).
        detail: what went wrong, as the remote agent or the transport said it.
        state: the task's last state ("failed", "rejected", "canceled", ...; "" when no task
            was started).
    """

    def __init__(self, agent: str, detail: str, *, state: str = "") -> None:
        self.agent = agent
        self.detail = detail
        self.state = state
        super().__init__(f"A2A agent {agent!r}: {detail}")

    def __reduce__(self) -> Any:
        return self._reduce_with(self.agent, self.detail, state=self.state)
