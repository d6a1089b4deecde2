"""The environment a stdio MCP server starts with: an allowlist, never the parent's secrets."""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["ALLOWED_ENV", "server_env"]

# What a well-behaved command line program needs to find itself, its home and its locale.
# Everything else (provider API keys, cloud credentials, tokens) stays in the parent.
ALLOWED_ENV: tuple[str, ...] = ("PATH", "HOME", "LANG", "TERM", "TMPDIR", "USER", "TZ")
_ALLOWED_PREFIXES: tuple[str, ...] = ("LC_",)


def server_env(
    extra: Mapping[str, str] | None = None, *, parent: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The allowlisted variables of ``parent`` (default ``os.environ``), plus ``extra``.

    Values that start with ``()`` are skipped: they are exported shell functions, not settings.
    """
    source = os.environ if parent is None else parent
    env = {
        key: value
        for key, value in source.items()
        if (key in ALLOWED_ENV or key.startswith(_ALLOWED_PREFIXES)) and not value.startswith("()")
    }
    env.update(extra or {})
    return env
