"""Command line: ``goagent-py mcp serve`` (an agent as an MCP server) and ``chat --mcp``.

The lead's ``goagent_py/cli/main.py`` wires these in with :func:`add_mcp_cli` and
:func:`stdio_connections`; ``python -m goagent_py.mcp serve ...`` runs the same command alone.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from goagent_py.cli._common import listen_socket, listening_url, port_number
from goagent_py.errors import ConfigurationError
from goagent_py.mcp.transports import MCPStdio

__all__ = ["add_mcp_cli", "endpoint_path", "mcp_agent", "run_mcp_command", "stdio_connections"]

_DEFAULT_PATHS = {"http": "/mcp", "sse": "/sse"}


def add_mcp_cli(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``mcp`` command (``mcp serve``) to an ``add_subparsers()`` object."""
    mcp: argparse.ArgumentParser = subparsers.add_parser(
        "mcp", help="serve an agent over the Model Context Protocol"
    )
    sub = mcp.add_subparsers(dest="mcp_command", required=True)
    serve = sub.add_parser(
        "serve",
        help="serve an agent (tool 'ask') and/or its tools over MCP (stdio, HTTP or SSE)",
    )
    serve.add_argument("--provider", help="anthropic:MODEL, openai:MODEL, ollama:MODEL or local")
    serve.add_argument("--name", default="goagent-py", help="server name (default: goagent-py)")
    serve.add_argument("--system", help="the agent's system prompt")
    serve.add_argument(
        "--expose",
        choices=("agent", "tools", "both"),
        default="agent",
        help="the agent as one tool, its tools one to one, or both (default: agent)",
    )
    serve.add_argument("--tool-name", default="ask", help="the agent tool's name (default: ask)")
    serve.add_argument(
        "--transport",
        choices=("stdio", "http", "sse"),
        default="stdio",
        help="stdio, streamable HTTP, or the legacy HTTP+SSE transport (default: stdio)",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a name clients reach the HTTP/SSE server by besides localhost and --host, e.g. "
        "the machine's LAN name with --host 0.0.0.0 (repeatable; any other Host is refused)",
    )
    serve.add_argument("--port", type=port_number, default=8000)
    serve.add_argument(
        "--path", help="the HTTP endpoint's path (default: /mcp, or /sse for --transport sse)"
    )
    serve.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="COMMAND",
        help="attach an MCP server's tools to the served agent (repeatable)",
    )
    return mcp


def endpoint_path(args: argparse.Namespace) -> str:
    """The HTTP endpoint's path: ``--path``, or the transport's usual one."""
    path: str = args.path or _DEFAULT_PATHS.get(args.transport, "/mcp")
    return path


def stdio_connections(commands: Sequence[str]) -> list[MCPStdio]:
    """One :class:`MCPStdio` per ``--mcp "<command> <args>"`` (split like a shell would, but run
    without one). Servers after the first get a prefix ``<name>_`` only if you ask for it."""
    out: list[MCPStdio] = []
    for command in commands:
        argv = shlex.split(command)
        if not argv:
            raise ConfigurationError("--mcp needs a command, e.g. --mcp 'uvx mcp-server-time'")
        out.append(MCPStdio(argv[0], argv[1:]))
    return out


def mcp_agent(args: argparse.Namespace, picked: Any) -> Any:
    """The served agent: the chat's (:func:`goagent_py.cli._agent.build_agent`, with the
    small-model kit for a small model), with the ``--mcp`` servers' tools attached."""
    from goagent_py.cli._agent import agent_kit, build_agent
    from goagent_py.cli._setup import loading_embedder

    embedder = loading_embedder() if picked.small else None
    kit = agent_kit(picked, embedder=embedder, system=args.system)
    settings: dict[str, Any] = {}
    connections = stdio_connections(args.mcp)
    if connections:
        settings["mcp_connectors"] = [c.connector() for c in connections]
    return build_agent(kit, name=args.name, **settings)


async def run_mcp_command(args: argparse.Namespace) -> int:
    """Run ``mcp serve`` (the only ``mcp`` subcommand); returns the exit code.

    Notes go to stderr: over stdio, stdout carries the protocol alone.
    """
    from goagent_py.cli._common import pick_provider
    from goagent_py.mcp.server import run_http, run_sse, run_stdio, serve_agent

    picked = await pick_provider(args.provider)
    print(
        f"goagent-py mcp serve: provider {picked.name} ({picked.model}): {picked.reason}",
        file=sys.stderr,
    )
    async with mcp_agent(args, picked) as agent:
        server = serve_agent(agent, name=args.name, expose=args.expose, tool_name=args.tool_name)
        path = endpoint_path(args)
        if args.transport == "stdio":
            await run_stdio(server)
            return 0
        # Bound here, not inside uvicorn's startup (which ends the process with sys.exit(3)
        # when it cannot): nothing is announced that is not there, and the address shown is
        # the one listened on (--port 0 shows the free port it got).
        listening = listen_socket(args.host, args.port)
        run = run_sse if args.transport == "sse" else run_http
        label = " (SSE)" if args.transport == "sse" else ""
        print(f"serving{label} on {listening_url(args.host, listening)}{path}", file=sys.stderr)
        with listening:
            await run(
                server,
                host=args.host,
                port=args.port,
                path=path,
                allowed_hosts=args.allowed_host,
                sock=listening,
            )
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m goagent_py.mcp serve ...``."""
    from goagent_py._interrupt import run_command

    parser = argparse.ArgumentParser(prog="python -m goagent_py.mcp", usage="%(prog)s serve ...")
    add_mcp_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["mcp", *(sys.argv[1:] if argv is None else argv)])
    try:
        return run_command(run_mcp_command(args))
    except ConfigurationError as exc:
        print(f"goagent-py mcp: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
