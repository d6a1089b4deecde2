"""One conversation, one record (issue 28): what storage holds is what the session shows, and
both pass the transcript validator, after every way a run can stop."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import signal
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from goagent_py import (
    Agent,
    Hooks,
    MaxIterationsError,
    Message,
    ProviderError,
    Role,
    RunResult,
    Session,
    SessionBusyError,
    StopReason,
    TextBlock,
    TextDelta,
    ToolCall,
    ToolExecutionEnd,
    ToolExecutionStart,
    current_tool_context,
    tool,
    validate_transcript,
)
from goagent_py.memory.compaction import (
    COMPACTION_METADATA_KEY,
    ClearToolResults,
    Summarize,
    Tiered,
)
from goagent_py.memory.compactor import Compactor
from goagent_py.memory.short_term import ShortTermMemory, is_boundary
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.memory.tokens import HeuristicEstimator
from goagent_py.messages import Usage
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response

ESTIMATOR = HeuristicEstimator()


def key(m: Message) -> tuple[Any, ...]:
    """What identifies a stored message (a copy compares equal to its original)."""
    calls = tuple(c.id for c in m.tool_calls)
    return (m.role, m.text, calls, m.tool_call_id)


def assert_one_record(stored: list[Message], shown: list[Message] | None = None) -> None:
    """The record rules: valid for every vendor, nothing stored twice, the session shows it.

    "Twice" is judged where identity is known: a message with tool calls or a tool result (by
    call id), and two equal messages in a row (the shape of the double-store defect)."""
    assert validate_transcript(stored) == []
    ids = Counter(key(m) for m in stored if m.tool_calls or m.role is Role.TOOL)
    twice = [k for k, n in ids.items() if n > 1]
    twice += [key(a) for a, b in itertools.pairwise(stored) if key(a) == key(b)]
    assert twice == [], f"stored twice: {twice}"
    if shown is not None:
        assert [key(m) for m in shown] == [key(m) for m in stored]


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool
def finish(q: str) -> str:
    """Do the last thing and end the run."""
    ctx = current_tool_context()
    assert ctx is not None
    ctx.terminate()
    return f"finished {q}"


STOPS = ["should_stop", "terminate", "stop_on_denied"]


def _stopping_agent(how: str, memory: ShortTermMemory) -> Agent:
    provider = ScriptedProvider(
        tool_call_response(("finish" if how == "terminate" else "lookup", {"q": "x"})),
        "after the stop",
    )
    settings: dict[str, Any] = {}
    if how == "should_stop":
        settings["should_stop"] = lambda state: True
    if how == "stop_on_denied":
        settings["stop_on_denied"] = True
        settings["before_tool_call"] = lambda call: "not allowed"
    return Agent(provider=provider, tools=[lookup, finish], short_term_memory=memory, **settings)


@pytest.mark.parametrize("how", STOPS)
async def test_a_run_stopped_after_a_tool_batch_stores_its_call_once(
    tmp_path: Path, how: str
) -> None:
    async with SQLiteStorage(tmp_path / "chat.db", session_id="s") as storage:
        memory = ShortTermMemory(storage)
        result = await _stopping_agent(how, memory).run("go")
        stored = await storage.load()
        assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL]
        assert_one_record(stored, result.messages)
        # and the next request is one every vendor takes
        again = _stopping_agent(how, memory)
        await again.run("and then?")
        assert_one_record(await storage.load())


@pytest.mark.parametrize("how", STOPS)
async def test_a_session_stopped_after_a_tool_batch_stores_its_call_once(
    tmp_path: Path, how: str
) -> None:
    async with SQLiteStorage(tmp_path / "chat.db", session_id="s") as storage:
        memory = ShortTermMemory(storage)
        session = Session(_stopping_agent(how, memory))
        await session.prompt("go")
        stored = await storage.load()
        assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL]
        assert_one_record(stored, session.transcript)


async def test_a_run_without_tool_traces_stopped_after_a_batch_stores_no_dangling_call(
    tmp_path: Path,
) -> None:
    async with SQLiteStorage(tmp_path / "chat.db", session_id="s") as storage:
        memory = ShortTermMemory(storage)
        agent = _stopping_agent("should_stop", memory).replace(short_term_trace_tools=False)
        await agent.run("go")
        stored = await storage.load()
        assert validate_transcript(stored) == []
        assert all(not m.tool_calls for m in stored)


# -- shared pieces for the defects below --------------------------------------------------------


class Gate:
    """Tools that wait until released, so a test can act while a batch runs."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    def tool(self) -> Any:
        @tool
        async def slow(n: int) -> str:
            """Wait for the test."""
            self.entered.set()
            await self.release.wait()
            return f"slow {n}"

        return slow


