"""Tests for goagent_py.dispatch: the chain, timeout, circuit breaker, recovery, and the options."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from goagent_py import Agent, CircuitBreakerConfig, RateLimitConfig
from goagent_py.dispatch import (
    Dispatcher,
    DispatchFunc,
    circuit_breaker_middleware,
    timeout_middleware,
)
from goagent_py.errors import (
    CircuitOpenError,
    ConfigurationError,
    ToolArgumentsError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolTimeoutError,
)
from goagent_py.hooks import Hooks, ToolResult
from goagent_py.messages import ContentBlock, Message, Role, ToolCall
from goagent_py.options import (
    with_circuit_breaker,
    with_dispatch_middleware,
    with_hooks,
    with_rate_limit,
    with_tool,
    with_tool_retry,
    with_tool_timeout,
    with_tools,
)
from goagent_py.resilience import CircuitBreaker, RetryPolicy
from goagent_py.testing import ScriptedProvider, tool_call_response
from goagent_py.tools import Tool, tool

MakeAgent = Callable[..., Agent]


class FakeClock:
    """A monotonic clock that only moves when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Switch:
    """A tool body whose outcome the test flips; counts its calls."""

    def __init__(self) -> None:
        self.fail = True
        self.calls = 0
        self.release: asyncio.Event | None = None
        self.entered = asyncio.Event()

    async def __call__(self) -> str:
        self.calls += 1
        self.entered.set()
        if self.release is not None:
            await self.release.wait()
        if self.fail:
            raise RuntimeError("backend down")
        return "fine"


def switch_tool(switch: Switch, name: str = "svc") -> Tool:
    @tool(name=name)
    async def svc() -> str:
        """A service that can be switched off."""
        return await switch()

    return svc


def call(name: str = "svc", args: dict[str, Any] | None = None, id: str = "c1") -> ToolCall:
    return ToolCall(id, name, args or {})


def error_of(result: ToolResult) -> BaseException:
    """The specific error a result holds (no wrapper to unwrap)."""
    assert result.error is not None
    return result.error


def tool_messages(provider: ScriptedProvider, request: int) -> list[Message]:
    return [m for m in provider.requests[request].messages if m.role is Role.TOOL]


# -- the chain --------------------------------------------------------------------------------


def recording_middleware(log: list[str], name: str) -> Callable[[DispatchFunc], DispatchFunc]:
    def middleware(next_: DispatchFunc) -> DispatchFunc:
        async def run(tc: ToolCall) -> list[ContentBlock]:
            log.append(f"{name} before")
            result = await next_(tc)
            log.append(f"{name} after")
            return result

        return run

    return middleware


async def test_middleware_order_first_registered_is_outermost(make_agent: MakeAgent) -> None:
    log: list[str] = []

    @tool
    def echo(text: str) -> str:
        """Echo."""
        log.append("tool")
        return text

    provider = ScriptedProvider(tool_call_response(("echo", {"text": "hi"})), "done")
    agent = make_agent(
        provider,
        with_tool(echo),
        with_dispatch_middleware(
            recording_middleware(log, "mw1"), recording_middleware(log, "mw2")
        ),
    )
    assert (await agent.run("go")).text == "done"
    assert log == ["mw1 before", "mw2 before", "tool", "mw2 after", "mw1 after"]


async def test_builtin_layers_wrap_custom_middlewares_in_the_documented_order() -> None:
    """Retry sits outside the custom middlewares; the breaker outside the retry."""
    log: list[str] = []
    switch = Switch()
    hooks = Hooks(on_tool_retry=lambda *a: log.append("retry"))

    async def no_sleep(_: float) -> None:
        log.append("sleep")

    dispatcher = Dispatcher(
        {"svc": switch_tool(switch)},
        timeout=5,
        circuit_breaker=CircuitBreakerConfig(1, 60),
        retry=RetryPolicy(max_attempts=2, sleep=no_sleep, jitter=0),
        rate_limit=RateLimitConfig(1000.0, 100),
        middlewares=[recording_middleware(log, "mw")],
        hooks=hooks,
        clock=FakeClock(),
    )
    result = await dispatcher.execute(call())
    # Both attempts went through the custom middleware; the breaker saw one failure only.
    assert log == ["mw before", "retry", "sleep", "mw before"]
    assert isinstance(error_of(result), ToolExecutionError)
    assert switch.calls == 2
    rejected = await dispatcher.execute(call())
    assert isinstance(error_of(rejected), CircuitOpenError)
    assert switch.calls == 2


