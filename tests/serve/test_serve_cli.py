"""``run_serve`` (``goagent-py serve``): options, auth from options, the served app."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import httpx
import pytest

from goagent_py.errors import ConfigurationError
from goagent_py.serve import TokenAuth, UsersFileAuth, verify_password
from goagent_py.serve.run import add_serve_arguments, build_auth, run_serve
from goagent_py.testing import FunctionProvider, ScriptedProvider


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    return parser.parse_args(list(argv))


def test_auth_from_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="loopback"):
        build_auth(_args("--host", "0.0.0.0"))
    with pytest.raises(ConfigurationError, match="token"):
        build_auth(_args("--auth", "token"))
    monkeypatch.setenv("GOAGENT_SERVE_TOKEN", "t" * 20)
    assert isinstance(build_auth(_args("--auth", "token", "--host", "0.0.0.0")), TokenAuth)
    users = tmp_path / "users"
    users.write_text("")
    assert isinstance(
        build_auth(_args("--auth", "users", "--users-file", str(users))), UsersFileAuth
    )
    with pytest.raises(ConfigurationError):
        build_auth(_args("--auth", "users"))


async def test_add_user_prints_a_users_file_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("getpass.getpass", lambda prompt: "s3cret")
    assert await run_serve(_args("--add-user", "alice")) == 0
    user, stored = capsys.readouterr().out.strip().split(":", 1)
    assert user == "alice"
    assert verify_password("s3cret", stored)


async def test_run_serve_serves_the_cli_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uvicorn = pytest.importorskip("uvicorn")
    import goagent_py.cli._common as cli_common
    from goagent_py.cli import main as cli

    async def pick(spec: str | None, base_url: str | None = None) -> Any:
        return cli.Picked(ScriptedProvider("served"), "scripted", "scripted-model", "test")

    served: list[Any] = []

    async def serve(self: Any, sockets: Any = None) -> None:
        served.append(self.config)

    monkeypatch.setattr(cli_common, "pick_provider", pick)
    monkeypatch.setattr(uvicorn.Server, "serve", serve)
    args = _args("--db", str(tmp_path / "s.db"), "--port", "0", "--memory", "none")
    assert await run_serve(args) == 0
    config = served[0]
    assert config.host == "127.0.0.1"  # the port: serve listens before uvicorn starts
    transport = httpx.ASGITransport(app=config.app, client=("127.0.0.1", 1))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        assert (await client.get("/v1/models")).json()["data"][0]["id"] == "scripted-model"
        tid = (await client.post("/api/threads", json={})).json()["id"]
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "hi"})
        assert '"RUN_FINISHED"' in r.text
        assert "served" in r.text
    await config.app.aclose()


async def test_no_model_configured_says_how_to_pick_one(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("uvicorn")
    import goagent_py.cli._common as cli_common
    from goagent_py.errors import MissingExtraError

    async def pick(spec: str | None, base_url: str | None = None) -> Any:
        # What pick_provider does with no key, no Ollama and no llama-cpp-python.
        raise MissingExtraError("llama-cpp-python", "local")

    monkeypatch.setattr(cli_common, "pick_provider", pick)
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY or OPENAI_API_KEY"):
        await run_serve(_args())
    with pytest.raises(MissingExtraError):  # a provider asked for by name: its own error
        await run_serve(_args("--provider", "local"))


def test_the_serve_options_do_not_import_the_web_stack() -> None:
    import subprocess
    import sys

    code = (
        "import sys, goagent_py.serve.run; "
        "print(sorted(m for m in ('starlette', 'uvicorn', 'sse_starlette') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.slow  # loads the real local embedder (and exports it to ONNX)
@pytest.mark.needs_extra("local", "vector")
async def test_the_served_agent_remembers_a_user_across_threads_only_for_that_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI's server keeps first-person statements per user and recalls them in a new
    thread (the memories panel lists them); the small-model kit quotes the fact to the model."""
    uvicorn = pytest.importorskip("uvicorn")
    import goagent_py.cli._common as cli_common
    from goagent_py.cli import main as cli

    seen: list[str] = []

    def model(request: Any) -> str:
        seen.append(request.messages[-1].text)
        return "noted"

    async def pick(spec: str | None, base_url: str | None = None) -> Any:
        provider = FunctionProvider(model)
        return cli.Picked(provider, "local", "tiny", "test", small=True)

    memories: dict[str, Any] = {}
    answers: list[str] = []

    async def serve(self: Any, sockets: Any = None) -> None:
        # what a browser would do while the server runs (the stores close when it stops)
        app = self.config.app
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            first = (await client.post("/api/threads", json={})).json()["id"]
            told = {"message": "I was born in Goa."}
            await client.post(f"/api/threads/{first}/runs", json=told)
            second = (await client.post("/api/threads", json={})).json()["id"]
            asked = {"message": "Which city was I born in?"}
            r = await client.post(f"/api/threads/{second}/runs", json=asked)
            assert '"RUN_FINISHED"' in r.text
            # covered by the statement: answered with it, said back, without the model
            covered = {"message": "Where was I born?"}
            r = await client.post(f"/api/threads/{second}/runs", json=covered)
            answers.append(r.text)
            memories.update((await client.get("/api/memories", params={"q": "born"})).json())
        await app.aclose()

    monkeypatch.setattr(cli_common, "pick_provider", pick)
    monkeypatch.setattr(uvicorn.Server, "serve", serve)
    assert await run_serve(_args("--db", str(tmp_path / "s.db"), "--port", "0")) == 0
    assert "Goa" in seen[-1]
    assert seen[-1].rstrip().endswith("Which city was I born in?")
    assert len(seen) == 2
    assert "You were born in Goa." in answers[0]
    assert [m["text"] for m in memories["memories"]] == ["I was born in Goa."]


def _loop_of_serve(monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, str]:
    """The exit code of ``goagent-py serve ARGV`` and the module of the event loop its
    ``run_serve`` ran on (``run_serve`` replaced: no provider, no server)."""
    import asyncio

    import goagent_py.serve.run as serve_run
    from goagent_py.cli import main as cli

    seen: list[str] = []

    async def run(args: argparse.Namespace) -> int:
        seen.append(type(asyncio.get_running_loop()).__module__)
        return 0

    monkeypatch.setattr(serve_run, "run_serve", run)
    code = cli.main(["serve", "--memory", "none", *argv])
    return code, seen[0] if seen else ""


def test_serve_runs_on_uvloop_when_it_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("uvloop")
    assert _loop_of_serve(monkeypatch) == (0, "uvloop")
    assert _loop_of_serve(monkeypatch, "--loop", "uvloop") == (0, "uvloop")
    assert _loop_of_serve(monkeypatch, "--loop", "asyncio") == (0, "asyncio.unix_events")


def test_serve_runs_on_the_standard_loop_without_uvloop(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    from goagent_py.cli._common import EXIT_MISSING_EXTRA

    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    assert _loop_of_serve(monkeypatch) == (0, "asyncio.unix_events")
    assert _loop_of_serve(monkeypatch, "--loop", "uvloop") == (EXIT_MISSING_EXTRA, "")
    assert 'pip install "goagent-py[serve]"' in capsys.readouterr().err
