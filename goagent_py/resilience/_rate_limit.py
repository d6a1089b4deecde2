"""Rate limiting: :class:`RateLimiter`, a token bucket, and :func:`rate_limit`, the middleware.

Waiting respects cancellation (a cancelled waiter gives its token back). Clocks and sleeps are
injectable so tests never wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Mapping

from goagent_py._dispatch_types import DispatchFunc, DispatchMiddleware
from goagent_py.errors import ConfigurationError
from goagent_py.messages import ContentBlock, ToolCall
from goagent_py.resilience._retry import Sleep

__all__ = ["PerTool", "RateLimiter", "check_rate_limit", "rate_limit"]


class _Waiter:
    """One caller waiting for its reserved token: when it is due on the limiter's clock, and
    the event that wakes it when a cancelled waiter ahead of it moves it up."""

    __slots__ = ("due", "loop", "moved")

    def __init__(self, due: float) -> None:
        self.due = due
        self.moved = asyncio.Event()
        self.loop = asyncio.get_running_loop()

    def wake(self) -> None:
        """Wake it from any thread (a limiter may serve runs of several event loops)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self.moved.set()
            return
        with contextlib.suppress(RuntimeError):  # its loop is closed: nobody to wake
            self.loop.call_soon_threadsafe(self.moved.set)


class RateLimiter:
    """A token bucket: ``burst`` calls at once, then ``rate`` calls per second.

    The bucket starts full. Waiters reserve their token when they arrive, so they are served in
    order; one that is cancelled while it waits (by its caller or by the tool timeout around it)
    gives its token back and stops at once, and every waiter behind it moves up by one token's
    time at once (it used to sleep the wait computed when it arrived).

    Args:
        rate: tokens added per second (> 0).
        burst: the bucket's size, the most calls let through at once (>= 1).
        clock: a monotonic clock in seconds (``time.monotonic`` by default).
        sleep: the async sleep used to wait (``asyncio.sleep`` by default).
    """

    __slots__ = ("_clock", "_last", "_sleep", "_tokens", "_waiters", "burst", "rate")

    def __init__(
        self,
        rate: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        check_rate_limit(rate, burst)
        self.rate = float(rate)
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._last = clock()
        self._waiters: list[_Waiter] = []  # in the order they reserved their tokens

    def _refill(self) -> None:
        now = self._clock()
        elapsed = now - self._last
        if elapsed > 0:
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.rate)
        self._last = now

    @property
    def idle(self) -> bool:
        """Whether the bucket is what a new one is: full, nobody waiting."""
        return not self._waiters and self.tokens >= self.burst

    @property
    def tokens(self) -> float:
        """Tokens available now (negative while callers wait for reserved ones)."""
        self._refill()
        return self._tokens

    def try_acquire(self) -> bool:
        """Take a token if one is available now, without waiting."""
        self._refill()
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False

    async def acquire(self) -> float:
        """Take a token, waiting until the bucket has one.

        Returns:
            The seconds this call had to wait (0 when a token was available).
        """
        self._refill()
        self._tokens -= 1
        if self._tokens >= 0:
            return 0.0
        start = self._clock()
        waiter = _Waiter(start + -self._tokens / self.rate)
        self._waiters.append(waiter)
        try:
            await self._wait(waiter)
        except BaseException:
            # Cancelled (or the sleep failed): the reserved token goes back to the bucket, and
            # each waiter behind this one is due one token's time sooner.
            position = self._leave(waiter)
            self._refill()
            self._tokens = min(float(self.burst), self._tokens + 1)
            for other in self._waiters[position:]:
                other.due -= 1 / self.rate
                other.wake()
            raise
        self._leave(waiter)
        return waiter.due - start

    async def _wait(self, waiter: _Waiter) -> None:
        """Sleep until ``waiter`` is due; woken early when a waiter ahead of it leaves."""
        while True:
            wait = waiter.due - self._clock()
            if wait <= 0:
                return
            waiter.moved.clear()
            sleeping = asyncio.ensure_future(self._sleep(wait))
            moved = asyncio.ensure_future(waiter.moved.wait())
            try:
                await asyncio.wait((sleeping, moved), return_when=asyncio.FIRST_COMPLETED)
            finally:
                moved.cancel()
                if not sleeping.done():
                    sleeping.cancel()
            if sleeping.done():
                # A sleep that ended is trusted (an injected one may not move the clock).
                sleeping.result()  # its own failure, if any, is this call's
                return

    def _leave(self, waiter: _Waiter) -> int:
        """Take ``waiter`` out of the queue; returns where it stood."""
        for index, other in enumerate(self._waiters):
            if other is waiter:
                del self._waiters[index]
                return index
        return len(self._waiters)


_SWEEP_AT = 1_024  # per-tool buckets kept before the idle ones are dropped

