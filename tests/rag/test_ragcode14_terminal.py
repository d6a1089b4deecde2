"""``rag index`` and ``rag ask`` show no control character a document or the model wrote.

File names, passages and the model's answer (which a passage can steer) were written to the
terminal raw: an ESC in a hostile document's text or name started an escape sequence (clear
the screen, retitle the window, write the clipboard with OSC 52) when ``rag ask`` quoted or
cited it. They are shown through the one ``printable`` helper now, as the coding agent does.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

import goagent_py.cli._common as cli_common
from goagent_py.cli import _rag as _cli_rag
from goagent_py.cli import main as cli
from goagent_py.rag.pipeline import Pipeline
from goagent_py.testing import FakeEmbedder, ScriptedProvider

ESC = "\x1b"
HOSTILE = "evil\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\r"


@pytest.fixture
def fake_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    def make(path: Path) -> Pipeline:
        return Pipeline.sqlite(path, FakeEmbedder(384), dimensions=384, table="rag")

    monkeypatch.setattr(_cli_rag, "_pipeline", make)


def _console() -> cli.Console:
    return cli.Console(io.StringIO(), io.StringIO(), interactive=False)


def _shown(console: cli.Console) -> str:
    return console.out.getvalue() + console.err.getvalue()  # type: ignore[attr-defined,no-any-return]


@pytest.mark.needs_extra("vector")
async def test_hostile_names_and_passages_reach_the_terminal_escaped(
    tmp_path: Path, fake_pipeline: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / f"{HOSTILE}.md").write_text(f"# Errors\n\nerror E1042 means {HOSTILE} expired\n")
    (docs / f"{HOSTILE}-empty.md").write_text("")  # named in a note: it holds no text
    (docs / f"{HOSTILE}-bin.txt").write_bytes(b"\0binary")  # named as skipped
    db = tmp_path / "rag.db"
    console = _console()
    args = argparse.Namespace(paths=[str(docs)], db=str(db), root=str(tmp_path))
    assert await _cli_rag.index(args, console) == cli.EXIT_OK
    shown = _shown(console)
    assert "skipped" in shown
    assert "holds no text" in shown
    assert ESC not in shown
    assert "\\e]52;" in shown  # named, escaped

    provider = ScriptedProvider(f"It means {HOSTILE} expired [1].")
    monkeypatch.setattr(cli_common, "make_provider", lambda vendor, model, base_url=None: provider)
    console = _console()
    args = argparse.Namespace(
        question="what does error E1042 mean",
        db=str(db),
        provider="local",
        base_url=None,
        top_k=3,
        min_score=0.0,
    )
    await _cli_rag.ask(args, console)
    shown = _shown(console)
    assert "Sources:" in shown
    assert ESC not in shown
    assert "\x07" not in shown
    assert "\r" not in shown
