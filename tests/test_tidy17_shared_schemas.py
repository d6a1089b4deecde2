"""Schemas goagent-py builds once and hands to every tool or run are frozen, as the generated
ones are (``goagent_py/_frozen.py``): an edit through one tool's definition (a caller, a
middleware) raises instead of changing every other tool's schema behind its back."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import BaseModel

from goagent_py import Agent
from goagent_py.agent_tool import as_tool
from goagent_py.orchestration import Pipeline
from goagent_py.output import OutputSpec
from goagent_py.testing import ScriptedProvider


def _agent() -> Agent:
    return Agent(provider=ScriptedProvider([]))


def _edits(parameters: dict[str, Any]) -> list[Any]:
    """Each way a caller changes a schema in place, nested and at the top."""
    prompt = parameters["properties"]["prompt"]
    return [
        lambda: prompt.__setitem__("description", "changed"),
        lambda: parameters["properties"].__setitem__("extra", {"type": "string"}),
        lambda: parameters["required"].append("extra"),
        lambda: parameters.__setitem__("additionalProperties", False),
    ]


def _assert_shared_schema_held(first: dict[str, Any], second: dict[str, Any]) -> None:
    before = copy.deepcopy(second)
    for edit in _edits(first):
        with pytest.raises(TypeError, match=r"copy\.deepcopy"):
            edit()
    assert second == before
    assert first == before
    # A copy is the caller's to change.
    mine = copy.deepcopy(first)
    mine["properties"]["prompt"]["description"] = "mine"
    assert second["properties"]["prompt"]["description"] != "mine"


def test_two_agent_tools_do_not_share_a_changeable_schema() -> None:
    one = as_tool(_agent(), name="one", description="The first.")
    two = as_tool(_agent(), name="two", description="The second.")
    _assert_shared_schema_held(one.definition.parameters, two.definition.parameters)


def test_two_flow_tools_do_not_share_a_changeable_schema() -> None:
    one = Pipeline(_agent()).as_tool(name="one", description="The first.")
    two = Pipeline(_agent()).as_tool(name="two", description="The second.")
    _assert_shared_schema_held(one.definition.parameters, two.definition.parameters)


def test_an_agent_tool_and_a_flow_tool_do_not_share_a_changeable_schema() -> None:
    one = as_tool(_agent(), name="one", description="The first.")
    two = Pipeline(_agent()).as_tool(name="two", description="The second.")
    _assert_shared_schema_held(one.definition.parameters, two.definition.parameters)


def test_a_hand_written_agent_tool_schema_stays_the_callers() -> None:
    mine = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    tool = as_tool(_agent(), name="one", description="The first.", parameters=mine)
    tool.definition.parameters["properties"]["q"]["description"] = "changed"
    assert mine["properties"]["q"]["description"] == "changed"


@pytest.mark.needs_extra("a2a")
def test_two_a2a_tools_do_not_share_a_changeable_schema() -> None:
    from goagent_py.a2a import A2AAgent

    one = A2AAgent("http://127.0.0.1:1").as_tool(name="one")
    two = A2AAgent("http://127.0.0.1:2").as_tool(name="two")
    _assert_shared_schema_held(one.definition.parameters, two.definition.parameters)


class City(BaseModel):
    name: str
    population: int


def test_an_output_schema_sent_in_every_run_cannot_be_changed_through_one_request() -> None:
    spec = OutputSpec(City)
    before = copy.deepcopy(spec.schema)
    with pytest.raises(TypeError, match=r"copy\.deepcopy"):
        spec.schema["properties"]["population"]["type"] = "string"
    with pytest.raises(TypeError, match=r"copy\.deepcopy"):
        spec.schema["required"].append("country")
    assert spec.schema == before


@pytest.mark.needs_extra("temporal")
def test_the_durable_retry_policy_does_not_hand_out_the_module_list() -> None:
    from goagent_py.durable._workflow import _retry_policy

    config = {"max_retry_delay": 1.0, "max_attempts": 3}
    one = _retry_policy(config).non_retryable_error_types
    assert one is not None
    with pytest.raises((TypeError, AttributeError)):
        one.append("ProviderError")  # type: ignore[attr-defined]
    assert "ProviderError" not in (_retry_policy(config).non_retryable_error_types or ())
