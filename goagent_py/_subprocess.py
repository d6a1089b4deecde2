"""The environment of a child process: an allowlist, never the parent's secrets (private).

MCP stdio servers and a shell tool run programs the model can influence. Handing them
``os.environ`` would hand them every API key of this process (``ANTHROPIC_API_KEY``,
``OPENAI_API_KEY``, cloud credentials...). :func:`safe_env` builds the child's environment from
what a program needs to run at all (``PATH``, ``HOME``, locale, terminal, temp directory, user,
shell, time zone, and on Windows what its C runtime and sockets need), plus what the caller
passes explicitly. Start children with it and without a shell:
``subprocess.Popen([program, *args], env=safe_env(...), shell=False)``.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping

from goagent_py.errors import ConfigurationError

__all__ = ["BASE_ALLOWLIST", "WINDOWS_ALLOWLIST", "safe_env"]

BASE_ALLOWLIST = frozenset(
    {"PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TMPDIR", "USER", "LOGNAME", "SHELL", "TZ"}
)
"""Inherited everywhere; ``LC_*`` (the locale categories) is inherited too."""

WINDOWS_ALLOWLIST = frozenset(
    {
        "SYSTEMROOT",  # without it Winsock and the C runtime fail in odd ways
        "SYSTEMDRIVE",
        "WINDIR",
        "COMSPEC",
        "PATHEXT",
        "TEMP",
        "TMP",
        "USERNAME",
        "USERPROFILE",
        "HOMEDRIVE",
        "HOMEPATH",
        "APPDATA",
        "LOCALAPPDATA",
        "PROGRAMDATA",
        "PROGRAMFILES",
        "PROGRAMFILES(X86)",
        "NUMBER_OF_PROCESSORS",
        "PROCESSOR_ARCHITECTURE",
        "OS",
    }
)
"""Inherited on Windows as well (names compared without case there)."""

# Names that hold credentials: never inherited through ``allow`` (pass such a value in
# ``extra`` when a child really needs it, so that it is a visible decision).
_SECRET_NAME = re.compile(
    r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE|AUTH|SESSION|COOKIE)"
)
_VALID_NAME = re.compile(r"^[^=\x00]+$")


def safe_env(
    extra: Mapping[str, str] | None = None,
    *,
    allow: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for a child process: the allowlisted variables, then ``extra``.

    Args:
        extra: variables to set in the child (they win over inherited ones). A credential the
            child needs (an MCP server's own token) goes here, deliberately.
        allow: more names to inherit from the parent when set there (``"NODE_OPTIONS"``, or a
            prefix pattern such as ``"PYTHON*"``). Names that look like credentials (``*KEY*``,
            ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``...) are refused here.
        environ: the parent environment to pick from (``os.environ`` by default; for tests).

    Returns:
        A new dict, safe to pass as ``env=`` to :mod:`subprocess` or asyncio's process API.

    Raises:
        ConfigurationError: a name in ``allow`` looks like a credential or is not a valid
            variable name, or ``extra`` holds a name or value that cannot be in an environment
            (``=`` or a NUL byte in a name, a NUL byte or a non-string value).
    """
    source = os.environ if environ is None else environ
    windows = sys.platform == "win32"
    names = set(BASE_ALLOWLIST) | (WINDOWS_ALLOWLIST if windows else set())
    patterns: list[str] = ["LC_"]
    for name in allow:
        if not isinstance(name, str) or not _VALID_NAME.match(name.removesuffix("*")):
            raise ConfigurationError(f"safe_env: allow holds an invalid variable name: {name!r}")
        if _SECRET_NAME.search(name):
            raise ConfigurationError(
                f"safe_env: {name!r} looks like a credential and is never inherited; pass the "
                "value in extra={...} if the child really needs it"
            )
        if name.endswith("*"):
            patterns.append(name[:-1])
        else:
            names.add(name)

    def wanted(name: str) -> bool:
        key = name.upper() if windows else name
        if windows:
            return key in {n.upper() for n in names} or any(
                key.startswith(p.upper()) for p in patterns
            )
        return key in names or any(key.startswith(p) for p in patterns)

    env = {k: v for k, v in source.items() if wanted(k) and not _SECRET_NAME.search(k)}
    for name, value in (extra or {}).items():
        if not isinstance(name, str) or not _VALID_NAME.match(name):
            raise ConfigurationError(f"safe_env: extra holds an invalid variable name: {name!r}")
        if not isinstance(value, str) or "\x00" in value:
            raise ConfigurationError(
                f"safe_env: the value of {name!r} must be a string without NUL bytes"
            )
        env[name] = value
    return env
