"""Safe by default: Host/Origin checks, JSON-only bodies with a cap, the auth modes, isolation."""

from __future__ import annotations

import pickle
import time
from pathlib import Path
from typing import Any

import pytest

from goagent_py.errors import ConfigurationError
from goagent_py.serve import (
    HttpError,
    TokenAuth,
    TrustedProxyAuth,
    UsersFileAuth,
    create_app,
    hash_password,
    verify_password,
)
from goagent_py.testing import FunctionProvider

TOKENS = {"a" * 20: "alice", "b" * 20: "bob", "c" * 20: "carol"}


def _echo(helpers: Any) -> Any:
    return helpers.factory_for(FunctionProvider(lambda request: "ok"))


def _as(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def test_no_auth_serves_local_clients_only(echo_app: Any, helpers: Any) -> None:
    async with helpers.client_for(echo_app, client="10.0.0.7") as client:
        r = await client.get("/api/threads")
        assert r.status_code == 403
    async with helpers.client_for(echo_app) as client:
        assert (await client.get("/api/me")).json() == {
            "authenticated": True,
            "user": "local",
            "session": False,
        }


async def test_host_and_origin_are_checked(echo_app: Any, helpers: Any) -> None:
    async with helpers.client_for(echo_app) as client:
        r = await client.get("/api/threads", headers={"host": "evil.example"})
        assert r.status_code == 421
        r = await client.post("/api/threads", json={}, headers={"origin": "http://evil.example"})
        assert r.status_code == 403
        r = await client.post("/api/threads", json={}, headers={"origin": "http://127.0.0.1"})
        assert r.status_code == 201


async def test_bodies_must_be_small_json_objects(db: str, helpers: Any) -> None:
    app = create_app(_echo(helpers), storage_path=db, max_body=1000)
    async with helpers.client_for(app) as client:
        tid = (await client.post("/api/threads", json={})).json()["id"]
        url = f"/api/threads/{tid}/runs"
        r = await client.post(url, content=b"message=hi", headers={"content-type": "text/plain"})
        assert r.status_code == 415
        r = await client.post(
            url, content=b"{not json", headers={"content-type": "application/json"}
        )
        assert r.status_code == 400
        r = await client.post(url, json=[1, 2])
        assert r.status_code == 400
        r = await client.post(url, json={"message": "x" * 2000})
        assert r.status_code == 413
        r = await client.post(url, json={"message": ""})
        assert r.status_code == 400
        # Nothing was stored by the refused requests.
        assert (await client.get(f"/api/threads/{tid}/messages")).json()["messages"] == []
        assert (
            await client.post("/api/threads/nope/runs", json={"message": "hi"})
        ).status_code == 404
    await app.aclose()


async def test_another_users_thread_and_run_are_404(db: str, helpers: Any) -> None:
    app = create_app(_echo(helpers), storage_path=db, auth=TokenAuth(TOKENS))
    async with helpers.client_for(app, client="10.1.2.3") as client:
        alice, bob = _as("a" * 20), _as("b" * 20)
        tid = (await client.post("/api/threads", json={"title": "mine"}, headers=alice)).json()[
            "id"
        ]
        await client.post(f"/api/threads/{tid}/runs", json={"message": "secret"}, headers=alice)
        assert (await client.get("/api/threads", headers=bob)).json()["threads"] == []
        for method, path in [
            ("GET", f"/api/threads/{tid}"),
            ("GET", f"/api/threads/{tid}/messages"),
            ("DELETE", f"/api/threads/{tid}"),
        ]:
            assert (await client.request(method, path, headers=bob)).status_code == 404
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "x"}, headers=bob)
        assert r.status_code == 404
        assert (
            await client.post("/api/runs/run_unknown/stop", json={}, headers=bob)
        ).status_code == 404
        assert (await client.get(f"/api/threads/{tid}/messages", headers=alice)).status_code == 200
        assert (await client.get("/api/threads")).status_code == 401
        assert (await client.get("/api/threads", headers=_as("z" * 20))).status_code == 401
    await app.aclose()


async def test_expired_token_is_401(db: str, helpers: Any) -> None:
    auth = TokenAuth({"e" * 20: "eve"}, expires={"e" * 20: time.time() - 1})
    app = create_app(_echo(helpers), storage_path=db, auth=auth)
    async with helpers.client_for(app) as client:
        r = await client.get("/api/threads", headers=_as("e" * 20))
        assert r.status_code == 401
    await app.aclose()


async def test_users_file_login_sets_a_strict_httponly_cookie(
    db: str, helpers: Any, tmp_path: Path
) -> None:
    users = tmp_path / "users"
    users.write_text(f"# users\nalice:{hash_password('correct horse')}\n")
    app = create_app(_echo(helpers), storage_path=db, auth=UsersFileAuth(users))
    async with helpers.client_for(app) as client:
        assert (await client.get("/api/threads")).status_code == 401
        bad = await client.post("/api/login", json={"user": "alice", "password": "nope"})
        assert bad.status_code == 401
        r = await client.post("/api/login", json={"user": "alice", "password": "correct horse"})
        assert r.status_code == 200
        cookie = r.headers["set-cookie"].lower()
        assert "httponly" in cookie
        assert "samesite=strict" in cookie
        assert (await client.get("/api/me")).json() == {
            "authenticated": True,
            "user": "alice",
            "session": True,
        }
        later = time.time() + 13 * 3600  # past the 12-hour cookie
        app.server.clock = lambda: later
        r = await client.get("/api/threads")
        assert r.status_code == 401
        assert "expired" in r.json()["error"]
    await app.aclose()


