"""The ``mcp serve`` command's grammar and ``chat --mcp`` command splitting."""

from __future__ import annotations

import argparse

import pytest

from goagent_py.cli._mcp import add_mcp_cli, endpoint_path, stdio_connections
from goagent_py.errors import ConfigurationError


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="goagent-py")
    add_mcp_cli(root.add_subparsers(dest="command", required=True))
    return root


def test_mcp_serve_defaults_to_the_agent_over_stdio() -> None:
    args = parser().parse_args(["mcp", "serve", "--provider", "ollama:qwen3"])
    assert (args.command, args.mcp_command) == ("mcp", "serve")
    assert (args.transport, args.expose, args.tool_name) == ("stdio", "agent", "ask")
    assert args.mcp == []


def test_mcp_serve_over_http_with_attached_servers() -> None:
    args = parser().parse_args(
        ["mcp", "serve", "--transport", "http", "--port", "9000", "--expose", "both",
         "--mcp", "uvx mcp-server-time", "--mcp", "mcp-server-git --repository ."]
    )  # fmt: skip
    assert (args.transport, args.port, endpoint_path(args)) == ("http", 9000, "/mcp")
    [time, git] = stdio_connections(args.mcp)
    assert (time.command, time.args, time.name) == ("uvx", ["mcp-server-time"], "uvx")
    assert (git.command, git.args) == ("mcp-server-git", ["--repository", "."])


def test_mcp_serve_over_sse_listens_at_sse_unless_told() -> None:
    args = parser().parse_args(["mcp", "serve", "--transport", "sse"])
    assert (args.transport, endpoint_path(args)) == ("sse", "/sse")
    args = parser().parse_args(["mcp", "serve", "--transport", "sse", "--path", "/legacy/sse"])
    assert endpoint_path(args) == "/legacy/sse"


def test_mcp_commands_are_split_like_a_shell_but_never_run_by_one() -> None:
    [conn] = stdio_connections(["server --name 'two words' ; rm -rf /"])
    # No shell: ';' and what follows are plain arguments of the server.
    assert conn.args == ["--name", "two words", ";", "rm", "-rf", "/"]
    with pytest.raises(ConfigurationError, match="--mcp"):
        stdio_connections([" "])


@pytest.mark.slow
async def test_python_m_goagent_py_mcp_serve_answers_an_sdk_client_over_stdio() -> None:
    import sys
    from pathlib import Path

    from mcp import Client, StdioServerParameters

    import goagent_py

    pytest.importorskip("llama_cpp", reason="the local extra runs the served agent's model")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "goagent_py.mcp", "serve", "--provider", "local", "--expose", "both"],
        env={"PYTHONPATH": str(Path(goagent_py.__file__).parents[1])},
    )
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("calculator", {"expression": "6 * 7"})
    assert names == {"ask", "calculator", "current_time"}
    assert result.content[0].text == "42"
