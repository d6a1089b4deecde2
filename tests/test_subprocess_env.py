"""goagent_py._subprocess.safe_env: a child's environment from an allowlist, never the keys."""

from __future__ import annotations

import subprocess
import sys

import pytest

from goagent_py._subprocess import safe_env
from goagent_py.errors import ConfigurationError

PARENT = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/u",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "LC_CTYPE": "C.UTF-8",
    "TERM": "xterm",
    "TMPDIR": "/tmp",
    "USER": "u",
    "SHELL": "/bin/sh",
    "TZ": "UTC",
    "ANTHROPIC_API_KEY": "sk-ant-secret",
    "OPENAI_API_KEY": "sk-secret",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "GITHUB_TOKEN": "ghp_secret",
    "DATABASE_URL": "postgres://u:pw@h/db",
    "NODE_OPTIONS": "--max-old-space-size=512",
    "PYTHONPATH": "/src",
    "PYTHONHASHSEED": "0",
}


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX allowlist")
def test_only_the_allowlist_is_inherited() -> None:
    env = safe_env(environ=PARENT)
    names = ["PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR", "USER", "SHELL", "TZ"]
    assert env == {k: PARENT[k] for k in names}


def test_extra_is_set_and_wins_and_allow_adds_names_and_prefixes() -> None:
    env = safe_env(
        {"PATH": "/opt/bin", "MCP_TOKEN": "given-on-purpose"},
        allow=["NODE_OPTIONS", "PYTHON*"],
        environ=PARENT,
    )
    assert env["PATH"] == "/opt/bin"
    assert env["MCP_TOKEN"] == "given-on-purpose"  # explicit: the caller's decision
    assert env["NODE_OPTIONS"] == PARENT["NODE_OPTIONS"]
    assert (env["PYTHONPATH"], env["PYTHONHASHSEED"]) == ("/src", "0")
    assert not {"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN", "DATABASE_URL"} & set(env)


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "GITHUB_TOKEN", "MY_SECRET", "X=Y", "", "*"])
def test_allow_refuses_credentials_and_bad_names(name: str) -> None:
    with pytest.raises(ConfigurationError, match="safe_env"):
        safe_env(allow=[name], environ=PARENT)


def test_an_allowed_prefix_still_never_lets_a_credential_through() -> None:
    env = safe_env(allow=["AWS_*"], environ={"AWS_REGION": "eu", "AWS_SECRET_ACCESS_KEY": "s"})
    assert env == {"AWS_REGION": "eu"}


@pytest.mark.parametrize("extra", [{"A=B": "x"}, {"A": "x\x00y"}, {"A": 1}])
def test_extra_that_cannot_be_an_environment_is_refused(extra: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError, match="safe_env"):
        safe_env(extra, environ={})  # type: ignore[arg-type]


def test_a_real_child_sees_no_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-canary-0123456789")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-0123456789")
    code = "import os, json; print(json.dumps(dict(os.environ)))"
    out = subprocess.run(
        [sys.executable, "-c", code], env=safe_env(), capture_output=True, text=True, check=True
    ).stdout
    assert "canary" not in out
    assert "PATH" in out
