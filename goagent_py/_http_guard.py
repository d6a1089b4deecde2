"""The Host and Origin checks every HTTP app of the package makes before routing (private).

A server on 127.0.0.1 is reachable from any page the user's browser opens: a cross-site page
can POST to it (a "simple" request needs no CORS preflight, so the server acts even though the
page cannot read the answer), and a DNS-rebinding page reaches it under its own host name
(then it can read the answers too). Two checks stop both (docs/security.md):

- the ``Host`` header must name the server (localhost, or a name it was told of): 421;
- a request that is not GET or HEAD and carries an ``Origin`` must come from the server's
  own origin: 403.

``goagent-py serve`` (serve/app.py) and the A2A server (a2a/server.py) both use
:func:`refusal`; :class:`OriginGuard` is the same as an ASGI middleware.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

__all__ = ["LOCAL_HOSTS", "OriginGuard", "host_and_origin", "refusal", "replay_body", "send_json"]

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def host_and_origin(headers: Iterable[tuple[bytes, bytes]]) -> tuple[str, str | None]:
    """The ``Host`` and ``Origin`` headers of an ASGI request (names come in lower case)."""
    host, origin = "", None
    for key, value in headers:
        if key == b"host":
            host = value.decode("latin-1")
        elif key == b"origin":
            origin = value.decode("latin-1")
    return host, origin


def refusal(scope: Scope, hosts: frozenset[str]) -> tuple[int, str] | None:
    """Why an HTTP request must be refused before routing, as (status, message); None if not.

    Args:
        scope: the ASGI scope.
        hosts: the host names accepted (lower case, IPv6 without brackets).
    """
    host, origin = host_and_origin(scope["headers"])
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    name = name.strip("[]").lower()
    if name not in hosts:
        return 421, f"unexpected Host {host!r}"
    if scope["method"] not in ("GET", "HEAD") and origin is not None:
        scheme = scope.get("scheme", "http")
        if origin != f"{scheme}://{host}":
            return 403, f"cross-origin request from {origin!r} refused"
    return None


class OriginGuard:
    """An ASGI middleware making the checks of :func:`refusal` (answered as JSON
    ``{"error": ...}``), refusing a POST, PUT or PATCH whose body is not JSON (415: an HTML
    form can send only other types) or is larger than ``max_body`` (413).

    Args:
        app: the app to guard.
        hosts: the host names accepted besides localhost.
        max_body: the largest body accepted, in bytes (None: no cap). The body is read here,
            up to the cap, before the app sees it, so a client holds no more than that
            whether or not it declares a ``Content-Length``.
    """

    def __init__(
        self,
        app: Callable[[Scope, Receive, Send], Awaitable[None]],
        *,
        hosts: Iterable[str] = (),
        max_body: int | None = None,
    ) -> None:
        self.app = app
        self.hosts = LOCAL_HOSTS | {h.strip("[]").lower() for h in hosts}
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            found = refusal(scope, self.hosts)
            if found is None and scope["method"] in ("POST", "PUT", "PATCH"):
                kind = dict(scope["headers"]).get(b"content-type", b"").decode("latin-1")
                if kind.split(";")[0].strip().lower() != "application/json":
                    found = 415, "send JSON (Content-Type: application/json)"
                elif self.max_body is not None:
                    body = await _bounded_body(scope, receive, self.max_body)
                    if body is None:
                        found = 413, f"body larger than {self.max_body} bytes"
                    else:
                        receive = replay_body(body, receive)
            if found is not None:
                await _send_json_error(send, *found)
                return
        await self.app(scope, receive, send)


async def _bounded_body(scope: Scope, receive: Receive, limit: int) -> bytes | None:
    """The request's body, or None when it is (or declares to be) larger than ``limit``."""
    declared = dict(scope["headers"]).get(b"content-length", b"")
    if declared.isdigit() and int(declared) > limit:
        return None
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":  # a disconnect: the app sees an empty body
            return bytes(body)
        body += message.get("body", b"")
        if len(body) > limit:
            return None
        if not message.get("more_body", False):
            return bytes(body)


def replay_body(body: bytes, receive: Receive, *, more: bool = False) -> Receive:
    """A ``receive`` giving ``body`` in one message, then what the client sends next (its
    disconnect, which a streamed response waits for; with ``more``, the rest of a body read
    only in part)."""
    sent = False

    async def replay() -> MutableMapping[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return replay


async def send_json(send: Send, status: int, data: Any) -> None:
    """Send ``data`` as a whole JSON response with ``status`` (no framework needed)."""
    body = json.dumps(data).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(body)),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _send_json_error(send: Send, status: int, message: str) -> None:
    await send_json(send, status, {"error": message})