@tool
def fast(n: int) -> str:
    """Answer at once."""
    return f"fast {n}"


class Model:
    """Calls `slow` when asked to "go slow", `lookup` once for any other user turn, then
    answers; records every request."""

    def __init__(self) -> None:
        self.requests: list[CompletionRequest] = []

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        self.requests.append(copy.deepcopy(request))
        last = request.messages[-1]
        if last.role is Role.TOOL:
            return text_response("answer " + "a" * 150, usage=Usage(10, 5))
        if last.text == "go slow":
            return tool_call_response(("slow", {"n": 1}), usage=Usage(10, 5))
        return tool_call_response(("lookup", {"q": last.text[:12]}), usage=Usage(10, 5))


class Summariser:
    """A summary model (numbered summaries); ``hang`` makes it wait until released."""

    def __init__(self, *, hang: bool = False) -> None:
        self.calls = 0
        self.hang = hang
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        self.calls += 1
        self.entered.set()
        if self.hang:
            await self.release.wait()
        return text_response(f"## Goal\nsummary #{self.calls}", usage=Usage(100, 20))


async def _stored_equals_shown(storage: SQLiteStorage, session: Session) -> list[Message]:
    stored = [m for m in await storage.load() if not is_boundary(m)]
    assert_one_record(stored, session.transcript)
    return stored


# -- HIGH: cancel mid-tool, 27 compacted turns, reopen with a plain Agent ------------------------


