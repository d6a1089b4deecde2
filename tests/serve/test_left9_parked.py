"""Runs parked for an OpenAI client's own tools are bounded per user: past
``max_parked_runs``, the one that has waited longest is ended, and results sent for it later are
refused with a message that says why (docs/serve.md)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from goagent_py.messages import Role
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.serve import create_app
from goagent_py.testing import FunctionProvider, ScriptedProvider, tool_call_response

openai = pytest.importorskip("openai")

_LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a word up in the client's dictionary.",
        "parameters": {
            "type": "object",
            "properties": {"word": {"type": "string"}},
            "required": ["word"],
        },
    },
}


def _sdk(app: Any) -> Any:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1234))
    http = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")
    return openai.AsyncOpenAI(base_url="http://127.0.0.1/v1", api_key="unused", http_client=http)


def _parked(app: Any) -> list[str]:
    return sorted(
        thread for (_, thread), live in app.server.live.items() if live.run and live.run.parked
    )


async def test_past_max_parked_runs_the_longest_waiting_run_is_ended(db: str, helpers: Any) -> None:
    def answer(request: CompletionRequest) -> CompletionResponse | str:
        if request.messages[-1].role is Role.USER:
            return tool_call_response(("lookup", {"word": "w"}))
        return "thanks"

    provider = FunctionProvider(answer)
    app = create_app(helpers.factory_for(provider), storage_path=db, max_parked_runs=2)
    calls: dict[str, str] = {}
    async with _sdk(app) as client:
        for name in ("a", "b", "c"):
            first = await client.chat.completions.create(
                model="goagent",
                messages=[{"role": "user", "content": "w?"}],
                tools=[_LOOKUP],
                user=name,
            )
            (call,) = first.choices[0].message.tool_calls
            calls[name] = call.id
        # was: every thread's run stayed parked until client_tool_timeout (600 s)
        assert _parked(app) == ["openai-b", "openai-c"]
        with pytest.raises(openai.APIStatusError) as err:
            await client.chat.completions.create(
                model="goagent",
                messages=[
                    {"role": "user", "content": "w?"},
                    {"role": "tool", "tool_call_id": calls["a"], "content": "x"},
                ],
                tools=[_LOOKUP],
                user="a",
            )
        later = await client.chat.completions.create(
            model="goagent",
            messages=[
                {"role": "user", "content": "w?"},
                {"role": "tool", "tool_call_id": calls["c"], "content": "x"},
            ],
            tools=[_LOOKUP],
            user="c",
        )
    await app.aclose()
    assert err.value.status_code == 409
    assert "max_parked_runs" in err.value.body["message"]
    assert later.choices[0].message.content == "thanks"


def test_max_parked_runs_below_one_is_a_configuration_error(db: str, helpers: Any) -> None:
    from goagent_py.errors import ConfigurationError

    provider = ScriptedProvider()
    with pytest.raises(ConfigurationError, match="max_parked_runs"):
        create_app(helpers.factory_for(provider), storage_path=db, max_parked_runs=0)
