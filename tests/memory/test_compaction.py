"""Context compaction: strategies, the validator, the compactor in real agent runs and sessions."""

from __future__ import annotations

import copy
import pickle
import re
from pathlib import Path

import pytest

from goagent_py import Agent
from goagent_py.errors import ConfigurationError
from goagent_py.memory.compaction import (
    CLEARED_NOTE,
    COMPACTION_METADATA_KEY,
    USAGE_SINK,
    ClampParts,
    ClearToolResults,
    CompactionError,
    SlidingWindow,
    Summarize,
    Tiered,
    boundary_message,
    is_boundary,
    validate_context,
)
from goagent_py.memory.compactor import EVENT_SINK, CompactionEvent, Compactor
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage import InMemoryStorage, SQLiteStorage
from goagent_py.memory.tokens import HeuristicEstimator
from goagent_py.messages import (
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    Usage,
    assistant_message,
    user_message,
)
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.providers import anthropic, ollama, openai
from goagent_py.results import ModelResponse
from goagent_py.session import Session
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response
from goagent_py.tools import tool

ESTIMATOR = HeuristicEstimator()


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
    assert messages[0].role is Role.USER
    anthropic.build_request(CompletionRequest(model="m", messages=messages), default_max_tokens=10)
    openai.build_request(CompletionRequest(model="m", messages=messages))
    ollama.build_chat_request(CompletionRequest(model="m", messages=messages))


def tokens(messages: list[Message]) -> int:
    return sum(ESTIMATOR.count(m) for m in messages)


def turn(i: int, result: str = "r" * 400) -> list[Message]:
    """One user turn with a tool call: user, assistant(call), tool result, answer."""
    call = ToolCall(f"c{i}", "lookup", {"q": f"q{i}"})
    return [
        user_message(f"question {i} " + "u" * 100),
        Message(Role.ASSISTANT, [ThinkingBlock("hmm", "sig")], tool_calls=[call]),
        Message(Role.TOOL, [TextBlock(f"result {i} {result}")], tool_call_id=call.id),
        assistant_message(f"answer {i} " + "a" * 100),
    ]


def conversation(turns: int) -> list[Message]:
    return [m for i in range(turns) for m in turn(i)]


class Summariser:
    """A summary model: numbers its summaries and says which previous summary it built on."""

    def __init__(self, *, fail: bool = False) -> None:
        self.requests: list[CompletionRequest] = []
        self.fail = fail

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        self.requests.append(copy.deepcopy(request))
        if self.fail:
            raise RuntimeError("summary model down")
        prompt = request.messages[0].text
        found = re.search(r"summary #(\d+)", prompt)
        previous = found.group(1) if found else "none"
        n = len(self.requests)
        return text_response(f"## Goal\nsummary #{n} (builds on #{previous})", usage=Usage(100, 20))


# -- strategies --------------------------------------------------------------------------------


async def test_clamp_parts_keeps_head_and_tail_with_a_marker() -> None:
    big = "H" * 500 + "M" * 1000 + "T" * 500
    msgs = [user_message(big), assistant_message("short")]
    out = await ClampParts(200)(msgs)
    text = out[0].text
    assert text.startswith("H" * 100)
    assert text.endswith("T" * 100)
    assert "[... 1800 characters clamped ...]" in text
    assert out[1] is msgs[1]  # untouched parts stay the same objects
    assert msgs[0].text == big  # the input is not mutated
    with pytest.raises(ConfigurationError):
        ClampParts(10)


async def test_clear_tool_results_keeps_calls_and_the_last_groups() -> None:
    msgs = conversation(3)
    out = await ClearToolResults(keep_last_groups=2)(msgs)
    results = [m for m in out if m.role is Role.TOOL]
    assert [m.text for m in results[:2]] == [CLEARED_NOTE, CLEARED_NOTE]
    assert results[2].text.startswith("result 2")  # within the last 2 groups
    assert [c.id for m in out for c in m.tool_calls] == ["c0", "c1", "c2"]
    assert_valid_for_every_provider(out)
    assert msgs[2].text.startswith("result 0")


