"""The exact-match signals bench/rag_identifiers.py tries as second stages (issue 36): which
names a query holds, when a chunk names them verbatim, how many query words its headings hold.

None of them moved the test half of bench/rag_labelled, so none is in the library; these tests
keep the benchmark's figures honest (a signal that matched the wrong things would be measured
as useless for the wrong reason).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from goagent_py.messages import Message, Role, TextBlock
from goagent_py.rag.results import SearchResult

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rag_identifiers", BENCH / "rag_identifiers.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["rag_identifiers"] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["rag_identifiers"]
    return module


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("What does Client.stream(timeout=30) raise?", ["Client.stream"]),
        ("pip install --no-deps", ["--no-deps"]),
        ("how is max_retries counted", ["max_retries"]),
        ("DataConverter and payloadCodec", ["DataConverter", "payloadCodec"]),
        ("Set PYTHON_DOTENV_DISABLED=1", ["PYTHON_DOTENV_DISABLED"]),
        ("ServerSentEvent.json()", ["ServerSentEvent.json"]),
        ("Will @attr.s and `attr.ib` keep working?", ["@attr.s", "attr.ib"]),
        ("textual-dev", ["textual-dev"]),  # one bare token names something
        ("Install openai[realtime] first", ["openai[realtime]"]),
        ("error GA-1042 after v2.3.1", ["GA-1042", "v2.3.1"]),
        ("How do I retry a failed request?", []),  # prose
        ("  ", []),
    ],
)
def test_the_code_shaped_names_of_a_query(bench: ModuleType, query: str, names: list[str]) -> None:
    assert bench.query_identifiers(query) == names


def test_an_identifier_matches_verbatim_only(bench: ModuleType) -> None:
    match = bench.identifier_match
    assert match(["max_retries"], "Set `max_retries` to 5.") == 1.0
    assert match(["max_retries"], "the max retries setting") == 0.0  # the words, not the name
    assert match(["max_retries"], "max_retries_total counts all") == 0.0  # a longer name
    assert match(["--no-deps"], "pip install --no-deps x") == 1.0
    assert match(["--no-deps"], "pip install --no-deps-check x") == 0.0
    assert match(["Client.stream"], "CLIENT.STREAM()") == 0.0  # case kept
    assert match(["Client.stream"], "client.stream()") == 0.25  # one piece of two, half
    assert match(["max_retries", "timeout_s"], "max_retries only") == 0.5
    text = "OpenBLASController has a method clear_controlling_thread()."
    assert match(["OpenBLASController.clear_controlling_thread"], text) == 0.5
    assert match([], "anything") == 0.0


def test_heading_words_match_stemmed_and_without_common_words(bench: ModuleType) -> None:
    match = bench.heading_match
    assert match("How do I set the ping interval?", "Usage > Ping intervals") == 2 / 3
    assert match("What is the retry_delay?", "Settings > Retry delay") == 1.0
    assert match("how is it", "How it is") == 0.0  # nothing but common words
    assert match("ping interval", "") == 0.0


def test_the_document_title_is_not_a_heading(bench: ModuleType) -> None:
    """Every chunk of a document has its title: only the headings under it tell them apart."""

    def result(heading: str | None) -> SearchResult:
        metadata = {"source": "a.md", "title": "Guide [![badge](https://x/y.svg)](https://x)"}
        if heading is not None:
            metadata["heading"] = heading
        message = Message(Role.USER, [TextBlock("x")], metadata=metadata)
        return SearchResult(id="a", message=message, score=1.0)

    assert bench.heading_path(result("Guide > Usage > Ping interval")) == "Usage > Ping interval"
    assert bench.heading_path(result("Guide")) == ""
    assert bench.heading_path(result(None)) == ""
    assert bench.heading_path(result("Other > [Setup](#setup)")) == "Other > Setup"
