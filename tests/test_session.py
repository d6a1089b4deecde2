"""Session: steering, follow-ups, abort, continue (docs/architecture.md "Sessions")."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from goagent_py import (
    Agent,
    AgentEnd,
    ApprovalPendingError,
    Approve,
    CompletionRequest,
    ConfigurationError,
    MaxIterationsError,
    MessageDelta,
    MessagesInjected,
    Role,
    Session,
    SessionBusyError,
    StopReason,
    TextBlock,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    tool,
    validate_transcript,
)
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.messages import Message, ToolCall
from goagent_py.provider import CompletionResponse
from goagent_py.providers import anthropic, ollama, openai
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response


def assert_valid_for_every_provider(messages: list[Message]) -> None:
    """No orphan tool call, no orphan result, and every request builder takes it."""
    open_calls: set[str] = set()
    for m in messages:
        if m.role is Role.TOOL:
            assert m.tool_call_id in open_calls, f"orphan result {m.tool_call_id}"
            open_calls.discard(m.tool_call_id)
        else:
            assert not open_calls, f"calls without results: {open_calls}"
            open_calls = {c.id for c in m.tool_calls}
    assert not open_calls, f"calls without results: {open_calls}"
    anthropic.build_request(CompletionRequest(model="m", messages=messages), default_max_tokens=10)
    openai.build_request(CompletionRequest(model="m", messages=messages))
    ollama.build_chat_request(CompletionRequest(model="m", messages=messages))


class Gate:
    """A tool that waits until released, so a test can act while a batch runs."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.calls = 0

    def tool(self) -> Any:
        @tool
        async def slow(n: int) -> str:
            """Wait for the test."""
            self.calls += 1
            self.entered.set()
            await self.release.wait()
            return f"slow {n}"

        return slow


@tool
def fast(n: int) -> str:
    """Answer at once."""
    return f"fast {n}"


def user_texts(request: CompletionRequest) -> list[str]:
    return [m.text for m in request.messages if m.role is Role.USER]


async def test_steering_arrives_after_the_batch_it_came_in_never_inside_it() -> None:
    gate = Gate()
    provider = ScriptedProvider(
        tool_call_response(("slow", {"n": 1}), ("fast", {"n": 2})), "noted", "done"
    )
    session = Session(Agent(provider=provider, tools=[gate.tool(), fast]))
    task = asyncio.create_task(session.prompt("work"))
    await gate.entered.wait()
    session.steer("use tabs")
    assert session.state.steering == 1
    assert session.state.running
    gate.release.set()
    result = await task
    second = provider.requests[1].messages
    # the batch is whole: call, both results, and only then the steering message
    assert [m.role for m in second] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL, Role.USER]
    assert second[-1].text == "use tabs"
    assert result.text == "noted"
    assert session.state.steering == 0
    assert_valid_for_every_provider(session.transcript)


@pytest.mark.parametrize(("mode", "requests"), [("one_at_a_time", 2), ("all", 1)])
async def test_steering_one_at_a_time_or_all(mode: str, requests: int) -> None:
    provider = ScriptedProvider("a", "b", "c")
    session = Session(Agent(provider=provider), steering_mode=mode)  # type: ignore[arg-type]
    session.steer("first")  # idle: waits for the next prompt, starts nothing
    session.steer("second")
    assert provider.requests == []
    await session.prompt("hello")
    assert len(provider.requests) == requests
    assert user_texts(provider.requests[0]) == (
        ["hello", "first", "second"] if mode == "all" else ["hello", "first"]
    )
    assert user_texts(provider.requests[-1]) == ["hello", "first", "second"]


async def test_follow_ups_only_when_the_run_would_stop_one_turn_each() -> None:
    provider = ScriptedProvider(tool_call_response(("fast", {"n": 1})), "one", "two", "three")
    session = Session(Agent(provider=provider, tools=[fast]))
    injected: list[str] = []
    session.subscribe(
        lambda e: (
            injected.extend(m.text for m in e.messages) if isinstance(e, MessagesInjected) else None
        )
    )
    session.follow_up("then A")
    session.follow_up("then B")
    result = await session.prompt("start")
    # the tool turn was not interrupted; then exactly one more turn per follow-up
    assert len(provider.requests) == 4
    assert user_texts(provider.requests[2])[-1] == "then A"
    assert user_texts(provider.requests[3])[-1] == "then B"
    assert injected == ["then A", "then B"]
    assert result.text == "three"