async def test_summarize_sends_a_clean_request_and_keeps_the_tail() -> None:
    summariser = Summariser()
    msgs = conversation(6)
    msgs[0] = Message(Role.USER, [TextBlock("hello"), ImageBlock(b"x", "image/png")])
    strategy = Summarize(summariser, model="small", keep_last_groups=3)
    out = await strategy(msgs)
    request = summariser.requests[0]
    assert request.tools == []
    assert request.model == "small"
    assert len(request.messages) == 1
    prompt = request.messages[0].text
    assert "hmm" not in prompt  # thinking dropped
    assert "ASSISTANT CALLED lookup" in prompt
    assert "TOOL RESULT lookup" in prompt
    assert "[image]" in prompt
    for section in ("Goal", "Decisions", "Open tasks", "Identifiers", "User preferences"):
        assert f"## {section}" in prompt
    assert is_boundary(out[0])
    assert out[1].role is Role.USER
    assert out[1:] == msgs[-4:]  # the last turn (its 3 groups) is kept verbatim
    assert strategy.usage == Usage(100, 20)
    assert_valid_for_every_provider(out)
    # the cut moves back to the user message that opens the groups kept
    wider = await Summarize(Summariser(), keep_last_groups=4)(msgs)
    assert wider[1:] == msgs[-8:]
    # incremental: the next summary is asked to build on this one
    again = await strategy(out + conversation(8)[-12:])
    assert "<previous_summary>" in summariser.requests[1].messages[0].text
    assert "builds on #1" in again[0].text


async def test_summarize_after_clearing_reads_the_full_tool_results() -> None:
    summariser = Summariser()
    msgs = conversation(6)
    tiered = Tiered([ClearToolResults(1), Summarize(summariser, keep_last_groups=3)])
    out = await tiered(msgs)
    prompt = summariser.requests[0].messages[0].text
    assert "result 0 rrrr" in prompt
    assert CLEARED_NOTE not in prompt
    assert is_boundary(out[0])


async def test_summarize_input_is_bounded() -> None:
    summariser = Summariser()
    msgs = [m for i in range(40) for m in turn(i, "z" * 20_000)]
    await Summarize(summariser, max_input_chars=10_000)(msgs)
    assert len(summariser.requests[0].messages[0].text) < 12_000


async def test_summarize_refuses_a_tool_call_answer_or_nothing_to_summarise() -> None:
    answer_with_call = ScriptedProvider(tool_call_response(("lookup", {})))
    with pytest.raises(CompactionError, match="tool call"):
        await Summarize(answer_with_call, keep_last_groups=1)(conversation(3))
    with pytest.raises(CompactionError, match="nothing to summarise"):
        await Summarize(Summariser(), keep_last_groups=8)(conversation(1))


def test_validator_rejects_what_providers_refuse() -> None:
    msgs = conversation(2)
    validate_context(msgs, msgs)
    with pytest.raises(CompactionError, match="orphan"):
        validate_context(msgs[2:], msgs)
    with pytest.raises(CompactionError, match="without results"):
        validate_context([msgs[0], msgs[1], msgs[3]], msgs)
    with pytest.raises(CompactionError, match="opens on"):
        validate_context(msgs[3:], msgs)
    with pytest.raises(CompactionError, match="kept part opens on"):
        validate_context([boundary_message("s", "summarize"), *msgs[3:]], msgs)
    with pytest.raises(CompactionError, match="newest"):
        validate_context(msgs[:3], msgs)
    with pytest.raises(CompactionError, match="no messages"):
        validate_context([], msgs)
    error = pickle.loads(pickle.dumps(CompactionError("x")))
    assert type(error) is CompactionError
    assert str(error) == "x"


