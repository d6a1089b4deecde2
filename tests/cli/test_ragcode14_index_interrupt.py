"""Ctrl-C during ``goagent-py rag index`` while the embedder loads ends the command at once.

The model loaded in the event loop's executor on its first use, and ``asyncio.run`` joins that
executor on the way out: a Ctrl-C while it loaded waited for the whole load. The real command
runs in a child process with the real embedder; its load is held at its start (where it would
spend its seconds) until long after the signal, and the test sends a real SIGINT once the load
has begun. The command must end with 130 before the load goes on, and leave no chunk or
manifest row in the index.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_PROGRAM = """
import sys, threading
from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder

_real = SentenceTransformerEmbedder._load

def _held(self):
    sys.stderr.write("LOAD STARTED\\n")
    sys.stderr.flush()
    threading.Event().wait(90)  # the seconds a load takes, made long: the signal comes first
    _real(self)
    sys.stderr.write("LOAD FINISHED\\n")
    sys.stderr.flush()

SentenceTransformerEmbedder._load = _held
from goagent_py.cli.main import main
sys.argv[1:] = ["rag", "index", sys.argv[1], "--db", sys.argv[2]]
sys.exit(main())
"""


@pytest.mark.slow
@pytest.mark.needs_extra("local", "vector")
def test_ctrl_c_while_the_embedder_loads_exits_130_at_once_with_nothing_written(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(3):
        (notes / f"n{i}.md").write_text(f"# Note {i}\n\nThe launch code is {i}.\n")
    db = tmp_path / "rag.db"
    env = {**os.environ, "GOAGENT_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", _PROGRAM, str(notes), str(db)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        assert child.stderr is not None
        seen = []
        for line in child.stderr:
            seen.append(line)
            if "LOAD STARTED" in line:
                break
        assert any("LOAD STARTED" in line for line in seen), "".join(seen)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=80)  # well before the held load would go on
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    err = "".join(seen) + err
    assert child.returncode == 130, (child.returncode, err[-3000:])
    assert "LOAD FINISHED" not in err  # it did not wait for the load
    assert "Traceback" not in err, err[-3000:]
    assert "indexed" not in out
    assert not db.exists() or asyncio.run(_sources(db)) == []


async def _sources(db: Path) -> list[str]:
    from goagent_py.rag.pipeline import Pipeline
    from goagent_py.testing import FakeEmbedder

    async with Pipeline.sqlite(db, FakeEmbedder(384), dimensions=384, table="rag") as pipeline:
        sources = await pipeline.sources()
        count = await pipeline.store.count()  # type: ignore[attr-defined]
    assert count == 0
    return sources
