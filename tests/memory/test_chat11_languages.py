"""The chat's write policy keeps the user's statements in any language, not English only
(docs/chat.md, "/memory"; docs/memory.md, "In goagent-py chat")."""

from __future__ import annotations

import pytest

from goagent_py.cli._setup import write_policy
from goagent_py.memory.write_policies import is_statement, statement_clauses, user_statements
from goagent_py.messages import assistant_message, user_message


def _kept(text: str) -> list[str] | None:
    chosen = write_policy("statements")(user_message(text), assistant_message("ok"))
    return None if chosen is None else [m.text for m in chosen]


@pytest.mark.parametrize(
    "said",
    [
        "我的名字是李华。",  # Chinese: my name is Li Hua
        "我住在北京",  # no full stop
        "私の名前は田中です。",  # Japanese
        "제 이름은 민준입니다.",  # Korean
        "J'habite à Lyon.",  # French, elided first person
        "Ich heiße Anna und wohne in Berlin.",
        "Mi perro se llama Toby.",
        "Меня зовут Иван.",
        "मेरा नाम राहुल है।",  # Hindi: a script the rules do not read is kept, not dropped
        "اسمي أحمد وأعيش في القاهرة.",  # Arabic
    ],
)
def test_a_statement_in_another_language_is_remembered(said: str) -> None:
    """ "我的名字是李华" was dropped: one "word" (no spaces) and no English first person."""
    assert _kept(said) == [said]


@pytest.mark.parametrize(
    "asked",
    [
        "我叫什么名字\uff1f",
        "你好吗",
        "Wie heiße ich?",
        "Où est-ce que j'habite ?",
        "اسمي ما هو؟",
        "谢谢",
    ],
)
def test_questions_and_short_remarks_in_any_language_are_not_stored(asked: str) -> None:
    assert _kept(asked) is None


def test_requests_not_about_the_user_stay_out_in_languages_the_rules_read() -> None:
    assert _kept("Calcule 250 moins 37 pour demain.") is None
    assert _kept("计算二百五十减三十七等于多少") is None  # no first person: a request


def test_chinese_sentences_are_separate_memories() -> None:
    """Full-width full stops end sentences with no space after them."""
    assert statement_clauses("你好\uff01我叫李华。我住在北京。") == [
        "你好\uff01",
        "我叫李华。",
        "我住在北京。",
    ]
    assert _kept("你好\uff01我叫李华。我住在北京。") == ["我叫李华。", "我住在北京。"]


def test_english_is_read_as_before() -> None:
    assert _kept("Hello! My name is Priya and I live in Lisbon.") == [
        "My name is Priya.",
        "I live in Lisbon.",
    ]
    assert _kept("What is my name?") is None
    assert _kept("Calculate 250 - 37") is None
    assert is_statement("it is raining today")
    assert user_statements()(user_message("好的"), assistant_message("ok")) is None