class Counting:
    """A strategy that records its calls and returns its input (or raises / breaks it)."""

    def __init__(self, mode: str = "same") -> None:
        self.calls = 0
        self.mode = mode

    async def __call__(self, messages: list[Message]) -> list[Message]:
        self.calls += 1
        if self.mode == "raise":
            raise RuntimeError("boom")
        if self.mode == "orphan":
            return messages[2:]
        return list(messages)


async def test_tiered_escalates_only_while_over_target() -> None:
    msgs = conversation(6)
    expensive = Counting()
    cheap = ClearToolResults(keep_last_groups=1)
    cleared = tokens(await cheap(msgs))
    tiered = Tiered([cheap, expensive], target_tokens=cleared + 1)
    out = await tiered(msgs)
    assert expensive.calls == 0
    assert tokens(out) == cleared
    tiered = Tiered([cheap, expensive], target_tokens=cleared - 1, fallback=SlidingWindow())
    out = await tiered(msgs)
    assert expensive.calls == 1
    assert tokens(out) < cleared
    assert is_boundary(out[0])


@pytest.mark.parametrize("mode", ["raise", "orphan"])
async def test_tiered_falls_back_when_a_strategy_fails_and_breaks_after_repeats(mode: str) -> None:
    msgs = conversation(6)
    failing = Counting(mode)
    tiered = Tiered(
        [failing], fallback=SlidingWindow(keep_last_groups=3), max_failures=2, cooldown=3
    )
    out = await tiered(msgs)
    assert is_boundary(out[0])
    assert out[1:] == msgs[-4:]
    assert_valid_for_every_provider(out)
    await tiered(msgs)
    assert failing.calls == 2
    assert tiered.breaker_open(0)
    for _ in range(3):  # skipped while open
        await tiered(msgs)
    assert failing.calls == 2
    assert not tiered.breaker_open(0)
    await tiered(msgs)  # tried again
    assert failing.calls == 3


# -- the compactor -----------------------------------------------------------------------------


async def test_compactor_leaves_a_small_context_alone_and_reuses_its_summary() -> None:
    summariser = Summariser()
    compactor = Compactor(Summarize(summariser, keep_last_groups=3), context_window=2000)
    small = conversation(2)
    assert await compactor(small) == small
    assert not compactor.events
    msgs = conversation(12)
    out = await compactor(msgs)
    assert len(summariser.requests) == 1
    assert is_boundary(out[0])
    assert tokens(out) <= compactor.trigger_tokens
    event = compactor.events[0]
    assert event.steps == ("summarize",)
    assert event.tokens_before > event.tokens_after
    assert event.covers == len(msgs) - len(out) + 1
    record = out[0].metadata[COMPACTION_METADATA_KEY]
    assert record["covers"] == event.covers
    assert record["strategy"] == "summarize"
    # the next request (one more turn) reuses the boundary: no model call
    again = await compactor(msgs + turn(12))
    assert len(summariser.requests) == 1
    assert again[0] is out[0]
    assert compactor.usage == Usage(100, 20)


async def test_summariser_raising_leaves_history_unchanged_and_uses_the_fallback() -> None:
    storage = InMemoryStorage()
    memory = ShortTermMemory(storage)
    msgs = conversation(12)
    await memory.append(*msgs)
    seen: list[CompactionEvent] = []
    compactor = Compactor(
        Tiered([Summarize(Summariser(fail=True), keep_last_groups=3)]),
        context_window=2000,
        memory=memory,
        on_event=seen.append,
    )
    loaded = await memory.messages()
    out = await compactor(loaded)
    assert tokens(out) <= compactor.trigger_tokens
    assert_valid_for_every_provider(out)
    assert "Summary" in out[0].text
    assert out[-1] == msgs[-1]
    (event,) = seen
    assert event.fallback_used
    assert isinstance(event.error, CompactionError)
    assert "summary model down" in str(event.error)
    assert not event.persisted
    assert compactor.boundary is None
    assert await storage.load() == msgs  # nothing replaced, nothing added
    assert loaded == msgs