async def test_chain_is_built_once_so_breaker_state_persists_across_runs(
    make_agent: MakeAgent,
) -> None:
    switch = Switch()
    provider = ScriptedProvider(
        tool_call_response(("svc", {})),
        "first run done",
        tool_call_response(("svc", {})),
        "second run done",
    )
    agent = make_agent(provider, with_tool(switch_tool(switch)), with_circuit_breaker(1, 60))
    assert (await agent.run("one")).text == "first run done"
    assert (await agent.run("two")).text == "second run done"
    assert switch.calls == 1  # the second run's call was rejected without calling the tool
    [rejection] = tool_messages(provider, 3)[-1:]
    assert rejection.is_error
    assert "circuit breaker open" in rejection.text


# -- circuit breaker --------------------------------------------------------------------------


def breaker_dispatcher(
    tools: dict[str, Tool], max_failures: int, clock: FakeClock, opened: list[Any] | None = None
) -> Dispatcher:
    hooks = Hooks(on_circuit_open=lambda *a: opened.append(a)) if opened is not None else None
    return Dispatcher(
        tools, circuit_breaker=CircuitBreakerConfig(max_failures, 30.0), hooks=hooks, clock=clock
    )


@pytest.mark.parametrize("max_failures", [1, 2, 3])
async def test_after_n_failures_the_next_call_is_rejected_without_calling_the_tool(
    max_failures: int,
) -> None:
    switch = Switch()
    opened: list[Any] = []
    d = breaker_dispatcher({"svc": switch_tool(switch)}, max_failures, FakeClock(), opened)
    for _ in range(max_failures):
        assert isinstance(error_of(await d.execute(call())), ToolExecutionError)
    assert opened == []
    rejected = await d.execute(call())
    error = error_of(rejected)
    assert isinstance(error, CircuitOpenError)
    assert switch.calls == max_failures
    assert "circuit breaker open" in rejected.content[0].text  # type: ignore[union-attr]
    assert len(opened) == 1
    assert opened[0] == (call(), error.open_until)


async def test_on_circuit_open_fires_on_every_rejection_with_the_reopen_time() -> None:
    switch = Switch()
    opened: list[Any] = []
    d = breaker_dispatcher({"svc": switch_tool(switch)}, 1, FakeClock(), opened)
    before = datetime.now(UTC)
    await d.execute(call())
    for i in range(3):
        await d.execute(call(id=f"r{i}"))
    assert len(opened) == 3
    assert [c.id for c, _ in opened] == ["r0", "r1", "r2"]
    for tc, open_until in opened:
        assert isinstance(tc, ToolCall)
        assert tc.name == "svc"
        assert open_until.tzinfo is not None
        assert before + timedelta(seconds=29) <= open_until <= before + timedelta(seconds=31)


async def test_half_open_success_closes_the_circuit() -> None:
    switch = Switch()
    clock = FakeClock()
    d = breaker_dispatcher({"svc": switch_tool(switch)}, 1, clock)
    await d.execute(call())
    assert isinstance(error_of(await d.execute(call())), CircuitOpenError)
    clock.advance(30)
    switch.fail = False
    assert (await d.execute(call())).error is None  # the probe
    for _ in range(3):
        assert (await d.execute(call())).error is None
    assert switch.calls == 5


async def test_half_open_failure_reopens_the_circuit() -> None:
    switch = Switch()
    clock = FakeClock()
    d = breaker_dispatcher({"svc": switch_tool(switch)}, 2, clock)
    await d.execute(call())
    await d.execute(call())
    clock.advance(31)
    assert isinstance(error_of(await d.execute(call())), ToolExecutionError)  # the failed probe
    assert isinstance(error_of(await d.execute(call())), CircuitOpenError)  # open again
    assert switch.calls == 3
    clock.advance(29)
    assert isinstance(error_of(await d.execute(call())), CircuitOpenError)
    clock.advance(1)
    switch.fail = False
    assert (await d.execute(call())).error is None


