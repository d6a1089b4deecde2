"""``goagent-py serve`` listens before it says where: a port it cannot have is a clear usage
error (in process too), and the address it prints is the one it listens on."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from goagent_py.cli import main as cli

pytest.importorskip("uvicorn")


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


@pytest.mark.needs_extra("serve")
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_port_in_use_is_a_usage_error_before_any_address_is_announced(
    loop: str, scripted: None, busy_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    argv = ["serve", "--port", str(busy_port), "--memory", "none", "--loop", loop]
    # was: "open http://..." printed, then uvicorn's sys.exit(3) raised SystemExit out of
    # main() in process (3 is the code for a missing extra)
    assert cli.main(argv) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "open http://" not in err
    assert f"cannot listen on 127.0.0.1:{busy_port}" in err
    assert "--port" in err


@pytest.mark.needs_extra("serve")
async def test_run_serve_listens_on_a_port_out_of_range_nowhere(scripted: None) -> None:
    """Given a port past 65535 without the CLI's parser, uvloop bound 99999 % 65536 = 34463
    and served there while it announced 99999 (a timeout's SIGTERM then made it 143)."""
    from goagent_py.errors import ConfigurationError
    from goagent_py.serve.run import run_serve

    args = cli.build_parser().parse_args(["serve", "--memory", "none"])
    args.port = 99999
    with pytest.raises(ConfigurationError, match=r"cannot listen on 127\.0\.0\.1:99999"):
        await run_serve(args)


@pytest.mark.needs_extra("serve")
async def test_port_0_announces_the_port_it_listens_on(
    scripted: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import uvicorn

    from goagent_py.serve.run import run_serve

    bound: list[int] = []

    async def serve(self: Any, sockets: Any = None) -> None:
        bound.extend(sock.getsockname()[1] for sock in sockets)
        await self.config.app.aclose()

    monkeypatch.setattr(uvicorn.Server, "serve", serve)
    args = cli.build_parser().parse_args(["serve", "--memory", "none", "--port", "0"])
    assert await run_serve(args) == 0
    (port,) = bound
    assert port != 0
    assert f"open http://127.0.0.1:{port}/" in capsys.readouterr().err


def test_a_folder_as_db_is_a_usage_error_before_any_address_is_announced(
    scripted: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # was: the address announced, memories put beside the folder ("/tmp-memories.db"), and
    # every thread request failing on a database that was a folder
    argv = ["serve", "--db", str(tmp_path), "--port", "0", "--memory", "none"]
    assert cli.main(argv) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "open http://" not in err
    assert f"--db {tmp_path} is a folder" in err


@pytest.mark.parametrize("transport", ["http", "sse"])
def test_mcp_serve_on_a_port_in_use_is_a_usage_error_before_any_address_is_announced(
    transport: str,
    scripted: None,
    busy_port: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("mcp")
    argv = ["mcp", "serve", "--transport", transport, "--port", str(busy_port)]
    # was: "serving on http://..." then uvicorn's sys.exit(3), a SystemExit out of main()
    assert cli.main(argv) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "serving" not in err
    assert f"cannot listen on 127.0.0.1:{busy_port}" in err
