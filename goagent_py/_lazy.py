"""Public names loaded on first access (PEP 562), for packages whose modules need extras or
cost import time: the package maps each name to its module and delegates its module-level
``__getattr__`` and ``__dir__`` here."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["lazy_dir", "lazy_load"]


def lazy_load(package: str, names: Mapping[str, str], name: str) -> Any:
    """``name`` from its module in ``names``, kept in ``package`` for the next access.

    Raises:
        AttributeError: ``package`` has no such public name.
    """
    module = names.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    setattr(sys.modules[package], name, value)
    return value


def lazy_dir(package: str, names: Mapping[str, str]) -> list[str]:
    """What ``dir(package)`` lists: what is loaded and what can be."""
    return sorted({*vars(sys.modules[package]), *names})
