"""goagent_py.coding._match: grep's whole-text search finds exactly the lines a line-by-line
search finds (it only skips the calls that cannot match)."""

from __future__ import annotations

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from goagent_py.coding._match import LineSearch, text_lines

PATTERNS = [
    "a",
    "ab",
    r"a\s+b",
    "^b",
    "b$",
    r"\Aa",
    r"a\Z",
    "(?<=a)b",
    "(?<!a)b",
    "",
    ".",
    "x*",
    r"\n",
    "(?i)A",
    "a|^c",
    "^$",
    r"\bb",
    "a.b",
    "(?s)a.b",
    "[^a]+$",
    "(?m)^c",
]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PATTERNS), st.text(alphabet="ab c\n\r", max_size=40), st.booleans())
def test_the_lines_found_are_the_lines_that_match_alone(
    pattern: str, text: str, ignore_case: bool
) -> None:
    flags = regex.IGNORECASE if ignore_case else 0
    alone = [
        (n, line)
        for n, line in enumerate(text_lines(text), 1)
        if regex.search(pattern, line, flags) is not None
    ]
    search = LineSearch(pattern, ignore_case=ignore_case, tool="grep", timeout=10)
    assert list(search.lines(text)) == alone