async def test_a_second_prompt_while_running_is_refused_and_abort_when_idle_is_a_no_op() -> None:
    gate = Gate()
    provider = ScriptedProvider(tool_call_response(("slow", {"n": 1})), "done")
    session = Session(Agent(provider=provider, tools=[gate.tool()]))
    session.abort()  # idle: nothing happens
    task = asyncio.create_task(session.prompt("x"))
    await gate.entered.wait()
    with pytest.raises(SessionBusyError, match="steer"):
        await session.prompt("y")
    gate.release.set()
    assert (await task).text == "done"


async def _store(tmp_path: Path) -> tuple[SQLiteStorage, ShortTermMemory]:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="s")
    return storage, ShortTermMemory(storage)


@pytest.mark.parametrize("mode", ["now", "after_tools", "after_turn"])
async def test_abort_while_tools_run_leaves_a_valid_stored_transcript(
    tmp_path: Path, mode: str
) -> None:
    gate = Gate()
    provider = ScriptedProvider(
        tool_call_response(("slow", {"n": 1}), ("fast", {"n": 2})), "never", "next answer"
    )
    storage, memory = await _store(tmp_path)
    async with storage:
        session = Session(
            Agent(provider=provider, tools=[gate.tool(), fast], short_term_memory=memory)
        )
        events: list[Any] = []
        session.subscribe(events.append)
        task = asyncio.create_task(session.prompt("go"))
        await gate.entered.wait()
        session.abort(mode, reason="user pressed stop")  # type: ignore[arg-type]
        if mode != "now":
            gate.release.set()
        result = await task
        assert result.stop_reason is StopReason.ABORTED
        assert result.error is None
        ends = [type(e) for e in events if isinstance(e, TurnEnd | AgentEnd)]
        assert ends[-2:] == [TurnEnd, AgentEnd]
        assert len(provider.requests) == 1  # no model call after the abort
        tool_results = [m for m in session.transcript if m.role is Role.TOOL]
        assert len(tool_results) == 2
        slow_result = tool_results[0]
        if mode == "now":
            assert slow_result.is_error
            assert "aborted" in slow_result.text
        else:
            assert slow_result.text == "slow 1"
        stored = await memory.messages()
        assert stored == session.transcript
        assert_valid_for_every_provider(stored)
        # the next prompt works on the reloaded transcript
        again = Session(Agent(provider=provider, tools=[fast], short_term_memory=memory))
        assert (await again.prompt("and now?")).text == "never"
        assert_valid_for_every_provider(await memory.messages())


class StreamingGate(ScriptedProvider):
    """Streams "partial " then waits until released before the rest."""

    def __init__(self, *responses: Any) -> None:
        super().__init__(*responses)
        self.streaming = asyncio.Event()
        self.release = asyncio.Event()

    async def stream(self, request: CompletionRequest) -> Any:
        from goagent_py.provider import StreamDone, TextDelta

        response = self._next(request)
        yield TextDelta("partial ")
        self.streaming.set()
        await self.release.wait()
        yield TextDelta(response.message.text)
        yield StreamDone(response)


async def test_abort_now_while_the_model_streams_keeps_the_partial_answer(tmp_path: Path) -> None:
    provider = StreamingGate("answer that never completes", "after")
    storage, memory = await _store(tmp_path)
    async with storage:
        session = Session(Agent(provider=provider, short_term_memory=memory))
        task = asyncio.create_task(session.prompt("hi"))
        await provider.streaming.wait()
        assert session.state.streaming_message == "partial "
        session.abort("now")
        result = await task
        assert result.stop_reason is StopReason.ABORTED
        assert result.text == "partial "
        assert [m.role for m in session.transcript] == [Role.USER, Role.ASSISTANT]
        assert await memory.messages() == session.transcript
        provider.release.set()
        assert (await session.prompt("again")).text == "after"
        assert_valid_for_every_provider(await memory.messages())


async def test_abort_between_turns_stops_before_the_next_model_call() -> None:
    provider = ScriptedProvider(tool_call_response(("fast", {"n": 1})), "unused")
    session = Session(Agent(provider=provider, tools=[fast]))

    def stop_after_tool(event: Any) -> None:
        if isinstance(event, ToolExecutionEnd):
            session.abort("after_turn")

    session.subscribe(stop_after_tool)
    result = await session.prompt("go")
    assert result.stop_reason is StopReason.ABORTED
    assert len(provider.requests) == 1
    assert [m.role for m in session.transcript] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    # continue: the transcript ends with tool results, so the model is called
    assert (await session.continue_()).text == "unused"


