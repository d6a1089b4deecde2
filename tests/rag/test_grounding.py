"""Grounding an answer in the passages it was given (issue 37: answers ran on into invented
text, and cited nothing)."""

from __future__ import annotations

from goagent_py.rag.grounding import (
    MAX_SENTENCE_CHARS,
    excerpts,
    ground_answer,
    passage_sentences,
)
from goagent_py.testing import FakeEmbedder

PASSAGES = [
    "# Pancakes\n\nMix flour, eggs and milk. Fry each pancake for two minutes a side.",
    "# Error codes\n\nE1042 means the license key expired. Renew it in the admin panel.",
]


def test_supported_sentences_are_kept_and_cited_and_the_run_on_is_cut() -> None:
    answer = (
        "E1042 means the license key expired. Renew the key in the admin panel. "
        "The key was invented by a wizard in 1887 on the moon."
    )
    grounded = ground_answer(answer, PASSAGES)
    assert grounded.text == (
        "E1042 means the license key expired. [2] Renew the key in the admin panel. [2]"
    )
    assert grounded.citations == [2]
    assert grounded.dropped == 1


def test_the_models_own_markers_are_not_trusted() -> None:
    grounded = ground_answer("The license key expired [1].", PASSAGES)
    assert grounded.text == "The license key expired. [2]"
    assert grounded.citations == [2]


def test_an_answer_no_passage_supports_grounds_to_nothing() -> None:
    grounded = ground_answer("The 1998 world cup was won by France.", PASSAGES)
    assert grounded.text == ""
    assert grounded.citations == []
    assert ground_answer("", PASSAGES).citations == []


def test_at_most_max_sentences_are_kept() -> None:
    answer = "Mix flour. Mix eggs. Mix milk. Fry each pancake."
    assert len(ground_answer(answer, PASSAGES, max_sentences=2).text.split("[1]")) == 3


def test_a_line_break_inside_a_sentence_does_not_split_it() -> None:
    grounded = ground_answer("E1042 means the license\nkey expired.", PASSAGES)
    assert grounded.text == "E1042 means the license key expired. [2]"


# -- issue 37: the sentences a small model reads, and the quote to fall back on ---------------


def test_passage_sentences_join_wrapped_lines_and_split_list_items() -> None:
    text = (
        "# Budget\n\nA budget limits iterations,\ntokens and time. When it runs out it raises "
        "BudgetExceededError.\n\n- the first item of a list\n- `--top-k N` passages\n| a | b |\n"
    )
    assert passage_sentences(text) == [
        "A budget limits iterations, tokens and time.",
        "When it runs out it raises BudgetExceededError.",
        "the first item of a list",
        "`--top-k N` passages",
    ]


async def test_excerpts_pick_the_sentences_closest_to_the_question_by_passage() -> None:
    passages = [
        "Pancakes need flour. Fry each pancake for two minutes a side. Serve them warm.",
        "E1042 means the license key expired. Renew the license key in the admin panel.",
    ]
    chosen = await excerpts(
        "what does error E1042 mean for the license key",
        passages,
        FakeEmbedder(64),
        max_sentences=2,
    )
    # Both sentences of passage 2 share words with the question; none of passage 1 does.
    assert [e.number for e in chosen] == [2]
    [excerpt] = chosen
    assert excerpt.sentences == [
        "E1042 means the license key expired.",
        "Renew the license key in the admin panel.",
    ]
    assert excerpt.best == "E1042 means the license key expired."
    assert 0 < excerpt.similarity <= 1


async def test_excerpts_of_no_sentences_are_empty() -> None:
    assert await excerpts("anything", ["", "# Title"], FakeEmbedder(16)) == []


def test_a_one_word_fragment_is_not_an_answer() -> None:
    """'Use [3]' was shown as a grounded answer: the tail of a run-on cut at a code fence."""
    answer = "Serve it with the dragon's golden HTTP bridge:\n```python3 # for Python2 only! Use"
    grounded = ground_answer(answer, ["Use the mcp serve command to serve an agent."])
    assert grounded.citations == []
    assert grounded.text == ""


def test_a_long_sentence_is_cut_at_a_word_boundary() -> None:
    text = "The transcript says " + " ".join(["indexed 1 documents into rag.db"] * 30) + "."
    [sentence] = passage_sentences(text)
    assert len(sentence) <= MAX_SENTENCE_CHARS + 1
    assert sentence.endswith("…")
    assert sentence.startswith("The transcript says indexed 1 documents")


def test_headings_and_underlines_are_not_sentences() -> None:
    """'Quote [2]: "Table format"': a heading was quoted as if it answered the question."""
    text = "# Table format\n\nWindows services\n================\n\nUse tablefmt to pick a style.\n"
    assert passage_sentences(text) == ["Use tablefmt to pick a style."]
