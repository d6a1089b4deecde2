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


@pytest.mark.needs_extra("serve")
@pytest.mark.parametrize(("argv", "limit"), [([], 1000), (["--max-connections", "7"], 7)])
async def test_serve_caps_the_connections_it_serves_at_once(
    argv: list[str], limit: int, scripted: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    from goagent_py.serve.run import run_serve

    limits: list[int | None] = []

    async def serve(self: Any, sockets: Any = None) -> None:
        limits.append(self.config.limit_concurrency)  # uvicorn answers 503 past it
        await self.config.app.aclose()

    monkeypatch.setattr(uvicorn.Server, "serve", serve)
    args = cli.build_parser().parse_args(["serve", "--memory", "none", "--port", "0", *argv])
    assert await run_serve(args) == 0
    # was: None, uvicorn's default (no cap on connections)
    assert limits == [limit]


def test_max_connections_below_one_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["serve", "--max-connections", "0"])
    assert "not a number of connections" in capsys.readouterr().err
