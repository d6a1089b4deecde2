"""The test suite's own layout: what pytest needs to collect it, and what CI's jobs rely on."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_test_file_names_are_unique_across_the_suite() -> None:
    # The test folders have no __init__.py (but tests/rag), so pytest imports each test file
    # under its bare name: two files of one name in two folders fail the collection of both.
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert [name for name, n in names.items() if n > 1] == []


def test_the_browser_tests_are_marked_slow() -> None:
    # CI's core-only job runs -m "not slow": the browser tests start chromium and a server.
    modules = sorted((TESTS / "serve" / "browser").glob("test_*.py"))
    assert modules
    for path in modules:
        marks = [
            ast.unparse(node.value)
            for node in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
        ]
        assert "pytest.mark.slow" in marks, path.name
