"""Who is asking: the four auth modes of the server and the scrypt password hashes.

Modes: :class:`NoAuth` (one local user, loopback peers only), :class:`TokenAuth` (bearer
tokens, optionally expiring), :class:`UsersFileAuth` (``user:scrypt$...`` lines, a login sets an
HttpOnly SameSite=Strict cookie) and :class:`TrustedProxyAuth` (a reverse proxy that already
authenticated the user names them in a header; only the proxy's address is believed).

Addresses are the socket's peer address (the ASGI ``client``), never a header: a Host or
X-Forwarded-For header is written by the client and proves nothing about where it is.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import os
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from goagent_py.errors import ConfigurationError

__all__ = [
    "Auth",
    "Login",
    "NoAuth",
    "RevocableAuth",
    "TokenAuth",
    "TrustedProxyAuth",
    "UsersFileAuth",
    "hash_password",
    "verify_password",
]

_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
_USER_RE = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or name to bind) is this machine."""
    return host in _LOOPBACK or host.startswith("127.")


def is_loopback_peer(address: str | None) -> bool:
    """Whether a socket's peer ``address`` (an IP address, never a name) is this machine.

    None (no address: a Unix socket, or a server that does not say) is not: a reverse proxy on
    a Unix socket would otherwise make every client of the proxy local.
    """
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 from a dual-stack socket
    return ip.is_loopback


def valid_user(name: str) -> bool:
    """Whether ``name`` is an acceptable user id (it becomes part of a storage key)."""
    return bool(_USER_RE.match(name))


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """A ``scrypt$n$r$p$salt$hash`` string for a users file (hashlib.scrypt, random salt)."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, dklen=32, **_SCRYPT)
    return f"scrypt${_SCRYPT['n']}${_SCRYPT['r']}${_SCRYPT['p']}${salt.hex()}${digest.hex()}"


@functools.cache
def _decoy() -> str:
    """A hash an unknown user's password is checked against, so that login costs one scrypt
    like a known user's (made once: hashing a fresh one each time cost two)."""
    return hash_password(secrets.token_hex(16))


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches a :func:`hash_password` string (constant-time compare)."""
    try:
        kind, n, r, p, salt, digest = stored.split("$")
        if kind != "scrypt":
            return False
        found = hashlib.scrypt(
            password.encode(), salt=bytes.fromhex(salt), n=int(n), r=int(r), p=int(p), dklen=32
        )
    except (ValueError, MemoryError):
        return False
    return hmac.compare_digest(found.hex(), digest)


@dataclass(frozen=True, slots=True, kw_only=True)
class Login:
    """What a login proves: the user, and when the credential that proved it stops working.

    Attributes:
        user: the authenticated user.
        expires_at: the Unix time the credential expires (an expiring token), or None; the login
            session (cookie) the server issues ends then at the latest.
        proof: a digest naming the credential that proved the login (never the credential
            itself), kept with the login session; a :class:`RevocableAuth` mode checks it on
            every use of the session, so a session ends with its credential ("": none).
    """

    user: str
    expires_at: float | None = None
    proof: str = ""


def _proof(kind: str, credential: str) -> str:
    return hashlib.sha256(f"{kind}:{credential}".encode()).hexdigest()


class Auth(Protocol):
    """How the server learns the user of a request."""

    requires_login: bool
    """Whether the page must show a login form (token or password) first."""

    def authenticate(self, headers: dict[str, str], client: str) -> str | None:
        """The user of a request from its (lower-cased) headers and client address, or None."""
        ...

    def login(self, body: dict[str, Any]) -> Login | None:
        """What a login body (``{"token"}`` or ``{"user", "password"}``) proves, or None.

        Called in a worker thread, since checking a password hash may take a while (scrypt:
        ~50 ms of CPU); it must not use the event loop.
        """
        ...


@runtime_checkable
class RevocableAuth(Protocol):
    """An auth mode that can tell whether the credential behind a login session still works
    (optional: the server asks it on every use of a session, which then ends with a removed
    token, a changed password or a removed user, across restarts too)."""

    def holds(self, login: Login) -> bool:
        """Whether the credential that proved ``login`` (its ``proof``) still proves it."""
        ...


def _bearer(headers: dict[str, str]) -> str:
    value = headers.get("authorization", "")
    return value[7:].strip() if value.lower().startswith("bearer ") else ""


@dataclass
class NoAuth:
    """No credentials: every loopback peer is ``user``; any other client is refused.

    The server checks the socket's peer address on every request, before anything else (the
    page and its files included). Behind a reverse proxy on the same machine every client is
    a loopback peer: use :class:`TrustedProxyAuth` (or another mode) there.
    """

    user: str = "local"
    requires_login: bool = field(default=False, init=False)

    def authenticate(self, headers: dict[str, str], client: str) -> str | None:
        """``user`` for a loopback peer address, None otherwise."""
        return self.user if is_loopback_peer(client) else None

    def login(self, body: dict[str, Any]) -> Login | None:
        """Nothing to log in to: the local user (the server has checked the peer already)."""
        return Login(user=self.user)


@dataclass
class TokenAuth:
    """Bearer tokens: ``tokens`` maps a token to its user; ``expires`` (optional) maps a token
    to the Unix time it stops working."""

    tokens: dict[str, str]
    expires: dict[str, float] = field(default_factory=dict)
    requires_login: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        for token, user in self.tokens.items():
            if len(token) < 16:
                raise ConfigurationError("TokenAuth: tokens must be at least 16 characters")
            if not valid_user(user):
                raise ConfigurationError(f"TokenAuth: invalid user name {user!r}")

    def _check(self, token: str) -> tuple[str, float | None] | None:
        """The user of ``token`` and its expiry, if it is known and not expired. One lookup in
        the mapping, not a comparison with every known token (issue 36: a request with the last
        of 50 tokens paid 50 comparisons). The lookup's time says nothing usable about a token:
        str hashes are keyed at random per process, and the characters are compared only with
        the token whose hash is the request's."""
        user = self.tokens.get(token)
        if user is None:
            return None
        deadline = self.expires.get(token)
        if deadline is None or time.time() < deadline:
            return user, deadline
        return None

    def holds(self, login: Login) -> bool:
        """Whether a token of ``login.user`` that proved ``login`` is still known and valid."""
        for known, user in self.tokens.items():
            if user == login.user and hmac.compare_digest(_proof("token", known), login.proof):
                deadline = self.expires.get(known)
                return deadline is None or time.time() < deadline
        return False

    def authenticate(self, headers: dict[str, str], client: str) -> str | None:
        """The user of the request's bearer token, if it is known and not expired."""
        token = _bearer(headers)
        found = self._check(token) if token else None
        return found[0] if found is not None else None

    def login(self, body: dict[str, Any]) -> Login | None:
        """The user of ``body["token"]``, with the token's expiry (the proof of a login session
        is made here only: a request's bearer token needs none)."""
        token = body.get("token")
        if not isinstance(token, str) or not token:
            return None
        found = self._check(token)
        if found is None:
            return None
        return Login(user=found[0], expires_at=found[1], proof=_proof("token", token))


