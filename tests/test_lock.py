"""The locks CI installs from agree with pyproject.toml (docs/development.md, "The lock").

``scripts/lock.sh`` writes them; a requirement added to or narrowed in pyproject.toml without a
refresh fails here, instead of CI installing a tree the ranges no longer allow.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
FULL_LOCK = ROOT / "requirements-lock.txt"
CORE_LOCK = ROOT / "requirements-core-lock.txt"
BUILD_LOCK = ROOT / "requirements-build.txt"

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)", re.MULTILINE)


def pins(text: str) -> dict[str, Version]:
    """Each package a lock pins, by its canonical name."""
    return {canonicalize_name(name): Version(version) for name, version in _PIN.findall(text)}


def locked_extras() -> list[str]:
    """The extras scripts/lock.sh locks (its EXTRAS line: the one list)."""
    match = re.search(r"^EXTRAS=\(([^)]*)\)", (ROOT / "scripts/lock.sh").read_text(), re.M)
    assert match, "scripts/lock.sh has no EXTRAS=(...) line"
    return match.group(1).split()


def requirements(extras: Iterable[str]) -> list[tuple[Requirement, str]]:
    """The project's requirements and those of ``extras``, each with the extra it serves."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = [(Requirement(r), "") for r in project["dependencies"]]
    for extra in extras:
        found += [(Requirement(r), extra) for r in project["optional-dependencies"][extra]]
    return found


def unmet(needed: Iterable[tuple[Requirement, str]], pinned: dict[str, Version]) -> list[str]:
    """The requirements the pins leave out or pin outside their range."""
    problems = []
    for req, extra in needed:
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue  # not for this platform (or Python)
        version = pinned.get(canonicalize_name(req.name))
        if version is None:
            problems.append(f"{req} ({extra or 'core'}): not in the lock")
        elif not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req} ({extra or 'core'}): the lock has {version}")
    return problems


def test_the_check_finds_a_requirement_the_lock_misses_or_pins_outside_its_range() -> None:
    needed = [(Requirement("httpx>=0.27"), ""), (Requirement("pypdf>=4"), "pdf")]
    assert unmet(needed, pins("httpx==0.28.1 \\\n    --hash=sha256:ab\n")) == [
        "pypdf>=4 (pdf): not in the lock"
    ]
    assert unmet(needed, pins("httpx==0.26.0\npypdf==5.0\n")) == [
        "httpx>=0.27 (core): the lock has 0.26.0"
    ]


def test_the_full_lock_meets_every_requirement_ci_installs() -> None:
    problems = unmet(requirements(locked_extras()), pins(FULL_LOCK.read_text()))
    assert not problems, "refresh the locks: bash scripts/lock.sh\n" + "\n".join(problems)


def test_the_core_lock_meets_the_core_and_dev_requirements() -> None:
    problems = unmet(requirements(["dev"]), pins(CORE_LOCK.read_text()))
    assert not problems, "refresh the locks: bash scripts/lock.sh\n" + "\n".join(problems)


def test_the_core_lock_pins_the_full_locks_versions() -> None:
    full, core = pins(FULL_LOCK.read_text()), pins(CORE_LOCK.read_text())
    assert {name: full.get(name) for name in core} == core


def test_the_full_lock_pins_pip_which_install_sh_installs_first() -> None:
    assert "pip" in pins(FULL_LOCK.read_text())


def test_the_locks_keep_the_constraints() -> None:
    constraints = [
        (Requirement(line), "")
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert not unmet(constraints, pins(FULL_LOCK.read_text()))


@pytest.mark.parametrize("lock", [FULL_LOCK, CORE_LOCK])
def test_every_pin_of_an_installed_lock_carries_a_hash(lock: Path) -> None:
    entries = re.split(r"\n(?=[A-Za-z0-9])", lock.read_text())
    unhashed = [e.split()[0] for e in entries if _PIN.match(e) and "--hash=sha256:" not in e]
    assert unhashed == []


def test_the_build_constraints_agree_with_the_lock() -> None:
    full, build = pins(FULL_LOCK.read_text()), pins(BUILD_LOCK.read_text())
    assert {"scikit-build-core", "hatchling"} <= set(build)
    assert {name: v for name, v in build.items() if name in full} == {
        name: full[name] for name in build if name in full
    }
