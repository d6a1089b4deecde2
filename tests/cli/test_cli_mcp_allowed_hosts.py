"""``goagent-py mcp serve --allowed-host NAME``: the HTTP transport, on a real port, serves a
request whose ``Host`` is a listed name and refuses any other (docs/mcp.md)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from goagent_py.cli import main as cli

pytest.importorskip("mcp")
uvicorn = pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Event, list[Any]]:
    """Set once uvicorn listens (an event, not a wait), with the server to stop it."""
    ready = asyncio.Event()
    servers: list[Any] = []
    startup = uvicorn.Server.startup

    async def startup_then_tell(self: Any, sockets: Any = None) -> None:
        await startup(self, sockets=sockets)
        servers.append(self)
        ready.set()

    monkeypatch.setattr(uvicorn.Server, "startup", startup_then_tell)
    return ready, servers


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_listed_host_is_served_and_any_other_refused(
    scripted: None, started: tuple[asyncio.Event, list[Any]]
) -> None:
    from goagent_py.cli._mcp import run_mcp_command

    ready, servers = started
    port = _free_port()
    hosts = ["--allowed-host", "agent.lan", "--allowed-host", "Other.Example"]
    args = cli.build_parser().parse_args(
        ["mcp", "serve", "--transport", "http", "--port", str(port), *hosts]
    )
    serving = asyncio.ensure_future(run_mcp_command(args))
    try:
        await asyncio.wait_for(ready.wait(), 120)
        url = f"http://127.0.0.1:{port}/mcp"
        headers = {"Accept": "application/json, text/event-stream"}
        status: dict[str, int] = {}
        async with httpx.AsyncClient(timeout=60) as client:
            for host in ("agent.lan", f"agent.lan:{port}", "other.example", "evil.example"):
                async with client.stream(
                    "POST", url, json=INITIALIZE, headers={**headers, "Host": host}
                ) as response:
                    status[host] = response.status_code
            origin = {**headers, "Host": "agent.lan", "Origin": "http://evil.example"}
            async with client.stream("POST", url, json=INITIALIZE, headers=origin) as response:
                status["foreign origin"] = response.status_code
    finally:
        for server in servers:
            server.should_exit = True
        assert await asyncio.wait_for(serving, 120) == 0
    assert status == {
        "agent.lan": 200,
        f"agent.lan:{port}": 200,
        "other.example": 200,
        "evil.example": 421,
        "foreign origin": 403,
    }


def test_allowed_host_is_repeatable_and_empty_by_default() -> None:
    parse = cli.build_parser().parse_args
    assert parse(["mcp", "serve"]).allowed_host == []
    args = parse(["mcp", "serve", "--allowed-host", "a.lan", "--allowed-host", "b.lan"])
    assert args.allowed_host == ["a.lan", "b.lan"]
