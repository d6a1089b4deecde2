# ruff: noqa: RUF001  (Chinese, Japanese, Greek and Russian text on purpose)
"""The heuristic token estimate of text outside ASCII (docs/sessions.md, "Counting tokens"):
a window counted with it must not overflow a model on a Chinese or Japanese conversation."""

from __future__ import annotations

import pytest

from goagent_py.memory.policies import TokenWindow
from goagent_py.memory.tokens import HeuristicEstimator, TiktokenEstimator
from goagent_py.messages import Message, assistant_message, user_message

# Natural text, as a user and a model would write it.
CHINESE = (
    "我下个月要去里斯本出差，顺便想在葡萄牙多待几天。请帮我规划一下行程：第一天参观贝伦塔和"
    "热罗尼莫斯修道院，第二天去辛特拉看佩纳宫，第三天坐火车去波尔图，尝一尝当地的葡萄酒。"
    "另外，我对海鲜过敏，所以推荐餐厅的时候请避开以海鲜为主的地方。预算大概是每天一千五百元"
    "人民币，不包括住宿。"
)
TRADITIONAL = (
    "我們公司最近在評估新的資料庫系統，需要比較效能、維護成本和團隊的學習曲線。請幫我整理"
    "一份報告，說明每個方案的優點和缺點，並附上遷移計畫的時間表與風險評估。"
)
JAPANESE = (
    "来週の会議の資料を準備しています。売上の推移をグラフにまとめて、前年同期との比較も"
    "入れてください。それから、新しいプロジェクトの進捗状況について簡単な説明を書いて"
    "もらえますか。締め切りは金曜日の午後五時です。"
)
GREEK = "Η συνάντηση μεταφέρθηκε για την επόμενη Τρίτη στις δέκα το πρωί στο κεντρικό γραφείο."
RUSSIAN = "Пожалуйста, напомни мне завтра утром позвонить врачу и записаться на приём."


def test_ascii_text_is_still_bytes_over_four() -> None:
    estimator = HeuristicEstimator()
    for text in ("", "abc", "abcd", "Where do I live? " * 7, "x" * 4001):
        assert estimator.count_text(text) == len(text.encode()) // 4


@pytest.mark.parametrize("text", [CHINESE, TRADITIONAL, JAPANESE], ids=["zh", "zh-tw", "ja"])
def test_cjk_text_costs_at_least_a_token_a_character(text: str) -> None:
    # cl100k_base spends 1.1-1.5 tokens on a CJK character; bytes / 4 said 0.75.
    cjk = sum(1 for ch in text if ord(ch) >= 0x3000)
    assert HeuristicEstimator().count_text(text) >= cjk


@pytest.mark.needs_extra("tiktoken")
@pytest.mark.parametrize(
    "text", [CHINESE, TRADITIONAL, JAPANESE, GREEK, RUSSIAN], ids=["zh", "zh-tw", "ja", "el", "ru"]
)
def test_the_estimate_is_near_cl100k_and_not_below_it_by_much(text: str) -> None:
    real = TiktokenEstimator("cl100k_base")
    if real.source == "heuristic":
        pytest.skip("no local copy of cl100k_base")
    truth = real.count_text(text)
    estimate = HeuristicEstimator().count_text(text)
    assert 0.85 * truth <= estimate <= 1.4 * truth, (estimate, truth)


def _conversation(turns: int) -> list[Message]:
    messages: list[Message] = []
    for i in range(turns):
        messages.append(user_message(f"{i}. {CHINESE}"))
        messages.append(assistant_message(f"{i}. {JAPANESE}"))
    return messages


@pytest.mark.needs_extra("tiktoken")
def test_a_token_window_on_a_chinese_conversation_fits_the_real_budget() -> None:
    # The window's promise: what it keeps fits max_tokens as the model counts. With bytes / 4
    # a 4,000-token window of this conversation held 6,583 cl100k tokens.
    real = TiktokenEstimator("cl100k_base")
    if real.source == "heuristic":
        pytest.skip("no local copy of cl100k_base")
    window = TokenWindow(4000).apply(_conversation(40))
    assert len(window) > 10
    assert sum(real.count(m) for m in window) <= 4000


def test_a_character_heavier_than_the_chunk_size_is_a_chunk_of_its_own() -> None:
    # An emoji is 2 heuristic tokens (bytes / 4 made any character at most 1): the recursive
    # chunker cannot cut it, and gives it alone rather than looping or dropping it.
    from goagent_py.memory.chunking import RecursiveChunker

    assert RecursiveChunker(1, 0).split("\U0001f600\U0001f600 ab") == [
        "\U0001f600",
        "\U0001f600",
        "ab",
    ]
