"""The chat as a user lives it (review10c): long and non-English input against the embedded
model's context window (docs/chat.md, "Memory")."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from goagent_py.cli import _agent
from goagent_py.cli import main as cli
from goagent_py.cli._common import Console, Picked
from goagent_py.memory.tokens import HeuristicEstimator, TokenEstimator
from goagent_py.testing import ScriptedProvider

# 1,008 characters: the default model reads it as 2,226 tokens, bytes / 4 says 756.
CHINESE = "我喜欢在公园里散步\uff0c看看花草树木\uff0c听听鸟儿唱歌。" * 42


class _CountingEstimator(HeuristicEstimator):
    """Counts a non-ASCII character as 2 tokens, as the default model's tokenizer roughly does."""

    def count_text(self, text: str) -> int:
        wide = sum(1 for c in text if ord(c) > 127)
        return 2 * wide + (len(text) - wide) // 4


class CountingProvider(ScriptedProvider):
    """A scripted model with a 4,096-token window that counts with its own tokenizer."""

    context_window = 4096
    max_tokens = 512

    def token_estimator(self) -> TokenEstimator:
        return _CountingEstimator()


@pytest.mark.parametrize("small", ["on", "off"])
async def test_pasted_chinese_text_does_not_push_later_turns_past_the_models_context(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, small: str
) -> None:
    """Pasted Chinese paragraphs made the next turns of the embedded model fail with "Requested
    tokens (4793) exceed context window of 4096": the window kept the last 4 messages (or 3,000
    tokens by bytes / 4) whatever the model's tokenizer made of them."""
    provider = CountingProvider("好的\uff0c我明白了。", "谢谢你的分享\uff01", "2 + 3 = 5")
    picked = Picked(provider, "local", "m", "test", small=True)
    args = cli.build_parser().parse_args(
        ["chat", "--db", str(tmp_path / "chat.db"), "--remember", "none", "--small-model", small]
    )
    monkeypatch.setattr(cli, "_make_embedder", lambda: None)
    closers: list[Any] = []
    agent, _ = await cli.build_agent(
        args,
        Console(io.StringIO(), io.StringIO(), interactive=False),
        picked,
        cli.ChatState(),
        closers,
    )
    try:
        await agent.run(CHINESE)
        await agent.run(CHINESE)
        await agent.run("What is 2 + 3?")
    finally:
        for closer in closers:
            await closer.aclose()

    assert len(provider.requests) == 3
    estimator = provider.token_estimator()
    budget = provider.context_window - provider.max_tokens - _agent.REQUEST_RESERVE
    for request, said in zip(provider.requests, [CHINESE, CHINESE, "What is 2 + 3?"], strict=True):
        assert sum(estimator.count(m) for m in request.messages) <= budget
        assert request.messages[-1].text == said


def test_a_provider_that_cannot_count_keeps_the_chats_own_window() -> None:
    assert _agent.agent_kit(Picked(ScriptedProvider(), "s", "m", "test")).fit is None


@pytest.mark.needs_extra("local")
@pytest.mark.slow
def test_the_embedded_model_counts_chinese_with_its_own_tokenizer() -> None:
    """bytes / 4 counted 756 tokens where the model reads 2,226."""
    from goagent_py.providers.llama_cpp import LlamaCppProvider

    provider = LlamaCppProvider()
    try:
        count = provider.count_text(CHINESE)
        assert count > 2 * (len(CHINESE.encode()) // 4)  # what bytes / 4 says
        assert provider.count_text("") == 0
        fit = _agent.context_fit(provider)
        assert fit is not None
        assert fit.max_tokens == 4096 - 512 - _agent.REQUEST_RESERVE
        assert fit.estimator.count_text(CHINESE) == count
    finally:
        provider.close()