async def test_calls_during_the_half_open_probe_are_rejected_not_queued() -> None:
    switch = Switch()
    clock = FakeClock()
    d = breaker_dispatcher({"svc": switch_tool(switch)}, 1, clock)
    await d.execute(call())
    clock.advance(30)
    switch.fail = False
    switch.release = asyncio.Event()
    switch.entered.clear()
    probe = asyncio.create_task(d.execute(call(id="probe")))
    await switch.entered.wait()
    others = [await d.execute(call(id=f"o{i}")) for i in range(5)]
    assert all(isinstance(error_of(r), CircuitOpenError) for r in others)
    assert switch.calls == 2
    switch.release.set()
    assert (await probe).error is None
    assert (await d.execute(call())).error is None


async def test_100_parallel_calls_admit_exactly_one_probe() -> None:
    switch = Switch()
    clock = FakeClock()
    opened: list[Any] = []
    all_rejected = asyncio.Event()

    def on_open(*args: Any) -> None:
        opened.append(args)
        if len(opened) == 99:
            all_rejected.set()

    d = Dispatcher(
        {"svc": switch_tool(switch)},
        circuit_breaker=CircuitBreakerConfig(1, 30.0),
        hooks=Hooks(on_circuit_open=on_open),
        clock=clock,
    )
    await d.execute(call())
    clock.advance(30)
    switch.fail = False
    switch.release = asyncio.Event()
    tasks = [asyncio.create_task(d.execute(call(id=str(i)))) for i in range(100)]
    await all_rejected.wait()  # 99 rejections while the probe is still running
    switch.release.set()
    results = await asyncio.gather(*tasks)
    ok = [r for r in results if r.error is None]
    rejected = [r for r in results if r.error is not None]
    assert len(ok) == 1
    assert len(rejected) == 99
    assert all(isinstance(error_of(r), CircuitOpenError) for r in rejected)
    assert sorted(args[0].id for args in opened) == sorted(r.call.id for r in rejected)
    assert switch.calls == 2


async def test_100_parallel_failing_calls_in_threads_keep_consistent_counts() -> None:
    calls = 0
    lock = threading.Lock()
    gate = threading.Event()

    @tool
    def shaky() -> str:
        """Fails in a worker thread."""
        nonlocal calls
        with lock:
            calls += 1
        gate.wait(5)
        raise RuntimeError("no")

    opened: list[Any] = []
    d = breaker_dispatcher({"shaky": shaky}, 5, FakeClock(), opened)
    tasks = [asyncio.create_task(d.execute(call("shaky", id=str(i)))) for i in range(100)]
    await asyncio.sleep(0)
    gate.set()
    results = await asyncio.gather(*tasks)
    failed = [r for r in results if isinstance(error_of(r), ToolExecutionError)]
    rejected = [r for r in results if isinstance(error_of(r), CircuitOpenError)]
    assert len(failed) + len(rejected) == 100
    assert len(failed) == calls
    assert len(rejected) == len(opened)
    # Afterwards the circuit is open: nothing else reaches the tool.
    assert isinstance(error_of(await d.execute(call("shaky"))), CircuitOpenError)
    assert calls == len(failed)


async def test_breaker_ignores_bad_arguments_and_unknown_tools() -> None:
    calls = 0

    @tool
    def typed(n: int) -> int:
        """Typed."""
        nonlocal calls
        calls += 1
        return n

    d = breaker_dispatcher({"typed": typed}, 1, FakeClock())
    for _ in range(3):
        assert isinstance(error_of(await d.execute(call("typed", {"n": "x"}))), ToolArgumentsError)
    missing = await d.execute(call("nope"))
    assert isinstance(missing.error, ToolNotFoundError)
    assert "typed" in str(missing.error)
    assert (await d.execute(call("typed", {"n": 2}))).error is None
    assert calls == 1


async def test_breaker_ignores_the_callers_cancellation() -> None:
    switch = Switch()
    switch.release = asyncio.Event()
    switch.fail = False
    d = breaker_dispatcher({"svc": switch_tool(switch)}, 1, FakeClock())
    task = asyncio.create_task(d.execute(call()))
    await switch.entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    switch.release.set()
    assert (await d.execute(call())).error is None
    assert switch.calls == 2


