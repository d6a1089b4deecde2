"""The rate limiter's queue after a cancelled waiter, and the circuit breaker's scope
(docs/reliability.md, "Tool calls under fault")."""

from __future__ import annotations

import asyncio
import gc
from dataclasses import dataclass
from typing import Any

import pytest

from goagent_py import Agent, with_circuit_breaker, with_tool
from goagent_py.dispatch import CircuitBreakerConfig, circuit_breaker_middleware
from goagent_py.errors import ConfigurationError
from goagent_py.messages import ContentBlock, TextBlock, ToolCall
from goagent_py.resilience import CircuitBreaker, RateLimiter
from goagent_py.testing import ScriptedProvider, tool_call_response
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import tool


class FakeClock:
    """A monotonic clock that moves only when told to; sleepers wake when it reaches them."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.asked: list[float] = []  # every sleep asked for, in order
        self.moved = asyncio.Condition()

    def __call__(self) -> float:
        return self.now

    async def advance(self, seconds: float) -> None:
        self.now += seconds
        async with self.moved:
            self.moved.notify_all()

    async def sleep(self, seconds: float) -> None:
        """An injected sleep on this clock: returns once the clock has moved ``seconds``."""
        until = self.now + seconds
        async with self.moved:
            self.asked.append(seconds)
            self.moved.notify_all()
            await self.moved.wait_for(lambda: self.now >= until - 1e-9)


async def _waiting(clock: FakeClock, count: int) -> None:
    """Return once ``count`` sleeps have been asked for."""
    async with clock.moved:
        await clock.moved.wait_for(lambda: len(clock.asked) >= count)


async def test_waiters_behind_a_cancelled_waiter_move_up_at_once() -> None:
    # rate 1/s, burst 1: the first call takes the token; A waits 1 s, B 2 s, C 3 s. A is
    # cancelled: its token goes back, so B is served after 1 s and C after 2 s, not 2 s and
    # 3 s (they used to sleep the waits computed when they arrived).
    clock = FakeClock()
    limiter = RateLimiter(1.0, 1, clock=clock, sleep=clock.sleep)
    assert await limiter.acquire() == 0.0
    a = asyncio.create_task(limiter.acquire())
    b = asyncio.create_task(limiter.acquire())
    c = asyncio.create_task(limiter.acquire())
    await _waiting(clock, 3)
    assert clock.asked == [1.0, 2.0, 3.0]
    a.cancel()
    with pytest.raises(asyncio.CancelledError):
        await a
    await clock.advance(1.0)
    done, _ = await asyncio.wait({b}, timeout=10)  # a fail-safe: B is due now
    assert b in done
    assert b.result() == pytest.approx(1.0)
    assert not c.done()
    await clock.advance(1.0)
    done, _ = await asyncio.wait({c}, timeout=10)
    assert c in done
    assert c.result() == pytest.approx(2.0)
    # The bucket is where it would be had A never come: empty, nobody waiting.
    assert limiter.tokens == pytest.approx(0.0)


async def test_a_cancelled_waiter_does_not_move_the_waiters_ahead_of_it() -> None:
    clock = FakeClock()
    limiter = RateLimiter(1.0, 1, clock=clock, sleep=clock.sleep)
    await limiter.acquire()
    a = asyncio.create_task(limiter.acquire())
    b = asyncio.create_task(limiter.acquire())
    await _waiting(clock, 2)
    b.cancel()
    with pytest.raises(asyncio.CancelledError):
        await b
    await clock.advance(0.5)
    assert not a.done()  # still due at 1 s: the one behind it left, nothing ahead
    await clock.advance(0.5)
    done, _ = await asyncio.wait({a}, timeout=10)
    assert a in done
    assert a.result() == pytest.approx(1.0)
    assert limiter.tokens == pytest.approx(0.0)


async def test_a_waiter_cancelled_while_moving_up_gives_one_token_back() -> None:
    # B is woken to move up (A left) and is cancelled before it sleeps again: the bucket gets
    # both tokens back, no more.
    clock = FakeClock()
    limiter = RateLimiter(1.0, 1, clock=clock, sleep=clock.sleep)
    await limiter.acquire()
    a = asyncio.create_task(limiter.acquire())
    b = asyncio.create_task(limiter.acquire())
    await _waiting(clock, 2)
    a.cancel()
    b.cancel()
    for task in (a, b):
        with pytest.raises(asyncio.CancelledError):
            await task
    assert limiter.tokens == pytest.approx(0.0)
    await clock.advance(1.0)
    assert limiter.try_acquire()
    assert not limiter.try_acquire()


# -- the circuit breaker's scope ----------------------------------------------------------------


@dataclass(frozen=True)
class User:
    name: str


@tool
def lookup(query: str) -> str:
    """Look ``query`` up in the user's own account."""
    context = current_tool_context()
    assert context is not None
    if context.deps_as(User).name == "mallory":
        raise RuntimeError("account locked")  # mallory's own calls fail, nobody else's
    return f"found {query}"


