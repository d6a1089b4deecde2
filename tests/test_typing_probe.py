"""The constructor is typed: mypy --strict flags a misspelled setting and a wrongly typed value.

Runs mypy on a small probe file, the way a user's type checker sees ``Agent(...)``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api", reason='needs mypy (the "dev" extra)')

PROBE = textwrap.dedent(
    """
    from goagent_py import Agent, CircuitBreakerConfig
    from goagent_py.testing import ScriptedProvider

    p = ScriptedProvider("ok")
    good = Agent(provider=p, max_iterations=5, circuit_breaker=CircuitBreakerConfig(3, 10.0))
    typo = Agent(provider=p, max_iteration=5)
    wrong = Agent(provider=p, tool_timeout="soon")
    tuple_breaker = Agent(provider=p, circuit_breaker=(3, 10.0))

    async def main() -> str:
        result = await good.run("hi")
        return result.text
    """
)


@pytest.mark.slow
def test_mypy_strict_flags_a_misspelled_setting_and_a_wrong_type(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    # The project's own mypy cache (CI runs mypy first), so only the probe is checked anew.
    cache = Path(__file__).resolve().parents[1] / ".mypy_cache"
    out, err, status = mypy_api.run(["--strict", "--cache-dir", str(cache), str(probe)])
    assert status == 1, out + err
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert any(':7: error: Unexpected keyword argument "max_iteration"' in e for e in errors), out
    assert any(":8: error:" in e and '"tool_timeout"' in e for e in errors), out
    assert any(":9: error:" in e and '"circuit_breaker"' in e for e in errors), out
    assert len(errors) == 3, out  # the good agent and the run's result type-check
