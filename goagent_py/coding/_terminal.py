"""Text the model controls, made safe to show on a terminal (see :mod:`goagent_py._terminal`:
the one helper every front end passes such text through, the coding agent's and the CLI's)."""

from __future__ import annotations

from goagent_py._terminal import printable

__all__ = ["printable"]