async def test_steering_from_another_thread_while_streaming() -> None:
    provider = StreamingGate("first answer", "steered answer")
    session = Session(Agent(provider=provider))
    deltas: list[str] = []
    task = asyncio.create_task(session.prompt("hi"))
    session.subscribe(lambda e: deltas.append(e.delta) if isinstance(e, MessageDelta) else None)
    await provider.streaming.wait()
    thread = threading.Thread(target=session.steer, args=("also mention cats",))
    thread.start()
    thread.join()
    provider.release.set()
    result = await task
    assert result.text == "steered answer"
    assert user_texts(provider.requests[1])[-1] == "also mention cats"
    assert "steered answer" in deltas


async def test_continue_needs_something_to_continue() -> None:
    session = Session(Agent(provider=ScriptedProvider("hi", "queued reply")))
    with pytest.raises(ConfigurationError, match="empty"):
        await session.continue_()
    await session.prompt("hello")
    with pytest.raises(ConfigurationError, match="no message is queued"):
        await session.continue_()
    session.follow_up("one more thing")
    assert (await session.continue_()).text == "queued reply"


async def test_a_subscriber_that_raises_never_breaks_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = Session(Agent(provider=ScriptedProvider("ok")))

    def broken(event: Any) -> None:
        raise RuntimeError("subscriber bug")

    session.subscribe(broken)
    assert (await session.prompt("x")).text == "ok"
    assert "subscriber bug" in caplog.text


async def test_cancelling_the_prompt_keeps_the_transcript_well_formed() -> None:
    gate = Gate()
    provider = ScriptedProvider(tool_call_response(("slow", {"n": 1}), ("fast", {"n": 2})))
    session = Session(Agent(provider=provider, tools=[gate.tool(), fast]))
    task = asyncio.create_task(session.prompt("go"))
    await gate.entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_valid_for_every_provider(session.transcript)
    assert not session.state.running
    errors = [m for m in session.transcript if m.role is Role.TOOL and m.is_error]
    assert errors
    assert all("interrupted" in m.text for m in errors)


CRASH_SCRIPT = Path(__file__).with_name("session_crash_script.py")


async def test_continue_after_a_crash_between_tool_results_and_the_next_model_call(
    tmp_path: Path,
) -> None:
    db = tmp_path / "chat.db"
    # One turn, killed at the second model call: after both tool results, before the answer.
    argv = [sys.executable, str(CRASH_SCRIPT), str(db), "model", "2", "6", "1"]
    proc = await asyncio.to_thread(subprocess.run, argv, capture_output=True, timeout=60)
    assert proc.returncode == -9, proc.stderr.decode()
    storage, memory = SQLiteStorage(db, session_id="s"), None
    async with storage:
        memory = ShortTermMemory(storage)
        provider = ScriptedProvider(text_response("seven"))
        session = Session(Agent(provider=provider, tools=[fast], short_term_memory=memory))
        transcript = await session.load()
        assert [m.role for m in transcript] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL]
        assert {m.text for m in transcript[2:]} == {"fast 7", "fast -7"}
        result = await session.continue_()
        assert result.text == "seven"
        assert [m.role for m in provider.requests[0].messages][-1] is Role.TOOL
        stored = await memory.messages()
        roles = [Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL, Role.ASSISTANT]
        assert [m.role for m in stored] == roles
        assert_valid_for_every_provider(stored)


async def test_tool_start_events_and_each_end_as_its_call_finishes() -> None:
    gate = Gate()
    provider = ScriptedProvider(tool_call_response(("slow", {"n": 1}), ("fast", {"n": 2})), "ok")
    agent = Agent(provider=provider, tools=[gate.tool(), fast])
    order: list[str] = []
    async for event in agent.stream("go"):
        if isinstance(event, ToolExecutionStart):
            order.append(f"start {event.call.name} {event.arguments}")
        elif isinstance(event, ToolExecutionEnd):
            order.append(f"end {event.result.call.name}")
            if event.result.call.name == "fast":
                gate.release.set()  # the fast call's end arrived while slow still runs
    assert order == [
        "start slow {'n': 1}",
        "start fast {'n': 2}",
        "end fast",
        "end slow",
    ]


