"""The Python snippets of docs/serve.md that build an app run and build one (the others talk
to a running server)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from goagent_py.serve import ServeApp

PAGE = Path(__file__).resolve().parents[2] / "docs" / "serve.md"
SNIPPETS = [
    code
    for code in re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    if "create_app(" in code
]


def test_the_page_has_snippets() -> None:
    assert SNIPPETS


@pytest.mark.parametrize("code", SNIPPETS)
async def test_snippet_builds_an_app(
    code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(code, str(PAGE), "exec"), namespace)
    app = namespace["app"]
    assert isinstance(app, ServeApp)
    await app.aclose()
