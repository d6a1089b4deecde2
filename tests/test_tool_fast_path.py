"""@tool's pydantic-free path for common signatures gives exactly what pydantic gives.

Plain signatures (str, int, float, bool, their ``| None``, ``Any``; JSON-plain defaults) are
described and validated without pydantic; these tests hold that path to pydantic's own output
(the schema, key order included, and the validated arguments or the error) on the same function.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Annotated, Any, Optional, Union

import pydantic
import pytest

from goagent_py import tools
from goagent_py.errors import ToolArgumentsError


def plain(a: int, b: str, c: float = 1.5, d: bool = True, e: int | None = None) -> str:
    """Plain.

    Args:
        a: the a.
        e: the e.
        b:
    """
    return ""


def untyped(  # type: ignore[no-untyped-def]
    x,
    y=3,
    z: Any = None,
    w: Optional[str] = "w",  # noqa: UP045
    v: Union[None, float] = 2,  # noqa: UP007, RUF036
) -> str:
    """Untyped."""
    return ""


def empty() -> str:
    """Nothing."""
    return ""


def unicode_defaults(name: str = "é\u2028", big: int = 10**30, neg: float = -0.0) -> str:
    """Defaults JSON must carry as they are."""
    return ""


PLAIN = [plain, untyped, empty, unicode_defaults]

ARGS: list[Any] = [
    {},
    {"a": 1, "b": "x"},
    {"a": 1, "b": "x", "c": 2.5, "d": False, "e": 7},
    {"a": 1, "b": "x", "e": None},
    {"a": "1", "b": "x"},  # coerced by pydantic
    {"a": 1.0, "b": "x"},
    {"a": True, "b": "x"},
    {"a": 1, "b": "x", "c": 2},  # int for a float: pydantic gives 2.0
    {"a": 1, "b": 5},
    {"a": 1, "b": "x", "extra": 1},
    {"a": None, "b": "x"},
    {"b": "x"},
    {"x": [1, {"k": 2}]},
    {"x": None, "y": "s", "z": object, "w": None, "v": 1},
    {"x": 1, "v": 1.25, "w": "q"},
    {"name": "n", "big": 2**70, "neg": float("nan")},
    {"name": 1},
    {"big": "3"},
]


def pydantic_validate(schema: tools._Schema, args: dict[str, Any]) -> dict[str, Any] | str:
    try:
        validated = schema.model.model_validate(args)
    except pydantic.ValidationError as exc:
        return tools._format_validation_error(exc)
    return {k: getattr(validated, k) for k in schema.field_names}


@pytest.mark.parametrize("fn", PLAIN, ids=lambda f: f.__name__)
def test_plain_schema_is_pydantics_key_for_key(fn: Any) -> None:
    schema = tools._Schema(fn, ())
    assert schema._fast is not None
    fast = schema.parameters("t")
    assert schema._model is None  # described without building the pydantic model
    expected = tools._model_parameters(schema.model, "t")
    assert json.dumps(fast) == json.dumps(expected)
    assert schema.field_names == tuple(schema.model.model_fields)


@pytest.mark.parametrize("fn", PLAIN, ids=lambda f: f.__name__)
def test_plain_validation_is_pydantics(fn: Any) -> None:
    for args in ARGS:
        expected = pydantic_validate(tools._Schema(fn, ()), args)
        if isinstance(expected, str):
            with pytest.raises(ToolArgumentsError) as caught:
                tools._Schema(fn, ()).validate("t", args)
            assert expected in str(caught.value)
            continue
        got = tools._Schema(fn, ()).validate("t", args)
        assert list(got) == list(expected)
        for key in got:
            assert type(got[key]) is type(expected[key]), (args, key)
            assert got[key] == expected[key] or got[key] != got[key], (args, key)


def test_valid_plain_arguments_skip_the_model() -> None:
    schema = tools._Schema(plain, ())
    assert schema.validate("t", {"a": 1, "b": "x"}) == {
        "a": 1,
        "b": "x",
        "c": 1.5,
        "d": True,
        "e": None,
    }
    assert schema._model is None
    with pytest.raises(ToolArgumentsError, match="a: Input should be a valid integer"):
        schema.validate("t", {"a": "one", "b": "x"})


def annotated(a: Annotated[int, pydantic.Field(ge=0)]) -> str:
    """Constrained."""
    return ""


def listy(a: list[int], b: int = 1) -> str:
    """A list."""
    return ""


def mutable_default(a: int, b: list[int] = []) -> str:  # noqa: B006
    """A mutable default (pydantic copies it)."""
    return ""


def shadowing(json: str) -> str:
    """A name of BaseModel's."""
    return ""


@pytest.mark.parametrize("fn", [annotated, listy, mutable_default, shadowing])
def test_other_signatures_are_pydantics(fn: Any) -> None:
    with pytest.warns() if fn is shadowing else _nothing():
        schema = tools._Schema(fn, ())
    assert schema._fast is None
    assert schema._model is not None  # built (and its errors raised) at decoration
    assert schema.parameters("t") == tools._model_parameters(schema.model, "t")


def test_names_pydantic_keeps_for_itself_are_listed() -> None:
    public = {n for n in dir(pydantic.BaseModel) if not n.startswith("_")}
    left = {n for n in public if not n.startswith("model_")}
    assert left <= tools._PYDANTIC_NAMES


def test_first_answer_with_a_plain_tool_does_not_import_pydantic() -> None:
    probe = (
        "import sys, goagent_py as ga\n"
        "from goagent_py.testing import ScriptedProvider, tool_call_response\n"
        "@ga.tool\n"
        "def add(a: int, b: int) -> int:\n"
        "    '''Add.'''\n"
        "    return a + b\n"
        "call = ga.ToolCall('c1', 'add', {'a': 2, 'b': 3})\n"
        "p = ScriptedProvider(tool_call_response(call), '5')\n"
        "assert ga.Agent(provider=p, tools=[add]).run_sync('2+3?').text == '5'\n"
        "names = ('pydantic', 'pydantic_core')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in names))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


HUGE = 10**5000  # beyond str(): left to pydantic_core

PLAIN_RESULTS: list[Any] = [
    0,
    -(2**63),
    2**64,
    HUGE,
    True,
    "",
    '\x7f\x00\x1f\u2028"\\/é\n\t\b\f\r',
    "\ud800",
    {"\udfff": 1},
    {"a": [1, None, True, "x"], "b": (1, ("t",)), "c": {}, "\n": "\u2028"},
    ("no", ["float", {"here": -1}]),
    [1.5, 1e20],
    {"deep": [[[{"f": float("nan")}]]]},
]


@pytest.mark.parametrize("value", PLAIN_RESULTS, ids=[f"r{i}" for i in range(len(PLAIN_RESULTS))])
def test_plain_results_are_written_as_pydantic_core_writes_them(value: Any) -> None:
    from pydantic_core import to_json

    from goagent_py._results import _stdlib_json, bounded_json

    try:
        expected = to_json(value, fallback=str).decode()
    except Exception as exc:
        with pytest.raises(type(exc)):
            bounded_json(value, 10**6)
        assert _stdlib_json(value) is None
        return
    assert bounded_json(value, 10**6) == expected
    assert _stdlib_json(value) in (expected, None)
    if not isinstance(value, list | dict) and value is not HUGE:  # no float: stdlib writes it
        assert _stdlib_json(value) == expected