async def test_cancel_mid_tool_then_compacted_turns_reopen_with_no_orphan_and_nothing_lost(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chat.db"
    gate = Gate()
    async with SQLiteStorage(path, session_id="s") as storage:
        memory = ShortTermMemory(storage)
        compactor = Compactor(
            Summarize(Summariser(), keep_last_groups=4), context_window=2500, memory=memory
        )
        session = Session(
            Agent(
                provider=Model(),
                tools=[gate.tool(), lookup],
                short_term_memory=memory,
                transform_context=compactor,
            )
        )
        task = asyncio.create_task(session.prompt("go slow"))
        await gate.entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        drift: list[int] = []  # turns after which storage and the session differed
        for i in range(27):
            stored = [m for m in await storage.load() if not is_boundary(m)]
            if [key(m) for m in stored] != [key(m) for m in session.transcript]:
                drift.append(i)
            await session.prompt(f"turn {i} " + "q" * 150)
        assert any(e.persisted for e in compactor.events)

    async with SQLiteStorage(path, session_id="s") as storage:
        memory = ShortTermMemory(storage)
        transcript = await memory.transcript()
        model = Model()
        agent = Agent(provider=model, tools=[lookup], short_term_memory=memory)
        await agent.run("after reopening")
        first = model.requests[0].messages
        assert validate_transcript(first) == []
        assert is_boundary(first[0])
        covers = first[0].metadata[COMPACTION_METADATA_KEY]["covers"]
        assert [key(m) for m in first[1:-1]] == [key(m) for m in transcript[covers:]]
        assert first[-1].text == "after reopening"
    assert drift == []


# -- MEDIUM -------------------------------------------------------------------------------------


async def _session(
    tmp_path: Path, storage: SQLiteStorage, provider: Any, **settings: Any
) -> Session:
    del tmp_path
    agent = Agent(provider=provider, short_term_memory=ShortTermMemory(storage), **settings)
    return Session(agent)


def _batch_provider() -> ScriptedProvider:
    return ScriptedProvider(
        tool_call_response(("slow", {"n": 1}), ("fast", {"n": 2})), "next answer", "more"
    )


def _assert_finished_call_kept(transcript: list[Message]) -> None:
    results = {m.text: m for m in transcript if m.role is Role.TOOL}
    assert "fast 2" in results, "the call that finished must keep its result"
    assert not results["fast 2"].is_error
    unfinished = [m for m in transcript if m.role is Role.TOOL and m.is_error]
    assert len(unfinished) == 1
    assert "did not finish" in unfinished[0].text


@pytest.mark.parametrize("how", ["cancel", "close_stream"])
async def test_cancel_or_stream_close_after_one_call_finished_keeps_it_and_one_record(
    tmp_path: Path, how: str
) -> None:
    gate = Gate()
    async with SQLiteStorage(tmp_path / "chat.db", session_id="s") as storage:
        session = await _session(tmp_path, storage, _batch_provider(), tools=[gate.tool(), fast])
        fast_done = asyncio.Event()

        def watch(event: Any) -> None:
            if isinstance(event, ToolExecutionEnd) and event.result.call.name == "fast":
                fast_done.set()

        session.subscribe(watch)
        if how == "cancel":
            task = asyncio.create_task(session.prompt("go"))
            await gate.entered.wait()
            await fast_done.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        else:
            async with contextlib.aclosing(session.stream("go")) as events:
                async for event in events:
                    if isinstance(event, ToolExecutionEnd):
                        break  # fast ends first; slow is still waiting
            assert not session.state.running
        stored = await _stored_equals_shown(storage, session)
        _assert_finished_call_kept(stored)
        assert (await session.prompt("and now?")).text == "next answer"
        await _stored_equals_shown(storage, session)


async def test_max_iterations_leaves_storage_and_session_one_record(tmp_path: Path) -> None:
    provider = ScriptedProvider(tool_call_response(("fast", {"n": 1})))
    async with SQLiteStorage(tmp_path / "chat.db", session_id="s") as storage:
        session = await _session(tmp_path, storage, provider, tools=[fast], max_iterations=1)
        with pytest.raises(MaxIterationsError) as caught:
            await session.prompt("go")
        stored = await _stored_equals_shown(storage, session)
        assert stored[-1].metadata.get("goagent.synthetic") == "max_iterations"
        assert caught.value.run_result is not None
        assert [key(m) for m in caught.value.run_result.messages] == [key(m) for m in stored]


async def test_two_prompts_started_together_one_is_refused(tmp_path: Path) -> None:
    async with SQLiteStorage(tmp_path / "chat.db", session_id="s") as storage:
        session = await _session(tmp_path, storage, ScriptedProvider("a", "b"))
        outcomes = await asyncio.gather(
            session.prompt("one"), session.prompt("two"), return_exceptions=True
        )
        assert sum(isinstance(o, SessionBusyError) for o in outcomes) == 1
        assert sum(isinstance(o, RunResult) for o in outcomes) == 1
        stored = await _stored_equals_shown(storage, session)
        assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT]
        assert not session.state.running


async def test_the_readme_abort_pattern_stops_a_run_that_is_still_starting(tmp_path: Path) -> None:
    provider = ScriptedProvider("never sent")
    async with SQLiteStorage(tmp_path / "chat.db", session_id="s") as storage:
        session = await _session(tmp_path, storage, provider)
        task = asyncio.create_task(session.prompt("hi"))
        await asyncio.sleep(0)  # the README's pattern: the run has started, not yet loaded
        session.abort("now")
        result = await task
        assert result.stop_reason is StopReason.ABORTED
        assert provider.requests == []
        await _stored_equals_shown(storage, session)


def _old_turns(n: int) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        out += [
            Message(Role.USER, [TextBlock(f"question {i} " + "u" * 300)]),
            Message(Role.ASSISTANT, [TextBlock(f"answer {i} " + "a" * 300)]),
        ]
    return out