async def test_setters_between_runs_and_ui_only_messages(tmp_path: Path) -> None:
    provider = ScriptedProvider("first", "second")
    storage, memory = await _store(tmp_path)
    async with storage:
        session = Session(Agent(provider=provider, model="small", short_term_memory=memory))
        await session.prompt("hi")
        await session.add_ui_message(Message(Role.ASSISTANT, [TextBlock("(shown to the user)")]))
        session.set_model("large")
        session.set_system_prompt("Be brief.")
        session.set_tools([fast])
        await session.prompt("again")
        request = provider.requests[1]
        assert (request.model, request.system_prompt) == ("large", "Be brief.")
        assert [t.name for t in request.tools] == ["fast"]
        assert all("shown to the user" not in m.text for m in request.messages)
        stored = await memory.messages()
        assert any(m.metadata.get("goagent.ui_only") for m in stored)  # kept for the UI
        with pytest.raises(ConfigurationError, match="max_iterations=0"):
            session.agent.replace(max_iterations=0)


async def test_compaction_is_an_event_of_the_run_and_its_usage_counts(tmp_path: Path) -> None:
    from goagent_py import ContextCompacted, Usage
    from goagent_py.memory import Compactor, Summarize
    from goagent_py.testing import FunctionProvider

    def model(request: CompletionRequest) -> Any:
        if not request.tools and request.system_prompt.startswith("You maintain"):
            return text_response("## Goal\nTalk.", usage=Usage(input_tokens=7, output_tokens=3))
        return text_response("noted", usage=Usage(input_tokens=1, output_tokens=1))

    provider = FunctionProvider(model)
    storage, memory = await _store(tmp_path)
    async with storage:
        compactor = Compactor(Summarize(provider, model="small"), context_window=400, memory=memory)
        agent = Agent(provider=provider, short_term_memory=memory, transform_context=compactor)
        session = Session(agent)
        compactions: list[Any] = []
        session.subscribe(
            lambda e: compactions.append(e) if isinstance(e, ContextCompacted) else None
        )
        results = [await session.prompt(f"message {i}: " + "blah " * 40) for i in range(8)]
        assert compactions, "the context went over the window: a compaction is reported"
        summarised = [r for r in results if r.usage.input_tokens > 1]
        assert summarised  # the summary call's tokens are counted in that run
        assert await session.compact_now(focus="numbers") is not None or compactor.events
        with pytest.raises(ConfigurationError, match="no compactor"):
            await Session(Agent(provider=provider)).compact_now()


async def test_the_gate_and_the_start_event_see_validated_arguments() -> None:
    seen: list[tuple[dict[str, Any], str]] = []

    def gate(call: Any, message: Message) -> str | None:
        seen.append((dict(call.arguments), message.role))
        return None

    provider = ScriptedProvider(
        tool_call_response(("fast", {"n": "7"}), ("fast", {"n": "seven"})), "ok"
    )
    agent = Agent(provider=provider, tools=[fast], before_tool_call=gate)
    starts: list[dict[str, Any]] = []
    async for event in agent.stream("go"):
        if isinstance(event, ToolExecutionStart):
            starts.append(dict(event.arguments))
    assert seen == [({"n": 7}, Role.ASSISTANT)]  # coerced; the invalid call never reaches it
    assert {"n": 7} in starts
    errors = [m for m in provider.requests[1].messages if m.role is Role.TOOL and m.is_error]
    assert len(errors) == 1
    assert "invalid arguments" in errors[0].text


async def test_a_token_budget_stops_the_run_within_the_step_and_persists_a_valid_turn(
    tmp_path: Path,
) -> None:
    from goagent_py import TokenBudgetError, Usage

    big = Usage(input_tokens=600, output_tokens=100)
    provider = ScriptedProvider(
        CompletionResponse(
            Message(Role.ASSISTANT, [], tool_calls=[ToolCall("c1", "fast", {"n": 1})]),
            StopReason.TOOL_USE,
            big,
        ),
        "never asked",
    )
    storage, memory = await _store(tmp_path)
    async with storage:
        agent = Agent(provider=provider, tools=[fast], short_term_memory=memory, max_run_tokens=500)
        with pytest.raises(TokenBudgetError, match="700 tokens, over its budget of 500") as info:
            await agent.run("go")
        assert info.value.run_result is not None
        assert len(provider.requests) == 1  # stopped right after the call that spent it
        stored = await memory.messages()
        assert_valid_for_every_provider(stored)
        assert "token budget is spent" in stored[-1].text