async def test_compactor_without_fallback_sends_the_context_unchanged() -> None:
    compactor = Compactor(Counting("raise"), context_window=1000, fallback=False)
    msgs = conversation(12)
    out = await compactor(msgs)
    assert out == msgs
    assert not compactor.events[0].changed
    assert compactor.events[0].error is not None


async def test_summary_usage_and_events_reach_the_run_through_the_sinks() -> None:
    seen: list[Usage] = []
    events: list[CompactionEvent] = []
    compactor = Compactor(Summarize(Summariser(), keep_last_groups=2), context_window=1000)
    usage_token = USAGE_SINK.set(seen.append)  # what a run sets around transform_context
    event_token = EVENT_SINK.set(events.append)
    try:
        await compactor(conversation(12))
    finally:
        USAGE_SINK.reset(usage_token)
        EVENT_SINK.reset(event_token)
    assert seen == [Usage(100, 20)]
    assert events == list(compactor.events)
    assert events[0].usage == Usage(100, 20)


async def test_a_compaction_is_a_span_with_its_sizes() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    compactor = Compactor(
        Tiered([Summarize(Summariser(fail=True))]), context_window=1000, tracer_provider=provider
    )
    await compactor(conversation(12))
    provider.shutdown()
    (span,) = exporter.get_finished_spans()
    assert span.name == "compact_context"
    attributes = dict(span.attributes or {})
    assert attributes["goagent.compaction.steps"] == ("sliding_window",)
    assert attributes["goagent.compaction.fallback_used"] is True
    assert (
        attributes["goagent.compaction.tokens_after"]
        < attributes["goagent.compaction.tokens_before"]
    )
    assert attributes["error.type"] == "goagent_py.memory.compaction.CompactionError"


async def test_compact_now_runs_every_tier_with_a_focus() -> None:
    summariser = Summariser()
    compactor = Compactor(Tiered([Summarize(summariser, keep_last_groups=2)]))
    out = await compactor.compact_now(conversation(4), focus="the file names")
    assert is_boundary(out[0])
    assert "Focus especially on: the file names" in summariser.requests[0].messages[0].text


async def test_the_measure_is_anchored_on_reported_input_tokens() -> None:
    compactor = Compactor(Counting(), context_window=100_000)
    msgs = conversation(2)
    await compactor(msgs)
    compactor.observe(0, ModelResponse(0.1, Usage(input_tokens=5000)))
    more = [*msgs, user_message("next")]
    assert compactor.estimate(more) == 5000 + ESTIMATOR.count(more[-1])
    assert compactor.estimate(conversation(2)) == tokens(msgs)  # other messages: estimated


def test_compactor_rejects_bad_settings() -> None:
    with pytest.raises(ConfigurationError):
        Compactor(Counting(), threshold=1.5)
    with pytest.raises(ConfigurationError):
        Compactor(Counting(), context_window=0)
    with pytest.raises(ConfigurationError):
        Compactor(Counting(), threshold=0.5, target=0.7)
    with pytest.raises(ConfigurationError):
        Compactor(Counting(), context_window=100, reserve_tokens=100)


# -- in agent runs -----------------------------------------------------------------------------


@tool
def lookup(q: str) -> str:
    """Look something up.

    Args:
        q: the query.
    """
    return f"found {q}: " + "x" * 400


class Model:
    """Calls lookup once per user turn, then answers; records every request."""

    def __init__(self) -> None:
        self.requests: list[CompletionRequest] = []

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        self.requests.append(copy.deepcopy(request))
        last = request.messages[-1]
        if last.role is Role.TOOL:
            return text_response("answer " + "a" * 150, usage=Usage(10, 5))
        return tool_call_response(("lookup", {"q": last.text[:12]}), usage=Usage(10, 5))


