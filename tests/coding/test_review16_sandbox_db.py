"""The sandbox hides the session database wherever it is, also in the root (docs/security.md).

``goagent-py code`` hides the database's folder from sandboxed commands. With ``--db
ROOT/code.db`` that folder is the root, which the sandbox never hides (it would empty the
workspace), so nothing was hidden: a sandboxed ``grep -r`` read the stored conversation out of
``code.db`` and its ``-wal`` file, and a command could rewrite it (the record a resumed session
is read back from). The database's own files are now hidden too, wherever the folder is.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from goagent_py.coding._sandbox import sandbox_available
from goagent_py.messages import Role

SANDBOX, WHY_NOT = sandbox_available()
pytestmark = [
    pytest.mark.skipif(not SANDBOX, reason=f"no shell sandbox here: {WHY_NOT}"),
    pytest.mark.slow,
]


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A folder outside /tmp (a sandboxed command gets a private, empty /tmp)."""
    folder = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="goagent-review16-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def test_a_sandboxed_command_cannot_read_a_session_database_kept_in_the_root(
    outside_tmp: Path,
) -> None:
    from goagent_py.coding.repl import build_parser, code_main
    from goagent_py.testing import ScriptedProvider, tool_call_response

    root = outside_tmp / "ws"
    root.mkdir()
    (root / "app.txt").write_text("visible workspace file\n")
    provider = ScriptedProvider(
        tool_call_response(
            ("shell", {"argv": ["grep", "-a", "-r", "-o", "-e", "PLUM-7[0-9]*", "."]})
        ),
        tool_call_response(("shell", {"argv": ["cat", "app.txt"]})),
        "done",
    )
    lines = iter(["remember the code word PLUM-7731 and look around", "/exit"])

    async def read_line(prompt: str) -> str | None:
        return next(lines, None)

    ns = build_parser().parse_args(
        ["--root", str(root), "--db", str(root / "code.db"), "--plain", "--yes", "--sandbox", "on"]
    )
    assert await code_main(ns, provider=provider, read_line=read_line, write=lambda _: None) == 0
    grep = provider.requests[1].messages[-1]
    assert grep.role is Role.TOOL
    assert "PLUM-7731" not in grep.text, grep.text  # no file of the database was read
    cat = provider.requests[2].messages[-1]
    assert "visible workspace file" in cat.text  # the root itself is still there
    assert (root / "code.db").stat().st_size > 0  # and the database was written
