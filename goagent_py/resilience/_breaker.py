"""The circuit breaker: one per tool name.

Closed -> open after ``max_failures`` consecutive failures -> after ``reset_timeout`` exactly one
half-open probe (concurrent calls meanwhile are rejected, not queued) -> closed on success, open
again on failure. Cancellation is never a failure: a cancelled probe is released, not counted.

Parallel calls: a call admitted with :meth:`CircuitBreaker.admit` carries a ticket, the circuit's
period (it changes each time the circuit opens). A call that ends in a later period than it was
admitted in started before the circuit opened: its verdict is about a state already judged, so
it is ignored (its success does not close an open circuit without a probe, its failure neither
reopens the circuit under a running probe nor pushes the reopen time back, and its release does
not let a second probe through).
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from goagent_py.errors import ConfigurationError

__all__ = ["CircuitBreaker", "CircuitState", "check_circuit_breaker"]


def check_circuit_breaker(max_failures: object, reset_timeout: object, *, owner: str) -> None:
    """Validate a breaker's settings; raise :class:`ConfigurationError` naming the fix.

    The one check behind :class:`CircuitBreaker`, ``CircuitBreakerConfig`` and
    ``circuit_breaker_middleware``; ``owner`` names what the caller built, for the message.
    """
    # "max_failures must be > 0, got 0" is the wording users have seen (and the docs show).
    if not isinstance(max_failures, int) or isinstance(max_failures, bool) or max_failures <= 0:
        raise ConfigurationError(
            f"{owner}: max_failures must be > 0, got {max_failures!r} (an int; pass "
            "circuit_breaker=None to switch the breaker off)"
        )
    if (
        not isinstance(reset_timeout, int | float)
        or isinstance(reset_timeout, bool)
        or not reset_timeout > 0
    ):
        raise ConfigurationError(
            f"{owner}: reset_timeout must be > 0, got {reset_timeout!r} (a number of seconds)"
        )


class CircuitState(enum.StrEnum):
    """The state of one tool's breaker."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    """One breaker (for one tool). Thread-safe; uses a monotonic clock, injectable for tests.

    Args:
        max_failures: consecutive failures that open the circuit (> 0).
        reset_timeout: seconds the circuit stays open before one probe is let through (> 0).
        clock: a monotonic clock in seconds (``time.monotonic`` by default).
    """

    __slots__ = (
        "_clock",
        "_failures",
        "_lock",
        "_open_until",
        "_period",
        "_state",
        "max_failures",
        "reset_timeout",
    )

    def __init__(
        self,
        max_failures: int,
        reset_timeout: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        check_circuit_breaker(max_failures, reset_timeout, owner="CircuitBreaker")
        self.max_failures = max_failures
        self.reset_timeout = reset_timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._state = CircuitState.CLOSED
        self._failures = 0
        self._open_until = 0.0
        self._period = 0  # one more each time the circuit opens

    @property
    def state(self) -> CircuitState:
        """The current state (an open circuit past its timeout still reads OPEN until probed)."""
        return self._state

    @property
    def idle(self) -> bool:
        """Whether the breaker has nothing to remember: closed, with no failure counted."""
        return self._state is CircuitState.CLOSED and self._failures == 0

    def allow(self) -> bool:
        """Whether a call may go through now; when it returns True for an open circuit past its
        reset timeout, this call is the single half-open probe."""
        return self.admit() is not None

    def admit(self) -> int | None:
        """:meth:`allow` for a call whose verdict comes later: its ticket, or None if refused.

        Pass the ticket to :meth:`record_success`, :meth:`record_failure` or
        :meth:`release_probe`: the verdict of a call admitted before the circuit last opened is
        then ignored (see the module docstring).
        """
        with self._lock:
            if self._state is CircuitState.CLOSED:
                return self._period
            if self._state is CircuitState.OPEN and self._clock() >= self._open_until:
                self._state = CircuitState.HALF_OPEN
                return self._period
            return None

    def open_until(self) -> datetime:
        """When the circuit lets the next probe through, as a UTC wall-clock time."""
        with self._lock:
            remaining = max(0.0, self._open_until - self._clock())
            if self._state is CircuitState.HALF_OPEN:
                # A probe is running: should it fail, the circuit opens for a whole timeout.
                remaining = self.reset_timeout
        return datetime.now(UTC) + timedelta(seconds=remaining)

    def record_success(self, ticket: int | None = None) -> None:
        """A call succeeded: close the circuit and reset the failure count.

        Args:
            ticket: what :meth:`admit` gave the call; a stale one (the circuit opened since)
                changes nothing.
        """
        with self._lock:
            if ticket is not None and ticket != self._period:
                return
            self._state = CircuitState.CLOSED
            self._failures = 0

    def record_failure(self, ticket: int | None = None) -> None:
        """A call failed: count it; open the circuit at the threshold or after a failed probe.

        Args:
            ticket: what :meth:`admit` gave the call; a stale one changes nothing.
        """
        with self._lock:
            if ticket is not None and ticket != self._period:
                return
            self._failures += 1
            if self._state is CircuitState.HALF_OPEN or (
                self._state is CircuitState.CLOSED and self._failures >= self.max_failures
            ):
                self._state = CircuitState.OPEN
                self._open_until = self._clock() + self.reset_timeout
                self._period += 1

    def release_probe(self, ticket: int | None = None) -> None:
        """A probe ended without a verdict (it was cancelled): let the next call probe again.

        Args:
            ticket: what :meth:`admit` gave the call; a stale one changes nothing.
        """
        with self._lock:
            if ticket is not None and ticket != self._period:
                return
            if self._state is CircuitState.HALF_OPEN:
                self._state = CircuitState.OPEN
