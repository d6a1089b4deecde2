"""How long a server asked us to wait: the one reading of ``Retry-After`` (and OpenAI's
``retry-after-ms``), for the providers' errors and the retry policy alike.

RFC 9110 section 10.2.3: the value is delay-seconds (digits) or an HTTP date, always GMT. A
fraction of a second (``1.5``) is read too, as servers send it. A value that is neither (a
negative number, ``nan``, ``inf``, words) is unusable and reads as absent (None), so the
policy's own backoff applies: it is not read as "retry at once". A date in the past is 0. The
value is not capped here: the retry policy caps it at its own maximum delay.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime

__all__ = ["parse_retry_after", "retry_after_of"]

_SECONDS = re.compile(r"\d+(?:\.\d+)?")


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delay-seconds or an HTTP date.

    Args:
        value: the header's value (None or "" when absent).
        now: the current time for the HTTP-date form (UTC now by default; a time without a
            zone is UTC, as HTTP dates are).

    Returns:
        The seconds (>= 0; 0 for a date in the past), or None when the header is absent or
        unusable (a negative number, ``nan``, ``inf``, not a number nor a date).
    """
    if not value:
        return None
    text = value.strip()
    if _SECONDS.fullmatch(text):
        return float(text)
    try:
        import email.utils  # here: its imports cost ~5 ms, and few retries carry a date

        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000": the zone unknown; HTTP dates are GMT
        when = when.replace(tzinfo=UTC)
    if now is None:
        now = datetime.now(UTC)
    elif now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def retry_after_of(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds the server asked us to wait, from ``retry-after-ms`` or else ``retry-after``.

    Args:
        headers: the response headers (a case-insensitive mapping, e.g. ``httpx.Headers``).
        now: the current time for the HTTP-date form (see :func:`parse_retry_after`).

    Returns:
        Seconds (>= 0), or None when neither header is usable.
    """
    millis = (headers.get("retry-after-ms") or "").strip()
    if _SECONDS.fullmatch(millis):
        return float(millis) / 1000.0
    return parse_retry_after(headers.get("retry-after"), now=now)
