"""JSON written outside the package (a model's arguments or answer, a server's body) that is
nested too deeply is bad JSON like any other, never a RecursionError (review7c: a model's
``"[" * 100_000`` crashed a typed run with RecursionError, and made a tool call's provider
raise ProviderError instead of giving the model an error result)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from goagent_py import Agent, OutputValidationError
from goagent_py._json_text import loads
from goagent_py.errors import ProviderError
from goagent_py.output import OutputSpec
from goagent_py.providers import anthropic, llama_cpp, ollama, openai
from goagent_py.providers._http import INVALID_ARGUMENTS_KEY, parse_json
from goagent_py.testing import ScriptedProvider, text_response

DEEP = ["[" * 100_000, '{"a": ' * 50_000, "[" * 5_000 + "]" * 5_000]


class City(BaseModel):
    name: str


@pytest.mark.parametrize("raw", DEEP)
def test_loads_refuses_deep_nesting_as_a_json_decode_error(raw: str) -> None:
    with pytest.raises(json.JSONDecodeError, match="nested too deeply"):
        loads(raw)
    assert loads('{"a": [1, {"b": 2}]}') == {"a": [1, {"b": 2}]}


@pytest.mark.parametrize("raw", DEEP)
@pytest.mark.parametrize(
    "parse",
    [
        openai.parse_arguments,
        llama_cpp.parse_arguments,
        ollama._arguments,
        lambda raw: anthropic._parse_streamed_input(raw, {}),
    ],
    ids=["openai", "llama_cpp", "ollama", "anthropic-stream"],
)
def test_deep_tool_arguments_reach_the_model_as_invalid_arguments(parse: Any, raw: str) -> None:
    assert parse(raw) == {INVALID_ARGUMENTS_KEY: raw}


def test_a_deep_body_is_a_provider_error() -> None:
    with pytest.raises(ProviderError, match="openai"):
        parse_json("[" * 100_000, provider="openai", status=200)


def test_a_deep_stream_chunk_is_a_provider_error() -> None:
    with pytest.raises(ProviderError):
        openai._StreamAssembler().feed("[" * 100_000)


def test_a_deep_typed_answer_is_retried_then_an_output_validation_error() -> None:
    spec = OutputSpec(City)
    with pytest.raises(ValueError, match="not valid JSON"):
        spec.parse("[" * 100_000)
    provider = ScriptedProvider(text_response("[" * 100_000), text_response("[" * 100_000))
    agent = Agent(provider=provider, model="m", output_type=City, output_mode="prompted")
    with pytest.raises(OutputValidationError):
        agent.run_sync("a city")
    assert len(provider.requests) == 2


def test_a_deep_error_body_is_no_error_object_for_the_retry_rules() -> None:
    from goagent_py._provider_retry import _error_object

    assert _error_object('{"error": ' * 50_000) == {}


def test_a_deep_decider_answer_is_a_decision_error() -> None:
    from goagent_py.memory.consolidation import DecisionError
    from goagent_py.memory.deciders import parse_model_answer

    with pytest.raises(DecisionError, match="not valid decisions JSON"):
        parse_model_answer('{"decisions": ' * 50_000 + "}", {}, 1)


def test_lone_surrogates_become_replacement_characters() -> None:
    # "\ud800" is JSON grammar but no Unicode: json.loads gave a str that cannot be UTF-8, so a
    # model's answer holding one (a server that split an emoji's UTF-16 pair across chunks)
    # was never stored: SQLite memory refused the turn (review7c). A pair is kept.
    assert loads('{"t": "bad \\ud800 text", "k": ["\\uDC80"]}') == {
        "t": "bad \ufffd text",
        "k": ["\ufffd"],
    }
    assert loads('"\\ud83d\\ude00"') == "\U0001f600"
    assert loads('{"\\ud800": 1}') == {"\ufffd": 1}


async def test_a_models_lone_surrogate_no_longer_loses_the_turn(tmp_path: Any) -> None:
    import httpx

    from goagent_py.memory import ShortTermMemory
    from goagent_py.memory.storage import SQLiteStorage

    body = (
        '{"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": '
        '[{"index": 0, "message": {"role": "assistant", "content": "bad \\ud800 text"}, '
        '"finish_reason": "stop"}]}'
    )
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body.encode()))
    storage = SQLiteStorage(str(tmp_path / "m.db"), session_id="s")
    async with httpx.AsyncClient(transport=transport) as http:
        provider = openai.OpenAIProvider(api_key="k", http_client=http)
        agent = Agent(provider=provider, model="m", short_term_memory=ShortTermMemory(storage))
        assert (await agent.run("hi")).text == "bad \ufffd text"
    stored = await ShortTermMemory(storage).messages()
    await storage.aclose()
    assert [m.text for m in stored] == ["hi", "bad \ufffd text"]
