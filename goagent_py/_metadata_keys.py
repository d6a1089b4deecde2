"""The metadata keys the framework writes on messages (a leaf module: no imports, so memory,
the loop and the validator all read them without importing each other)."""

from __future__ import annotations

__all__ = ["SYNTHETIC_METADATA_KEY", "UI_ONLY_KEY"]

SYNTHETIC_METADATA_KEY = "goagent.synthetic"
"""Set on a message the framework wrote for a stop (value: "aborted", "interrupted", "failed",
"max_iterations"), so the record tells it from what the model or a tool wrote."""

UI_ONLY_KEY = "goagent.ui_only"
"""Messages with this metadata set stay in the transcript for UIs and never reach the model."""