async def test_abort_now_while_the_summariser_hangs_ends_the_run(tmp_path: Path) -> None:
    summariser = Summariser(hang=True)
    async with SQLiteStorage(tmp_path / "chat.db", session_id="s") as storage:
        memory = ShortTermMemory(storage)
        await memory.append(*_old_turns(8))
        compactor = Compactor(
            Summarize(summariser, keep_last_groups=1), context_window=1000, memory=memory
        )
        session = Session(
            Agent(
                provider=ScriptedProvider("unused"),
                short_term_memory=memory,
                transform_context=compactor,
            )
        )
        task = asyncio.create_task(session.prompt("next"))
        await summariser.entered.wait()
        session.abort("now")
        result = await task  # never released: a hung summariser must not hold the abort
        assert result.stop_reason is StopReason.ABORTED
        assert not summariser.release.is_set()
        await _stored_equals_shown(storage, session)


class FailingStream(ScriptedProvider):
    """Streams "partial answer" and then fails, as a connection dropped mid-stream."""

    async def stream(self, request: CompletionRequest) -> Any:
        self._next(request)
        yield TextDelta("partial ")
        yield TextDelta("answer")
        raise ProviderError("connection reset mid-stream")


async def test_a_provider_failure_mid_stream_keeps_the_partial_answer(tmp_path: Path) -> None:
    async with SQLiteStorage(tmp_path / "chat.db", session_id="s") as storage:
        session = await _session(tmp_path, storage, FailingStream("unused", "second"))
        with pytest.raises(ProviderError):
            await session.prompt("hi")
        stored = await _stored_equals_shown(storage, session)
        assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT]
        assert stored[1].text == "partial answer"
        assert stored[1].metadata.get("goagent.synthetic") == "failed"


