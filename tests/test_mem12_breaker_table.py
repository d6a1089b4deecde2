"""The keyed circuit breakers' table stays bounded (docs/reliability.md, "Tool calls under
fault"): a key with failures below the threshold, or an open circuit nobody calls again, is
not kept forever."""

from __future__ import annotations

import gc

import pytest

from goagent_py import with_circuit_breaker
from goagent_py.dispatch import CircuitBreakerConfig, circuit_breaker_middleware
from goagent_py.errors import CircuitOpenError, ConfigurationError
from goagent_py.messages import ContentBlock, TextBlock, ToolCall
from goagent_py.resilience import CircuitBreaker


def _live_breakers() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is CircuitBreaker)


async def _failing(tc: ToolCall) -> list[ContentBlock]:
    if tc.arguments.get("fail"):
        raise RuntimeError("account locked")
    return [TextBlock("ok")]


def _by_user(call: ToolCall, ctx: object) -> str:
    return str(call.arguments["user"])


async def test_keys_failing_below_the_threshold_do_not_grow_the_table_without_bound() -> None:
    # One failure each for 12,000 users (threshold 3): none ever succeeds afterwards, so
    # every breaker has a failure to remember; the table keeps the 10,000 used last (the
    # documented default), not all of them.
    call = circuit_breaker_middleware(3, 60.0, key=_by_user)(_failing)
    before = _live_breakers()
    for i in range(12_000):
        with pytest.raises(RuntimeError):
            await call(ToolCall(str(i), "lookup", {"user": f"u{i}", "fail": True}))
    assert _live_breakers() - before <= 10_000


async def test_the_bound_is_a_setting_and_the_least_recently_used_key_goes_first() -> None:
    call = circuit_breaker_middleware(2, 60.0, key=_by_user, max_keys=3)(_failing)
    before = _live_breakers()
    # mallory's circuit opens; then two other users fail once each: three keys, all kept.
    for _ in range(2):
        with pytest.raises(RuntimeError):
            await call(ToolCall("m", "lookup", {"user": "mallory", "fail": True}))
    for user in ("bob", "carol"):
        with pytest.raises(RuntimeError):
            await call(ToolCall(user, "lookup", {"user": user, "fail": True}))
    # mallory keeps calling: her key is the one used last, so a fourth user's failure evicts
    # bob's (used least recently), never her open circuit.
    with pytest.raises(CircuitOpenError):
        await call(ToolCall("m", "lookup", {"user": "mallory", "fail": True}))
    with pytest.raises(RuntimeError):
        await call(ToolCall("d", "lookup", {"user": "dave", "fail": True}))
    assert _live_breakers() - before == 3
    with pytest.raises(CircuitOpenError):
        await call(ToolCall("m", "lookup", {"user": "mallory", "fail": True}))
    # bob's count was dropped: his next failure is his first again (2 to open), so his call
    # after it reaches the tool.
    with pytest.raises(RuntimeError):
        await call(ToolCall("b", "lookup", {"user": "bob", "fail": True}))
    assert (await call(ToolCall("b", "lookup", {"user": "bob"}))) == [TextBlock("ok")]


def test_max_keys_must_be_a_positive_int() -> None:
    with pytest.raises(ConfigurationError, match="max_keys must be an int > 0"):
        CircuitBreakerConfig(2, 60.0, key=_by_user, max_keys=0)
    with pytest.raises(ConfigurationError, match="max_keys must be an int > 0"):
        with_circuit_breaker(2, 60.0, key=_by_user, max_keys=True)
    assert CircuitBreakerConfig(2, 60.0).max_keys == 10_000
