"""Fixtures of the CLI tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import goagent_py.cli._common as cli_common
from goagent_py.cli import main as cli
from goagent_py.testing import ScriptedProvider


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every command picks a ScriptedProvider answering "hi", with GOAGENT_HOME in tmp_path."""

    async def pick(spec: str | None, base_url: str | None = None) -> Any:
        return cli.Picked(ScriptedProvider("hi"), "scripted", "scripted-model", "test")

    monkeypatch.setattr(cli_common, "pick_provider", pick)
    monkeypatch.setattr(cli, "pick_provider", pick)  # the chat's own name for it (main.py)
    monkeypatch.setenv("GOAGENT_HOME", str(tmp_path / "home"))