async def _run_as(agent: Agent[Any, Any], user: str) -> str:
    result = await agent.run("look it up", deps=User(user))
    [tool_message] = [m for m in result.messages if m.role == "tool"]
    return tool_message.text


def _agent(*options: Any) -> Agent[Any, Any]:
    script: list[Any] = []
    for _ in range(4):
        script += [tool_call_response(("lookup", {"query": "order 7"})), "done"]
    return Agent(with_tool(lookup), *options, provider=ScriptedProvider(*script))


async def test_a_breaker_keyed_by_user_keeps_one_users_failures_to_that_user() -> None:
    # Two failing calls of mallory open mallory's circuit; alice's calls still reach the tool.
    agent = _agent(with_circuit_breaker(2, 60.0, key=lambda call, ctx: ctx.deps_as(User).name))
    assert "account locked" in await _run_as(agent, "mallory")
    assert "account locked" in await _run_as(agent, "mallory")
    assert await _run_as(agent, "alice") == "found order 7"
    assert "circuit breaker open" in await _run_as(agent, "mallory")


async def test_by_default_a_tools_breaker_is_shared_by_every_run() -> None:
    # The documented default: a tool has one breaker (a dependency that is down is down for
    # every caller), so mallory's failures open it for alice too.
    agent = _agent(with_circuit_breaker(2, 60.0))
    await _run_as(agent, "mallory")
    await _run_as(agent, "mallory")
    assert "circuit breaker open" in await _run_as(agent, "alice")


async def test_idle_keyed_breakers_are_not_kept() -> None:
    # One breaker per key must not mean one per user ever seen: a key whose circuit is closed
    # with no failure counted and no call running has nothing to remember.
    calls = 0

    async def base(tc: ToolCall) -> list[ContentBlock]:
        nonlocal calls
        calls += 1
        return [TextBlock("ok")]

    middleware = circuit_breaker_middleware(1, 60.0, key=lambda call, ctx: call.arguments["user"])
    call = middleware(base)
    before = _live_breakers()
    for i in range(500):
        await call(ToolCall(str(i), "lookup", {"user": f"user-{i}"}))
    assert calls == 500
    assert _live_breakers() - before < 5


def _live_breakers() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is CircuitBreaker)


def test_a_key_that_is_not_a_function_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="key must be None or a function"):
        CircuitBreakerConfig(2, 60.0, key="user")  # type: ignore[arg-type]


async def test_a_key_function_that_fails_fails_the_call_not_the_run() -> None:
    # A run without the deps the key reads: the call is an error result the model reads,
    # the tool does not run, and the run goes on.
    agent = _agent(with_circuit_breaker(2, 60.0, key=lambda call, ctx: ctx.deps_as(User).name))
    result = await agent.run("look it up")
    [tool_message] = [m for m in result.messages if m.role == "tool"]
    assert tool_message.is_error
    assert "found" not in tool_message.text
    assert result.text == "done"
