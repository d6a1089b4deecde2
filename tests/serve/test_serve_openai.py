"""OpenAI-compatible clients see what the agent did (issue 33), drive their own tools, get the
JSON their ``response_format`` asks for (issue 32), and talk Responses: every test drives the
official ``openai`` SDK against the ASGI app."""

from __future__ import annotations

import html
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from goagent_py.messages import Role
from goagent_py.serve import create_app
from goagent_py.testing import FunctionProvider, ScriptedProvider, tool_call_response
from goagent_py.tools import tool
from goagent_py.transcript import validate_transcript

openai = pytest.importorskip("openai")

_DETAILS = re.compile(
    r'<details type="tool_calls" done="true" id="([^"]*)" name="([^"]*)" '
    r'arguments="([^"]*)" result="([^"]*)">\n<summary>Tool Executed</summary>\n</details>'
)


@tool
def weather(city: str) -> str:
    """The forecast for a city."""
    return f"sunny in {city}"


def _sdk(app: Any) -> Any:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1234))
    http = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")
    return openai.AsyncOpenAI(base_url="http://127.0.0.1/v1", api_key="unused", http_client=http)


@pytest.fixture
async def weather_app(db: str, helpers: Any) -> AsyncIterator[Any]:
    provider = ScriptedProvider(
        *[tool_call_response(("weather", {"city": "Quito"})), "The forecast is ready."] * 4
    )
    app = create_app(helpers.factory_for(provider, [weather]), storage_path=db)
    yield app
    await app.aclose()


async def _stored(app: Any, thread: str = "default") -> list[Any]:
    live = app.server.live[("local", "openai-" + thread)]
    return list(await live.session.agent.options.short_term_memory.transcript())


def _tool_cards(content: str) -> list[tuple[str, dict[str, Any], str]]:
    return [
        (name, json.loads(html.unescape(args)), json.loads(html.unescape(result)))
        for _, name, args, result in _DETAILS.findall(content)
    ]


# -- the agent's own tools, as Open WebUI shows them ----------------------------------------


async def test_server_tool_calls_reach_a_plain_completion(weather_app: Any) -> None:
    async with _sdk(weather_app) as client:
        answer = await client.chat.completions.create(
            model="goagent", messages=[{"role": "user", "content": "weather Quito"}]
        )
    content = answer.choices[0].message.content
    assert _tool_cards(content) == [("weather", {"city": "Quito"}, "sunny in Quito")]
    assert content.endswith("The forecast is ready.")
    assert answer.choices[0].finish_reason == "stop"
    assert answer.choices[0].message.tool_calls is None  # the server ran it, not the client


async def test_server_tool_calls_reach_a_streamed_completion(weather_app: Any) -> None:
    async with _sdk(weather_app) as client:
        stream = await client.chat.completions.create(
            model="goagent",
            messages=[{"role": "user", "content": "weather Quito"}],
            stream=True,
        )
        chunks = [c async for c in stream]
    content = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert _tool_cards(content) == [("weather", {"city": "Quito"}, "sunny in Quito")]
    assert content.endswith("The forecast is ready.")
    assert chunks[-1].choices[0].finish_reason == "stop"


# -- the client's own tools -----------------------------------------------------------------

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


@pytest.fixture
async def client_tool_app(db: str, helpers: Any) -> AsyncIterator[Any]:
    provider = ScriptedProvider(
        *[tool_call_response(("lookup", {"word": "ubuntu"})), "It means humanity."] * 3
    )
    app = create_app(helpers.factory_for(provider, [weather]), storage_path=db)
    app.provider = provider  # type: ignore[attr-defined]
    yield app
    await app.aclose()


