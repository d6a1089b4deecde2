"""Every Python snippet in README.md and in the documentation site (docs/, notes aside) runs.

A snippet's comments are claims: each comment that starts a line's text must appear in what the
snippet prints.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [
    ROOT / "README.md",
    *sorted(
        p
        for p in (ROOT / "docs").rglob("*.md")
        if "notes" not in p.relative_to(ROOT / "docs").parts
    ),
]
SNIPPETS = [
    (page.relative_to(ROOT).as_posix(), code)
    for page in PAGES
    for code in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
]


def test_readme_and_docs_have_snippets() -> None:
    assert any(page == "README.md" for page, _ in SNIPPETS)
    assert len({page for page, _ in SNIPPETS}) > 5


# What a snippet names -> the extra it needs (the snippet is skipped without it).
_EXTRA_OF = {
    "SqliteVecStore": "vector",
    "Pipeline.sqlite": "vector",
    "PgVectorStore": "postgres",
    "QdrantStore": "qdrant",
    "tiktoken": "tiktoken",
    "LlamaCppProvider": "local",
    "SentenceTransformerEmbedder": "local",
    '"local"': "local",
    "load_pdf": "pdf",
    "goagent_py.a2a": "a2a",
    "goagent_py.mcp": "mcp",
    "goagent_py.serve": "serve",
    "create_app": "serve",
}


def _needs(code: str) -> list[pytest.MarkDecorator]:
    extras = sorted({extra for name, extra in _EXTRA_OF.items() if name in code})
    marks = [pytest.mark.needs_extra(*extras)] if extras else []
    if "local" in extras:  # loads a real model: a slow test (it still runs in CI)
        marks.append(pytest.mark.slow)
    return marks


@pytest.mark.parametrize(
    "index",
    [
        pytest.param(i, marks=_needs(code), id=f"{page}-{i}")
        for i, (page, code) in enumerate(SNIPPETS)
    ],
)
def test_snippet_runs(index: int) -> None:
    _, code = SNIPPETS[index]
    # The timeout only catches a hang: a snippet that loads a model on a busy machine may take
    # minutes, and a test must not fail because the CPU is loaded.
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=1800, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    for expected in _comments(code):
        if expected.strip() and not expected.startswith(" "):
            assert expected.strip() in out.stdout


def _comments(code: str) -> list[str]:
    """The text of each comment in ``code`` (real comments: a "#" inside a string is not)."""
    tokens = tokenize.generate_tokens(io.StringIO(code).readline)
    return [t.string.lstrip("#").lstrip() for t in tokens if t.type == tokenize.COMMENT]
