"""The metadata keys the framework writes on messages (a leaf module: no imports, so memory,
the loop and the validator all read them without importing each other)."""

from __future__ import annotations

__all__ = [
    "CLAIM_KEY",
    "DECISIONS_KEY",
    "PENDING_KEY",
    "SYNTHETIC_METADATA_KEY",
    "UI_ONLY_KEY",
]

SYNTHETIC_METADATA_KEY = "goagent.synthetic"
"""Set on a message the framework wrote for a stop (value: "aborted", "interrupted", "failed",
"max_iterations"), so the record tells it from what the model or a tool wrote."""

UI_ONLY_KEY = "goagent.ui_only"
"""Messages with this metadata set stay in the transcript for UIs and never reach the model."""

PENDING_KEY = "goagent.pending"
"""Set on an assistant message whose tool calls wait for a person's decisions (or for an
external tool's results): ``{"token": ..., "calls": [{"id", "name", "arguments", "kind",
"deadline"}]}``. The calls of such a message, when it is the last one sent to the model, are
waiting, not unanswered (docs/approvals.md)."""

DECISIONS_KEY = "goagent.decisions"
"""Set on that message when its calls were decided: ``{call id: {"decision": ..., ...}}``, the
record of who-said-what that replaced :data:`PENDING_KEY` in one compare-and-set."""

CLAIM_KEY = "goagent.claim"
"""Set beside :data:`DECISIONS_KEY` by a durable run's claim: the claim's own id (the run's
and the wait's), so a retried claim that took effect knows its own settlement from another
decider's with the same decisions (durable11)."""
