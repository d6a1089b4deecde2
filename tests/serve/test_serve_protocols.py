"""The protocols spoken exactly (issue 33, its serve bullets): ``/v1`` refusals in OpenAI's error
shape and statuses, and one terminal AG-UI event per run."""

from __future__ import annotations

from typing import Any

from goagent_py.errors import ProviderError
from goagent_py.serve import TokenAuth, create_app
from goagent_py.testing import ScriptedProvider

_KEYS = ["code", "message", "param", "type"]


def _openai_error(response: Any, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert sorted(error) == _KEYS
    assert error["type"] == kind
    assert isinstance(error["message"], str)
    assert error["message"]
    return error


async def test_v1_refusals_are_openai_shaped(echo_app: Any, helpers: Any) -> None:
    async with helpers.client_for(echo_app) as client:
        url = "/v1/chat/completions"
        r = await client.post(url, json={"model": "goagent", "messages": "hello"})
        _openai_error(r, 400, "invalid_request_error")
        r = await client.post(url, json={"model": "goagent", "messages": []})
        _openai_error(r, 400, "invalid_request_error")
        # A body that is not JSON is a 400 at OpenAI (the /api routes say 415).
        r = await client.post(url, content=b"hi", headers={"content-type": "text/plain"})
        _openai_error(r, 400, "invalid_request_error")
        r = await client.post(url, content=b"{oops", headers={"content-type": "application/json"})
        _openai_error(r, 400, "invalid_request_error")
        r = await client.get("/v1/embeddings")
        assert "/v1/embeddings" in _openai_error(r, 404, "invalid_request_error")["message"]
    # Refused before routing (no-auth and a LAN peer, a foreign Host): the same shape.
    async with helpers.client_for(echo_app, client="10.0.0.9") as lan:
        _openai_error(await lan.get("/v1/models"), 403, "permission_error")
    async with helpers.client_for(echo_app) as client:
        r = await client.get("/v1/models", headers={"host": "evil.example"})
        _openai_error(r, 421, "invalid_request_error")
        # The rest of the API keeps its plain shape.
        assert (await client.get("/api/threads/nope")).json() == {"error": "no such thread"}


async def test_v1_wrong_key_and_failed_run(db: str, helpers: Any) -> None:
    provider = ScriptedProvider(ProviderError("vendor down"), ProviderError("still down"))
    app = create_app(
        helpers.factory_for(provider), storage_path=db, auth=TokenAuth({"k" * 20: "ann"})
    )
    async with helpers.client_for(app) as client:
        body = {"model": "goagent", "messages": [{"role": "user", "content": "hi"}]}
        r = await client.post("/v1/chat/completions", json=body)
        assert _openai_error(r, 401, "invalid_request_error")["code"] == "invalid_api_key"
        key = {"authorization": "Bearer " + "k" * 20}
        r = await client.post("/v1/chat/completions", json=body, headers=key)
        assert "vendor down" in _openai_error(r, 500, "server_error")["message"]
        streamed = await client.post(
            "/v1/chat/completions", json={**body, "stream": True}, headers=key
        )
        errors = [e["error"] for e in helpers.sse_events(streamed.text) if "error" in e]
        assert len(errors) == 1
        assert sorted(errors[0]) == _KEYS
        assert errors[0]["type"] == "server_error"
    await app.aclose()


async def test_a_failed_run_sends_exactly_one_terminal_event(db: str, helpers: Any) -> None:
    provider = ScriptedProvider(ProviderError("vendor down"), "fine now")
    app = create_app(helpers.factory_for(provider), storage_path=db)
    terminal = {"RUN_FINISHED", "RUN_ERROR"}
    async with helpers.client_for(app) as client:
        tid = (await client.post("/api/threads", json={})).json()["id"]
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "a"})
        types = [e["type"] for e in helpers.sse_events(r.text)]
        assert [t for t in types if t in terminal] == ["RUN_ERROR"]
        assert types[-1] == "RUN_ERROR"
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "b"})
        events = helpers.sse_events(r.text)
        assert [e["type"] for e in events if e["type"] in terminal] == ["RUN_FINISHED"]
        assert events[-1]["result"] == {"stopReason": "end_turn", "text": "fine now"}
    await app.aclose()
