"""A client that sends part of a body and then nothing is answered 408 after ``body_timeout``
instead of holding its request open for ever (docs/serve.md)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from goagent_py.serve import create_app
from goagent_py.testing import ScriptedProvider


async def test_a_body_that_stops_arriving_is_a_408(db: str, helpers: Any) -> None:
    app = create_app(
        helpers.factory_for(ScriptedProvider("hi")), storage_path=db, body_timeout=0.001
    )
    body = json.dumps({"model": "goagent", "messages": [{"role": "user", "content": "hi"}]})
    scope = helpers.post_scope("/v1/chat/completions", body.encode())
    first = [{"type": "http.request", "body": body.encode()[:10], "more_body": True}]
    never = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if first:
            return first.pop()
        await never.wait()  # the rest of the body never comes
        return {"type": "http.disconnect"}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    try:
        # was: the request waited for the rest of the body for ever (a guard here, not a
        # measure: the app answers long before it)
        await asyncio.wait_for(app(scope, receive, send), 120)
    finally:
        await app.aclose()
    assert sent[0]["status"] == 408
    error = json.loads(sent[1]["body"])["error"]
    assert "body_timeout" in error["message"]
    assert error["type"] == "invalid_request_error"  # the client's doing, not a server_error


def test_body_timeout_must_be_above_0(db: str, helpers: Any) -> None:
    from goagent_py.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="body_timeout"):
        create_app(helpers.factory_for(ScriptedProvider()), storage_path=db, body_timeout=0)
