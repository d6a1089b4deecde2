"""Work the server does once, not per request (issue 36): the AG-UI models load with the app,
the page's files are read once a process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from goagent_py.serve import _server, create_app
from goagent_py.testing import ScriptedProvider

_FIRST_RUN = textwrap.dedent(
    """
    import asyncio, sys
    import httpx
    from goagent_py import Agent
    from goagent_py.serve import create_app
    from goagent_py.testing import ScriptedProvider

    provider = ScriptedProvider("hello there")
    app = create_app(
        lambda ctx: Agent(provider=provider, short_term_memory=ctx.short_term_memory),
        storage_path=sys.argv[1],
    )

    async def main():
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            tid = (await c.post("/api/threads", json={})).json()["id"]
            before = set(sys.modules)
            r = await c.post(f"/api/threads/{tid}/runs", json={"message": "hi"})
            assert "RUN_FINISHED" in r.text, r.text
            new = set(sys.modules) - before
            new = sorted(m for m in new if m.startswith(("ag_ui", "pydantic")))
            print("loaded by the first run:", new)
        await app.aclose()

    asyncio.run(main())
    """
)


def test_the_first_run_loads_no_protocol_models(tmp_path: Path) -> None:
    # A fresh interpreter: this one has loaded everything already.
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_RUN, str(tmp_path / "serve.db")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "loaded by the first run: []"


async def test_the_page_files_are_read_once(
    db: str, helpers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    real = _server.resources.files

    class Counting:
        def __init__(self, root: Any) -> None:
            self.root = root

        def joinpath(self, *parts: str) -> Any:
            reads.append("/".join(parts))
            return self.root.joinpath(*parts)

    monkeypatch.setattr(_server.resources, "files", lambda pkg: Counting(real(pkg)))
    _server._package_file.cache_clear()
    app = create_app(helpers.factory_for(ScriptedProvider()), storage_path=db)
    try:
        async with helpers.client_for(app) as client:
            pages = [(await client.get("/")).text for _ in range(3)]
            scripts = [(await client.get("/static/app.js")).text for _ in range(2)]
    finally:
        await app.aclose()
        _server._package_file.cache_clear()
    assert pages[0] == pages[1] == pages[2]
    assert "<html" in pages[0].lower()
    assert scripts[0] == scripts[1]
    page_reads = [r for r in reads if r.startswith("static")]  # jsonschema reads its own too
    assert page_reads == ["static/index.html", "static/app.js"]