async def test_breaker_counts_errors_of_custom_middlewares() -> None:
    switch = Switch()
    switch.fail = False

    def broken(next_: DispatchFunc) -> DispatchFunc:
        async def run(tc: ToolCall) -> list[ContentBlock]:
            raise PermissionError("quota exceeded")

        return run

    d = Dispatcher(
        {"svc": switch_tool(switch)},
        circuit_breaker=CircuitBreakerConfig(1, 30),
        middlewares=[broken],
        clock=FakeClock(),
    )
    first = error_of(await d.execute(call()))
    assert isinstance(first, ToolExecutionError)
    assert isinstance(first.__cause__, PermissionError)
    assert isinstance(error_of(await d.execute(call())), CircuitOpenError)


async def test_breaker_counts_timeouts() -> None:
    @tool
    async def hang() -> str:
        """Never answers."""
        await asyncio.Event().wait()
        return ""

    d = Dispatcher(
        {"hang": hang}, timeout=0.05, circuit_breaker=CircuitBreakerConfig(1, 30), clock=FakeClock()
    )
    assert isinstance(error_of(await d.execute(call("hang"))), ToolTimeoutError)
    assert isinstance(error_of(await d.execute(call("hang"))), CircuitOpenError)


# -- timeouts ---------------------------------------------------------------------------------


