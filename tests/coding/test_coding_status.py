"""goagent_py.coding.Status: the status line from usage events, a cost only at a known price."""

from __future__ import annotations

from goagent_py.coding import Price, Status
from goagent_py.coding.status import tokens_text
from goagent_py.events import MessageEnd, ToolExecutionUpdate
from goagent_py.messages import Message, Role, TextBlock, ToolCall, Usage


def _end(usage: Usage, path: tuple[str, ...] = ()) -> MessageEnd:
    return MessageEnd(Message(Role.ASSISTANT, [TextBlock("x")]), usage=usage, path=path)


def test_tokens_text() -> None:
    assert [tokens_text(n) for n in (0, 999, 1000, 12_345, 2_000_000)] == [
        "0", "999", "1k", "12.3k", "2M",
    ]  # fmt: skip


def test_the_line_counts_sub_agents_but_fills_the_context_from_the_top_level_only() -> None:
    status = Status(model="m", context_window=10_000, price=Price(3.0, 15.0))
    assert status.line() == "m · 0 tokens · $0.000 · context —/10k · idle"
    status.see(_end(Usage(4000, 100)))
    call = ToolCall("c1", "explore", {})
    status.see(ToolExecutionUpdate(call, _end(Usage(50_000, 1000), ("explore",))))
    status.see(MessageEnd(Message(Role.USER, [TextBlock("u")])))  # no usage: nothing counted
    # 55.1k tokens: 54k in at $3/M (0.162) + 1.1k out at $15/M (0.0165) = $0.1785.
    assert status.line() == (
        "m · 55.1k tokens (54k in, 1.1k out) · $0.178 · context 4.1k/10k (41%) · idle"
    )
    status.reset_context()
    assert "context —/10k ·" in status.line()


def test_without_a_price_the_cost_is_not_guessed() -> None:
    status = Status(model="m")
    status.see(_end(Usage(10, 2, cache_read_input_tokens=5)))
    assert status.line() == "m · 17 tokens (15 in, 2 out) · cost — · context 17 · idle"
    assert Price(1.0, 2.0).of(Usage(1_000_000, 1_000_000)) == 3.0
