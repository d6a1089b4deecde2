"""Window policies: reference behaviour, plus hypothesis properties over random conversations."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goagent_py.errors import ConfigurationError
from goagent_py.memory.policies import FixedWindow, NoOp, Policy, TokenWindow, message_groups
from goagent_py.memory.tokens import HeuristicEstimator
from goagent_py.messages import (
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    assistant_message,
    user_message,
)


def call(*ids: str) -> Message:
    return Message(Role.ASSISTANT, tool_calls=[ToolCall(i, "lookup", {"q": i}) for i in ids])


def result(call_id: str, text: str = "ok") -> Message:
    return Message(Role.TOOL, [TextBlock(text)], tool_call_id=call_id)


class Fixed:
    """A tokenizer that costs every message the same."""

    def __init__(self, cost: int) -> None:
        self.cost = cost

    def count_text(self, text: str) -> int:
        return self.cost

    def count(self, message: Message) -> int:
        return self.cost


def test_policies_satisfy_the_protocol() -> None:
    for policy in (NoOp(), FixedWindow(2), TokenWindow(10)):
        assert isinstance(policy, Policy)


def test_groups_keep_tool_calls_with_their_results() -> None:
    msgs = [user_message("q"), call("a"), result("a"), assistant_message("done")]
    assert message_groups(msgs) == [(0, 1), (1, 3), (3, 4)]
    parallel = [user_message("q"), call("a", "b", "c"), result("a"), result("b"), result("c")]
    assert message_groups(parallel) == [(0, 1), (1, 5)]
    assert message_groups([result("x"), user_message("q")]) == [(0, 1), (1, 2)]
    assert message_groups([]) == []


def test_noop_returns_a_new_list() -> None:
    msgs = [user_message("a"), assistant_message("b")]
    out = NoOp().apply(msgs)
    assert out == msgs
    out.append(user_message("c"))
    assert len(msgs) == 2
    assert NoOp().apply([]) == []


def test_fixed_window_reference_cases() -> None:
    simple = [user_message("first"), assistant_message("second")]
    assert FixedWindow(1).apply(simple) == [simple[1]]
    assert FixedWindow(5).apply(simple) == simple
    assert FixedWindow(0).apply(simple) == []
    assert FixedWindow(3).apply([]) == []
    trace = [user_message("q"), call("a"), result("a"), assistant_message("done")]
    assert FixedWindow(2).apply(trace) == trace[1:]
    assert FixedWindow(1).apply(trace) == [trace[3]]


def test_fixed_window_rejects_bad_n() -> None:
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ConfigurationError):
            FixedWindow(bad)  # type: ignore[arg-type]


def test_token_window_reference_cases() -> None:
    two = [user_message("aaaa"), assistant_message("bbbb")]  # 5 tokens each
    assert TokenWindow(100).apply(two) == two
    assert TokenWindow(5).apply(two) == [two[1]]
    assert TokenWindow(3).apply(two) == [two[1]]  # the newest group is always kept
    assert TokenWindow(10).apply([]) == []

    trace = [user_message("x" * 400), call("a"), result("a"), assistant_message("done")]
    out = TokenWindow(60).apply(trace)
    assert out == trace[1:]  # the 104-token question is dropped, the tool pair kept
    assert TokenWindow(9).apply(trace) == [trace[3]]  # never an orphan tool result

    letters = [user_message(c) for c in "abc"]
    assert TokenWindow(25, estimator=Fixed(10)).apply(letters) == letters[1:]


def test_token_window_counts_images() -> None:
    image = ImageBlock(
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + (128).to_bytes(4, "big") * 2 + b"\x08\x02\0\0\0",
        "image/png",
    )
    msgs = [user_message("x"), Message(Role.USER, [image])]
    cost = HeuristicEstimator().count(msgs[1])
    assert cost == 4 + 680
    assert TokenWindow(cost + 4).apply(msgs) == msgs
    assert TokenWindow(cost + 3).apply(msgs) == [msgs[1]]


def test_token_window_counts_tool_calls_and_thinking() -> None:
    heavy_call = Message(
        Role.ASSISTANT,
        [ThinkingBlock("t" * 400)],
        tool_calls=[ToolCall("a", "lookup", {"q": "x" * 400})],
    )
    msgs = [user_message("q"), heavy_call, result("a", "r" * 400), assistant_message("done")]
    assert TokenWindow(200).apply(msgs) == [msgs[3]]
    assert TokenWindow(318).apply(msgs) == msgs[1:]  # 316 with the call, 320 with "q"
    assert TokenWindow(320).apply(msgs) == msgs


def test_token_window_rejects_bad_budget() -> None:
    for bad in (0, -5, True):
        with pytest.raises(ConfigurationError):
            TokenWindow(bad)


def test_windows_skip_orphan_tool_results_at_the_start() -> None:
    msgs = [result("lost"), user_message("q"), assistant_message("a")]
    assert FixedWindow(3).apply(msgs) == msgs[1:]
    assert TokenWindow(1000).apply(msgs) == msgs[1:]
    assert NoOp().apply(msgs) == msgs  # NoOp keeps everything as stored
    assert FixedWindow(1).apply([result("lost")]) == []
    assert TokenWindow(10).apply([result("lost")]) == []


# -- properties ----------------------------------------------------------------------------------

texts = st.text(alphabet="abcdefgh é", max_size=60)


@st.composite
def groups(draw: st.DrawFn) -> list[Message]:
    kind = draw(st.sampled_from(["user", "assistant", "tools", "orphan", "thinking"]))
    if kind == "user":
        return [user_message(draw(texts))]
    if kind == "assistant":
        return [assistant_message(draw(texts))]
    if kind == "thinking":
        return [Message(Role.ASSISTANT, [ThinkingBlock(draw(texts)), TextBlock(draw(texts))])]
    if kind == "orphan":
        return [result("orphan", draw(texts))]
    n = draw(st.integers(1, 3))
    ids = [f"c{draw(st.integers(0, 10_000))}_{i}" for i in range(n)]
    return [call(*ids), *(result(i, draw(texts)) for i in ids)]


conversations = st.lists(groups(), max_size=25).map(lambda gs: [m for g in gs for m in g])
policies = st.one_of(
    st.builds(FixedWindow, st.integers(0, 30)),
    st.builds(TokenWindow, st.integers(1, 400)),
    st.just(NoOp()),
)


def _group_starts(msgs: Sequence[Message]) -> set[int]:
    return {start for start, _ in message_groups(msgs)}


@settings(max_examples=300, deadline=None)
@given(conversations, policies)
def test_windows_are_suffixes_cut_between_groups(msgs: list[Message], policy: Policy) -> None:
    before = copy.deepcopy(msgs)
    ids = [id(m) for m in msgs]
    out = policy.apply(msgs)
    assert msgs == before  # input untouched
    assert [id(m) for m in msgs] == ids
    assert out is not msgs
    start = len(msgs) - len(out)
    assert all(a is b for a, b in zip(out, msgs[start:], strict=True))  # a contiguous tail
    if out:
        assert start in _group_starts(msgs)  # never inside a tool-call group
        if not isinstance(policy, NoOp):
            assert out[0].role != Role.TOOL  # never an orphan tool result first


@settings(max_examples=300, deadline=None)
@given(conversations, st.integers(1, 400))
def test_token_window_fits_budget_and_keeps_newest_group(msgs: list[Message], budget: int) -> None:
    est = HeuristicEstimator()
    out = TokenWindow(budget).apply(msgs)
    grouped = message_groups(msgs)
    kept = [g for g in grouped if msgs[g[0]].role != Role.TOOL]
    if not kept:
        assert out == []
        return
    newest = kept[-1]
    assert len(out) >= len(msgs) - newest[0]  # the newest real group is always there
    cost = sum(est.count(m) for m in out)
    newest_cost = sum(est.count(m) for m in msgs[newest[0] :])
    if len(out) > len(msgs) - newest[0]:
        assert cost <= budget
    # Maximal: the group just before the window would not have fitted.
    start = len(msgs) - len(out)
    before = [g for g in grouped if g[1] == start]
    if before and msgs[before[0][0]].role != Role.TOOL:
        extra = sum(est.count(m) for m in msgs[before[0][0] : before[0][1]])
        assert cost + extra > budget or newest_cost > budget


@settings(max_examples=200, deadline=None)
@given(conversations, st.integers(1, 30))
def test_fixed_window_keeps_at_most_n_groups(msgs: list[Message], n: int) -> None:
    out = FixedWindow(n).apply(msgs)
    assert len(message_groups(out)) <= n
    if len(message_groups(msgs)) <= n and msgs and msgs[0].role != Role.TOOL:
        assert out == msgs
