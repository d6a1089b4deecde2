"""Tool and output schemas are checked against the JSON Schema meta-schema when built."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, Field

from goagent_py import Agent, ConfigurationError, tool, tool_blocks_func, tool_func
from goagent_py._json_schema import _plainly_valid, recursive_def, schema_problem
from goagent_py.agent_tool import AgentTool
from goagent_py.testing import ScriptedProvider
from goagent_py.tools import ToolDefinition

BENCH_SET = Path(__file__).parent.parent / "bench" / "extraction_data" / "bfcl_simple.jsonl"


def _echo(args: dict[str, Any]) -> str:
    return "ok"


def test_the_issue_example_is_refused_naming_the_path() -> None:
    bad = {"type": "dict", "properties": {"x": {"type": "float"}}}
    with pytest.raises(ConfigurationError, match=r"tool 'f' parameters .* at type: 'dict'") as info:
        tool_func("f", "d", bad, _echo)
    assert "use 'object'" in str(info.value)
    nested = {"type": "object", "properties": {"x": {"type": "float"}}}
    with pytest.raises(ConfigurationError, match=r"at properties\.x\.type: 'float' .*'number'"):
        tool_func("f", "d", nested, _echo)


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"type": "object", "required": "x"}, "at required: 'x' is not of type 'array'"),
        ({"type": "object", "properties": {"a": {"minLength": -1}}}, "properties.a.minLength"),
        ({"type": "object", "properties": []}, "at properties: []"),
        ({"type": ["object", "map"]}, "'map' is not a JSON Schema type (use 'object')"),
        ({"type": "object", "properties": {"a": {"anyOf": []}}}, "properties.a.anyOf"),
    ],
)
def test_other_invalid_schemas_name_their_path(schema: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        tool_blocks_func("g", "d", schema, lambda a: [])
    assert where in str(info.value)


def test_valid_schemas_pass_and_are_kept_as_given() -> None:
    schema = {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date"},
            "n": {"type": ["integer", "null"], "minimum": 0, "multipleOf": 2},
            "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}, "uniqueItems": True},
        },
        "$defs": {"Tag": {"enum": ["a", "b"]}},
        "required": ["when"],
    }
    assert tool_func("f", "d", schema, _echo).definition.parameters == schema
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}
    assert tool_func("h", "d", draft7, _echo).definition.parameters == draft7


def test_an_agent_tool_with_bad_parameters_is_refused() -> None:
    child = Agent(provider=ScriptedProvider("x"), name="child")
    with pytest.raises(ConfigurationError, match=r"at properties\.q\.type: 'str'"):
        AgentTool(
            child,
            name="c",
            description="C.",
            parameters={"type": "object", "properties": {"q": {"type": "str"}}},
        )


def test_the_fast_path_never_passes_what_the_meta_schema_refuses() -> None:
    """The walk that spares jsonschema's ~5-10 ms per schema only says "valid" when
    jsonschema agrees (on the benchmark's 120 BFCL schemas, pydantic's schemas and the
    invalid ones above)."""

    class Inner(BaseModel):
        x: int = Field(ge=0, description="x")

    class Outer(BaseModel):
        inner: Inner
        items: list[Inner | None]
        mapping: dict[str, float]

    lines = BENCH_SET.read_text().splitlines()
    schemas: list[Any] = [json.loads(line)["schema"] for line in lines]
    schemas += [Outer.model_json_schema(), Inner.model_json_schema()]
    schemas += [
        {"type": "dict"},
        {"required": ["a", "a"]},
        {"minItems": 1.5},
        {"exclusiveMinimum": True},
        {"readOnly": "yes"},
        {"properties": {"a": {"items": []}}},
        {"$defs": {"A": {"type": "strin"}}},
    ]
    meta = jsonschema.Draft202012Validator(jsonschema.Draft202012Validator.META_SCHEMA)
    for schema in schemas:
        if _plainly_valid(schema):
            assert meta.is_valid(schema), schema
        assert (schema_problem(schema) is None) == meta.is_valid(schema), schema


def test_typed_tools_and_output_types_build_valid_schemas() -> None:
    @tool
    def add(a: int, b: float = 1.0) -> str:
        """Add."""
        return str(a + b)

    assert schema_problem(add.definition.parameters) is None

    class Tree(BaseModel):
        name: str
        children: list[Tree] = []

    assert recursive_def(Tree.model_json_schema()) == "Tree"
    Agent(provider=ScriptedProvider("{}"), output_type=Tree)  # valid, and recursion is fine here


class HandMade:
    """A tool written against the protocol, with a schema in another dialect."""

    definition = ToolDefinition("lookup", "Look up.", {"type": "object", "required": "q"})

    async def execute(self, args: dict[str, Any]) -> list[Any]:
        return []


def test_a_hand_written_tool_with_a_bad_schema_is_refused_when_the_agent_is_built() -> None:
    with pytest.raises(ConfigurationError, match=r"tool 'lookup' parameters .* at required"):
        Agent(provider=ScriptedProvider("x"), tools=[HandMade()])
    fixed = HandMade()
    fixed.definition = ToolDefinition("lookup", "Look up.", {"type": "object"})
    Agent(provider=ScriptedProvider("x"), tools=[fixed])
    Agent(provider=ScriptedProvider("x"), tools=[fixed])  # the second agent re-checks nothing


def _nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


@pytest.mark.parametrize("levels", [300, 450])
def test_a_schema_nested_too_deeply_is_a_configuration_error_not_a_recursion_error(
    levels: int,
) -> None:
    # jsonschema's meta-schema check recursed past Python's stack on these (RecursionError
    # from tool_func, a 500 from serve's /v1 with such a tool or response_format; review7c).
    with pytest.raises(ConfigurationError, match=r"tool 't' parameters .* nested more than"):
        tool_func("t", "d", _nested(levels), _echo)
    problem = schema_problem(_nested(levels))
    assert problem is not None
    assert "properties.a.properties.a" in problem


def test_a_schema_nested_within_the_bound_is_still_checked_and_accepted() -> None:
    assert schema_problem(_nested(30)) is None
    bad = _nested(30)
    bad["properties"]["a"]["properties"]["a"]["type"] = "dict"
    assert "'dict' is not a JSON Schema type" in (schema_problem(bad) or "")