async def test_calls_of_one_turn_run_at_most_max_parallel_tools_at_once() -> None:
    running = 0
    peak = 0

    @tool
    async def work(n: int) -> str:
        """Work a little."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        running -= 1
        return str(n)

    calls = [ToolCall(f"c{i}", "work", {"n": i}) for i in range(200)]
    provider = ScriptedProvider(tool_call_response(*calls), "done")
    assert Agent(provider=provider, tools=[work]).options.max_parallel_tools == 64
    await Agent(provider=provider, tools=[work], max_parallel_tools=8).run("go")
    assert peak == 8
    results = [m for m in provider.requests[1].messages if m.role is Role.TOOL]
    assert [m.text for m in results] == [str(i) for i in range(200)]  # still in call order


async def test_a_tool_sets_details_for_uis_and_asks_the_run_to_terminate() -> None:
    from goagent_py import current_tool_context

    @tool
    def deploy(target: str) -> str:
        """Deploy a target."""
        ctx = current_tool_context()
        assert ctx is not None
        ctx.set_details({"target": target, "url": f"https://{target}.example"})
        ctx.terminate()
        return f"{target} deployed"

    both = ScriptedProvider(
        tool_call_response(("deploy", {"target": "a"}), ("deploy", {"target": "b"})), "unused"
    )
    ends: list[Any] = []
    async for event in Agent(provider=both, tools=[deploy]).stream("ship"):
        if isinstance(event, ToolExecutionEnd):
            ends.append(event.result)
    assert len(both.requests) == 1  # every call of the batch asked: the run stops there
    assert {r.details["url"] for r in ends} == {"https://a.example", "https://b.example"}
    assert all("url" not in "".join(b.text for b in r.content) for r in ends)  # not for the model

    one = ScriptedProvider(
        tool_call_response(("deploy", {"target": "a"}), ("fast", {"n": 1})), "goes on"
    )
    result = await Agent(provider=one, tools=[deploy, fast]).run("ship")
    assert result.text == "goes on"  # one call did not ask: the run goes on


@pytest.mark.parametrize("memory", [False, True])
async def test_a_consumer_that_stops_reading_at_agent_end_leaves_the_session_idle(
    tmp_path: Path, memory: bool
) -> None:
    from goagent_py.events import AgentEnd

    kwargs: dict[str, Any] = {}
    if memory:
        storage = SQLiteStorage(str(tmp_path / "s.db"), session_id="s")
        kwargs["short_term_memory"] = ShortTermMemory(storage)
    session = Session(Agent(provider=ScriptedProvider("one", "two"), model="m", **kwargs))
    stream = session.stream("first")
    async for event in stream:
        if isinstance(event, AgentEnd):
            break  # the stream is left open, as a natural loop leaves it
    assert not session.state.running
    assert [m.text for m in session.transcript] == ["first", "one"]
    assert (await session.prompt("second")).text == "two"  # not "the session is running"
    await stream.aclose()
    assert [m.text for m in session.transcript] == ["first", "one", "second", "two"]


async def test_abort_now_while_should_stop_decides_ends_the_run_with_the_batch_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # should_stop is user code awaited between turns: one that hung held abort("now") (review6a).
    started = asyncio.Event()

    async def hangs(state: Any) -> bool:
        started.set()
        await asyncio.Event().wait()
        return False

    @tool
    def note(text: str) -> str:
        """Note something.

        Args:
            text: what.
        """
        return "noted"

    memory = ShortTermMemory(storage=SQLiteStorage(tmp_path / "chat.db", session_id="s"))
    provider = ScriptedProvider(tool_call_response(ToolCall("c1", "note", {"text": "x"})), "done")
    session = Session(
        Agent(provider=provider, tools=[note], short_term_memory=memory, should_stop=hangs)
    )
    task = asyncio.create_task(session.prompt("go"))
    await started.wait()
    session.abort("now")
    with caplog.at_level("WARNING"):
        result = await asyncio.wait_for(task, 60)  # a hang guard, not a timing

    assert result.stop_reason == StopReason.ABORTED
    assert "should_stop raised" not in caplog.text  # an abort, not a failure of should_stop
    assert len(provider.requests) == 1
    stored = await memory.transcript()
    assert [(m.role, m.text) for m in stored[2:]] == [(Role.TOOL, "noted")]  # kept, not redone
    assert session.transcript == stored


# -- an abort while long-term memory or its write policy hangs (review7a) ------------------------


@pytest.mark.parametrize("where", ["retrieve", "write_policy", "store"])
async def test_abort_now_while_long_term_memory_hangs_ends_the_run_at_once(
    tmp_path: Path, where: str
) -> None:
    # A remote embedder that never answers (recall before the first turn, the store after the
    # answer) or a write policy that asks a model held abort("now") for good.
    started = asyncio.Event()

    async def hang(*args: Any, **kwargs: Any) -> Any:
        started.set()
        await asyncio.Event().wait()

    class LongTerm:
        async def retrieve(self, query: Any, *, top_k: Any, session: str = "") -> list[Any]:
            return await hang() if where == "retrieve" else []

        async def store(self, messages: Any, *, session: str = "") -> None:
            if where == "store":
                await hang()

    provider = ScriptedProvider("an answer")
    memory = ShortTermMemory(storage=SQLiteStorage(tmp_path / "chat.db", session_id="s"))
    session = Session(
        Agent(
            provider=provider,
            short_term_memory=memory,
            long_term_memory=LongTerm(),
            write_policy=hang if where == "write_policy" else None,
        )
    )
    task = asyncio.create_task(session.prompt("hello"))
    await started.wait()
    session.abort("now")
    result = await asyncio.wait_for(task, 60)  # a hang guard, not a timing

    if where == "retrieve":  # before the first turn: the run ends aborted, the prompt kept
        assert result.stop_reason == "aborted"
        assert provider.requests == []
    else:  # after the answer: the run ends with it, the long-term write given up
        assert result.text == "an answer"
    stored = await memory.transcript()
    assert validate_transcript(stored) == []
    assert session.transcript == stored


# -- continue_() after each kind of stop (review7a) -----------------------------------------------


async def test_continue_while_calls_wait_raises_approval_pending_and_keeps_the_queue(
    tmp_path: Path,
) -> None:
    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay."""
        return "paid"

    memory = ShortTermMemory(storage=SQLiteStorage(tmp_path / "c.db", session_id="s"))
    session = Session(
        Agent(
            provider=ScriptedProvider(tool_call_response(("pay", {"amount": 3})), "done"),
            tools=[pay],
            short_term_memory=memory,
        )
    )
    waiting = await session.prompt("pay")
    session.steer("and say thanks")
    with pytest.raises(ApprovalPendingError):  # was a ConfigurationError saying "an answer"
        await session.continue_()
    assert [m.text for m in session.steering_queue] == ["and say thanks"]
    assert not session.state.running
    result = await session.resume({waiting.pending[0].id: Approve()})
    assert result.text == "done"