class UsersFileAuth:
    """Users and scrypt hashes from a file of ``user:scrypt$n$r$p$salt$hash`` lines.

    Args:
        path: the users file (``#`` comments and blank lines are skipped). Make lines with
            :func:`hash_password` (``goagent-py serve --add-user NAME``).
    """

    requires_login = True

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.users: dict[str, str] = {}
        for number, line in enumerate(Path(path).read_text().splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            user, sep, stored = line.partition(":")
            if not sep or not valid_user(user) or not stored.startswith("scrypt$"):
                raise ConfigurationError(f"{path}:{number}: expected user:scrypt$... ")
            self.users[user] = stored

    def authenticate(self, headers: dict[str, str], client: str) -> str | None:
        """None: users of a users file authenticate with the login cookie."""
        return None

    def login(self, body: dict[str, Any]) -> Login | None:
        """The user if ``body["password"]`` matches their hash."""
        user, password = body.get("user"), body.get("password")
        if not isinstance(user, str) or not isinstance(password, str):
            return None
        stored = self.users.get(user)
        if stored is None:
            verify_password(password, _decoy())  # one scrypt, as for a known user
            return None
        if not verify_password(password, stored):
            return None
        return Login(user=user, proof=_proof("users", stored))

    def holds(self, login: Login) -> bool:
        """Whether ``login.user`` is still in the file with the password that logged in."""
        stored = self.users.get(login.user)
        return stored is not None and hmac.compare_digest(_proof("users", stored), login.proof)


@dataclass
class TrustedProxyAuth:
    """The user named by ``header``, believed only from the proxy addresses in ``trusted``."""

    header: str = "x-forwarded-user"
    trusted: frozenset[str] = frozenset({"127.0.0.1", "::1"})
    requires_login: bool = field(default=False, init=False)

    def authenticate(self, headers: dict[str, str], client: str) -> str | None:
        """The header's user when the request comes from a trusted proxy."""
        if client not in self.trusted:
            return None
        user = headers.get(self.header.lower(), "")
        return user if valid_user(user) else None

    def login(self, body: dict[str, Any]) -> Login | None:
        """None: the proxy logs users in."""
        return None

    def holds(self, login: Login) -> bool:
        """False: this mode opens no login session, so none opened before (by another mode,
        on the same threads database) is believed."""
        return False
