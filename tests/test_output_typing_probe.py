"""Typed output and deps are typed end to end: mypy --strict sees ``result.output`` as the
output type, ``deps_as(Deps)`` as a ``Deps``, and ``Agent[Deps, Out]`` binds what
``run(..., deps=...)`` takes.

Runs mypy on a small probe file, the way a user's type checker sees ``Agent(output_type=...)``
and ``run(..., output_type=...)``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api", reason='needs mypy (the "dev" extra)')

PROBE = textwrap.dedent(
    """
    from typing import Any
    from pydantic import BaseModel
    from goagent_py import Agent, RunResult
    from goagent_py.testing import ScriptedProvider

    class City(BaseModel):
        name: str

    p = ScriptedProvider("ok")
    typed = Agent(provider=p, output_type=City)
    plain = Agent(provider=p)

    async def main() -> None:
        city = (await typed.run("x")).output
        name: str = city.name
        wrong: int = city.name
        text: str = (await plain.run("x")).output
        numbers: list[int] = (await plain.run("x", output_type=list[int])).output
        not_text: str = (await plain.run("x", output_type=City)).output
        synced: RunResult[City] = typed.run_sync("x")
        bare: RunResult = plain.run_sync("x")
        mixed: RunResult[str] = typed.run_sync("x")

    from dataclasses import dataclass
    from goagent_py.tool_context import ToolContext

    @dataclass
    class Deps:
        user_id: str

    def read(ctx: ToolContext) -> int:
        return ctx.deps_as(Deps).user_id

    with_deps = Agent(provider=p, deps_type=Deps, output_type=City)

    async def typed_deps() -> None:
        city: City = (await with_deps.run("x", deps=Deps("u"))).output
        await with_deps.run("x", deps="u")
        same: Agent[Deps, City] = with_deps
        other: Agent[str, City] = with_deps
        anything: Agent[Any, str] = plain
        await plain.run("x", deps=3)
    """
)


@pytest.mark.slow
def test_mypy_strict_sees_the_output_type(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    cache = Path(__file__).resolve().parents[1] / ".mypy_cache"
    out, err, status = mypy_api.run(["--strict", "--cache-dir", str(cache), str(probe)])
    assert status == 1, out + err
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert any(":17: error:" in e and '"str"' in e and '"int"' in e for e in errors), out
    assert any(":20: error:" in e and '"City"' in e and '"str"' in e for e in errors), out
    assert any(":23: error:" in e and "RunResult[City]" in e for e in errors), out
    assert any(":33: error:" in e and '"str"' in e and '"int"' in e for e in errors), out
    # Agent[Deps, Out]: deps_type binds the deps a run takes; an agent without one takes any.
    assert any(":39: error:" in e and 'overload variant of "run"' in e for e in errors), out
    assert any(":41: error:" in e and "Agent[str, City]" in e for e in errors), out
    assert len(errors) == 6, out  # the rest type-checks: output is City, str, list[int]
