"""The JSON-RPC body checks of the A2A app, made before the SDK reads the body (private).

Three kinds of body failed inside the SDK's routes instead of getting the error the JSON-RPC
spec names: a lone UTF-16 surrogate escape (``"\\ud800"``: JSON grammar, but no Unicode text;
the 0.3 adapter answered -32603 with the codec's message and logged a traceback, the 1.0 route
logged one, and one in the request's ``id`` crashed the answer itself), bytes that are not
UTF-8 and nesting deeper than the parser's stack (both -32603, an internal error). Here they
are a parse error (-32700), or invalid params (-32602) naming where the surrogate is, with the
request's id, so the client knows what to fix (docs/a2a.md, "Serve an agent").
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from goagent_py._http_guard import Receive, Scope, Send, replay_body, send_json

__all__ = ["JsonRpcGuard"]

_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
# Fewer brackets than this cannot nest deep enough to exhaust the parser's stack.
_SHALLOW = 200


class JsonRpcGuard:
    """An ASGI middleware answering a POST whose body the SDK would fail on (see the module's
    docstring) with the JSON-RPC error; any other request goes to ``app`` untouched."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, ended = await _body(receive)
        fault = _fault(body)
        if fault is None:
            await self.app(scope, replay_body(body, receive, more=not ended), send)
            return
        request_id, code, message = fault
        await send_json(
            send,
            200,
            {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}},
        )


async def _body(receive: Receive) -> tuple[bytes, bool]:
    """The request's body (the origin guard before this one bounded it), and whether it ended."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body), True
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return bytes(body), True


def _fault(body: bytes) -> tuple[Any, int, str] | None:
    """What is wrong with ``body`` for the SDK: (the id to answer with, the JSON-RPC code, the
    message), or None when the SDK can read it (its own checks follow)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return (
            None,
            -32700,
            f"Parse error: the body is not UTF-8 ({exc.reason} at byte {exc.start})",
        )
    # Parsed here only when it may fail in the SDK: the SDK parses it again.
    deep = body.count(b"[") + body.count(b"{") > _SHALLOW
    if not deep and not _SURROGATE_ESCAPE.search(body):
        return None
    try:
        data = json.loads(text)
    except RecursionError:
        return None, -32700, "Parse error: the JSON is nested too deeply"
    except ValueError:
        return None  # the SDK's parse error
    where = _surrogate_at(data)
    if where is None:
        return None  # every escape was half of a pair
    request_id = data.get("id") if isinstance(data, dict) else None
    if isinstance(request_id, str) and _SURROGATE.search(request_id):
        request_id = None
    params = where == "params" or where.startswith(("params.", "params["))
    return (
        request_id if params else None,
        -32602 if params else -32600,
        f"{'Invalid params' if params else 'Invalid Request'}: {where} holds a lone "
        "surrogate (a \\ud800-\\udfff escape that is not half of a pair), which is not "
        "Unicode text: send the text as valid UTF-8 JSON (an emoji's two escapes together)",
    )


def _surrogate_at(data: Any) -> str | None:
    """Where in ``data`` (a JSON path such as ``params.message.parts[0].text``) the first
    string or key holding a lone surrogate is, or None. Iterative: ``data`` may be deep."""
    todo: list[tuple[str, Any]] = [("", data)]
    while todo:
        path, node = todo.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return path or "the body"
        elif isinstance(node, dict):
            for key, value in reversed(node.items()):
                name = (
                    key
                    if not _SURROGATE.search(key)
                    else key.encode("ascii", "backslashreplace").decode()
                )
                inner = f"{path}.{name}" if path else name
                if name is not key:
                    return inner
                todo.append((inner, value))
        elif isinstance(node, list):
            todo.extend((f"{path}[{i}]", item) for i, item in reversed(list(enumerate(node))))
    return None
