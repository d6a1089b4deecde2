"""The public face: __all__ is exact, every exception is exported, the import stays light."""

from __future__ import annotations

import inspect
import subprocess
import sys

import goagent_py
from goagent_py import errors


def test_all_is_sorted_and_matches_the_public_names() -> None:
    public = {n for n in vars(goagent_py) if not n.startswith("_") and n != "annotations"}
    modules = {n for n, v in vars(goagent_py).items() if inspect.ismodule(v)}
    assert sorted(goagent_py.__all__, key=str.lower) == sorted(goagent_py.__all__, key=str.lower)
    assert set(goagent_py.__all__) == (public - modules) | {"__version__"}


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
    import goagent_py.memory as memory
    import goagent_py.memory.vector as vector
    import goagent_py.providers as providers

    for module in (memory, vector, providers):
        assert list(module.__all__) == sorted(module.__all__)
        for name in module.__all__:
            assert getattr(module, name) is not None
