"""The public face: __all__ is exact, every exception is exported, the import stays light."""

from __future__ import annotations
import __future__

import importlib
import inspect
import os
import pkgutil
import subprocess
import sys
from types import ModuleType

import pytest

import goagent_py
from goagent_py import errors

# The public packages; each one's namespace must be exactly its ``__all__``.
PACKAGE_NAMES = [
    "goagent_py",
    "goagent_py.memory",
    "goagent_py.memory.storage",
    "goagent_py.memory.vector",
    "goagent_py.otel",
    "goagent_py.providers",
    "goagent_py.rag",
    "goagent_py.resilience",
]
PACKAGES = PACKAGE_NAMES
# Dunder names a package exports on purpose.
EXPORTED_DUNDERS = {"__version__"}


def _public_names(module: ModuleType) -> list[str]:
    """What ``from module import *`` should give: the namespace minus submodules and private names.

    Submodules are left out: they appear as attributes whenever anything imports them. Names a
    package loads lazily (a ``_LAZY`` table behind a module ``__getattr__``) count as present.
    """
    names = {
        name
        for name, value in vars(module).items()
        if (not name.startswith("_") or name in EXPORTED_DUNDERS)
        and not inspect.ismodule(value)
        and not isinstance(value, __future__._Feature)  # `from __future__ import annotations`
    }
    names |= set(getattr(module, "_LAZY", {}))
    return sorted(names, key=lambda n: (n.casefold(), n))


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_exactly_the_public_namespace_sorted_case_insensitively(name: str) -> None:
    module = importlib.import_module(name)
    assert list(module.__all__) == _public_names(module)


def test_the_namespace_check_can_fail() -> None:
    fake = ModuleType("fake")
    fake.__dict__.update(Zeta=1, alpha=2, helper=3, _private=4, os=os)
    fake.__dict__["__all__"] = ["alpha", "Zeta"]
    assert _public_names(fake) == ["alpha", "helper", "Zeta"]
    assert fake.__dict__["__all__"] != _public_names(fake)


def _exception_classes() -> dict[type[BaseException], ModuleType]:
    """Every exception class defined in a public goagent_py module that imports here."""
    found: dict[type[BaseException], ModuleType] = {}
    for info in pkgutil.walk_packages(goagent_py.__path__, "goagent_py."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:
            continue  # an optional extra is missing
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == module.__name__
            ):
                found[obj] = module
    return found


def test_every_exception_is_exported() -> None:
    exceptions = {
        name
        for name, obj in vars(errors).items()
        if inspect.isclass(obj)
        and issubclass(obj, BaseException)
        and obj.__module__ == errors.__name__
    }
    assert exceptions <= set(goagent_py.__all__)
    assert exceptions == set(errors.__all__)
    # An exception defined elsewhere is exported by its module, when the module has an __all__
    # (a private one, named with "_", is the module's own business).
    for cls, module in _exception_classes().items():
        exported = getattr(module, "__all__", None)
        if exported is not None and not cls.__name__.startswith("_"):
            assert cls.__name__ in exported, f"{module.__name__}.{cls.__name__}"


def test_every_error_derives_from_goagent_error() -> None:
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.GoAgentError)


def test_import_is_light() -> None:
    code = (
        "import sys, goagent_py, goagent_py.memory, goagent_py.memory.vector, goagent_py.providers,"
        " goagent_py.testing;"
        "heavy = [m for m in ('numpy', 'httpx', 'tenacity', 'opentelemetry', 'tiktoken', "
        "'torch', 'llama_cpp', 'sqlite_vec', 'psycopg', 'qdrant_client') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_subpackages_export_what_they_say() -> None:
    for name in PACKAGE_NAMES:
        module = importlib.import_module(name)
        for exported in module.__all__:
            assert getattr(module, exported) is not None, f"{name}.{exported}"


def test_provider_from_string_is_importable_from_the_package_and_loads_lazily() -> None:
    # The README's quick start builds its provider with it; it lives in goagent_py.providers.
    code = (
        "import sys, goagent_py;"
        "before = 'goagent_py.providers' in sys.modules;"
        "from goagent_py import provider_from_string;"
        "from goagent_py.providers import provider_from_string as original;"
        "print(before, provider_from_string is original, 'provider_from_string' in dir(goagent_py))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.stdout.split() == ["False", "True", "True"], out.stderr
    assert "provider_from_string" in goagent_py.__all__