async def test_client_tools_come_back_as_tool_calls_and_results_continue_the_run(
    client_tool_app: Any,
) -> None:
    app = client_tool_app
    chat: list[dict[str, Any]] = [{"role": "user", "content": "what is ubuntu?"}]
    async with _sdk(app) as client:
        first = await client.chat.completions.create(
            model="goagent", messages=chat, tools=[_LOOKUP]
        )
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        (call,) = choice.message.tool_calls
        assert call.function.name == "lookup"
        assert json.loads(call.function.arguments) == {"word": "ubuntu"}
        # The model was offered the client's tool beside the agent's own.
        offered = [t.name for t in app.provider.requests[0].tools]
        assert offered == ["weather", "lookup"]
        chat += [
            choice.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "a Zulu word: humanity"},
        ]
        second = await client.chat.completions.create(
            model="goagent", messages=chat, tools=[_LOOKUP]
        )
    assert second.choices[0].message.content == "It means humanity."
    assert second.choices[0].finish_reason == "stop"
    # The model read the client's result, and the thread's record is whole and valid.
    sent = app.provider.requests[1].messages
    assert sent[-1].role is Role.TOOL
    assert sent[-1].text == "a Zulu word: humanity"
    stored = await _stored(app)
    assert validate_transcript(stored) == []
    assert [m.role.value for m in stored] == ["user", "assistant", "tool", "assistant"]
    # The thread's own agent (without the client's tool) is back for the next run.
    agent = app.server.live[("local", "openai-default")].session.agent
    assert [t.definition.name for t in agent.tools] == ["weather"]


async def test_client_tools_streamed(client_tool_app: Any) -> None:
    chat: list[dict[str, Any]] = [{"role": "user", "content": "what is ubuntu?"}]
    async with _sdk(client_tool_app) as client:
        stream = await client.chat.completions.create(
            model="goagent", messages=chat, tools=[_LOOKUP], stream=True
        )
        chunks = [c async for c in stream]
        assert chunks[-1].choices[0].finish_reason == "tool_calls"
        deltas = [t for c in chunks for t in (c.choices[0].delta.tool_calls or [])]
        assert [(d.index, d.function.name) for d in deltas] == [(0, "lookup")]
        call_id = deltas[0].id
        chat += [
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "lookup", "arguments": deltas[0].function.arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": "humanity"},
        ]
        stream = await client.chat.completions.create(
            model="goagent", messages=chat, tools=[_LOOKUP], stream=True
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream])
    assert text == "It means humanity."


async def test_a_new_message_instead_of_results_ends_the_waiting_run(
    client_tool_app: Any,
) -> None:
    app = client_tool_app
    async with _sdk(app) as client:
        first = await client.chat.completions.create(
            model="goagent", messages=[{"role": "user", "content": "q"}], tools=[_LOOKUP]
        )
        assert first.choices[0].finish_reason == "tool_calls"
        # Results for a call nobody waits for are refused, OpenAI-shaped.
        with pytest.raises(openai.BadRequestError) as err:
            await client.chat.completions.create(
                model="goagent",
                messages=[
                    {"role": "user", "content": "q"},
                    {"role": "tool", "tool_call_id": "nope", "content": "x"},
                ],
            )
        assert "missing" in err.value.body["message"]
        again = await client.chat.completions.create(
            model="goagent", messages=[{"role": "user", "content": "never mind"}]
        )
    # The waiting call was closed with an error result; the new message got its own run.
    assert again.choices[0].finish_reason in ("stop", "tool_calls")
    stored = await _stored(app)
    assert validate_transcript(stored) == []
    assert stored[2].role is Role.TOOL
    assert stored[2].is_error


# -- response_format -----------------------------------------------------------------------

_CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer", "minimum": 0}},
    "required": ["city", "population"],
    "additionalProperties": False,
}


