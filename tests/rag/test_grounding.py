"""Grounding an answer in the passages it was given (issue 37: answers ran on into invented
text, and cited nothing)."""

from __future__ import annotations

import re

import pytest

from goagent_py.rag.grounding import (
    MAX_SENTENCE_CHARS,
    adds_to,
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


# -- issue 37: support is what the answer adds to the question --------------------------------
# "The capital of Peru is Lima. [1]" passed when the passage held the question itself (a chat
# transcript in the docs): the words the answer shares with the question counted as support.

PERU_ECHO = "question> What is the capital of Peru?\n(the model's answer used none of the passages)"
ERRORS = "E1042 means the license key expired. Renew it in the admin panel."
PANCAKES = "Mix flour, eggs and milk. Fry each pancake for two minutes a side."
STORES = (
    "Long-term memory can use SQLite, sqlite-vec, pgvector, Qdrant or Chroma as its vector store."
)
MEMORY = (
    "Long-term memory stores what a user said as vectors and recalls the most relevant "
    "memories before each turn."
)

GROUNDING_CASES = [
    # (id, question, passages, answer, the grounded text: "" when nothing is supported)
    (
        "invented name, the passage only echoes the question",
        "What is the capital of Peru?",
        [PERU_ECHO],
        "The capital of Peru is Lima. [1]",
        "",
    ),
    (
        "the same answer, supported",
        "What is the capital of Peru?",
        ["Lima is the capital and largest city of Peru."],
        "The capital of Peru is Lima. [1]",
        "The capital of Peru is Lima. [1]",
    ),
    (
        "the added name in a passage on another subject",
        "What is the capital of Peru?",
        ["Lima, a small town in Ohio, has a water tower."],
        "The capital of Peru is Lima.",
        "",
    ),
    (
        "restates the question",
        "How do I limit the tokens a run may spend?",
        ["You can limit the tokens a run may spend with a Budget."],
        "You can limit the tokens a run may spend [1].",
        "",
    ),
    (
        "restates the question with filler",
        "What is the capital of Peru?",
        [PERU_ECHO],
        "Yes, the passage says what the capital of Peru is. [1]",
        "",
    ),
    (
        "paraphrase and inflection",
        "How do I make a tool retry when it fails?",
        ["Wrap the tool with retry_tool to retry failed calls with backoff."],
        "Wrapping the tool in retry_tool retries its failing calls, backing off [1].",
        "Wrapping the tool in retry_tool retries its failing calls, backing off. [1]",
    ),
    (
        "an invented number",
        "How long should each pancake fry?",
        [PANCAKES],
        "Fry each pancake for 5 minutes a side.",
        "",
    ),
    (
        "a number written as a word in the passage",
        "How long should each pancake fry?",
        [PANCAKES],
        "Fry each pancake for 2 minutes on a side.",
        "Fry each pancake for 2 minutes on a side. [1]",
    ),
    (
        "an invented year",
        "When was version 2 released?",
        ["Version 2 was released in March 2021 with the new parser."],
        "Version 2 came out in March 2019 with the new parser.",
        "",
    ),
    (
        "the right date, reordered",
        "When was version 2 released?",
        ["Version 2 was released in March 2021 with the new parser."],
        "It came out in 2021, in March.",
        "It came out in 2021, in March. [1]",
    ),
    (
        "a wrong citation number is replaced by the passage that supports the sentence",
        "What does E1042 mean?",
        [PANCAKES, ERRORS],
        "E1042 means the license key expired [1].",
        "E1042 means the license key expired. [2]",
    ),
    (
        "one invented sentence among supported ones",
        "What does E1042 mean?",
        [PANCAKES, ERRORS],
        "The license key expired. Renew the key in the admin panel. The key was issued by "
        "Oracle in 2003.",
        "The license key expired. [2] Renew the key in the admin panel. [2]",
    ),
    (
        "an invented store among real ones",
        "Which vector stores can long-term memory use?",
        [STORES],
        "Long-term memory can use Qdrant, Chroma or Pinecone.",
        "",
    ),
    (
        "real stores",
        "Which vector stores can long-term memory use?",
        [STORES],
        "It can use pgvector, Qdrant or Chroma [1].",
        "It can use pgvector, Qdrant or Chroma. [1]",
    ),
    (
        "a sentence saying the passages do not hold the answer is not an answer",
        "Which vector stores can long-term memory use?",
        [MEMORY],
        "The answer is that long-term memory, which stores what a user said as vectors and "
        "recalls relevant memories, does not contain any of those passages.",
        "",
    ),
    (
        "thousands separators",
        "How many requests per minute does the free tier allow?",
        ["The free tier allows 1,200 requests per minute."],
        "It allows 1200 requests per minute [1].",
        "It allows 1200 requests per minute. [1]",
    ),
    (
        "an invented number with a separator",
        "How many requests per minute does the free tier allow?",
        ["The free tier allows 1,200 requests per minute."],
        "The free tier allows 1,500 requests per minute.",
        "",
    ),
    (
        "a decimal is one number",
        "What is the default timeout?",
        ["The timeout defaults to 2.5 seconds."],
        "The timeout defaults to 25 seconds.",
        "",
    ),
    (
        "accents: a name written without them",
        "Wo ist der Sitz der Müller GmbH?",
        ["Der Sitz der Müller GmbH ist in Zürich."],
        "Der Sitz der Muller GmbH ist in Zurich.",
        "Der Sitz der Muller GmbH ist in Zurich. [1]",
    ),
    (
        "another alphabet",
        "Какая столица Перу?",
        ["Лима — столица Перу и крупнейший город страны."],
        "Столица Перу — Лима.",
        "Столица Перу — Лима. [1]",
    ),
    (
        "another alphabet, an invented name",
        "Какая столица Перу?",
        ["Лима — столица Перу и крупнейший город страны."],
        "Столица Перу — Куско.",
        "",
    ),
    (
        "a number and its unit written together",
        "What is the default timeout?",
        ["The timeout defaults to 500 ms, and 2.50 s for a slow server."],
        "It defaults to 500ms, or 2.5s for a slow server.",
        "It defaults to 500ms, or 2.5s for a slow server. [1]",
    ),
    (
        "an ordinal date",
        "When does the sale start?",
        ["The sale starts on March 21, 2026, at noon."],
        "It starts on the 21st of March 2026.",
        "It starts on the 21st of March 2026. [1]",
    ),
    (
        "an ordinal date, a day off",
        "When does the sale start?",
        ["The sale starts on March 21, 2026, at noon."],
        "It starts on the 22nd of March 2026.",
        "",
    ),
    (
        "the question's words and one name the passage holds",
        "How do I limit the tokens a run may spend?",
        ["A Budget limits the tokens, iterations and time a run may spend."],
        "Use a Budget to limit the tokens [1].",
        "Use a Budget to limit the tokens. [1]",
    ),
    (
        "a name first in the sentence",
        "What is the capital of Peru?",
        ["Lima is the capital and largest city of Peru."],
        "Lima is the capital of Peru.",
        "Lima is the capital of Peru. [1]",
    ),
    (
        "an imperative first word is no name",
        "How do I install the package?",
        ["Install it with pip install goagent-py[local] in a virtual environment."],
        "Run pip install goagent-py[local] [1].",
        "Run pip install goagent-py[local]. [1]",
    ),
    (
        "a name of the question that the passage lacks: another subject",
        "How many moons does Jupiter have?",
        ["Saturn has 146 known moons."],
        "Jupiter has 146 moons.",
        "",
    ),
    (
        "one word added",
        "What colour is the sky?",
        ["The sky is blue on a clear day."],
        "The sky is blue.",
        "The sky is blue. [1]",
    ),
    (
        "a negation the passage does not hold",
        "What does E1042 mean?",
        [ERRORS],
        "E1042 doesn't mean that the license key expired.",
        "",
    ),
    (
        "a negation the passage holds",
        "Does the free tier need a card?",
        ["The free tier needs no credit card; the paid tiers do."],
        "No, the free tier needs no credit card.",
        "No, the free tier needs no credit card. [1]",
    ),
    (
        "a script without spaces",
        "秘鲁的首都是哪里？",  # noqa: RUF001
        ["利马是秘鲁的首都和最大城市。"],
        "秘鲁的首都是利马。",
        "秘鲁的首都是利马。 [1]",
    ),
    (
        "a script without spaces, an invented name",
        "秘鲁的首都是哪里？",  # noqa: RUF001
        ["利马是秘鲁的首都和最大城市。"],
        "秘鲁的首都是库斯科。",
        "",
    ),
    (
        "a script without spaces, one invented sentence of two",
        "秘鲁的首都是哪里？",  # noqa: RUF001
        ["利马是秘鲁的首都和最大城市。"],
        "秘鲁的首都是利马。它建于一九九九年。",
        "秘鲁的首都是利马。 [1]",
    ),
]


@pytest.mark.parametrize(
    ("question", "passages", "answer", "expected"),
    [case[1:] for case in GROUNDING_CASES],
    ids=[case[0] for case in GROUNDING_CASES],
)
def test_support_comes_from_what_the_answer_adds_to_the_question(
    question: str, passages: list[str], answer: str, expected: str
) -> None:
    grounded = ground_answer(answer, passages, question=question)
    assert grounded.text == expected
    cited = [int(n) for n in re.findall(r"\[(\d+)\]", expected)]
    assert grounded.citations == list(dict.fromkeys(cited))


def test_without_a_question_every_content_word_must_be_supported() -> None:
    """A caller that has no question still gets the sentence-level check."""
    assert ground_answer("The capital of Peru is Lima.", [PERU_ECHO]).text == ""
    grounded = ground_answer("Lima is the capital of Peru.", ["Lima is the capital of Peru."])
    assert grounded.citations == [1]


def test_a_sentence_that_holds_the_question_is_no_quote() -> None:
    """A docs transcript line, "... question> Which vector stores can long-term memory use?",
    was quoted as the answer to that very question."""
    question = "Which vector stores can long-term memory use?"
    transcript = (
        "(models loaded in 67.5s; ask away) question> Which vector stores can long-term memory use?"
    )
    assert not adds_to(transcript, question)
    assert not adds_to("question> What is the capital of Peru?", "What is the capital of Peru?")
    assert not adds_to("The documents do not mention the capital.", "What is the capital of Peru?")
    assert adds_to(MEMORY, question)
