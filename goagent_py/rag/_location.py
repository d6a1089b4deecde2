"""Where a chunk sits in its document, in words (shared by results and formatters)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["describe_location"]


def describe_location(metadata: Mapping[str, Any]) -> str:
    """Where a chunk is in its document, for citations: 'section "A > B", lines 3-9' or 'page 2'.

    Built from the chunk metadata the pipeline records (``heading``, ``page``, ``line_start``,
    ``line_end``); "" when none is known.
    """
    parts = []
    heading = metadata.get("heading")
    if isinstance(heading, str) and heading:
        parts.append(f'section "{heading}"')
    page = metadata.get("page")
    if isinstance(page, int) and not isinstance(page, bool):
        parts.append(f"page {page}")
    start, end = metadata.get("line_start"), metadata.get("line_end")
    if isinstance(start, int) and isinstance(end, int):
        parts.append(f"line {start}" if start == end else f"lines {start}-{end}")
    return ", ".join(parts)
