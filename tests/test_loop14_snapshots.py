"""The scripted providers' records of tool definitions, fourth look (issue 36): the parameters
are fingerprinted, the name and description (strings the record's copy shares) compared by
identity. A definition or a record changed past its frozenness (``object.__setattr__``) is
recorded as it is when sent, never as an earlier record or another provider's holds it."""

from __future__ import annotations

import asyncio

import pytest

from goagent_py.provider import CompletionRequest
from goagent_py.testing import ScriptedProvider
from goagent_py.tools import ToolDefinition


def _definition() -> ToolDefinition:
    return ToolDefinition("t", "Adds.", {"type": "object", "properties": {"a": {"type": "int"}}})


@pytest.mark.parametrize("field", ["name", "description"])
def test_a_definition_whose_string_changed_between_requests_is_recorded_as_sent(
    field: str,
) -> None:
    definition = _definition()
    request = CompletionRequest(model="m", tools=[definition])
    scripted = ScriptedProvider("one", "two")
    asyncio.run(scripted.complete(request))
    object.__setattr__(definition, field, "changed")
    asyncio.run(scripted.complete(request))
    first, second = scripted.requests
    assert getattr(first.tools[0], field) != "changed"
    assert getattr(second.tools[0], field) == "changed"


@pytest.mark.parametrize("field", ["name", "description"])
def test_a_new_provider_never_records_a_string_another_providers_reader_changed(
    field: str,
) -> None:
    definition = _definition()
    request = CompletionRequest(model="m", tools=[definition])
    first, second = ScriptedProvider("1"), ScriptedProvider("2")
    asyncio.run(first.complete(request))
    object.__setattr__(first.requests[0].tools[0], field, "changed by a reader")
    asyncio.run(second.complete(request))
    assert getattr(second.requests[0].tools[0], field) == getattr(definition, field)


def test_a_definition_given_an_equal_string_of_its_own_is_recorded_with_it() -> None:
    """An equal value in a new object: recorded again (identity, not equality, is the check),
    with the value sent."""
    definition = _definition()
    request = CompletionRequest(model="m", tools=[definition])
    scripted = ScriptedProvider("one", "two")
    asyncio.run(scripted.complete(request))
    equal = "".join(["Ad", "ds."])
    object.__setattr__(definition, "description", equal)
    asyncio.run(scripted.complete(request))
    assert scripted.requests[1].tools[0].description is equal