async def test_continue_after_an_answer_cut_off_asks_the_model_to_go_on(tmp_path: Path) -> None:
    memory = ShortTermMemory(storage=SQLiteStorage(tmp_path / "c.db", session_id="s"))
    provider = ScriptedProvider("the first half of a long answer", "and the second half.")
    session = Session(Agent(provider=provider, short_term_memory=memory))
    async for event in session.stream("tell me"):
        if isinstance(event, MessageDelta):
            session.abort("now")
    assert session.transcript[-1].metadata["goagent.synthetic"] == "aborted"

    result = await session.continue_()  # refused before: "ends with the assistant's answer"

    assert result.text == "and the second half."
    asked = provider.requests[-1].messages[-1]
    assert asked.role is Role.USER
    assert "the first half of a long answer" in asked.text
    stored = await memory.transcript()
    assert validate_transcript(stored, allow_pending=False) == []
    assert session.transcript == stored


async def test_continue_after_the_iteration_budget_asks_the_model_to_go_on(
    tmp_path: Path,
) -> None:
    @tool
    def look(q: str) -> str:
        """Look."""
        return "seen"

    memory = ShortTermMemory(storage=SQLiteStorage(tmp_path / "c.db", session_id="s"))
    provider = ScriptedProvider(tool_call_response(("look", {"q": "a"})), "found it")
    session = Session(
        Agent(provider=provider, tools=[look], max_iterations=1, short_term_memory=memory)
    )
    with pytest.raises(MaxIterationsError):
        await session.prompt("find it")

    result = await session.continue_()

    assert result.text == "found it"
    assert provider.requests[-1].messages[-1].role is Role.USER
    stored = await memory.transcript()
    assert validate_transcript(stored, allow_pending=False) == []
    assert session.transcript == stored
    with pytest.raises(ConfigurationError):  # a complete answer: nothing to go on with
        await session.continue_()
