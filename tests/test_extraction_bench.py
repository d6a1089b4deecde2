"""bench/extraction.py asks for the task's own schema: the output type it builds for a task
refuses what the task's JSON schema refuses, so the grammar built from that type and the
``jsonschema`` check the benchmark counts with agree.

The first run of the benchmark counted 7 of 120 grammar outputs as invalid; 6 of them were
values the grammar had allowed (an ``enum`` field typed ``str``, a nested object typed
``dict``) and the task's schema refused.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest

from goagent_py.output import OutputSpec

BENCH = Path(__file__).resolve().parents[1] / "bench" / "extraction.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("extraction_bench", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH_MODULE = _bench()
TASKS: list[dict[str, Any]] = [
    json.loads(line) for line in BENCH_MODULE.DATA.read_text().splitlines()
]


def _violations(schema: dict[str, Any], valid: Any) -> list[Any]:
    """Values that break ``schema`` at one place each, built from ``valid``."""
    out: list[Any] = []
    if "enum" in schema:
        out.append("surely-not-" + str(schema["enum"][0]))
    if schema.get("type") == "array":
        items = schema.get("items", {})
        out += [[bad] for bad in _violations(items, _example(items))]
    if schema.get("type") == "object":
        for name in schema.get("required", []):
            out.append({k: v for k, v in valid.items() if k != name})
        for name, sub in schema.get("properties", {}).items():
            out += [{**valid, name: bad} for bad in _violations(sub, _example(sub))]
    return out


def _example(schema: dict[str, Any]) -> Any:
    """A value valid for ``schema`` (every property filled in)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "string")
    if kind == "object":
        return {k: _example(v) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [_example(schema.get("items", {}))]
    return {"string": "x", "integer": 1, "number": 1.5, "boolean": True}[kind]


@pytest.mark.parametrize("task", TASKS, ids=[t["id"] for t in TASKS])
def test_the_output_type_refuses_what_the_task_schema_refuses(task: dict[str, Any]) -> None:
    spec: OutputSpec[Any] = OutputSpec(BENCH_MODULE.model_for(task))
    valid = _example(task["schema"])
    jsonschema.validate(valid, task["schema"])
    spec.parse(json.dumps(valid))
    for bad in _violations(task["schema"], valid):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, task["schema"])
        with pytest.raises(ValueError, match=r"Field required|Input should be"):
            spec.parse(json.dumps(bad))


def test_enums_and_nested_objects_are_in_the_schema_the_grammar_is_built_from() -> None:
    by_id = {t["id"]: t for t in TASKS}
    schema = OutputSpec(BENCH_MODULE.model_for(by_id["simple_python_34"])).schema
    assert schema["properties"]["exploration_type"]["anyOf"][0]["enum"] == [
        "nature",
        "urban",
        "history",
        "culture",
    ]
    schema = OutputSpec(BENCH_MODULE.model_for(by_id["simple_python_96"])).schema
    (nested,) = schema["$defs"].values()
    assert nested["required"] == ["field", "operation", "value"]