async def test_response_format_json_schema_gives_schema_valid_json(db: str, helpers: Any) -> None:
    from jsonschema import validate

    provider = ScriptedProvider(
        tool_call_response(("final_result", {"city": "Quito", "population": -5})),
        tool_call_response(("final_result", {"city": "Quito", "population": 2800000})),
    )
    app = create_app(helpers.factory_for(provider), storage_path=db)
    fmt = {"type": "json_schema", "json_schema": {"name": "city", "schema": _CITY}}
    async with _sdk(app) as client:
        answer = await client.chat.completions.create(
            model="goagent",
            messages=[{"role": "user", "content": "the capital of Ecuador?"}],
            response_format=fmt,  # type: ignore[arg-type]
        )
    await app.aclose()
    data = json.loads(answer.choices[0].message.content)
    validate(data, _CITY)
    assert data == {"city": "Quito", "population": 2800000}
    # The schema reached the model, and the invalid first answer went back with the error.
    offered = {t.name: t.parameters for t in provider.requests[0].tools}
    assert offered["final_result"]["properties"] == _CITY["properties"]
    retry = provider.requests[1].messages[-1].text
    assert "population" in retry


async def test_response_format_streamed_and_refused_when_not_json_schema(
    db: str, helpers: Any
) -> None:
    provider = ScriptedProvider(
        tool_call_response(("final_result", {"city": "Lima", "population": 10})),
    )
    app = create_app(helpers.factory_for(provider), storage_path=db)
    fmt = {"type": "json_schema", "json_schema": {"name": "city", "schema": _CITY}}
    async with _sdk(app) as client:
        stream = await client.chat.completions.create(
            model="goagent",
            messages=[{"role": "user", "content": "x"}],
            response_format=fmt,  # type: ignore[arg-type]
            stream=True,
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream])
        assert json.loads(text) == {"city": "Lima", "population": 10}
        bad = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "dict"}}}
        with pytest.raises(openai.BadRequestError) as err:
            await client.chat.completions.create(
                model="goagent",
                messages=[{"role": "user", "content": "x"}],
                response_format=bad,  # type: ignore[arg-type]
            )
    await app.aclose()
    assert "not valid JSON Schema" in err.value.body["message"]


# -- the Responses API ---------------------------------------------------------------------


async def test_responses_round_trip(weather_app: Any) -> None:
    async with _sdk(weather_app) as client:
        response = await client.responses.create(model="goagent", input="weather Quito")
    assert response.status == "completed"
    assert response.output_text == "The forecast is ready."
    kinds = [item.type for item in response.output]
    assert kinds == ["mcp_call", "message"]
    call = response.output[0]
    assert (call.name, json.loads(call.arguments), call.output) == (
        "weather",
        {"city": "Quito"},
        "sunny in Quito",
    )


async def test_responses_streamed(weather_app: Any) -> None:
    async with _sdk(weather_app) as client:
        stream = await client.responses.create(model="goagent", input="weather Quito", stream=True)
        events = [e async for e in stream]
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "The forecast is ready."
    final = events[-1].response
    assert final.output_text == "The forecast is ready."
    assert [i.type for i in final.output] == ["mcp_call", "message"]


async def test_responses_client_function_call_round_trip(client_tool_app: Any) -> None:
    lookup = {"type": "function", **_LOOKUP["function"]}
    async with _sdk(client_tool_app) as client:
        first = await client.responses.create(
            model="goagent",
            input="what is ubuntu?",
            tools=[lookup],  # type: ignore[list-item]
        )
        (call,) = [i for i in first.output if i.type == "function_call"]
        assert call.name == "lookup"
        second = await client.responses.create(
            model="goagent",
            input=[
                {"role": "user", "content": "what is ubuntu?"},
                {"type": "function_call_output", "call_id": call.call_id, "output": "humanity"},
            ],
            tools=[lookup],  # type: ignore[list-item]
        )
    assert second.output_text == "It means humanity."
    assert validate_transcript(await _stored(client_tool_app)) == []


async def test_responses_text_format_json_schema(db: str, helpers: Any) -> None:
    provider = ScriptedProvider(
        tool_call_response(("final_result", {"city": "Quito", "population": 2800000})),
    )
    app = create_app(helpers.factory_for(provider), storage_path=db)
    fmt = {"type": "json_schema", "name": "city", "schema": _CITY}
    async with _sdk(app) as client:
        response = await client.responses.create(
            model="goagent",
            input="the capital of Ecuador?",
            text={"format": fmt},  # type: ignore[typeddict-item]
        )
    await app.aclose()
    assert json.loads(response.output_text) == {"city": "Quito", "population": 2800000}
    assert [i.type for i in response.output] == ["message"]  # final_result is the answer


