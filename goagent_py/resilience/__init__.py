"""Resilience for tools and providers: circuit breaker, retry, rate limiting.

- :class:`CircuitBreaker`, per tool name: closed -> open after ``max_failures`` consecutive
  failures -> after ``reset_timeout`` exactly one half-open probe (concurrent calls meanwhile are
  rejected, not queued) -> closed on success, open again on failure.
- :class:`RetryPolicy` with :func:`retry_tool`, :func:`retry_middleware` and
  :func:`retry_provider`, on tenacity, with one precedence for what is retried (see the policy).
- :class:`RateLimiter`, a token bucket, and :func:`rate_limit`, the dispatch middleware.

Cancellation is never a failure: it opens no circuit and is never retried. Clocks and sleeps
are injectable so tests never wait.
"""

from goagent_py.resilience._breaker import CircuitBreaker, CircuitState, check_circuit_breaker
from goagent_py.resilience._rate_limit import PerTool, RateLimiter, check_rate_limit, rate_limit
from goagent_py.resilience._retry import (
    RetryPolicy,
    Sleep,
    TransientError,
    TransientMarker,
    is_retryable_provider_error,
    is_retryable_tool_error,
    parse_retry_after,
    retry_middleware,
    retry_provider,
    retry_tool,
)

__all__ = [
    "check_circuit_breaker",
    "check_rate_limit",
    "CircuitBreaker",
    "CircuitState",
    "is_retryable_provider_error",
    "is_retryable_tool_error",
    "parse_retry_after",
    "PerTool",
    "rate_limit",
    "RateLimiter",
    "retry_middleware",
    "retry_provider",
    "retry_tool",
    "RetryPolicy",
    "Sleep",
    "TransientError",
    "TransientMarker",
]
