"""Who may ask (issue 29, "The web server"): no-auth mode serves loopback peers only, judged on
the socket's peer address for every request; login sessions live in the threads database and end
with the token that opened them; every POST is JSON; /api/me never logs a console error."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import sqlite3
import time
from typing import Any

import httpx
import pytest

from goagent_py.serve import TokenAuth, UsersFileAuth, create_app, hash_password
from goagent_py.serve._auth import is_loopback_peer
from goagent_py.testing import FunctionProvider

LAN = "192.168.1.20"
TOKEN = "t" * 24


def _echo(helpers: Any) -> Any:
    return helpers.factory_for(FunctionProvider(lambda request: "ok"))


def _lan_client(app: Any, *, address: str = LAN) -> httpx.AsyncClient:
    """A client on another machine that claims to be local in its Host header."""
    transport = httpx.ASGITransport(app=app, client=(address, 50123))
    return httpx.AsyncClient(
        transport=transport, base_url="http://127.0.0.1:8765", headers={"host": "127.0.0.1:8765"}
    )


# -- no auth: loopback peers only ------------------------------------------------------------


async def test_no_auth_refuses_a_lan_peer_on_every_route_whatever_its_host_header(
    echo_app: Any, helpers: Any
) -> None:
    async with _lan_client(echo_app) as lan:
        # The report's attack: a login without a credential, then the API with the cookie.
        r = await lan.post("/api/login", json={})
        assert r.status_code == 403
        assert "set-cookie" not in r.headers
        assert "--auth" in r.json()["error"]  # says what to do
        for method, path in [
            ("GET", "/"),
            ("GET", "/static/app.js"),
            ("GET", "/api/me"),
            ("GET", "/api/threads"),
            ("POST", "/api/threads"),
            ("GET", "/v1/models"),
            ("POST", "/v1/chat/completions"),
        ]:
            body = {} if method == "POST" else None
            r = await lan.request(method, path, json=body)
            assert r.status_code == 403, (method, path, r.status_code)
    # A cookie obtained by a local client is no pass for a LAN peer either.
    async with helpers.client_for(echo_app) as local:
        r = await local.post("/api/login", json={})
        assert r.status_code == 200
        cookie = r.cookies["goagent_session"]
        tid = (await local.post("/api/threads", json={"title": "mine"})).json()["id"]
    async with _lan_client(echo_app) as lan:
        lan.cookies.set("goagent_session", cookie)
        for method, path in [
            ("GET", "/api/threads"),
            ("GET", f"/api/threads/{tid}/messages"),
            ("POST", f"/api/threads/{tid}/runs"),
        ]:
            body = {"message": "hi"} if method == "POST" else None
            r = await lan.request(method, path, json=body)
            assert r.status_code == 403, (method, path, r.status_code)


async def test_no_auth_judges_the_peer_address_not_its_name(echo_app: Any) -> None:
    # IPv4-mapped loopback (a dual-stack socket) is local; an IPv4-mapped LAN address is not.
    async with _lan_client(echo_app, address="::ffff:127.0.0.1") as mapped:
        assert (await mapped.get("/api/threads")).status_code == 200
    for address in ("::ffff:192.168.1.20", "localhost", "testclient", "fd00::2"):
        async with _lan_client(echo_app, address=address) as other:
            assert (await other.get("/api/threads")).status_code == 403, address


async def test_no_auth_refuses_a_request_without_a_peer_address(echo_app: Any) -> None:
    # A Unix socket (or a server that does not say) gives no address: not provably local.
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/api/threads",
        "raw_path": b"/api/threads",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8765")],
        "client": None,
        "server": ("127.0.0.1", 8765),
    }
    await echo_app(scope, receive, send)
    assert sent[0]["status"] == 403


def test_loopback_peer_addresses() -> None:
    assert is_loopback_peer("127.0.0.1")
    assert is_loopback_peer("127.8.9.10")
    assert is_loopback_peer("::1")
    assert is_loopback_peer("::ffff:127.0.0.1")
    for address in (None, "", "localhost", "testclient", "10.0.0.1", "::ffff:10.0.0.1", "fe80::1"):
        assert not is_loopback_peer(address), address


def _lan_address() -> str | None:
    """This machine's address on a network (not loopback), or None."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # UDP: nothing is sent
        address: str = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if is_loopback_peer(address) else address


