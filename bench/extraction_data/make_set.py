"""Build bench/extraction_data/bfcl_simple.jsonl from BFCL's "simple_python" category.

Run it (needs the bfcl-eval wheel's data folder, which ships in the wheel on PyPI):

    pip download bfcl-eval==2026.3.23 --no-deps -d /tmp/bfcl
    unzip -q /tmp/bfcl/bfcl_eval-*.whl -d /tmp/bfcl/x
    python bench/extraction_data/make_set.py /tmp/bfcl/x/bfcl_eval/data

Each BFCL entry is a user question, one function definition and the acceptable argument values
(Berkeley Function Calling Leaderboard, Apache 2.0). An entry becomes an extraction task: the
question is the text, the function's parameters the schema to fill, the ground truth the
labels. BFCL writes its schemas in its own dialect (``dict``, ``float``, ``tuple``, ``any``);
they are translated to JSON Schema here, since goagent-py refuses the originals. Entries whose
labels are not plain JSON values are skipped; the first ``LIMIT`` that remain are kept.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

LIMIT = 120
_TYPES = {"dict": "object", "float": "number", "tuple": "array", "integer": "integer"}
_SIMPLE = {"string", "integer", "number", "boolean", "array", "object"}


def to_json_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """BFCL's dialect as JSON Schema, or None when it uses a type JSON Schema cannot say."""
    out: dict[str, Any] = {}
    kind = schema.get("type")
    if kind is not None:
        kind = _TYPES.get(kind, kind)
        if kind not in _SIMPLE:
            return None
        out["type"] = kind
    for key in ("description", "enum", "required"):
        if key in schema:
            out[key] = schema[key]
    if "properties" in schema:
        props = {}
        for name, sub in schema["properties"].items():
            converted = to_json_schema(sub)
            if converted is None:
                return None
            props[name] = converted
        out["properties"] = props
    if "items" in schema:
        items = to_json_schema(schema["items"])
        if items is None:
            return None
        out["items"] = items
    return out


def main(data: Path) -> None:
    questions = [json.loads(line) for line in (data / "BFCL_v4_simple_python.json").open()]
    answers = {
        a["id"]: a
        for a in map(json.loads, (data / "possible_answer" / "BFCL_v4_simple_python.json").open())
    }
    kept = []
    for q in questions:
        (function,) = q["function"]
        schema = to_json_schema(function["parameters"])
        (truth,) = answers[q["id"]]["ground_truth"]
        (args,) = truth.values()
        if schema is None or not schema.get("properties"):
            continue
        # The labelled fields: the required ones, each with its acceptable values.
        labels = {name: args[name] for name in schema.get("required", []) if name in args}
        if not labels:
            continue
        kept.append(
            {
                "id": q["id"],
                "text": q["question"][0][0]["content"],
                "function": function["name"],
                "description": function["description"],
                "schema": schema,
                "labels": labels,
            }
        )
        if len(kept) == LIMIT:
            break
    out = Path(__file__).with_name("bfcl_simple.jsonl")
    out.write_text("".join(json.dumps(k) + "\n" for k in kept))
    print(f"{len(kept)} tasks -> {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