async def test_trusted_proxy_header_only_from_the_proxy(db: str, helpers: Any) -> None:
    app = create_app(_echo(helpers), storage_path=db, auth=TrustedProxyAuth())
    async with helpers.client_for(app) as client:
        r = await client.get("/api/me", headers={"x-forwarded-user": "dora"})
        assert r.json() == {"authenticated": True, "user": "dora", "session": False}
    async with helpers.client_for(app, client="10.9.9.9") as client:
        r = await client.get("/api/threads", headers={"x-forwarded-user": "dora"})
        assert r.status_code == 401
        r = await client.get("/api/me", headers={"x-forwarded-user": "dora"})
        assert r.json()["authenticated"] is False
    await app.aclose()


async def test_page_has_a_strict_csp_and_no_inline_script(echo_app: Any, helpers: Any) -> None:
    async with helpers.client_for(echo_app) as client:
        r = await client.get("/")
        assert r.status_code == 200
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert '<script src="/static/app.js"' in r.text
        assert "<script>" not in r.text
        assert "http" not in r.text.replace("http-equiv", "")
        assert (await client.get("/static/app.js")).status_code == 200
        assert (await client.get("/static/app.css")).status_code == 200
        assert (await client.get("/static/..%2Fapp.py")).status_code == 404


def test_password_hashes_and_bad_config() -> None:
    stored = hash_password("pw")
    assert stored.startswith("scrypt$")
    assert verify_password("pw", stored)
    assert not verify_password("other", stored)
    assert not verify_password("pw", "garbage")
    with pytest.raises(ConfigurationError):
        TokenAuth({"short": "x"})
    err = pickle.loads(pickle.dumps(HttpError(404, "no such thread")))
    assert (err.status, err.message) == (404, "no such thread")


def test_a_public_host_without_auth_is_refused() -> None:
    import argparse

    from goagent_py.serve.run import build_auth

    args = argparse.Namespace(auth="none", host="0.0.0.0")
    with pytest.raises(ConfigurationError, match="loopback"):
        build_auth(args)
    assert build_auth(argparse.Namespace(auth="none", host="127.0.0.1")).user == "local"


async def test_deeply_nested_json_is_a_400_not_a_server_error(echo_app: Any, helpers: Any) -> None:
    # 100k open brackets fit in the 1 MiB cap; json.loads raised RecursionError on them, which
    # escaped as a plain-text 500 with a traceback in the log (review7c).
    nested = b"[" * 100_000
    headers = {"content-type": "application/json"}
    async with helpers.client_for(echo_app) as client:
        tid = (await client.post("/api/threads", json={})).json()["id"]
        r = await client.post(f"/api/threads/{tid}/runs", content=nested, headers=headers)
        assert r.status_code == 400
        assert "nested" in r.json()["error"]
        r = await client.post("/v1/chat/completions", content=nested, headers=headers)
        assert r.status_code == 400
        assert r.json()["error"]["type"] == "invalid_request_error"
        assert "nested" in r.json()["error"]["message"]


async def test_a_deeply_nested_schema_from_a_v1_client_is_a_400(
    echo_app: Any, helpers: Any
) -> None:
    # A ~600-level JSON body parses, but jsonschema's check of the schema in it recursed past
    # the stack: a 500 with a logged traceback, for a tool's parameters and a response_format.
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(300):
        schema = {"type": "object", "properties": {"a": schema}}
    ask = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    fn = {"type": "function", "function": {"name": "t", "parameters": schema}}
    async with helpers.client_for(echo_app) as client:
        for extra in ({"response_format": fmt}, {"tools": [fn]}):
            r = await client.post("/v1/chat/completions", json={**ask, **extra})
            assert r.status_code == 400, r.text
            assert "nested more than" in r.json()["error"]["message"]


async def test_a_lone_surrogate_in_a_json_string_is_a_400(echo_app: Any, helpers: Any) -> None:
    # "\ud800" is valid JSON grammar but no Unicode text: it parsed to a str SQLite cannot
    # encode, and the run's title update raised UnicodeEncodeError (a 500; review7c).
    headers = {"content-type": "application/json"}
    async with helpers.client_for(echo_app) as client:
        tid = (await client.post("/api/threads", json={})).json()["id"]
        for url, body in [
            (f"/api/threads/{tid}/runs", b'{"message": "hi \\ud800 there"}'),
            ("/api/threads", b'{"title": "t \\uDC80"}'),
            ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x\\ud800"}]}'),
        ]:
            r = await client.post(url, content=body, headers=headers)
            assert r.status_code == 400, (url, r.text)
            assert "surrogate" in r.text
        # A pair is one character, and passes.
        r = await client.post(
            f"/api/threads/{tid}/runs", content=b'{"message": "\\ud83d\\ude00"}', headers=headers
        )
        assert r.status_code == 200
        assert "echo: \\ud83d\\ude00" in r.text  # the emoji, escaped in the SSE JSON
