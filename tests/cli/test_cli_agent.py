"""One agent for ``chat``, ``serve`` and ``mcp serve`` (goagent_py/cli/_agent.py), and its
default system prompt (issue 37)."""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Any

import httpx
import pytest

import goagent_py.cli._common as cli_common
import goagent_py.cli._setup as cli_setup
from goagent_py.cli import _agent
from goagent_py.cli import main as cli
from goagent_py.cli._common import Console, Picked
from goagent_py.cli._mcp import add_mcp_cli, run_mcp_command
from goagent_py.testing import FakeEmbedder, ScriptedProvider, tool_call_response


def _mcp_args(*argv: str) -> argparse.Namespace:
    root = argparse.ArgumentParser()
    add_mcp_cli(root.add_subparsers(dest="command", required=True))
    return root.parse_args(["mcp", "serve", *argv])


def _console() -> Console:
    return Console(io.StringIO(), io.StringIO(), interactive=False)


def _picked(provider: Any, *, small: bool) -> Picked:
    return Picked(provider, "local" if small else "scripted", "m", "test", small=small)


def test_a_small_model_gets_the_short_default_prompt_and_a_users_own_replaces_it() -> None:
    small = _agent.agent_kit(_picked(ScriptedProvider(), small=True))
    assert small.system_prompt == cli_common.SMALL_MODEL_PROMPT
    large = _agent.agent_kit(_picked(ScriptedProvider(), small=False))
    assert large.system_prompt == cli_common.SYSTEM_PROMPT
    own = _agent.agent_kit(_picked(ScriptedProvider(), small=True), system="Be a pirate.")
    assert own.system_prompt == "Be a pirate."


async def test_the_chat_sends_the_small_models_default_prompt(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    provider = ScriptedProvider("Hello! How can I help you today?")
    picked = _picked(provider, small=True)
    args = cli.build_parser().parse_args(["chat", "--no-memory", "--small-model", "on"])
    monkeypatch.setattr(cli, "_make_embedder", lambda: None)
    agent, _ = await cli.build_agent(args, _console(), picked, cli.ChatState(), [])
    await agent.run("Hello! How are you today?")
    assert provider.requests[0].system_prompt == cli_common.SMALL_MODEL_PROMPT


async def test_mcp_ask_has_the_chats_small_model_kit(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ask("What is 12 * 12?")`` answered with the clock: mcp serve built a plain agent."""
    from mcp import Client

    provider = ScriptedProvider(tool_call_response(("calculator", {"expression": "12 * 12"})))

    async def pick(spec: str | None, base_url: str | None = None) -> Any:
        return _picked(provider, small=True)

    answers: list[str] = []

    async def run_stdio(server: Any) -> None:
        async with Client(server) as client:
            result = await client.call_tool("ask", {"prompt": "What is 12 * 12?"})
        answers.append(getattr(result.content[0], "text", ""))

    monkeypatch.setattr(cli_common, "pick_provider", pick)
    monkeypatch.setattr(cli_setup, "loading_embedder", lambda: FakeEmbedder(64))
    monkeypatch.setattr("goagent_py.mcp.server.run_stdio", run_stdio)
    assert await run_mcp_command(_mcp_args("--provider", "local")) == 0
    assert answers == ["12 * 12 = 144"]  # from the calculator's result, as the chat answers
    assert [t.name for t in provider.requests[0].tools] == ["calculator"]
    assert provider.requests[0].system_prompt == cli_common.SMALL_MODEL_PROMPT


@pytest.mark.needs_extra("serve")
async def test_chat_serve_and_mcp_serve_build_their_agents_in_one_place(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    uvicorn = pytest.importorskip("uvicorn")
    from goagent_py.serve.run import add_serve_arguments, run_serve

    built: list[str] = []
    real = _agent.build_agent

    def spy(kit: _agent.AgentKit, **kwargs: Any) -> Any:
        built.append(kwargs["name"])
        return real(kit, **kwargs)

    monkeypatch.setattr(_agent, "build_agent", spy)

    async def pick(spec: str | None, base_url: str | None = None) -> Any:
        return _picked(ScriptedProvider(*(["fine"] * 3)), small=False)

    monkeypatch.setattr(cli_common, "pick_provider", pick)

    # chat
    args = cli.build_parser().parse_args(["chat", "--no-memory", "--small-model", "off"])
    picked = await pick(None)
    await cli.build_agent(args, _console(), picked, cli.ChatState(), [])

    # serve: one agent per thread
    async def serve(self: Any, sockets: Any = None) -> None:
        transport = httpx.ASGITransport(app=self.config.app, client=("127.0.0.1", 1))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            tid = (await client.post("/api/threads", json={})).json()["id"]
            await client.post(f"/api/threads/{tid}/runs", json={"message": "hi"})
        await self.config.app.aclose()

    monkeypatch.setattr(uvicorn.Server, "serve", serve)
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    serve_args = parser.parse_args(["--db", str(tmp_path / "s.db"), "--memory", "none"])
    assert await run_serve(serve_args) == 0

    # mcp serve
    async def run_stdio(server: Any) -> None:
        return None

    monkeypatch.setattr("goagent_py.mcp.server.run_stdio", run_stdio)
    assert await run_mcp_command(_mcp_args("--name", "mcp-agent")) == 0
    assert built == ["goagent-chat", "user-local", "mcp-agent"]
