"""``goagent-py mcp serve --port 0`` announces the port it listens on, as ``serve`` does
(docs/mcp.md)."""

from __future__ import annotations

from typing import Any

import pytest

from goagent_py.cli import main as cli


@pytest.mark.needs_extra("mcp")
@pytest.mark.parametrize(("transport", "path"), [("http", "/mcp"), ("sse", "/sse")])
async def test_mcp_serve_port_0_announces_the_port_it_listens_on(
    transport: str,
    path: str,
    scripted: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import uvicorn

    from goagent_py.cli._mcp import run_mcp_command

    bound: list[int] = []

    async def serve(self: Any, sockets: Any = None) -> None:
        # was: uvicorn bound port 0 itself, after "serving on http://127.0.0.1:0/mcp"
        bound.extend(sock.getsockname()[1] for sock in sockets or ())

    monkeypatch.setattr(uvicorn.Server, "serve", serve)
    args = cli.build_parser().parse_args(["mcp", "serve", "--transport", transport, "--port", "0"])
    assert await run_mcp_command(args) == 0
    (port,) = bound
    assert port != 0
    assert f"on http://127.0.0.1:{port}{path}\n" in capsys.readouterr().err