_WAIT_CANCELLED = "goagent-rate-limit-wait-cancelled"
"""The message of the cancellation a call waiting for its token ends with, whatever cancelled
it: the tool never ran, so nothing about the tool's health is learned from it."""


PerTool = bool | Mapping[str, tuple[float, int]]
"""``rate_limit``'s ``per_tool``: False (one shared bucket), True (a bucket per tool), or limits
for named tools (``{"search": (1.0, 2)}``; the other tools share the global bucket)."""


def check_rate_limit(
    rate: float, burst: int, *, per_tool: PerTool = False
) -> dict[str, tuple[float, int]]:
    """Validate a rate limit; raise :class:`ConfigurationError` saying what is wrong.

    Args:
        rate: calls per second; must be > 0.
        burst: calls let through at once; must be an int >= 1.
        per_tool: False, True, or ``{tool_name: (rate, burst)}`` (each checked the same way).

    Returns:
        The limits of the tools named in ``per_tool`` (empty unless it is a mapping).
    """
    if not isinstance(rate, int | float) or isinstance(rate, bool) or not rate > 0:
        raise ConfigurationError(f"rate limit: rate must be > 0 calls per second, got {rate!r}")
    if not isinstance(burst, int) or isinstance(burst, bool) or burst < 1:
        raise ConfigurationError(f"rate limit: burst must be an int >= 1, got {burst!r}")
    named: dict[str, tuple[float, int]] = {}
    if isinstance(per_tool, Mapping):
        for name, limit in per_tool.items():
            if not isinstance(limit, tuple | list) or len(limit) != 2:
                raise ConfigurationError(
                    f"rate limit for tool {name!r}: give (rate, burst), got {limit!r}"
                )
            check_rate_limit(*limit)
            named[name] = (float(limit[0]), int(limit[1]))
    elif not isinstance(per_tool, bool):
        raise ConfigurationError(
            "rate limit: per_tool must be True, False or {tool_name: (rate, burst)}, "
            f"got {per_tool!r}"
        )
    return named


def rate_limit(
    rate: float,
    burst: int,
    *,
    per_tool: PerTool = False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Sleep = asyncio.sleep,
) -> DispatchMiddleware:
    """A dispatch middleware that holds tool calls to a token-bucket rate.

    Waiting respects cancellation, and in the agent's chain (inside the timeout) the tool
    timeout too: a call that waits past it ends as a timeout and gives its token back.

    Args:
        rate: calls per second (> 0).
        burst: calls let through at once (>= 1).
        per_tool: False: one bucket shared by every tool; True: one ``(rate, burst)`` bucket per
            tool name; a mapping ``{tool_name: (rate, burst)}``: those tools get their own
            bucket with their own limits, and every other tool shares the global one.
        clock: the buckets' monotonic clock (inject one in tests).
        sleep: the async sleep used to wait (inject one in tests).

    Returns:
        The middleware. Its buckets live as long as it does (build it once per agent); a
        per-tool bucket that is full again with nobody waiting is what a new one would be, so
        it is dropped: the table holds the tools called lately, not every name it was given.
    """
    named = check_rate_limit(rate, burst, per_tool=per_tool)
    shared = RateLimiter(rate, burst, clock=clock, sleep=sleep)
    buckets: dict[str, RateLimiter] = {}
    sweep_at = [_SWEEP_AT]  # the table's size that triggers the next sweep of idle buckets
    table_lock = threading.Lock()  # runs of several threads (run_sync) share the table

    def limiter_for(name: str) -> RateLimiter:
        if per_tool is False or (named and name not in named):
            return shared
        with table_lock:
            return bucket_for(name)

    def bucket_for(name: str) -> RateLimiter:
        limiter = buckets.get(name)
        if limiter is None:
            if len(buckets) >= sweep_at[0]:
                for idle in [n for n, b in buckets.items() if b.idle]:
                    del buckets[idle]
                # Amortised: the next sweep waits until the table has grown as much again.
                sweep_at[0] = max(_SWEEP_AT, 2 * len(buckets))
            r, b = named.get(name, (rate, burst))
            limiter = buckets[name] = RateLimiter(r, b, clock=clock, sleep=sleep)
        return limiter

    def middleware(next_: DispatchFunc) -> DispatchFunc:
        async def call(tc: ToolCall) -> list[ContentBlock]:
            try:
                await limiter_for(tc.name).acquire()
            except asyncio.CancelledError as exc:
                # Cancelled in the queue (by the tool timeout, say): the tool never ran, so the
                # circuit breaker outside must not count it a failure of the tool. It records a
                # failure only for the timeout's own cancel message; this one it releases.
                raise asyncio.CancelledError(_WAIT_CANCELLED) from exc
            return await next_(tc)

        return call

    return middleware
