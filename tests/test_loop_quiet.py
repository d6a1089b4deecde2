"""A run nobody observes (``Agent.run`` without hooks) builds no events (issue 36): what it
returns, stores and tells its tools is what a streamed run of the same script gives."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from goagent_py import (
    Agent,
    AgentEnd,
    Hooks,
    ProviderError,
    RetryPolicy,
    RunResult,
    ToolCall,
    ToolExecutionError,
    ToolRetry,
    current_tool_context,
    tool,
)
from goagent_py._loop import _RunIds
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.messages import Message
from goagent_py.testing import ScriptedProvider, tool_call_response

SEEN: list[tuple[str, int, str]] = []


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    ctx = current_tool_context()
    assert ctx is not None
    SEEN.append((ctx.call.id, ctx.iteration, ctx.idempotency_key.split(":", 1)[1]))
    return a + b


@tool
def mul(a: int, b: int) -> int:
    """Multiply two integers (a sync tool: a worker thread)."""
    return a * b


@tool
async def boom() -> str:
    """Fail."""
    raise ValueError("boom")


def script() -> ScriptedProvider:
    """One call, an error, an unknown tool, two calls at once, then the answer."""
    return ScriptedProvider(
        tool_call_response(ToolCall("c1", "add", {"a": 2, "b": 3})),
        tool_call_response(ToolCall("c2", "boom", {})),
        tool_call_response(ToolCall("c3", "nope", {})),
        tool_call_response(
            ToolCall("c4", "mul", {"a": 2, "b": 3}), ToolCall("c5", "add", {"a": 1, "b": 1})
        ),
        "6",
    )


def comparable(result: RunResult[Any]) -> dict[str, Any]:
    """What must not depend on whether anyone watched (ids and clocks aside)."""
    return {
        "text": result.text,
        "output": result.output,
        "stop_reason": result.stop_reason,
        "iterations": result.iterations,
        "usage": result.usage,
        "tool_calls": result.tool_calls,
        "messages": [plain(m) for m in result.messages],
        "error": repr(result.error),
        "pending": result.pending,
    }


def plain(message: Message) -> Message:
    return dataclasses.replace(message, metadata={})


async def streamed(agent: Agent) -> tuple[RunResult[Any], list[Any]]:
    events = [e async for e in agent.stream("2+3?")]
    end = events[-1]
    assert isinstance(end, AgentEnd)
    return end.result, events


async def test_run_gives_what_the_stream_ends_with_and_stores_the_same(tmp_path: Path) -> None:
    results = []
    records = []
    seen = []
    for quiet in (True, False):
        SEEN.clear()
        storage = SQLiteStorage(tmp_path / f"{quiet}.db")
        memory = ShortTermMemory(storage)
        agent = Agent(provider=script(), tools=[add, mul, boom], short_term_memory=memory)
        if quiet:
            result = await agent.run("2+3?")
        else:
            result, events = await streamed(agent)
            assert len(events) > 40
        results.append(comparable(result))
        records.append([plain(m) for m in await memory.messages()])
        seen.append(sorted(SEEN))
        await storage.aclose()
    assert results[0] == results[1]
    assert results[0]["text"] == "6"
    assert records[0] == records[1]
    assert len(records[0]) == 11  # user, 4 x (assistant, its results: 1, 1, 1, 2), answer
    errors = [m.text for m in records[0] if m.is_error]
    assert errors[0] == "Error: tool 'boom' failed: ValueError: boom"
    assert errors[1].startswith("Error: tool not found: 'nope'")
    assert seen[0] == seen[1] == [("c1", 0, "0:c1"), ("c5", 3, "3:c5")]


async def test_a_quiet_run_still_feeds_every_hook() -> None:
    def hooks(calls: list[str]) -> Hooks:
        names = ("on_run_start", "on_iteration_start", "on_provider_response", "on_tool_call")
        more = ("on_tool_result", "on_response", "on_run_end")
        return Hooks(**{n: (lambda *a, n=n: calls.append(n)) for n in names + more})

    quiet: list[str] = []
    loud: list[str] = []
    await Agent(provider=script(), tools=[add, mul, boom], hooks=hooks(quiet)).run("2+3?")
    agent = Agent(provider=script(), tools=[add, mul, boom], hooks=hooks(loud))
    await streamed(agent)
    assert quiet == loud
    assert quiet.count("on_tool_result") == 5
    assert quiet[-1] == "on_run_end"


async def test_a_failed_quiet_run_raises_with_its_result_and_logs_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cause = RuntimeError("down")
    provider = ScriptedProvider(tool_call_response(ToolCall("c1", "add", {"a": 1, "b": 1})), cause)
    with (
        caplog.at_level(logging.WARNING, logger="goagent_py"),
        pytest.raises(ProviderError) as raised,
    ):
        await Agent(provider=provider, tools=[add]).run("go")
    assert raised.value.__cause__ is cause
    result = raised.value.run_result
    assert result is not None
    assert (result.iterations, result.tool_calls) == (2, 1)
    assert [r.getMessage() for r in caplog.records if "provider error" in r.getMessage()] == [
        "provider error: down"
    ]


async def test_a_run_inside_a_tool_reports_to_itself_not_to_the_run_around_it() -> None:
    attempts: list[int] = []

    @tool
    async def flaky() -> str:
        """Fail once."""
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("once")
        return "ok"

    async def no_sleep(_: float) -> None:
        return None

    inner = Agent(
        provider=ScriptedProvider(tool_call_response(ToolCall("i1", "flaky", {})), "inner done"),
        tools=[flaky],
        tool_retry=RetryPolicy(max_attempts=2, sleep=no_sleep, jitter=0),
    )

    @tool
    async def ask_inner() -> str:
        """Run the inner agent, unobserved."""
        return (await inner.run("go")).text

    outer = Agent(
        provider=ScriptedProvider(tool_call_response(ToolCall("o1", "ask_inner", {})), "done"),
        tools=[ask_inner],
    )
    _, events = await streamed(outer)
    assert len(attempts) == 2  # the inner call was retried...
    assert not [e for e in events if isinstance(e, ToolRetry)]  # ...in the inner run only


def test_run_ids_are_32_hex_unique_and_drawn_again_in_a_forked_child() -> None:
    ids = _RunIds()
    many = [ids.next() for _ in range(1000)]
    assert len(set(many)) == 1000
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in many)
    assert _RunIds().next()[:20] != many[0][:20]  # another process draws another prefix
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, ids.next().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    os.close(read)
    os.close(write)
    assert child[:20] != many[0][:20]
    assert ids.next()[:20] == many[0][:20]


async def test_run_ids_differ_per_run_and_reach_the_tools() -> None:
    SEEN.clear()
    agent = Agent(provider=script(), tools=[add, mul, boom])
    first = await agent.run("2+3?")
    second, _ = await streamed(Agent(provider=script(), tools=[add, mul, boom]))
    assert first.run_id != second.run_id
    assert len(first.run_id) == 32


def test_run_ids_roll_over_to_a_new_prefix() -> None:
    ids = _RunIds()
    ids._count = iter([1 << 48, 1])  # type: ignore[assignment]
    prefix = ids._prefix
    rolled = ids.next()
    assert rolled[:20] != prefix
    assert rolled.endswith("000000000001")


def test_threads_never_share_an_id() -> None:
    ids = _RunIds()
    with ThreadPoolExecutor(4) as pool:
        chunks = list(pool.map(lambda _: [ids.next() for _ in range(2000)], range(4)))
    got = [i for chunk in chunks for i in chunk]
    assert len(set(got)) == len(got) == 8000


def counted_tool(seen: list[dict[str, Any]], validations: list[dict[str, Any]]) -> Any:
    """A function tool whose validator counts its calls and coerces ``n`` to an int."""
    from goagent_py import FunctionTool, TextBlock, ToolArgumentsError, ToolDefinition

    def validate(args: dict[str, Any]) -> dict[str, Any]:
        validations.append(dict(args))
        if not str(args.get("n", "")).isdigit():
            raise ToolArgumentsError("count", f"n: not a number: {args.get('n')!r}")
        return {"n": int(args["n"])}

    async def call(args: dict[str, Any]) -> list[Any]:
        seen.append(args)
        return [TextBlock(str(args["n"] + 1))]

    return FunctionTool(ToolDefinition("count", "Count on."), call, validate)


def one_call(arguments: dict[str, Any]) -> ScriptedProvider:
    return ScriptedProvider(tool_call_response(ToolCall("c1", "count", arguments)), "done")


@pytest.mark.parametrize("through", ["plain", "middleware", "gate"])
async def test_a_call_is_validated_once_and_the_tool_runs_on_the_validated_arguments(
    through: str,
) -> None:
    seen: list[dict[str, Any]] = []
    validations: list[dict[str, Any]] = []
    passed: list[str] = []

    def middleware(next_: Any) -> Any:
        async def call(tc: ToolCall) -> Any:
            passed.append(tc.id)
            return await next_(tc)

        return call

    extra: dict[str, Any] = {}
    if through == "middleware":
        extra["dispatch_middlewares"] = [middleware]
    provider = one_call({"n": "41"})
    agent = Agent(provider=provider, tools=[counted_tool(seen, validations)], **extra)
    if through == "gate":  # a gate may change the call in place: the tool validates again
        agent = Agent(
            provider=provider,
            tools=[counted_tool(seen, validations)],
            before_tool_call=lambda call: None,
        )
    result = await agent.run("count")
    assert result.text == "done"
    assert seen == [{"n": 41}]
    assert validations == ([{"n": "41"}] * (2 if through == "gate" else 1))
    assert provider.requests[1].messages[-1].text == "42"
    assert passed == (["c1"] if through == "middleware" else [])


async def test_a_middleware_that_changes_the_call_has_the_new_arguments_validated() -> None:
    seen: list[dict[str, Any]] = []
    validations: list[dict[str, Any]] = []

    def middleware(next_: Any) -> Any:
        async def call(tc: ToolCall) -> Any:
            return await next_(ToolCall(tc.id, tc.name, {"n": "9"}))

        return call

    agent = Agent(
        provider=one_call({"n": "41"}),
        tools=[counted_tool(seen, validations)],
        dispatch_middlewares=[middleware],
    )
    assert (await agent.run("count")).text == "done"
    assert validations == [{"n": "41"}, {"n": "9"}]
    assert seen == [{"n": 9}]


async def test_bad_arguments_are_validated_once_and_the_model_reads_why() -> None:
    seen: list[dict[str, Any]] = []
    validations: list[dict[str, Any]] = []
    provider = one_call({"n": "x"})
    agent = Agent(provider=provider, tools=[counted_tool(seen, validations)])
    assert (await agent.run("count")).text == "done"
    assert seen == []
    assert validations == [{"n": "x"}]
    tool_message = provider.requests[1].messages[-1]
    assert tool_message.is_error
    assert tool_message.text == "Error: invalid arguments for tool 'count': n: not a number: 'x'"


@pytest.mark.parametrize("change", ["top", "nested"])
async def test_a_middleware_that_changes_the_arguments_in_place_has_them_validated(
    change: str,
) -> None:
    # Review5: the same call object, its arguments changed in place by a middleware: the tool
    # must run on what it now holds, validated, never on the loop's earlier validation.
    seen: list[dict[str, Any]] = []
    validations: list[dict[str, Any]] = []

    def middleware(next_: Any) -> Any:
        async def call(tc: ToolCall) -> Any:
            if change == "top":
                tc.arguments["n"] = "9"
            else:
                tc.arguments["tags"].append("late")
            return await next_(tc)

        return call

    from goagent_py import FunctionTool, TextBlock, ToolDefinition

    def validate(args: dict[str, Any]) -> dict[str, Any]:
        validations.append({k: list(v) if isinstance(v, list) else v for k, v in args.items()})
        return {"n": int(args["n"]), "tags": list(args.get("tags", []))}

    async def run(args: dict[str, Any]) -> list[Any]:
        seen.append(args)
        return [TextBlock(str(args["n"] + 1))]

    tool = FunctionTool(ToolDefinition("count", "Count on."), run, validate)
    agent = Agent(
        provider=one_call({"n": "41", "tags": ["a"]}),
        tools=[tool],
        dispatch_middlewares=[middleware],
    )
    assert (await agent.run("count")).text == "done"
    if change == "top":
        assert seen == [{"n": 9, "tags": ["a"]}]
    else:
        assert seen == [{"n": 41, "tags": ["a", "late"]}]
    assert len(validations) == 2


@tool
async def finish(a: int) -> int:
    """Ask the run to end after this turn."""
    ctx = current_tool_context()
    assert ctx is not None
    ctx.terminate()
    return a


def stop_script() -> ScriptedProvider:
    """A call that terminates, then an answer the run must never ask for."""
    return ScriptedProvider(
        tool_call_response(ToolCall("c1", "finish", {"a": 7})),
        tool_call_response(ToolCall("c2", "add", {"a": 1, "b": 1})),
        "never",
    )


def goes_on_script() -> ScriptedProvider:
    return ScriptedProvider(
        tool_call_response(ToolCall("c1", "add", {"a": 7, "b": 0})),
        tool_call_response(ToolCall("c2", "add", {"a": 1, "b": 1})),
        "done",
    )


@pytest.mark.parametrize("how", ["terminate", "should_stop", "goes_on"])
async def test_a_quiet_turn_stops_where_a_streamed_one_does(how: str) -> None:
    """The quiet path checks the stop conditions without a coroutine (issue 36): a terminating
    call, ``should_stop`` and neither end the run after the same turn as a streamed run."""
    seen: dict[bool, list[int]] = {True: [], False: []}
    results = []
    for quiet in (True, False):

        def should_stop(state: Any, quiet: bool = quiet) -> bool:
            seen[quiet].append(state.iteration)
            return how == "should_stop"

        agent = Agent(
            # Only "terminate" runs the call that terminates; "goes_on" ends on the third answer.
            provider=stop_script() if how == "terminate" else goes_on_script(),
            tools=[finish, add],
            should_stop=should_stop if how != "terminate" else None,
        )
        result = await agent.run("2+3?") if quiet else (await streamed(agent))[0]
        results.append(comparable(result))
    assert results[0] == results[1]
    assert seen[True] == seen[False]
    expected = {"terminate": (1, []), "should_stop": (1, [0]), "goes_on": (3, [0, 1])}[how]
    assert (results[0]["iterations"], seen[True]) == expected


async def test_a_quiet_runs_tool_error_carries_the_tools_traceback() -> None:
    """Exception recovery runs in the dispatcher's own frame on the bare path (issue 36): the
    error is the same, cause and tool traceback included, as in a streamed run."""
    errors: dict[bool, list[BaseException | None]] = {True: [], False: []}
    texts = []
    for quiet in (True, False):
        provider = ScriptedProvider(tool_call_response(ToolCall("c1", "boom", {})), "ok")
        agent = Agent(
            provider=provider,
            tools=[boom],
            after_tool_call=lambda r, quiet=quiet: errors[quiet].append(r.error),
        )
        result = await agent.run("2+3?") if quiet else (await streamed(agent))[0]
        assert result.messages[2].is_error
        texts.append(result.messages[2].text)
    assert texts[0] == texts[1] == "Error: tool 'boom' failed: ValueError: boom"
    for quiet in (True, False):
        [error] = errors[quiet]
        assert isinstance(error, ToolExecutionError)
        assert isinstance(error.__cause__, ValueError)
        assert error.cause is error.__cause__
        assert 'raise ValueError("boom")' in error.traceback


class _Failing:
    """A provider whose second call fails as ``how`` says (the first asks for add)."""

    def __init__(self, how: str) -> None:
        self.how = how
        self.calls = 0
        self.cause = ProviderError("rate limited", status=429)
        self.cause.__cause__ = KeyError("inner")

    async def complete(self, request: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            return tool_call_response(ToolCall("c1", "add", {"a": 1, "b": 2}))
        if self.how == "raises":
            raise RuntimeError("down")
        if self.how == "provider_error":
            raise self.cause
        return "not a response"


def _failure(exc: BaseException) -> tuple[Any, ...]:
    cause = exc.__cause__
    return (
        type(exc),
        str(exc),
        type(cause),
        str(cause),
        type(exc.__context__),
        type(cause.__cause__) if cause is not None else None,
    )


@pytest.mark.parametrize("how", ["raises", "provider_error", "wrong_type"])
async def test_a_quiet_runs_provider_failure_is_the_loud_runs(
    how: str, caplog: pytest.LogCaptureFixture
) -> None:
    got: dict[bool, tuple[Any, ...]] = {}
    for loud in (False, True):
        provider = _Failing(how)
        hooks = [Hooks(on_run_end=lambda result: None)] if loud else []
        agent = Agent(provider=provider, tools=[add], hooks=hooks)
        caplog.clear()
        with (
            caplog.at_level(logging.WARNING, logger="goagent_py"),
            pytest.raises(ProviderError) as raised,
        ):
            await agent.run("go")
        logged = [r.getMessage() for r in caplog.records if "provider error" in r.getMessage()]
        result = raised.value.run_result
        assert result is not None
        if how == "provider_error":
            assert raised.value is provider.cause  # raised as itself, its own cause kept
        got[loud] = (_failure(raised.value), logged, result.iterations, len(result.messages))
    assert got[False] == got[True]


async def test_a_run_after_the_first_starts_as_the_first_did() -> None:
    # The first run connects through start_run; later ones start without awaiting it.
    seen: list[Any] = []

    @tool
    async def who() -> str:
        """Say whose request this is."""
        ctx = current_tool_context()
        assert ctx is not None
        seen.append(ctx.deps)
        return str(ctx.deps)

    def turn() -> list[Any]:
        return [tool_call_response(ToolCall("c1", "who", {})), "done"]

    provider = ScriptedProvider(*turn(), *turn())
    agent = Agent(provider=provider, tools=[who], system_prompt="sys")
    first = await agent.run("hi", deps="alice")
    second = await agent.run("hi", deps="bob")
    assert seen == ["alice", "bob"]
    assert [(r.text, r.iterations, r.tool_calls) for r in (first, second)] == [("done", 2, 1)] * 2
    assert [m.text for m in first.messages] == ["hi", "", "alice", "done"]
    assert [m.text for m in second.messages] == ["hi", "", "bob", "done"]
    first_requests, second_requests = provider.requests[:2], provider.requests[2:]
    for a, b in zip(first_requests, second_requests, strict=True):
        assert (a.model, a.system_prompt, a.tools, len(a.messages)) == (
            b.model,
            b.system_prompt,
            b.tools,
            len(b.messages),
        )


class _Reserving:
    """A tool that is not a FunctionTool and takes a place in line (as the file tools do)."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.definition = add.definition

    def reserve(self, call: ToolCall) -> Any:
        self.seen.append(f"reserve {call.id}")
        return lambda: self.seen.append(f"release {call.id}")

    async def execute(self, args: dict[str, Any]) -> Any:
        self.seen.append("execute")
        return await add.execute(args)


