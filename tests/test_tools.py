"""Tools: @tool schemas from hints and docstrings, validation, tool_func, schema_from."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import threading
from typing import Annotated, Literal

import pydantic
import pytest
from typing_extensions import TypedDict

from goagent_py import (
    ConfigurationError,
    ImageBlock,
    TextBlock,
    Tool,
    ToolArgumentsError,
    schema_from,
    tool,
    tool_blocks_func,
    tool_func,
)
from goagent_py.tools import parse_docstring


class Op(enum.StrEnum):
    ADD = "add"
    SUB = "sub"


class Point(pydantic.BaseModel):
    x: int
    y: int = 0


@tool
def calculate(op: Op, a: float, b: float = 1.0) -> str:
    """Do arithmetic on two numbers.

    Use it for sums and differences.

    Args:
        op: which operation
            to apply.
        a: the first operand.
        b: the second operand.

    Returns:
        The result as text.
    """
    return str(a + b if op is Op.ADD else a - b)


def test_tool_schema_from_hints_and_docstring() -> None:
    d = calculate.definition
    assert d.name == "calculate"
    assert d.description == "Do arithmetic on two numbers.\n\nUse it for sums and differences."
    props = d.parameters["properties"]
    assert d.parameters["type"] == "object"
    assert d.parameters["required"] == ["op", "a"]
    assert props["a"] == {"type": "number", "description": "the first operand."}
    assert props["b"]["default"] == 1.0
    assert props["op"]["description"] == "which operation to apply."
    assert "title" not in str(d.parameters)


async def test_tool_validates_and_coerces_arguments() -> None:
    assert await calculate.execute({"op": "add", "a": "2", "b": 3}) == [TextBlock("5.0")]
    with pytest.raises(ToolArgumentsError, match=r"op: Input should be 'add' or 'sub'"):
        await calculate.execute({"op": "mul", "a": 1})
    with pytest.raises(ToolArgumentsError, match="a: Field required"):
        await calculate.execute({"op": "add"})
    with pytest.raises(ToolArgumentsError, match="extra: Extra inputs are not permitted"):
        await calculate.execute({"op": "add", "a": 1, "extra": 1})


async def test_async_tool_with_model_argument_and_overrides() -> None:
    @tool(name="move", description="Move a point.")
    async def move_point(p: Point, dx: Annotated[int, pydantic.Field(ge=0)]) -> dict[str, int]:
        return {"x": p.x + dx, "y": p.y}

    assert move_point.definition.name == "move"
    assert move_point.definition.description == "Move a point."
    out = await move_point.execute({"p": {"x": 1}, "dx": 2})
    assert out == [TextBlock('{"x":3,"y":0}')]
    with pytest.raises(ToolArgumentsError, match="greater than or equal to 0"):
        await move_point.execute({"p": {"x": 1}, "dx": -1})


async def test_sync_tool_runs_in_a_worker_thread() -> None:
    seen: list[str] = []

    @tool
    def where() -> str:
        """Say which thread runs this."""
        seen.append(threading.current_thread().name)
        return "ok"

    assert await where.execute({}) == [TextBlock("ok")]
    assert seen[0] != threading.main_thread().name


async def test_tool_can_return_blocks() -> None:
    @tool
    def picture() -> list[ImageBlock]:
        """Return a picture."""
        return [ImageBlock(b"GIF89a", "image/gif")]

    assert await picture.execute({}) == [ImageBlock(b"GIF89a", "image/gif")]


def test_tool_rejects_var_args_and_bad_names() -> None:
    def star(*args: int) -> str:
        return ""

    with pytest.raises(ConfigurationError, match="named parameters"):
        tool(star)
    with pytest.raises(ConfigurationError, match="invalid tool name"):
        tool(name="has space")(calculate.definition.__class__)


async def test_tool_func_sync_and_async() -> None:
    echo = tool_func("echo", "Echo.", None, lambda args: str(args["v"]))

    async def shout(args: dict[str, object]) -> str:
        await asyncio.sleep(0)
        return str(args["v"]).upper()

    loud = tool_func("shout", "Shout.", {"type": "object"}, shout)
    assert isinstance(echo, Tool)
    assert echo.definition.parameters == {"type": "object", "properties": {}}
    assert await echo.execute({"v": 1}) == [TextBlock("1")]
    assert await loud.execute({"v": "a"}) == [TextBlock("A")]


async def test_tool_func_propagates_errors_and_checks_return_type() -> None:
    def boom(args: dict[str, object]) -> str:
        raise ValueError("nope")

    with pytest.raises(ValueError, match="nope"):
        await tool_func("boom", "", None, boom).execute({})
    bad = tool_func("bad", "", None, lambda a: 3)  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigurationError, match="must return str"):
        await bad.execute({})


async def test_tool_blocks_func_passes_blocks_through() -> None:
    blocks = [TextBlock("a"), ImageBlock(b"x", "image/png")]
    t = tool_blocks_func("b", "", None, lambda args: blocks)
    assert await t.execute({}) == blocks


def test_schema_from_model_dataclass_typeddict_and_none() -> None:
    @dataclasses.dataclass
    class Args:
        city: str
        unit: Literal["c", "f"] = "c"

    class TD(TypedDict):
        title: str
        tags: list[str]

    assert schema_from(None) == {"type": "object", "properties": {}}
    dc = schema_from(Args)
    assert dc["required"] == ["city"]
    assert dc["properties"]["unit"]["enum"] == ["c", "f"]
    td = schema_from(TD)
    # a property named "title" survives title-stripping
    assert set(td["properties"]) == {"title", "tags"}
    assert td["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    assert schema_from(Point)["required"] == ["x"]
    with pytest.raises(ConfigurationError, match="must describe an object"):
        schema_from(int)


def test_parse_docstring_sections() -> None:
    desc, args = parse_docstring(
        """Summary line.

        More text.

        Args:
            path (str): where
                it is.
            *names: many.

        Raises:
            ValueError: never.
        """
    )
    assert desc == "Summary line.\n\nMore text."
    assert args == {"path": "where it is.", "names": "many."}
