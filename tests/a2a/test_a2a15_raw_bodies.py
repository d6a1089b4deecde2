"""Request bodies the SDK's JSON-RPC routes fail on inside (an internal error -32603 with the
codec's text and a logged traceback, or a crash while answering) are refused at our boundary
with the JSON-RPC error that names what is wrong (docs/a2a.md, "Serve an agent")."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest
from a2a_helpers import free_socket, serving

from goagent_py import Agent
from goagent_py.a2a import a2a_app
from goagent_py.testing import ScriptedProvider

pytestmark = pytest.mark.slow

_OLD = (
    b'{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message",'
    b'"role":"user","messageId":"m-7","parts":[{"kind":"text","text":"TEXT"}]}}}'
)
_NEW = (
    b'{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"role":"ROLE_USER",'
    b'"messageId":"m-7","metadata":{"KEY":1},"parts":[{"text":"hi"}]}}}'
)


@pytest.mark.parametrize(
    ("body", "code", "says", "version"),
    [
        # A lone surrogate escape: JSON grammar, but no Unicode text (the 0.3 adapter crashed
        # encoding it, answering -32603 with the codec's message).
        (_OLD.replace(b"TEXT", b"a\\ud800b"), -32602, "params.message.parts[0].text", "0.3"),
        (_OLD.replace(b"TEXT", b"\\udc00"), -32602, "lone surrogate", "0.3"),
        (_NEW.replace(b"KEY", b"k\\udfff"), -32602, "params.message.metadata", "1.0"),
        # In the request's id: the SDK crashed rendering its answer (no JSON-RPC reply).
        (_OLD.replace(b'"id":7', b'"id":"\\ud800"'), -32600, "id", "0.3"),
        # Not UTF-8, or nested deeper than a parser's stack: a parse error, not an internal one.
        (_OLD.replace(b"TEXT", b"a\xffb"), -32700, "UTF-8", "0.3"),
        (_OLD.replace(b'"TEXT"', b"[" * 100_000 + b"]" * 100_000), -32700, "nested", "0.3"),
    ],
)
async def test_a_body_the_sdk_would_fail_on_gets_the_json_rpc_error_naming_the_fault(
    body: bytes, code: int, says: str, version: str, caplog: Any
) -> None:
    provider = ScriptedProvider("never")
    agent = Agent(provider=provider, model="m", name="h")
    sock = free_socket()
    headers = {"content-type": "application/json", "A2A-Version": version}
    with caplog.at_level(logging.ERROR):
        async with (
            serving(a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}"), sock) as url,
            httpx.AsyncClient(timeout=60) as http,
        ):
            response = await http.post(url + "/", content=body, headers=headers)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["jsonrpc"] == "2.0"
    assert answer["error"]["code"] == code, answer
    assert says in answer["error"]["message"], answer
    assert answer["id"] == (None if code != -32602 else 7)
    assert provider.requests == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # no traceback logged