@pytest.mark.parametrize("loud", [False, True])
def test_a_tool_with_a_reserve_takes_its_place_on_every_path(loud: bool) -> None:
    # Issue 36: a function tool skips the place look; any other tool still takes its place
    # before it runs and releases it after, inline (quiet) or in its task (streamed).
    reserving = _Reserving()
    provider = ScriptedProvider(tool_call_response(ToolCall("c1", "add", {"a": 2, "b": 3})), "5")
    # An ``on_tool_call`` hook watches the call: it runs in a task of its own, not inline.
    hooks = Hooks(on_tool_call=lambda call: reserving.seen.append("hook")) if loud else None
    Agent(provider=provider, tools=[reserving], hooks=hooks).run_sync("2+3?")
    if loud:
        reserving.seen.remove("hook")
    assert reserving.seen == ["reserve c1", "execute", "release c1"]
    assert provider.requests[1].messages[-1].text == "5"


@pytest.mark.parametrize(("limit", "expected"), [(None, "1" * 30), (0, "1" * 30), (5, None)])
def test_an_int_result_is_sized_by_the_running_calls_limit(
    limit: int | None, expected: str | None
) -> None:
    from goagent_py._results import bounded_json, to_blocks
    from goagent_py.tool_context import ToolContext, _current, _LazyContext

    value = int("1" * 30)
    for ctx in (
        ToolContext(call=ToolCall("c", "t", {}), max_result_chars=limit),
        _LazyContext(ToolContext, limit),
    ):
        token = _current.set(ctx)
        try:
            [block] = to_blocks(value)
        finally:
            _current.reset(token)
        assert block.text == (expected or bounded_json(value, 5))  # type: ignore[union-attr]
