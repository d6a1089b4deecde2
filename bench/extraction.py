"""Typed extraction on the embedded model: schema-valid share and field accuracy.

Run it (takes a few minutes of CPU; ``nice`` it on a shared machine):

    nice python bench/extraction.py            # all 120 tasks
    nice python bench/extraction.py --limit 40 # a subset
    nice python bench/extraction.py --modes native  # the grammar only (prompted is the slow one)

Each task of ``bench/extraction_data/bfcl_simple.jsonl`` (120 questions of BFCL's
``simple_python`` category, with their labelled argument values; ``make_set.py`` there says how
the set was built) asks SmolLM2-135M-Instruct through ``LlamaCppProvider`` to fill a function's
arguments from one sentence, as typed output. Two runs per task, temperature 0, seed 0,
``output_retries=0``:

- ``native``: the schema becomes a llama.cpp grammar (the provider's default mode);
- ``prompted``: the same model, the schema in the system prompt, no grammar.

Prints per mode: the share of schema-valid outputs (the run returned an output, and it
validates against the task's JSON schema with ``jsonschema``), the share of labelled fields
right (BFCL's acceptable values; strings compared lower-cased without spaces and punctuation,
numbers by value), and the share of tasks with every labelled field right.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any, Literal

import jsonschema
from pydantic import BaseModel, Field, create_model

from goagent_py import Agent, OutputValidationError
from goagent_py.providers import LlamaCppProvider

DATA = Path(__file__).with_name("extraction_data") / "bfcl_simple.jsonl"
_PY = {"string": str, "integer": int, "number": float, "boolean": bool}


def _field_type(schema: dict[str, Any], name: str) -> Any:
    """The Python type whose JSON schema is ``schema``: an ``enum`` becomes a ``Literal`` and an
    object with properties a model of its own, so the grammar built from the output type admits
    only what ``jsonschema`` accepts (a bare ``str`` or ``dict`` let the model write values the
    task's schema refuses: 6 of the 7 invalid outputs of the first run)."""
    if "enum" in schema:
        return Literal[tuple(schema["enum"])]
    kind = schema.get("type", "string")
    if kind == "array":
        return list[_field_type(schema.get("items", {}), name)]  # type: ignore[misc]
    if kind == "object":
        return _model(schema, name) if schema.get("properties") else dict[str, Any]
    return _PY.get(kind, Any)


def _model(schema: dict[str, Any], name: str) -> type[BaseModel]:
    required = set(schema.get("required", []))
    fields: dict[str, Any] = {}
    for field, sub in schema["properties"].items():
        kind = _field_type(sub, f"{name}_{field}")
        description = sub.get("description")
        if field in required:
            fields[field] = (kind, Field(description=description))
        else:
            fields[field] = (kind | None, Field(None, description=description))
    return create_model(name, **fields)


def model_for(task: dict[str, Any]) -> type[BaseModel]:
    """A pydantic model for the task's schema (required fields required, enums as literals,
    nested objects as nested models)."""
    name = re.sub(r"\W", "_", task["function"]).strip("_") or "Arguments"
    return _model(task["schema"], name)


def _norm(value: Any) -> Any:
    if isinstance(value, str):
        return re.sub(r"[\s\W_]", "", value.lower())
    if isinstance(value, list):
        return [_norm(v) for v in value]
    return value


def field_right(value: Any, acceptable: list[Any]) -> bool:
    return any(_norm(value) == _norm(a) for a in acceptable)


async def run_task(provider: LlamaCppProvider, task: dict[str, Any], mode: str) -> dict[str, Any]:
    agent: Agent[Any, Any] = Agent(
        provider=provider,
        output_type=model_for(task),
        output_mode=mode,  # type: ignore[arg-type]
        output_retries=0,
        system_prompt=(
            f"Fill in the arguments of the function {task['function']}: {task['description']} "
            "Take the values from the user's message."
        ),
    )
    try:
        result = await agent.run(task["text"])
    except OutputValidationError:
        return {"valid": False, "right": 0}
    data = result.output.model_dump(exclude_none=True)
    try:
        jsonschema.validate(data, task["schema"])
    except jsonschema.ValidationError:
        return {"valid": False, "right": 0}
    right = sum(field_right(data.get(k), v) for k, v in task["labels"].items())
    return {"valid": True, "right": right}


_LABELS = {"native": "grammar (native)", "prompted": "prompted JSON, no grammar"}


def report(tasks: list[dict[str, Any]], outcomes: dict[str, list[dict[str, Any]]]) -> None:
    done = tasks[: min(len(got) for got in outcomes.values())]
    labelled = sum(len(t["labels"]) for t in done)
    print(f"after {len(done)} tasks ({labelled} labelled fields):", flush=True)
    for mode in outcomes:
        label = _LABELS[mode]
        got = outcomes[mode][: len(done)]
        valid = sum(o["valid"] for o in got)
        right = sum(o["right"] for o in got)
        whole = sum(o["right"] == len(t["labels"]) for o, t in zip(got, done, strict=True))
        print(
            f"  {label:27s} schema-valid {valid}/{len(done)} ({valid / len(done):.0%})  "
            f"fields right {right}/{labelled} ({right / labelled:.0%})  "
            f"tasks all right {whole}/{len(done)} ({whole / len(done):.0%})",
            flush=True,
        )


async def main(limit: int, modes: list[str]) -> None:
    tasks = [json.loads(line) for line in DATA.read_text().splitlines()][:limit]
    provider = LlamaCppProvider(temperature=0.0, seed=0, max_tokens=128)
    print(f"{len(tasks)} tasks, SmolLM2-135M-Instruct, temperature 0, max_tokens 128", flush=True)
    outcomes: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    start = time.perf_counter()
    # Both modes task by task, so a run stopped early still compares them on the same tasks.
    for i, task in enumerate(tasks, 1):
        for mode in modes:
            outcomes[mode].append(await run_task(provider, task, mode))
        if i % 10 == 0 or i == len(tasks):
            report(tasks, outcomes)
            print(f"  [{time.perf_counter() - start:.0f} s]", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=10_000)
    parser.add_argument(
        "--modes",
        default="native,prompted",
        help="comma-separated: native (the grammar), prompted (no grammar; the slow one)",
    )
    args = parser.parse_args()
    modes = args.modes.split(",")
    if not modes or not set(modes) <= set(_LABELS):
        parser.error(f"--modes takes {', '.join(_LABELS)}, got {args.modes!r}")
    asyncio.run(main(args.limit, modes))