async def test_hung_async_tool_times_out_and_the_model_reads_it(make_agent: MakeAgent) -> None:
    cancelled = asyncio.Event()
    timeouts: list[tuple[str, float]] = []

    @tool
    async def hang() -> str:
        """Never answers."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return ""

    provider = ScriptedProvider(tool_call_response(("hang", {})), "gave up waiting")
    agent = make_agent(
        provider,
        with_tool(hang),
        with_tool_timeout(0.05),
        with_hooks(Hooks(on_tool_timeout=lambda *a: timeouts.append(a))),
    )
    result = await agent.run("go")
    assert result.text == "gave up waiting"
    assert cancelled.is_set()
    [message] = tool_messages(provider, 1)
    assert message.is_error
    assert "timed out after 0.05s" in message.text
    [(timed_out, seconds)] = timeouts
    assert isinstance(timed_out, ToolCall)
    assert timed_out.name == "hang"
    assert timed_out.id == message.tool_call_id
    assert seconds == 0.05


async def test_hung_sync_tool_is_abandoned_and_the_run_goes_on(make_agent: MakeAgent) -> None:
    release = threading.Event()
    results: list[ToolResult] = []

    threads: list[threading.Thread] = []

    @tool
    def block() -> str:
        """Blocks its thread."""
        threads.append(threading.current_thread())
        release.wait(10)
        return "late"

    provider = ScriptedProvider(tool_call_response(("block", {})), "moved on")
    agent = make_agent(
        provider,
        with_tool(block),
        with_tool_timeout(0.05),
        with_hooks(Hooks(on_tool_result=results.append)),
    )
    try:
        assert (await agent.run("go")).text == "moved on"
    finally:
        release.set()
        for thread in threads:  # let the abandoned thread end while the loop is open
            thread.join(5)
    [message] = tool_messages(provider, 1)
    assert message.is_error
    assert "timed out" in message.text
    assert isinstance(error_of(results[0]), ToolTimeoutError)


async def test_retry_waits_count_against_the_timeout_and_fail_the_breaker_once() -> None:
    switch = Switch()
    waits: list[float] = []

    async def endless(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.Event().wait()

    d = Dispatcher(
        {"svc": switch_tool(switch)},
        timeout=0.05,
        circuit_breaker=CircuitBreakerConfig(2, 30),
        retry=RetryPolicy(max_attempts=5, sleep=endless),
        clock=FakeClock(),
    )
    assert isinstance(error_of(await d.execute(call())), ToolTimeoutError)
    assert switch.calls == 1
    assert len(waits) == 1
    # One call, one failure for the breaker (max 2): the next call still reaches the tool.
    assert isinstance(error_of(await d.execute(call())), ToolTimeoutError)
    assert switch.calls == 2
    assert isinstance(error_of(await d.execute(call())), CircuitOpenError)


async def test_rate_limit_waits_count_against_the_timeout() -> None:
    switch = Switch()
    switch.fail = False
    d = Dispatcher(
        {"svc": switch_tool(switch)},
        timeout=0.05,
        rate_limit=RateLimitConfig(0.001, 1),  # the second call would wait ~1000 s for a token
    )
    await d.execute(call())
    # The bound only stops a hang (a wait for the token the timeout failed to cut short).
    result = await asyncio.wait_for(d.execute(call()), 60)
    assert isinstance(error_of(result), ToolTimeoutError)
    assert switch.calls == 1  # the second call never got its token


# -- exception recovery -----------------------------------------------------------------------


async def test_a_raising_tool_becomes_a_panic_error_the_model_reads(make_agent: MakeAgent) -> None:
    @tool
    def explode(x: int) -> int:
        """Explodes."""
        raise ZeroDivisionError(f"cannot divide {x}")

    seen: list[ToolResult] = []
    provider = ScriptedProvider(tool_call_response(("explode", {"x": 7})), "recovered")
    agent = make_agent(provider, with_tool(explode), with_hooks(Hooks(on_tool_result=seen.append)))
    assert (await agent.run("go")).text == "recovered"
    panic = error_of(seen[0])
    assert isinstance(panic, ToolExecutionError)
    assert panic.tool_name == "explode"
    assert isinstance(panic.cause, ZeroDivisionError)
    assert "ZeroDivisionError" in panic.traceback
    [message] = tool_messages(provider, 1)
    assert message.is_error
    assert "cannot divide 7" in message.text


async def test_a_raising_sibling_does_not_stop_the_other_call(make_agent: MakeAgent) -> None:
    @tool
    async def good(x: int) -> str:
        """Works."""
        await asyncio.sleep(0)
        return f"good {x}"

    @tool
    async def bad() -> str:
        """Fails."""
        raise ValueError("bad tool")

    provider = ScriptedProvider(
        tool_call_response(("bad", {}), ("good", {"x": 1}), ("good", {"x": 2})), "ok"
    )
    agent = make_agent(provider, with_tools(good, bad))
    assert (await agent.run("go")).text == "ok"
    messages = tool_messages(provider, 1)
    assert [m.is_error for m in messages] == [True, False, False]
    assert [m.text for m in messages[1:]] == ["good 1", "good 2"]
    assert "bad tool" in messages[0].text


async def test_keyboard_interrupt_propagates_out_of_run(make_agent: MakeAgent) -> None:
    @tool
    async def interrupt() -> str:
        """Interrupts."""
        raise KeyboardInterrupt

    provider = ScriptedProvider(tool_call_response(("interrupt", {})), "never")
    agent = make_agent(provider, with_tool(interrupt), with_circuit_breaker(1, 30))
    with pytest.raises(KeyboardInterrupt):
        await agent.run("go")
    assert provider.remaining == 1


async def test_dispatcher_lets_base_exceptions_through() -> None:
    @tool
    async def leave() -> str:
        """Exits."""
        raise SystemExit(3)

    d = Dispatcher(
        {"leave": leave}, circuit_breaker=CircuitBreakerConfig(1, 30), retry=RetryPolicy()
    )
    with pytest.raises(SystemExit):
        await d.execute(call("leave"))


# -- options ----------------------------------------------------------------------------------


async def test_with_tool_retry_retries_through_the_agent(make_agent: MakeAgent) -> None:
    switch = Switch()
    retries: list[tuple[str, int]] = []

    async def no_sleep(_: float) -> None:
        return None

    class Flip:
        async def __call__(self, *args: Any) -> None:
            retries.append((args[0].name, args[1]))

    async def flip_after_first(_: float) -> None:
        switch.fail = False  # the retry's wait: the backend recovers meanwhile

    provider = ScriptedProvider(tool_call_response(("svc", {})), "ok")
    agent = make_agent(
        provider,
        with_tool(switch_tool(switch)),
        with_tool_retry(RetryPolicy(sleep=flip_after_first)),
        with_hooks(Hooks(on_tool_retry=Flip())),
    )
    assert (await agent.run("go")).text == "ok"
    assert retries == [("svc", 1)]
    [message] = tool_messages(provider, 1)
    assert not message.is_error
    assert message.text == "fine"


def test_rate_limit_and_retry_options_are_validated_at_construction() -> None:
    provider = ScriptedProvider()
    with pytest.raises(ConfigurationError, match="RateLimitConfig: rate limit: rate must be > 0"):
        Agent(provider=provider, model="m", rate_limit=RateLimitConfig(0, 1))
    with pytest.raises(ConfigurationError, match="burst must be an int >= 1"):
        Agent(with_rate_limit(1.0, 0), provider=provider, model="m")
    with pytest.raises(ConfigurationError, match=r"rate limit for tool 'x'|burst"):
        Agent(with_rate_limit(1.0, 1, per_tool={"x": (1.0, 0)}), provider=provider, model="m")
    with pytest.raises(ConfigurationError, match="tool_retry=3: expected a RetryPolicy"):
        Agent(provider=provider, model="m", tool_retry=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="rate_limit='fast': expected a RateLimitConfig"):
        Agent(provider=provider, model="m", rate_limit="fast")  # type: ignore[arg-type]


def test_keyword_options_map_onto_the_same_settings() -> None:
    policy = RetryPolicy(max_attempts=5)
    agent = Agent(
        provider=ScriptedProvider(),
        model="m",
        tool_retry=policy,
        rate_limit=RateLimitConfig(2.0, 3, {"svc": (1.0, 1)}),
    )
    assert agent.options.tool_retry is policy
    assert agent.options.rate_limit == RateLimitConfig(2.0, 3, {"svc": (1.0, 1)})
    by_option = Agent(with_rate_limit(1, 2, per_tool=True), provider=ScriptedProvider(), model="m")
    assert by_option.options.rate_limit == RateLimitConfig(1, 2, True)


async def test_with_rate_limit_limits_through_the_agent(make_agent: MakeAgent) -> None:
    switch = Switch()
    switch.fail = False
    provider = ScriptedProvider(
        tool_call_response(("svc", {}), ("svc", {})),
        "ok",
        tool_call_response(("svc", {})),
        "ok",
    )
    agent = make_agent(
        provider, with_tool(switch_tool(switch)), with_rate_limit(0.001, 2), with_tool_timeout(0.05)
    )
    assert (await agent.run("first")).text == "ok"
    assert [m.is_error for m in tool_messages(provider, 1)] == [False, False]
    assert (await agent.run("second")).text == "ok"  # the bucket is empty and persists across runs
    [limited] = tool_messages(provider, 3)[-1:]
    assert limited.is_error
    assert "timed out" in limited.text
    assert switch.calls == 2


# -- one validation path for the chain's settings ---------------------------------------------


@tool
def f() -> str:
    """A tool that answers."""
    return "ran"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"circuit_breaker": (3, 10)},
            r"Dispatcher\(circuit_breaker=\(3, 10\)\): expected a CircuitBreakerConfig\(",
        ),
        (
            {"rate_limit": (2, 1)},
            r"Dispatcher\(rate_limit=\(2, 1\)\): expected a RateLimitConfig\(",
        ),
        (
            {"timeout": (1, 2)},
            r"Dispatcher\(timeout=\(1, 2\)\): must be a number of seconds > 0",
        ),
        ({"timeout": 0}, r"Dispatcher\(timeout=0\): must be a number of seconds > 0"),
        ({"timeout": True}, r"Dispatcher\(timeout=True\): must be a number"),
        ({"retry": 3}, r"Dispatcher\(retry=3\): expected a RetryPolicy\("),
        ({"middlewares": [42]}, r"dispatch middleware 42 is not callable"),
    ],
)
def test_the_dispatcher_refuses_bad_settings_when_built(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Dispatcher({"f": f}, **settings)


@pytest.mark.parametrize(
    ("agent_keyword", "dispatcher_keyword", "value"),
    [
        ("circuit_breaker", "circuit_breaker", (3, 10)),
        ("rate_limit", "rate_limit", (2, 1)),
        ("tool_timeout", "timeout", (1, 2)),
        ("tool_timeout", "timeout", -1),
        ("tool_retry", "retry", "twice"),
    ],
)
def test_agent_and_dispatcher_refuse_a_setting_in_the_same_words(
    agent_keyword: str, dispatcher_keyword: str, value: object
) -> None:
    with pytest.raises(ConfigurationError) as by_agent:
        Agent(provider=ScriptedProvider(), **{agent_keyword: value})  # type: ignore[misc]
    with pytest.raises(ConfigurationError) as by_dispatcher:
        Dispatcher({"f": f}, **{dispatcher_keyword: value})
    agent_label = f"{agent_keyword}={value!r}: "
    dispatcher_label = f"Dispatcher({dispatcher_keyword}={value!r}): "
    assert str(by_agent.value).startswith(agent_label)
    assert str(by_dispatcher.value).startswith(dispatcher_label)
    assert (
        str(by_agent.value)[len(agent_label) :] == str(by_dispatcher.value)[len(dispatcher_label) :]
    )


async def test_a_dispatcher_built_with_good_settings_runs_the_tool() -> None:
    dispatcher = Dispatcher(
        {"f": f},
        timeout=5,
        circuit_breaker=CircuitBreakerConfig(3, 10),
        retry=RetryPolicy(max_attempts=2),
        rate_limit=RateLimitConfig(100.0, 5),
    )
    result = await dispatcher.execute(call("f"))
    assert result.error is None
    assert [block.text for block in result.content] == ["ran"]  # type: ignore[union-attr]


def test_the_public_middlewares_refuse_bad_settings_when_built() -> None:
    with pytest.raises(ConfigurationError, match=r"timeout_middleware\(\(1, 2\)\): must be"):
        timeout_middleware((1, 2))  # type: ignore[arg-type]
    with pytest.raises(
        ConfigurationError, match=r"circuit_breaker_middleware: max_failures must be > 0, got '3'"
    ):
        circuit_breaker_middleware("3", 10)  # type: ignore[arg-type]
    with pytest.raises(
        ConfigurationError, match=r"CircuitBreaker: reset_timeout must be > 0, got \(1, 2\)"
    ):
        CircuitBreaker(3, (1, 2))  # type: ignore[arg-type]


# -- the chain with nothing configured (issue 36: logging and recovery, no extra layers) --------


@pytest.mark.parametrize("extra", [(), ("middleware",)], ids=["bare", "with_middleware"])
async def test_every_call_is_logged_once_and_a_tool_exception_is_recovered(
    extra: tuple[str, ...], caplog: pytest.LogCaptureFixture
) -> None:
    @tool
    async def fine() -> str:
        """Works."""
        return "ok"

    @tool
    async def broken() -> str:
        """Raises."""
        raise ValueError("boom")

    def passthrough(next_: DispatchFunc) -> DispatchFunc:
        async def call_(tc: ToolCall) -> list[ContentBlock]:
            return await next_(tc)

        return call_

    dispatcher = Dispatcher(
        {"fine": fine, "broken": broken},
        middlewares=[passthrough] if extra else [],
    )
    with caplog.at_level("DEBUG", logger="goagent_py.dispatch"):
        good = await dispatcher.execute(call("fine"))
        bad = await dispatcher.execute(call("broken"))
    assert good.error is None
    assert good.started_at is not None
    assert good.started_at.tzinfo is UTC
    assert isinstance(bad.error, ToolExecutionError)
    assert isinstance(bad.error.__cause__, ValueError)
    assert "ValueError: boom" in bad.error.traceback  # the formatted traceback, for logs
    assert bad.content[0].text == "Error: tool 'broken' failed: ValueError: boom"  # type: ignore[union-attr]
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert len(lines) == 2, lines  # one line per call, whatever the layers
    assert lines[0][0] == "DEBUG"
    assert lines[0][1].startswith("tool dispatch: tool=fine duration=")
    assert lines[1][0] == "WARNING"
    assert lines[1][1].startswith("tool dispatch failed: tool=broken duration=")
    assert lines[1][1].endswith("error=tool 'broken' failed: ValueError: boom")


async def test_a_key_a_failing_tool_quotes_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    """review7d: the WARNING for a failed call quoted the tool's error as it was."""
    import logging

    from goagent_py.tools import tool_func

    key = "sk-proj-Qw7Er5Ty3Ui1Op9As7Df5Gh3"

    async def fetch(args: dict[str, Any]) -> str:
        raise RuntimeError(f"GET https://api.example/v1?api_key={key} -> 401 (Bearer {key})")

    dispatcher = Dispatcher({"fetch": tool_func("fetch", "Fetch.", None, fetch)})
    with caplog.at_level(logging.WARNING, logger="goagent_py"):
        result = await dispatcher.execute(ToolCall("c1", "fetch", {}))
    assert result.error is not None
    logged = [r.getMessage() for r in caplog.records]
    assert any("tool dispatch failed" in m and "api.example" in m for m in logged)
    assert not [m for m in logged if key in m]
