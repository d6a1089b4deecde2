"""goagent_py.coding.tui: the full-screen front end drives the same REPL (Textual's pilot)."""

from __future__ import annotations

from pathlib import Path

import pytest

from goagent_py.coding.repl import build_parser
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response

textual = pytest.importorskip("textual")


async def test_the_window_asks_edits_and_quits(tmp_path: Path) -> None:
    from goagent_py.coding.tui import make_app

    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("hello\n")
    provider = ScriptedProvider(
        tool_call_response(("read_file", {"path": "a.txt"})),
        tool_call_response(
            ("edit_file", {"path": "a.txt", "old_string": "hello", "new_string": "bye"})
        ),
        text_response("changed it"),
    )
    ns = build_parser().parse_args(["--root", str(root), "--db", str(tmp_path / "c.db")])
    app = make_app(ns, provider=provider)
    async with app.run_test() as pilot:
        assert await app.prompts.get() == "> "
        app.query_one("#prompt").value = "change a.txt"
        await pilot.press("enter")
        assert await app.prompts.get() == "allow edit_file a.txt? [y]es [a]lways [n]o [s]top: "
        await pilot.press("y", "enter")
        assert await app.prompts.get() == "> "
        assert (root / "a.txt").read_text() == "bye\n"
        assert "changed it" in app.output
        await pilot.press("ctrl+q")
    assert app.return_code == 0
