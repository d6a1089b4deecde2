"""Hooks: firing order on success and on every failure path, merge_hooks, failing hooks."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
from typing import Any

import pytest

from goagent_py import (
    Agent,
    Hooks,
    MaxIterationsError,
    MemoryStoreError,
    Message,
    ProviderError,
    ThinkingBlock,
    ToolCall,
    merge_hooks,
    tool,
    with_hooks,
)
from goagent_py.hooks import HOOK_NAMES
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response
from goagent_py.tools import tool_func


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def recorder(log: list[str], *, async_hooks: bool = False) -> Hooks:
    """Hooks that append their name (and a key argument) to ``log``."""

    def make(name: str) -> Any:
        def describe(args: tuple[Any, ...]) -> str:
            if name == "on_tool_call":
                return f"{name}:{args[0].name}"
            if name in ("on_iteration_start", "on_provider_request", "on_provider_response"):
                return f"{name}:{args[0]}"
            return name

        if async_hooks:

            async def ahook(*args: Any) -> None:
                await asyncio.sleep(0)
                log.append(describe(args))

            return ahook

        def hook(*args: Any) -> None:
            log.append(describe(args))

        return hook

    return Hooks(**{name: make(name) for name in HOOK_NAMES})


class Mem:
    async def messages(self) -> list[Message]:
        return []

    async def append(self, *messages: Message) -> None:
        return None


class LTM:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    async def retrieve(self, query: Any, *, top_k: int, session: str = "") -> list[Any]:
        if self.fail:
            raise OSError("index gone")
        return []

    async def store(self, messages: list[Message], *, session: str = "") -> None:
        return None


@pytest.mark.parametrize("async_hooks", [False, True])
async def test_hook_order_on_success(async_hooks: bool) -> None:
    log: list[str] = []
    first = tool_call_response(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4}))
    first.message.content.append(ThinkingBlock("hm"))
    agent = Agent(
        provider=ScriptedProvider(first, "done"),
        model="m",
        tools=[add],
        short_term_memory=Mem(),
        long_term_memory=LTM(),
        hooks=recorder(log, async_hooks=async_hooks),
    )
    await agent.run("go")
    assert log == [
        "on_run_start",
        "on_long_term_retrieve",
        "on_short_term_load",
        "on_iteration_start:0",
        "on_provider_request:0",
        "on_provider_response:0",
        "on_thinking",
        "on_tool_call:add",
        "on_tool_call:add",
        "on_tool_result",
        "on_tool_result",
        "on_iteration_start:1",
        "on_provider_request:1",
        "on_provider_response:1",
        "on_response",
        "on_short_term_append",
        "on_long_term_store",
        "on_run_end",
    ]


async def test_streaming_hooks_fire_per_delta() -> None:
    log: list[str] = []
    tokens: list[str] = []
    hooks = merge_hooks(recorder(log), Hooks(on_stream_token=tokens.append))
    agent = Agent(provider=ScriptedProvider("one two"), model="m", hooks=hooks)
    [e async for e in agent.stream("hi")]
    assert tokens == ["one", " two"]
    assert log[:4] == [
        "on_run_start",
        "on_iteration_start:0",
        "on_provider_request:0",
        "on_stream_start",
    ]
    assert log[-3:] == ["on_provider_response:0", "on_response", "on_run_end"]


@pytest.mark.parametrize("execution", ["parallel", "sequential"])
async def test_on_tool_call_fires_in_the_calls_own_task_after_the_approval_check(
    execution: str,
) -> None:
    """What on_tool_call sets in its context reaches its own call's tool (a sync tool's thread
    too), never a sibling call or the run."""
    current: contextvars.ContextVar[str] = contextvars.ContextVar("current", default="-")
    log: list[str] = []

    def on_tool_call(call: ToolCall) -> None:
        log.append(f"on_tool_call:{call.id}")
        current.set(call.id)

    def approve(call: ToolCall) -> str | None:
        log.append(f"before_tool_call:{call.id}")
        return "no" if call.id == "blocked" else None

    async def probe(args: dict[str, Any]) -> str:
        await asyncio.sleep(0)  # let siblings start
        log.append(f"probe:{args['k']}:{current.get()}")
        return "ok"

    def sync_probe(args: dict[str, Any]) -> str:
        log.append(f"sync_probe:{args['k']}:{current.get()}")
        return "ok"

    provider = ScriptedProvider(
        tool_call_response(
            ToolCall("a", "probe", {"k": "a"}),
            ToolCall("b", "probe", {"k": "b"}),
            ToolCall("s", "sync_probe", {"k": "s"}),
            ToolCall("blocked", "probe", {"k": "blocked"}),
        ),
        "done",
    )
    agent = Agent(
        provider=provider,
        model="m",
        tools=[
            tool_func("probe", "Probe.", None, probe),
            tool_func("sync_probe", "Probe.", None, sync_probe),
        ],
        tool_execution=execution,  # type: ignore[arg-type]
        before_tool_call=approve,
        hooks=Hooks(
            on_tool_call=on_tool_call,
            on_tool_result=lambda r: log.append(f"on_tool_result:{r.call.id}:{current.get()}"),
        ),
    )
    assert (await agent.run("go")).text == "done"
    assert {e for e in log if "probe:" in e} == {"probe:a:a", "probe:b:b", "sync_probe:s:s"}
    for call_id in ("a", "b", "s", "blocked"):
        assert log.index(f"before_tool_call:{call_id}") < log.index(f"on_tool_call:{call_id}")
    results = [e for e in log if e.startswith("on_tool_result")]
    # each result as its call finishes, in the run's context (what the call set stays there)
    assert sorted(results) == sorted(f"on_tool_result:{c}:-" for c in ("a", "b", "s", "blocked"))
    for c in ("a", "b", "s"):
        probe = next(
            i
            for i, e in enumerate(log)
            if e.startswith(("probe:", "sync_probe:")) and e.split(":")[1] == c
        )
        assert log.index(f"on_tool_result:{c}:-") > probe
    assert current.get() == "-"


async def _ends(agent: Agent, log: list[str], exc: type[BaseException]) -> None:
    with pytest.raises(exc):
        await agent.run("go")
    assert log.count("on_run_end") == 1
    assert log[-1] == "on_run_end"


async def test_hook_order_on_provider_error() -> None:
    log: list[str] = []
    agent = Agent(
        provider=ScriptedProvider(RuntimeError("boom")),
        model="m",
        short_term_memory=Mem(),
        hooks=recorder(log),
    )
    await _ends(agent, log, ProviderError)
    assert log == [
        "on_run_start",
        "on_short_term_load",
        "on_iteration_start:0",
        "on_provider_request:0",
        "on_provider_response:0",
        "on_run_end",
    ]


async def test_hook_order_on_max_iterations() -> None:
    log: list[str] = []
    agent = Agent(
        provider=ScriptedProvider(tool_call_response(("add", {"a": 1, "b": 1}))),
        model="m",
        tools=[add],
        max_iterations=1,
        short_term_memory=Mem(),
        hooks=recorder(log),
    )
    await _ends(agent, log, MaxIterationsError)
    assert log[-4:] == ["on_tool_result", "on_response", "on_short_term_append", "on_run_end"]


async def test_hook_order_on_memory_load_error() -> None:
    log: list[str] = []
    agent = Agent(
        provider=ScriptedProvider(), model="m", long_term_memory=LTM(fail=True), hooks=recorder(log)
    )
    await _ends(agent, log, MemoryStoreError)
    assert log == ["on_run_start", "on_long_term_retrieve", "on_run_end"]


async def test_run_end_once_on_cancellation() -> None:
    log: list[str] = []
    gate = asyncio.Event()

    @tool
    async def wait() -> str:
        """Wait forever."""
        gate.set()
        await asyncio.Event().wait()
        return ""

    agent = Agent(
        provider=ScriptedProvider(tool_call_response(("wait", {}))),
        model="m",
        tools=[wait],
        hooks=recorder(log),
    )
    task = asyncio.create_task(agent.run("go"))
    await gate.wait()
    task.cancel()
    await _ends_task(task)
    assert log.count("on_run_end") == 1
    assert "on_tool_result" not in log
    assert "on_response" not in log


async def _ends_task(task: asyncio.Task[Any]) -> None:
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_run_end_once_when_a_stream_consumer_stops_early() -> None:
    log: list[str] = []
    agent = Agent(provider=ScriptedProvider("a b c d"), model="m", hooks=recorder(log))
    stream = agent.stream("hi")
    async for _ in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    assert log.count("on_run_end") == 1


async def test_a_raising_hook_is_logged_and_the_run_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def bad(*args: Any) -> None:
        raise ValueError("hook bug")

    seen: list[str] = []
    hooks = merge_hooks(
        Hooks(on_run_start=bad, on_response=bad, on_run_end=bad),
        Hooks(on_run_end=lambda r: seen.append(r.text)),
    )
    agent = Agent(provider=ScriptedProvider("fine"), model="m", hooks=hooks)
    with caplog.at_level(logging.ERROR):
        assert (await agent.run("x")).text == "fine"
    assert seen == ["fine"]  # the second set still ran after the first raised
    assert len([r for r in caplog.records if "raised; the run goes on" in r.message]) == 3


async def test_run_result_fields_on_success_and_error() -> None:
    results: list[Any] = []
    agent = Agent(
        provider=ScriptedProvider(text_response("ok"), RuntimeError("x")),
        model="m",
        hooks=Hooks(on_run_end=results.append),
    )
    await agent.run("a")
    with pytest.raises(ProviderError):
        await agent.run("b")
    ok, failed = results
    assert (ok.text, ok.iterations, ok.error) == ("ok", 1, None)
    assert ok.duration > 0
    assert isinstance(failed.error, ProviderError)
    assert failed.iterations == 1
    assert failed.text == ""


def test_merge_hooks_semantics() -> None:
    calls: list[str] = []
    a = Hooks(on_response=lambda t, i: calls.append(f"a{i}"))
    b = Hooks(on_response=lambda t, i: calls.append(f"b{i}"), on_thinking=calls.append)
    assert merge_hooks(a) is a
    merged = merge_hooks(a, Hooks(), b)
    assert merged.on_run_end is None  # fields nobody set stay None
    assert merged.on_thinking is b.on_thinking  # a single callback is kept as is
    asyncio.run(_call(merged.on_response, "t", 7))
    assert calls == ["a7", "b7"]
    assert merge_hooks() == Hooks()
    assert len(dataclasses.fields(Hooks)) == len(HOOK_NAMES) == 20


async def _call(hook: Any, *args: Any) -> None:
    result = hook(*args)
    if asyncio.iscoroutine(result):
        await result


async def test_hooks_none_means_no_hooks_and_a_wrong_type_is_refused() -> None:
    from goagent_py import ConfigurationError

    assert (
        await Agent(provider=ScriptedProvider("ok"), model="m", hooks=None).run("x")
    ).text == "ok"
    with pytest.raises(ConfigurationError, match="expected Hooks objects, got dict"):
        Agent(provider=ScriptedProvider(), hooks=[{"on_run_end": print}])  # type: ignore[list-item]


async def test_hook_sets_compose_instead_of_replacing_each_other() -> None:
    seen: list[str] = []
    telemetry = Hooks(on_run_end=lambda r: seen.append("telemetry"))
    mine = Hooks(on_run_end=lambda r: seen.append("mine"))
    agent = Agent(with_hooks(telemetry), provider=ScriptedProvider("ok"), hooks=mine)
    await agent.run("x")
    assert seen == ["telemetry", "mine"]


async def test_hooks_see_the_provider_run_id_and_assistant_message() -> None:
    infos: list[Any] = []
    events: list[Any] = []
    results: list[Any] = []
    provider = ScriptedProvider("hello")
    agent = Agent(
        provider=provider,
        model="m",
        hooks=Hooks(
            on_run_start=infos.append,
            on_provider_response=lambda i, e: events.append(e),
            on_run_end=results.append,
        ),
    )
    await agent.run("x")
    assert infos[0].provider is provider
    assert results[0].run_id == infos[0].run_id != ""
    assert events[0].message.text == "hello"


# -- an abort while a hook hangs (review7a) -------------------------------------------------------


@pytest.mark.parametrize(
    "hook",
    ["on_iteration_start", "on_provider_request", "on_tool_result", "on_response", "on_run_end"],
)
async def test_abort_now_while_an_async_hook_hangs_ends_the_run_at_once(
    tmp_path: Any, hook: str
) -> None:
    # A hook that awaits something that never comes (a telemetry exporter whose collector is
    # down) held abort("now") for good: hooks were awaited in the run's own frame.
    from goagent_py import Session, validate_transcript
    from goagent_py.memory import ShortTermMemory
    from goagent_py.memory.storage import SQLiteStorage

    started = asyncio.Event()

    async def hangs(*args: Any) -> None:
        started.set()
        await asyncio.Event().wait()

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return "found"

    memory = ShortTermMemory(storage=SQLiteStorage(tmp_path / "chat.db", session_id="s"))
    agent = Agent(
        provider=ScriptedProvider(tool_call_response(("lookup", {"q": "x"})), "done"),
        tools=[lookup],
        short_term_memory=memory,
        hooks=Hooks(**{hook: hangs}),
    )
    session = Session(agent)
    task = asyncio.create_task(session.prompt("hello"))
    await started.wait()
    session.abort("now")
    result = await asyncio.wait_for(task, 60)  # a hang guard, not a timing

    # A hook that hangs at the run's very end (the answer given) lets it end as it ended.
    assert result.stop_reason in ("aborted", "end_turn")
    assert not session.state.running
    stored = await memory.transcript()
    assert validate_transcript(stored) == []
    assert session.transcript == stored
    assert result.messages == stored[-len(result.messages) :]


async def test_what_an_async_hook_sets_in_the_context_reaches_later_hooks_in_a_session() -> None:
    # Async hooks of a session run are awaited in a task an abort can cancel (review7a); what
    # they set in their context still reaches the hooks after them, as when awaited in place.
    from goagent_py import Session

    current: contextvars.ContextVar[str] = contextvars.ContextVar("run_tag", default="-")
    seen: list[str] = []

    async def on_run_start(info: Any) -> None:
        await asyncio.sleep(0)
        current.set("tagged")

    def on_run_end(result: Any) -> None:
        seen.append(current.get())

    agent = Agent(
        provider=ScriptedProvider("hi"),
        hooks=Hooks(on_run_start=on_run_start, on_run_end=on_run_end),
    )
    await Session(agent).prompt("hello")
    assert seen == ["tagged"]
