"""What checking tool schemas against the JSON Schema meta-schema costs at construction.

Run it:

    python bench/schema_check.py

Builds 100 ``tool_func`` tools with five-property schemas (each checked when built) and times
them, beside ``jsonschema``'s own 2020-12 meta-schema validator on the same 100 schemas (what
every check would cost without the walk that judges common schemas first). Prints the median
of 5 rounds of each.
"""

from __future__ import annotations

import statistics
import time

import jsonschema

from goagent_py import tool_func

SCHEMAS = [
    {
        "type": "object",
        "properties": {f"x{j}": {"type": "string", "description": f"field {j} of tool {i}"}
                       for j in range(5)},
        "required": ["x0"],
    }
    for i in range(100)
]  # fmt: skip


def _answer(args: dict[str, object]) -> str:
    return "ok"


def tools() -> float:
    start = time.perf_counter()
    for i, schema in enumerate(SCHEMAS):
        tool_func(f"tool{i}", "A tool.", schema, _answer)
    return time.perf_counter() - start


def meta_schema_only() -> float:
    validator = jsonschema.Draft202012Validator(jsonschema.Draft202012Validator.META_SCHEMA)
    start = time.perf_counter()
    for schema in SCHEMAS:
        validator.is_valid(schema)
    return time.perf_counter() - start


if __name__ == "__main__":
    tools(), meta_schema_only()  # warm: imports, the validator
    ours = statistics.median(tools() for _ in range(5))
    theirs = statistics.median(meta_schema_only() for _ in range(5))
    print(f"100 tool_func tools, each schema checked: {ours * 1000:.1f} ms")
    print(f"jsonschema's meta-schema validator alone, same 100 schemas: {theirs * 1000:.0f} ms")
