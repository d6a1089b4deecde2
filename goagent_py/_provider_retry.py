"""What a provider error's own answer says about retrying it (private).

Used by :func:`goagent_py.resilience.is_retryable_provider_error` before it looks at the HTTP
status, in this order:

1. the server's ``x-should-retry`` header (``true`` or ``false``), which the official Anthropic
   and OpenAI SDKs obey over everything else: the server knows best;
2. a quota or spend limit that no wait will lift (OpenAI ``insufficient_quota`` and its billing
   codes, Anthropic ``enforced_spend_limit_reached``): never retried, although it is a 429;
3. a vendor error type in the body that means "busy, try again": Anthropic
   ``overloaded_error``/``rate_limit_error``/``api_error``/``timeout_error``, OpenAI
   ``server_error``/``service_unavailable_error`` and the codes ``server_is_overloaded``,
   ``slow_down``, ``rate_limit_exceeded``; Ollama's untyped mid-stream errors are given one of
   these types by the provider. This is what classifies an error sent mid-stream (HTTP 200);
4. for an error sent with HTTP 200, a numeric ``code`` in its error object (vLLM and other
   OpenAI-compatible servers put the HTTP status they would have sent there): retried as that
   status would be (408, 409, 429, 5xx).

Anything else is left to the HTTP status.
"""

from __future__ import annotations

from typing import Any

from goagent_py._json_text import loads
from goagent_py.errors import ProviderError

__all__ = [
    "RETRYABLE_ERROR_TYPES",
    "is_quota_exhausted",
    "parse_should_retry",
    "provider_verdict",
    "server_should_retry",
    "set_server_should_retry",
]

RETRYABLE_ERROR_TYPES = frozenset(
    {
        # Anthropic error types
        "overloaded_error",
        "rate_limit_error",
        "api_error",
        "timeout_error",
        # OpenAI (and compatible servers) error types and codes
        "server_error",
        "service_unavailable_error",
        "server_is_overloaded",
        "slow_down",
        "rate_limit_exceeded",
    }
)

# 429s (and mid-stream errors) that say the account is out of money or quota: waiting seconds
# does not fix them, so retrying only burns the run's time.
_QUOTA_CODES = frozenset(
    {
        "insufficient_quota",
        "credit_balance_exhausted",
        "organization_spend_limit_exceeded",
        "project_spend_limit_exceeded",
        "organization_usage_limit_exceeded",
        "enforced_spend_limit_reached",
    }
)
_QUOTA_PHRASES = ("exceeded your current quota", "insufficient_quota")

_SHOULD_RETRY = "should_retry"


def set_server_should_retry(error: ProviderError, value: bool | None) -> None:
    """Record the server's ``x-should-retry`` verdict on ``error`` (None: it gave none)."""
    # An instance attribute until ProviderError declares the field; pickling keeps __dict__.
    vars(error)[_SHOULD_RETRY] = value


def server_should_retry(error: BaseException) -> bool | None:
    """The server's ``x-should-retry`` verdict recorded on ``error``, or None."""
    value = getattr(error, _SHOULD_RETRY, None)
    return value if isinstance(value, bool) else None


def parse_should_retry(value: str | None) -> bool | None:
    """``x-should-retry``'s value as a verdict: "true" or "false" (any case), else None."""
    text = (value or "").strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    return None


def _error_object(body: str) -> dict[str, Any]:
    """The ``error`` object of a vendor body (``{"error": {...}}``), or {}."""
    if not body or "{" not in body:
        return {}
    try:
        data = loads(body)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    error = data.get("error")
    return error if isinstance(error, dict) else {}


def _codes(error: ProviderError) -> set[str]:
    """Every type and code the error carries: its ``error_type`` and the body's fields."""
    found = {error.error_type} if error.error_type else set()
    obj = _error_object(error.body)
    for key in ("type", "code"):
        value = obj.get(key)
        if isinstance(value, str) and value:
            found.add(value)
    details = obj.get("details")
    if isinstance(details, dict):
        code = details.get("error_code")
        if isinstance(code, str) and code:
            found.add(code)
    return found


def _embedded_status(error: ProviderError) -> int | None:
    """The HTTP status an error sent with a 200 carries in its ``code`` field, if any."""
    code = _error_object(error.body).get("code")
    if isinstance(code, str) and code.isdigit():
        code = int(code)
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
        return code
    return None


def is_quota_exhausted(error: ProviderError) -> bool:
    """Whether ``error`` says a quota or spend limit is used up (no wait will help)."""
    if _codes(error) & _QUOTA_CODES:
        return True
    text = f"{error} {error.body}".lower() if error.status in (429, 200, None) else ""
    return any(phrase in text for phrase in _QUOTA_PHRASES)


def provider_verdict(error: ProviderError) -> bool | None:
    """Whether to retry ``error`` from what the server said, or None to let the status decide.

    See the module docstring for the order.
    """
    header = server_should_retry(error)
    if header is not None:
        return header
    if is_quota_exhausted(error):
        return False
    if _codes(error) & RETRYABLE_ERROR_TYPES:
        return True
    if error.status == 200:
        status = _embedded_status(error)
        if status is not None:
            return status in (408, 409, 429) or status >= 500
    return None