async def test_ui_only_messages_do_not_make_a_reopened_session_resend_covered_turns(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chat.db"
    async with SQLiteStorage(path, session_id="s") as storage:
        memory = ShortTermMemory(storage)
        compactor = Compactor(
            Summarize(Summariser(), keep_last_groups=4), context_window=2500, memory=memory
        )
        model = Model()
        session = Session(
            Agent(
                provider=model,
                tools=[lookup],
                short_term_memory=memory,
                transform_context=compactor,
            )
        )
        for i in range(20):
            await session.add_ui_message(Message(Role.ASSISTANT, [TextBlock(f"(ui note {i})")]))
            await session.prompt(f"turn {i} " + "q" * 150)
        last = model.requests[-1].messages
        assert is_boundary(last[0])
        assert all(e.persisted for e in compactor.events if e.summary)
    async with SQLiteStorage(path, session_id="s") as storage:
        model = Model()
        again = Session(
            Agent(provider=model, tools=[lookup], short_term_memory=ShortTermMemory(storage))
        )
        await again.prompt("after reopening")
        first = model.requests[0].messages
        assert validate_transcript(first) == []
        assert first[0].text == last[0].text  # the same summary
        # what follows it is what the last request of the first session kept, no earlier turn
        assert [key(m) for m in first[1 : len(last)]] == [key(m) for m in last[1:]]


async def test_the_compaction_target_uses_the_reported_token_counts() -> None:
    window = 3000

    class Counting(Model):
        """Reports twice the estimate as its input tokens (a tokenizer that counts more)."""

        async def complete(self, request: CompletionRequest) -> CompletionResponse:
            response = await super().complete(request)
            real = 2 * sum(ESTIMATOR.count(m) for m in request.messages)
            return replace(response, usage=Usage(real, 5))

    model = Counting()
    memory = ShortTermMemory()
    compactor = Compactor(
        Tiered([ClearToolResults(4), Summarize(Summariser(), keep_last_groups=2)]),
        context_window=window,
        memory=memory,
    )
    agent = Agent(
        provider=model,
        tools=[lookup],
        short_term_memory=memory,
        transform_context=compactor,
        hooks=compactor.hooks(),
    )
    for i in range(40):
        await agent.run(f"turn {i} " + "q" * 150)
    over = [r for r in model.requests if 2 * sum(ESTIMATOR.count(m) for m in r.messages) > window]
    assert over == []


@tool
def boom(n: int) -> str:
    """Exit the process (as a tool that calls sys.exit would)."""
    raise SystemExit(3)


async def test_a_base_exception_in_a_parallel_call_reaches_the_caller_as_itself() -> None:
    gate = Gate()
    provider = ScriptedProvider(tool_call_response(("slow", {"n": 1}), ("boom", {"n": 2})))
    ends: list[RunResult] = []
    hooks = Hooks(on_run_end=ends.append)
    agent = Agent(provider=provider, tools=[gate.tool(), boom], hooks=hooks)
    with pytest.raises(SystemExit) as caught:
        await agent.run("go")
    assert caught.value.code == 3
    assert [type(r.error) for r in ends] == [SystemExit]


async def test_compact_now_with_ui_only_messages_cuts_where_the_model_view_cuts(
    tmp_path: Path,
) -> None:
    async with SQLiteStorage(tmp_path / "chat.db", session_id="s") as storage:
        memory = ShortTermMemory(storage)
        compactor = Compactor(
            Summarize(Summariser(), keep_last_groups=2), context_window=100_000, memory=memory
        )
        session = Session(
            Agent(
                provider=Model(),
                tools=[lookup],
                short_term_memory=memory,
                transform_context=compactor,
            )
        )
        for i in range(4):
            await session.add_ui_message(Message(Role.ASSISTANT, [TextBlock(f"(ui note {i})")]))
            await session.prompt(f"turn {i}")
        await session.compact_now()
        view = await memory.messages()
        assert is_boundary(view[0])
        assert validate_transcript(view) == []
        sent = [m for m in view[1:] if not m.metadata.get("goagent.ui_only")]
        assert sent[0].role is Role.USER
        assert sent[0].text == "turn 3"  # keep_last_groups=2: the last turn's two groups
        await _stored_equals_shown(storage, session)


# -- LOW ----------------------------------------------------------------------------------------


async def test_abort_from_another_thread_calls_subscribers_on_the_sessions_loop() -> None:
    gate = Gate()
    provider = ScriptedProvider(tool_call_response(("slow", {"n": 1})), "unused")
    session = Session(Agent(provider=provider, tools=[gate.tool()]))
    seen: list[tuple[str, int]] = []
    session.subscribe(lambda e: seen.append((type(e).__name__, threading.get_ident())))
    task = asyncio.create_task(session.prompt("go"))
    await gate.entered.wait()
    thread = threading.Thread(target=session.abort, args=("after_tools",))
    thread.start()
    thread.join()
    gate.release.set()
    result = await task
    assert result.stop_reason is StopReason.ABORTED
    here = threading.get_ident()
    assert [t for name, t in seen if name == "AbortRequested"] == [here]


async def test_two_steers_in_one_batch_arrive_one_per_request_in_one_at_a_time_mode() -> None:
    gate = Gate()
    provider = ScriptedProvider(tool_call_response(("slow", {"n": 1})), "first", "second", "unused")
    agent = Agent(provider=provider, tools=[gate.tool()], transform_context=lambda m: m)
    session = Session(agent)
    task = asyncio.create_task(session.prompt("go"))
    await gate.entered.wait()
    session.steer("steer one")
    session.steer("steer two")
    gate.release.set()
    await task
    users = [[m.text for m in r.messages if m.role is Role.USER] for r in provider.requests]
    assert users[1] == ["go", "steer one"]
    assert users[2] == ["go", "steer one", "steer two"]


async def test_a_summary_larger_than_the_window_is_neither_stored_nor_sent() -> None:
    class Verbose:
        """A summary model that ignores max_tokens."""

        async def complete(self, request: CompletionRequest) -> CompletionResponse:
            return text_response("## Goal\n" + "word " * 3000)

    memory = ShortTermMemory()
    await memory.append(*_old_turns(8))
    window = 1500
    compactor = Compactor(
        Summarize(Verbose(), keep_last_groups=1), context_window=window, memory=memory
    )
    provider = ScriptedProvider("fine")
    agent = Agent(provider=provider, short_term_memory=memory, transform_context=compactor)
    await agent.run("next")
    sent = provider.requests[0].messages
    assert sum(ESTIMATOR.count(m) for m in sent) <= window
    assert not any(is_boundary(m) and "word word" in m.text for m in await memory.storage.load())
    assert compactor.events[-1].fallback_used


async def test_a_sync_tool_sees_an_abort_through_its_contexts_cancelled_flag() -> None:
    started, stopped, give_up = threading.Event(), threading.Event(), threading.Event()

    @tool
    def crunch(n: int) -> str:
        """Work until told to stop."""
        ctx = current_tool_context()
        assert ctx is not None
        started.set()
        while not give_up.is_set():
            if getattr(ctx, "cancelled", False):
                stopped.set()
                return "stopped early"
            give_up.wait(0.001)
        return "gave up"

    provider = ScriptedProvider(tool_call_response(("crunch", {"n": 1})), "unused")
    session = Session(Agent(provider=provider, tools=[crunch]))
    task = asyncio.create_task(session.prompt("go"))
    assert await asyncio.to_thread(started.wait, 30)
    session.abort("now")
    assert (await task).stop_reason is StopReason.ABORTED
    try:
        assert await asyncio.to_thread(stopped.wait, 30)  # a bound for a failure, not a timing
    finally:
        give_up.set()


async def test_closing_a_session_stream_early_ends_the_run_at_once() -> None:
    gate = Gate()
    session = Session(Agent(provider=_batch_provider(), tools=[gate.tool(), fast]))
    stream = session.stream("go")
    async for event in stream:
        if isinstance(event, ToolExecutionStart):
            break
    assert session.state.running
    await stream.aclose()
    assert not session.state.running  # not left to the async generator finaliser
    assert validate_transcript(session.transcript) == []


async def test_a_stored_dangling_call_is_closed_in_storage_on_load(tmp_path: Path) -> None:
    async with SQLiteStorage(tmp_path / "chat.db", session_id="s") as storage:
        dangling = Message(Role.ASSISTANT, tool_calls=[ToolCall("c9", "fast", {"n": 1})])
        await storage.append([Message(Role.USER, [TextBlock("old")]), dangling])
        session = Session(
            Agent(provider=ScriptedProvider("next"), short_term_memory=ShortTermMemory(storage))
        )
        await session.load()
        stored = await _stored_equals_shown(storage, session)
        assert stored[-1].tool_call_id == "c9"
        assert stored[-1].metadata.get("goagent.synthetic") == "interrupted"


async def test_an_aborted_call_gets_its_end_event_in_the_live_stream() -> None:
    gate = Gate()
    session = Session(Agent(provider=_batch_provider(), tools=[gate.tool(), fast]))
    ends: list[Any] = []
    session.subscribe(lambda e: ends.append(e.result) if isinstance(e, ToolExecutionEnd) else None)
    task = asyncio.create_task(session.prompt("go"))
    await gate.entered.wait()
    session.abort("now")
    await task
    by_name = {r.call.name: r for r in ends}
    assert set(by_name) == {"slow", "fast"}
    assert type(by_name["slow"].error).__name__ == "ToolAbortedError"


# -- a process killed at any point leaves one valid record --------------------------------------

CRASH_SCRIPT = Path(__file__).with_name("session_crash_script.py")


@pytest.mark.parametrize(
    ("where", "at"),
    [
        ("model", 1),
        ("model", 2),
        ("model", 5),
        ("tool", 1),
        ("tool", 2),
        ("tool", 5),
        ("stream", 2),
    ],
)
async def test_a_process_killed_at_any_point_leaves_one_valid_record(
    tmp_path: Path, where: str, at: int
) -> None:
    path = tmp_path / "chat.db"
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(CRASH_SCRIPT), str(path), where, str(at), "0", "4"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    async with SQLiteStorage(path, session_id="s") as storage:
        memory = ShortTermMemory(storage)
        stored = await storage.load()
        if stored:
            assert validate_transcript(stored) == []
        session = Session(Agent(provider=ScriptedProvider("resumed"), short_term_memory=memory))
        await session.load()
        await _stored_equals_shown(storage, session)
        await session.prompt("after the crash")
        await _stored_equals_shown(storage, session)
