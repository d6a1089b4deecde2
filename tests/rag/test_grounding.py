"""Grounding an answer in the passages it was given (issue 37: answers ran on into invented
text, and cited nothing)."""

from __future__ import annotations

from goagent_py.rag.grounding import ground_answer

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