async def test_200_turns_under_a_small_window_never_overflow_nor_orphan() -> None:
    model, summariser = Model(), Summariser()
    memory = ShortTermMemory()
    window = 3000
    compactor = Compactor(
        Tiered([ClampParts(2000), ClearToolResults(4), Summarize(summariser, keep_last_groups=4)]),
        context_window=window,
        memory=memory,
    )
    agent = Agent(
        provider=model, tools=[lookup], short_term_memory=memory, transform_context=compactor
    )
    for i in range(200):
        result = await agent.run(f"turn {i} " + "q" * 150)
        assert result.text.startswith("answer")
    assert len(model.requests) == 400
    for request in model.requests:
        assert tokens(request.messages) <= window
        assert_valid_for_every_provider(request.messages)
        if is_boundary(request.messages[0]):  # the kept part opens on a user message
            assert request.messages[1].role is Role.USER
    # summaries were built incrementally, each on the one before
    assert len(summariser.requests) >= 10
    for n in range(2, len(summariser.requests) + 1):
        assert f"summary #{n - 1}" in summariser.requests[n - 1].messages[0].text
    assert all(tokens(r.messages) <= window for r in summariser.requests)
    assert all(e.error is None for e in compactor.events)
    # the history is append-only: every message of every turn is still stored
    transcript = await memory.transcript()
    assert len(transcript) == 800
    assert tokens(transcript) > 10 * window
    assert [m.text for m in transcript if m.role is Role.USER][:2] == [
        "turn 0 " + "q" * 150,
        "turn 1 " + "q" * 150,
    ]
    assert sum(is_boundary(m) for m in await memory.storage.load()) == len(summariser.requests)


async def test_a_session_reopened_from_sqlite_sends_the_boundary_and_the_tail(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chat.db"
    summariser = Summariser()
    async with SQLiteStorage(path, session_id="s") as storage:
        memory = ShortTermMemory(storage)
        compactor = Compactor(
            Summarize(summariser, keep_last_groups=4), context_window=2500, memory=memory
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
            await session.prompt(f"turn {i} " + "q" * 150)
        assert compactor.events
        assert all(e.persisted for e in compactor.events)
        latest = compactor.boundary
        assert latest is not None
    summaries_before = len(summariser.requests)

    async with SQLiteStorage(path, session_id="s") as storage:
        memory = ShortTermMemory(storage)
        transcript = await memory.transcript()
        assert len(transcript) == 80  # the full conversation is still stored
        loaded = await memory.messages()
        assert loaded[0].text == latest.text
        assert is_boundary(loaded[0])
        covers = loaded[0].metadata[COMPACTION_METADATA_KEY]["covers"]
        assert loaded[1:] == transcript[covers:]
        model = Model()
        compactor = Compactor(
            Summarize(summariser, keep_last_groups=4), context_window=2500, memory=memory
        )
        session = Session(
            Agent(
                provider=model,
                tools=[lookup],
                short_term_memory=memory,
                transform_context=compactor,
            )
        )
        await session.prompt("after reopening")
        first = model.requests[0].messages
        assert first[0].text == latest.text  # boundary, then the tail, then the new prompt
        assert first[1:-1] == transcript[covers:]
        assert first[-1].text == "after reopening"
        assert len(summariser.requests) == summaries_before  # no re-summarising
        assert_valid_for_every_provider(first)
        assert len(await memory.transcript()) == 84
        record = loaded[0].metadata[COMPACTION_METADATA_KEY]
        assert set(record) == {"summary", "covers", "strategy", "tokens_before", "tokens_after"}
        assert record["tokens_after"] < record["tokens_before"]


async def test_boundary_message_and_short_term_view() -> None:
    memory = ShortTermMemory()
    msgs = conversation(3)
    await memory.append(*msgs)
    await memory.append(boundary_message("old", "summarize", covers=4))
    await memory.append(boundary_message("newer", "summarize", covers=8))
    view = await memory.messages()
    assert view[0].metadata[COMPACTION_METADATA_KEY]["summary"] == "newer"
    assert view[1:] == msgs[8:]
    assert memory.window_start == 8
    assert await memory.transcript() == msgs