async def test_thinking_reaches_chat_clients_as_reasoning_content(db: str, helpers: Any) -> None:
    from goagent_py.messages import Message, StopReason, TextBlock, ThinkingBlock, Usage
    from goagent_py.provider import CompletionResponse

    blocks = [ThinkingBlock("Quito is high up", signature="s"), TextBlock("Cold nights.")]
    reply = CompletionResponse(Message(Role.ASSISTANT, blocks), StopReason.END_TURN, Usage())
    app = create_app(helpers.factory_for(ScriptedProvider(reply, reply)), storage_path=db)
    async with _sdk(app) as client:
        plain = await client.chat.completions.create(
            model="goagent", messages=[{"role": "user", "content": "nights?"}]
        )
        stream = await client.chat.completions.create(
            model="goagent", messages=[{"role": "user", "content": "nights?"}], stream=True
        )
        chunks = [c async for c in stream]
    await app.aclose()
    assert plain.choices[0].message.content == "Cold nights."
    assert plain.choices[0].message.model_extra["reasoning_content"] == "Quito is high up"
    streamed = [(c.choices[0].delta.model_extra or {}).get("reasoning_content") for c in chunks]
    assert "".join(s for s in streamed if s) == "Quito is high up"


async def test_usage_reaches_both_apis_and_the_agui_terminal_event(db: str, helpers: Any) -> None:
    from goagent_py.messages import Usage
    from goagent_py.testing import text_response

    spent = Usage(input_tokens=10, output_tokens=4, cache_read_input_tokens=6)
    provider = ScriptedProvider(*[text_response("fine", usage=spent)] * 4)
    app = create_app(helpers.factory_for(provider), storage_path=db)
    async with _sdk(app) as client:
        plain = await client.chat.completions.create(
            model="goagent", messages=[{"role": "user", "content": "x"}]
        )
        stream = await client.chat.completions.create(
            model="goagent",
            messages=[{"role": "user", "content": "x"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [c async for c in stream]
        response = await client.responses.create(model="goagent", input="x")
    async with helpers.client_for(app) as http:
        tid = (await http.post("/api/threads", json={})).json()["id"]
        r = await http.post(f"/api/threads/{tid}/runs", json={"message": "x"})
        final = helpers.sse_events(r.text)[-1]
    await app.aclose()
    # Cache reads are part of the input (AG-UI's and OpenAI's accounting).
    assert (plain.usage.prompt_tokens, plain.usage.completion_tokens) == (16, 4)
    assert plain.usage.prompt_tokens_details.cached_tokens == 6
    assert chunks[-1].choices == []
    assert chunks[-1].usage.total_tokens == 20
    assert (response.usage.input_tokens, response.usage.output_tokens) == (16, 4)
    assert final["usage"] == [
        {"inputTokens": 16, "outputTokens": 4, "totalTokens": 20, "cachedInputTokens": 6}
    ]


async def test_a_continuation_without_tools_still_hands_the_clients_calls_back(
    db: str, helpers: Any
) -> None:
    provider = ScriptedProvider(
        tool_call_response(("lookup", {"word": "a"})),
        tool_call_response(("lookup", {"word": "b"})),
        "both looked up",
    )
    app = create_app(helpers.factory_for(provider), storage_path=db)
    chat: list[dict[str, Any]] = [{"role": "user", "content": "a and b?"}]
    async with _sdk(app) as client:
        answer = await client.chat.completions.create(
            model="goagent", messages=chat, tools=[_LOOKUP]
        )
        for word in ("a", "b"):
            assert answer.choices[0].finish_reason == "tool_calls"
            (call,) = answer.choices[0].message.tool_calls
            assert json.loads(call.function.arguments) == {"word": word}
            chat += [
                answer.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": word.upper()},
            ]
            # The tools are not sent again: the run still knows which calls are the client's.
            answer = await client.chat.completions.create(model="goagent", messages=chat)
    assert answer.choices[0].message.content == "both looked up"
    stored = await _stored(app)
    await app.aclose()
    assert validate_transcript(stored) == []
    assert [m.text for m in stored if m.role is Role.TOOL] == ["A", "B"]


async def test_a_client_that_never_sends_results_does_not_hold_the_thread(
    db: str, helpers: Any
) -> None:
    provider = ScriptedProvider(tool_call_response(("lookup", {"word": "a"})), "gave up on it")
    app = create_app(helpers.factory_for(provider), storage_path=db, client_tool_timeout=0.001)
    async with _sdk(app) as client:
        first = await client.chat.completions.create(
            model="goagent", messages=[{"role": "user", "content": "a?"}], tools=[_LOOKUP]
        )
        assert first.choices[0].finish_reason == "tool_calls"
        run = app.server.live[("local", "openai-default")].run
        await run.done.wait()  # the call failed for want of a result; the run went on
    stored = await _stored(app)
    await app.aclose()
    assert validate_transcript(stored) == []
    assert stored[2].is_error
    assert "did not send this call's result" in stored[2].text
    assert stored[-1].text == "gave up on it"
    assert "did not send" in provider.requests[1].messages[-1].text  # what the model read
    from goagent_py.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="client_tool_timeout"):
        create_app(helpers.factory_for(provider), storage_path=db, client_tool_timeout=0)


# -- the thread a request names (review6a) -----------------------------------------------------


async def test_distinct_user_fields_never_share_a_thread(db: str, helpers: Any) -> None:
    # An app serving many people through one key names each by the request's "user": names that
    # differ only in punctuation, or after 40 characters, were one thread (one person's
    # conversation in another's request).
    seen: list[list[str]] = []

    def answer(request: Any) -> str:
        seen.append([m.text for m in request.messages])
        return "ok"

    app = create_app(helpers.factory_for(FunctionProvider(answer)), storage_path=db)
    long = "customer-" + "0" * 40
    names = [
        "alice.smith@corp.example",
        "alicesmith@corp.example",
        long + "1",
        long + "2",
        "José",
        "Jose",
    ]
    async with _sdk(app) as client:
        for name in names:
            await client.chat.completions.create(
                model="goagent",
                messages=[{"role": "user", "content": f"I am {name}"}],
                user=name,
            )
        again = await client.chat.completions.create(
            model="goagent", messages=[{"role": "user", "content": "who am I?"}], user=names[1]
        )
    await app.aclose()

    assert again.choices[0].message.content == "ok"
    for name, request in zip(names, seen, strict=False):
        assert request == [f"I am {name}"], name  # nobody else's messages
    assert seen[-1] == [f"I am {names[1]}", "ok", "who am I?"]
    # A plain name keeps its documented thread id.
    threads = {t["id"] for t in await app.server.threads.list("local")}
    assert "openai-Jose" in threads
    assert len(threads) == len(names)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
async def test_stream_and_user_of_the_wrong_type_are_400s(echo_app: Any, path: str) -> None:
    # "stream": "false" streamed (bool("false")), and a non-string "user" (0, false, {}) named
    # a thread by its str() or fell back to the shared "default" one, where OpenAI answers 400.
    ask: dict[str, Any] = {"model": "goagent"}
    if path.endswith("completions"):
        ask["messages"] = [{"role": "user", "content": "hi"}]
    else:
        ask["input"] = "hi"
    transport = httpx.ASGITransport(app=echo_app, client=("127.0.0.1", 1234))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        for bad in ({"stream": "false"}, {"stream": 1}, {"user": 0}, {"user": False}, {"user": {}}):
            r = await client.post(path, json={**ask, **bad})
            assert r.status_code == 400, (bad, r.text)
            error = r.json()["error"]
            assert error["type"] == "invalid_request_error"
            assert next(iter(bad)) in error["message"]
        r = await client.post(path, json={**ask, "stream": False, "user": "u1"})
        assert r.status_code == 200
        assert "openai-u1" in {t for _, t in echo_app.server.live}