@pytest.mark.slow
async def test_no_auth_refuses_a_lan_peer_on_a_real_socket(db: str, helpers: Any) -> None:
    uvicorn = pytest.importorskip("uvicorn")
    address = _lan_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to connect from")
    app = create_app(_echo(helpers), storage_path=db)
    sock = socket.socket()
    sock.bind(("0.0.0.0", 0))  # what a user who binds every interface gets
    sock.listen(16)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        host = {"host": f"127.0.0.1:{port}"}
        lan = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(local_address=address),
            base_url=f"http://{address}:{port}",
            headers=host,
        )
        async with lan:
            r = await lan.post("/api/login", json={})
            assert r.status_code == 403
            assert "set-cookie" not in r.headers
            assert (await lan.get("/api/threads")).status_code == 403
            assert (await lan.post("/api/threads", json={})).status_code == 403
            assert (await lan.get("/")).status_code == 403
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as local:
            assert (await local.get("/api/threads")).status_code == 200
            assert (await local.post("/api/threads", json={})).status_code == 201
    finally:
        server.should_exit = True
        await task
        sock.close()
        await app.aclose()


# -- login sessions ----------------------------------------------------------------------------


async def _token_app(db: str, helpers: Any, *, expires_in: float) -> Any:
    auth = TokenAuth({TOKEN: "alice"}, expires={TOKEN: time.time() + expires_in})
    return create_app(_echo(helpers), storage_path=db, auth=auth, cookie_ttl=12 * 3600)


async def test_a_login_session_ends_when_its_token_expires(db: str, helpers: Any) -> None:
    app = await _token_app(db, helpers, expires_in=3600)
    async with helpers.client_for(app, client="10.0.0.5") as client:
        r = await client.post("/api/login", json={"token": TOKEN})
        assert r.status_code == 200
        # The browser is told the truth too: the cookie lasts no longer than the token.
        max_age = int(r.headers["set-cookie"].lower().split("max-age=")[1].split(";")[0])
        assert 0 < max_age <= 3600
        assert (await client.get("/api/threads")).status_code == 200
        # Two hours later the token has expired: so has the session it opened (the cookie's
        # own 12 hours notwithstanding).
        start = time.time()
        app.server.clock = lambda: start + 7200
        r = await client.get("/api/threads")
        assert r.status_code == 401
        assert "expired" in r.json()["error"]
    await app.aclose()


async def test_an_expired_token_opens_no_session(db: str, helpers: Any) -> None:
    app = await _token_app(db, helpers, expires_in=-1)
    async with helpers.client_for(app) as client:
        r = await client.post("/api/login", json={"token": TOKEN})
        assert r.status_code == 401
        assert "set-cookie" not in r.headers
    await app.aclose()


