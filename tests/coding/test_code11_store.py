"""The session store's files are never written through a link (code11): with the store in the
workspace, a command the agent ran could plant one to any file of the user's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from goagent_py.coding.repl import build_parser
from goagent_py.coding.session import _last_file, open_session
from goagent_py.errors import MemoryStoreError
from goagent_py.testing import ScriptedProvider

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX symlinks")


async def _refuse(request: object) -> str:
    return "deny"


async def test_a_link_planted_as_the_last_session_pointer_writes_nothing_through(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    precious = tmp_path / "bashrc"
    precious.write_text("export PATH=...\n")
    db = root / "code.db"
    _last_file(db, root).symlink_to(precious)  # planted by a command the agent ran
    ns = build_parser().parse_args(["--root", str(root), "--db", str(db), "--continue"])
    code = await open_session(ns, provider=ScriptedProvider(), ask=_refuse, write=lambda _: None)
    try:
        # was: the user's file truncated and overwritten with the session's name
        assert precious.read_text() == "export PATH=...\n"
        assert not _last_file(db, root).is_symlink()
        assert _last_file(db, root).read_text() == code.session_id
        assert code.loaded == 0  # nothing resumed from what the link named
    finally:
        await code.aclose()


async def test_a_session_store_that_is_a_link_is_refused_with_what_to_do(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    precious = tmp_path / "notes.txt"
    precious.write_text("mine\n")
    db = root / "code.db"
    db.symlink_to(precious)
    ns = build_parser().parse_args(["--root", str(root), "--db", str(db)])
    with pytest.raises(MemoryStoreError, match="symbolic link: give --db the file it points to"):
        await open_session(ns, provider=ScriptedProvider(), ask=_refuse, write=lambda _: None)
    assert precious.read_text() == "mine\n"
