"""The one place that imports the ``a2a-sdk`` (lazily), so a missing extra is a clear error.

goagent-py speaks A2A protocol 1.0 through the SDK's 1.x line (the ``a2a`` extra pins 1.3.*):
protobuf types (``a2a.types``), ``DefaultRequestHandler`` and the Starlette routes on the server
side, ``create_client`` on the client side. The 0.x SDKs (pydantic types, protocol 0.2/0.3) are
refused here with a clear error, not a failure deep inside.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType

from goagent_py.errors import ConfigurationError, MissingExtraError

__all__ = ["require", "sdk_version"]


def sdk_version() -> str:
    """The installed SDK's version, or "" when it is not installed."""
    try:
        return version("a2a-sdk")
    except PackageNotFoundError:
        return ""


def require(module: str) -> ModuleType:
    """Import ``module`` of the SDK, or raise :class:`MissingExtraError` (not installed) or
    :class:`ConfigurationError` (an SDK of another major version)."""
    installed = sdk_version()
    if not installed:
        raise MissingExtraError("a2a-sdk", "a2a", feature="A2A agents")
    if installed.split(".", 1)[0] != "1":
        raise ConfigurationError(
            f"goagent_py.a2a needs the a2a-sdk 1.x (protocol 1.0), found {installed}: "
            'pip install -U "goagent-py[a2a]"'
        )
    try:
        return import_module(module)
    except ImportError as exc:  # the http-server part (starlette, sse-starlette) is missing
        raise MissingExtraError(exc.name or "a2a-sdk[http-server]", "a2a") from exc