def _logins(db: str) -> list[tuple[str, str, float]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT token_sha256, user, expires_at FROM goagent_serve_logins")
        return list(rows)


async def test_login_sessions_live_in_the_threads_database(
    db: str, helpers: Any, tmp_path: Any
) -> None:
    users = tmp_path / "users"
    users.write_text(f"alice:{hash_password('correct horse')}\n")
    body = {"user": "alice", "password": "correct horse"}
    app = create_app(_echo(helpers), storage_path=db, auth=UsersFileAuth(users), cookie_ttl=600)
    async with helpers.client_for(app) as client:
        assert (await client.post("/api/login", json=body)).status_code == 200
        cookie = client.cookies["goagent_session"]
    await app.aclose()
    # In the same SQLite file as the threads, as a hash: a copy of the file opens no session.
    rows = _logins(db)
    assert [(user, len(digest)) for digest, user, _ in rows] == [("alice", 64)]
    assert cookie not in rows[0][0]

    # A restart keeps the session.
    again = create_app(_echo(helpers), storage_path=db, auth=UsersFileAuth(users), cookie_ttl=600)
    async with helpers.client_for(again) as client, helpers.client_for(again) as other:
        client.cookies.set("goagent_session", cookie)
        assert (await client.get("/api/me")).json() == {
            "authenticated": True,
            "user": "alice",
            "session": True,
        }
        # Expired sessions are swept when someone logs in, not only when they are used.
        later = time.time() + 601
        again.server.clock = lambda: later
        assert (await other.post("/api/login", json=body)).status_code == 200
        assert len(_logins(db)) == 1
        assert cookie not in str(_logins(db))
        assert (await client.get("/api/threads")).status_code == 401
        assert (await other.get("/api/threads")).status_code == 200
        # Logout ends the session on the server, not only in the browser.
        kept = other.cookies["goagent_session"]
        assert (await other.post("/api/logout", json={})).status_code == 200
        assert _logins(db) == []
        other.cookies.set("goagent_session", kept)
        assert (await other.get("/api/threads")).status_code == 401
    await again.aclose()


async def test_login_results_carry_the_token_expiry() -> None:
    deadline = time.time() + 60
    auth = TokenAuth({TOKEN: "alice"}, expires={TOKEN: deadline})
    found = auth.login({"token": TOKEN})
    assert found is not None
    assert (found.user, found.expires_at) == ("alice", deadline)
    assert found.proof  # a digest, never the token
    assert TOKEN not in found.proof
    bob = TokenAuth({TOKEN: "bob"}).login({"token": TOKEN})
    assert bob is not None
    assert (bob.user, bob.expires_at) == ("bob", None)
    assert auth.login({"token": "x" * 24}) is None


# -- bodies and the page's questions -----------------------------------------------------------


async def test_stop_and_logout_refuse_non_json_bodies(echo_app: Any, helpers: Any) -> None:
    async with helpers.client_for(echo_app) as client:
        tid = (await client.post("/api/threads", json={})).json()["id"]
        form = {"content-type": "application/x-www-form-urlencoded"}
        for path in (f"/api/threads/{tid}/stop", "/api/runs/run_x/stop", "/api/logout"):
            r = await client.post(path, content=b"a=1", headers=form)
            assert r.status_code == 415, path
            assert "application/json" in r.json()["error"]
        assert (await client.post(f"/api/threads/{tid}/stop", json={})).json() == {"stopped": False}
        assert (await client.post("/api/logout", json={})).status_code == 200


async def test_me_answers_200_before_a_login(db: str, helpers: Any, tmp_path: Any) -> None:
    users = tmp_path / "users"
    users.write_text(f"alice:{hash_password('pw-alice')}\n")
    app = create_app(_echo(helpers), storage_path=db, auth=UsersFileAuth(users))
    async with helpers.client_for(app) as client:
        r = await client.get("/api/me")
        assert r.status_code == 200
        assert r.json()["authenticated"] is False
        assert r.json()["login"] is True
        await client.post("/api/login", json={"user": "alice", "password": "pw-alice"})
        assert (await client.get("/api/me")).json() == {
            "authenticated": True,
            "user": "alice",
            "session": True,
        }
        # Everything else still refuses without a credential.
        client.cookies.clear()
        assert (await client.get("/api/threads")).status_code == 401
    await app.aclose()


# -- a login session lasts only while the credential that opened it works (review6a) ----------


async def test_a_login_session_ends_when_its_token_is_removed_and_the_server_restarts(
    db: str, helpers: Any
) -> None:
    # docs/security.md says to restart to end the sessions of a removed token; sessions are
    # kept in the threads database, so the restart alone ended nothing.
    other = "u" * 24
    app = create_app(_echo(helpers), storage_path=db, auth=TokenAuth({TOKEN: "alice"}))
    async with helpers.client_for(app) as client:
        assert (await client.post("/api/login", json={"token": TOKEN})).status_code == 200
        cookie = client.cookies["goagent_session"]
    await app.aclose()

    again = create_app(_echo(helpers), storage_path=db, auth=TokenAuth({other: "alice"}))
    async with helpers.client_for(again) as client:
        client.cookies.set("goagent_session", cookie)
        assert (await client.get("/api/threads")).status_code == 401
        assert (await client.get("/api/me")).json()["authenticated"] is False
        # A login with the token the server knows now works as before.
        assert (await client.post("/api/login", json={"token": other})).status_code == 200
        assert (await client.get("/api/threads")).status_code == 200
    await again.aclose()


async def test_a_login_session_ends_when_its_users_password_changes_or_the_user_goes(
    db: str, helpers: Any, tmp_path: Any
) -> None:
    users = tmp_path / "users"
    users.write_text(
        f"alice:{hash_password('correct horse')}\nbob:{hash_password('battery staple')}\n"
    )
    app = create_app(_echo(helpers), storage_path=db, auth=UsersFileAuth(users))
    cookies = {}
    for user, password in [("alice", "correct horse"), ("bob", "battery staple")]:
        async with helpers.client_for(app) as client:
            body = {"user": user, "password": password}
            assert (await client.post("/api/login", json=body)).status_code == 200
            cookies[user] = client.cookies["goagent_session"]
    await app.aclose()

    # alice's password changed (a leaked one, say), bob was removed from the file.
    users.write_text(f"alice:{hash_password('new password')}\n")
    again = create_app(_echo(helpers), storage_path=db, auth=UsersFileAuth(users))
    for user in ("alice", "bob"):
        async with helpers.client_for(again) as client:
            client.cookies.set("goagent_session", cookies[user])
            assert (await client.get("/api/threads")).status_code == 401, user
    await again.aclose()


async def test_a_threads_file_from_before_login_proofs_is_migrated_and_its_sessions_end(
    db: str, helpers: Any
) -> None:
    cookie = "c" * 43
    with sqlite3.connect(db) as conn:
        conn.execute(
            "CREATE TABLE goagent_serve_logins ("
            " token_sha256 TEXT PRIMARY KEY, user TEXT NOT NULL, expires_at REAL NOT NULL)"
        )
        digest = hashlib.sha256(cookie.encode()).hexdigest()
        conn.execute(
            "INSERT INTO goagent_serve_logins VALUES (?, ?, ?)", (digest, "alice", time.time() + 60)
        )
    conn.close()
    app = create_app(_echo(helpers), storage_path=db, auth=TokenAuth({TOKEN: "alice"}))
    async with helpers.client_for(app) as client:
        client.cookies.set("goagent_session", cookie)
        assert (await client.get("/api/threads")).status_code == 401
        assert (await client.post("/api/login", json={"token": TOKEN})).status_code == 200
        assert (await client.get("/api/threads")).status_code == 200
    await app.aclose()


async def test_a_password_login_runs_off_the_event_loop(
    db: str, helpers: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # scrypt costs ~50 ms of CPU (more under load) and ran on the event loop: anyone who could
    # reach the login form stalled every user's stream with a flood of wrong passwords, without
    # a credential (review7c). hashlib.scrypt lets go of the GIL, so in a worker thread the loop
    # keeps serving.
    users = tmp_path / "users"
    users.write_text(f"alice:{hash_password('pw')}\n")
    auth = UsersFileAuth(users)
    on_loop: list[bool] = []
    login = auth.login

    def watched(body: dict[str, Any]) -> Any:
        try:
            asyncio.get_running_loop()
            on_loop.append(True)
        except RuntimeError:
            on_loop.append(False)
        return login(body)

    monkeypatch.setattr(auth, "login", watched)
    app = create_app(
        helpers.factory_for(FunctionProvider(lambda r: "ok")), storage_path=db, auth=auth
    )
    async with helpers.client_for(app, client="10.0.0.9") as client:
        ok = await client.post("/api/login", json={"user": "alice", "password": "pw"})
        bad = await client.post("/api/login", json={"user": "alice", "password": "no"})
    await app.aclose()
    assert [ok.status_code, bad.status_code] == [200, 401]
    assert on_loop == [False, False]


def test_an_unknown_users_login_costs_one_hash_like_a_known_one(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The unknown user's decoy hashed a fresh password first, then verified against it: two
    # scrypts where a known user costs one (twice the CPU per guessed name, and a timing tell).
    users = tmp_path / "users"
    users.write_text(f"alice:{hash_password('pw')}\n")
    auth = UsersFileAuth(users)
    auth.login({"user": "nobody", "password": "x"})  # the decoy may be made once, here
    calls: list[int] = []
    real = hashlib.scrypt

    def counted(*args: Any, **kwargs: Any) -> bytes:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(hashlib, "scrypt", counted)
    assert auth.login({"user": "nobody", "password": "x"}) is None
    unknown = len(calls)
    calls.clear()
    assert auth.login({"user": "alice", "password": "wrong"}) is None
    assert unknown == len(calls) == 1
