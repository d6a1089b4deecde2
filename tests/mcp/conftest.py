"""Fixtures of the MCP tests: the reference servers' commands and our fixture server."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

# Without the mcp extra (SDK 2.x) every test module here is collected as a skip naming it
# (tests/conftest.py, FOLDER_EXTRAS).

HERE = Path(__file__).parent
FIXTURE_SERVER = str(HERE / "fixture_server.py")
AGENT_SERVER = str(HERE / "agent_server.py")


def venv_command(name: str) -> str:
    """A console script installed next to this interpreter (or on PATH); skip if missing."""
    candidate = Path(sys.executable).parent / name
    found = str(candidate) if candidate.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install {name})")
    return found


@pytest.fixture
def time_server() -> str:
    """The command of the reference server mcp-server-time."""
    return venv_command("mcp-server-time")


@pytest.fixture
def git_server() -> str:
    """The command of the reference server mcp-server-git."""
    return venv_command("mcp-server-git")
