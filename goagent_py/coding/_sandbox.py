"""An OS-level sandbox for the shell tool: bubblewrap (``bwrap``), where the machine has it.

What a sandboxed command gets (:meth:`Sandbox.wrap`):

- the whole file system read-only, the workspace root read-write;
- an empty, private ``/tmp``; the usual places of credentials in the home folder
  (:data:`SECRET_PLACES`: ``~/.ssh``, ``~/.aws``, ``~/.config``, ``~/.netrc``...) shown empty,
  and the paths given in ``hide`` (the session database's folder) too; ``hide=[Path.home()]``
  empties the whole home folder (safer, but a Python or toolchain installed there, e.g. with
  pyenv, is then gone too);
- a new PID namespace with its own ``/proc``: the agent's process and its environment
  (``/proc/<pid>/environ``, which holds the API keys) cannot be seen; when the command is
  killed, every process it started dies with the namespace, ``setsid()`` or not;
- no network (a new network namespace with only loopback) unless ``network=True``;
- new IPC and UTS namespaces, ``--die-with-parent`` and ``--new-session`` (no TIOCSTI).

What it does not do: limit CPU, memory or disk use; hide what the user can read elsewhere
(``/etc``, other projects, credentials kept in places not listed: read-only, but readable); stop a
command from using the network when ``network=True``; protect the workspace itself, which the
command may change or delete (that is what the approvals are for).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from goagent_py.errors import ConfigurationError

__all__ = ["SECRET_PLACES", "Sandbox", "sandbox_available"]

SECRET_PLACES = (
    ".ssh", ".gnupg", ".aws", ".azure", ".config", ".docker", ".kube", ".netrc",
    ".git-credentials", ".npmrc", ".pypirc", ".terraformrc", ".terraform.d", ".password-store",
    ".local/share/keyrings", ".bash_history", ".zsh_history", ".python_history",
)  # fmt: skip
"""Paths under the home folder that a sandboxed command sees empty (credentials, histories)."""

_INSTALL = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
_INSTALL += "bubblewrap) on Linux, or run without the sandbox"


@functools.cache
def _probe() -> str:
    """ "" when bubblewrap runs here, else why not (cached: the machine does not change)."""
    if not sys.platform.startswith("linux"):
        return f"bubblewrap needs Linux (this is {sys.platform})"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap is not installed"
    try:
        done = subprocess.run(
            [bwrap, *_BASE, "--unshare-net", "--", "true"],
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap failed to start: {exc}"
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", "replace").strip()
        return f"bwrap cannot create namespaces here ({err or done.returncode})"
    return ""


def sandbox_available() -> tuple[bool, str]:
    """Whether the shell tool's sandbox works on this machine, and if not, why.

    Returns:
        ``(True, "")``, or ``(False, reason)``.
    """
    reason = _probe()
    return (not reason, reason)


_BASE = (
    "--ro-bind", "/", "/",
    "--dev", "/dev",
    "--proc", "/proc",
    "--tmpfs", "/tmp",
    "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
    "--die-with-parent", "--new-session",
)  # fmt: skip


class Sandbox:
    """Wraps a command in bubblewrap (see the module docstring).

    Args:
        root: the workspace, the only writable folder.
        network: leave the network on.
        hide: more paths to show empty (those that do not exist are skipped).

    Raises:
        ConfigurationError: bubblewrap cannot run here (the message says what to install).
    """

    def __init__(
        self,
        root: Path,
        *,
        network: bool = False,
        hide: Sequence[str | os.PathLike[str]] = (),
    ) -> None:
        ok, reason = sandbox_available()
        if not ok:
            raise ConfigurationError(f"the shell sandbox is not available: {reason}; {_INSTALL}")
        self.bwrap = shutil.which("bwrap") or "bwrap"
        self.root = root
        self.network = network
        places = [Path.home() / p for p in SECRET_PLACES]
        hidden = [Path(os.path.realpath(p)) for p in [*places, *hide]]
        # Never "/" (a session database at /code.db would otherwise empty the whole system).
        hidden = [p for p in dict.fromkeys(hidden) if p.exists() and p not in (root, Path("/"))]
        # Mounts stack in order: a folder around the root (or beside it) is hidden before the
        # root is bound back on top; one inside the root is hidden after.
        self.hidden_before = [p for p in hidden if root not in p.parents]
        self.hidden_after = [p for p in hidden if root in p.parents]

    def wrap(self, program: list[str], cwd: Path) -> list[str]:
        """The command line that runs ``program`` in ``cwd`` inside the sandbox."""
        argv = [self.bwrap, *_BASE]
        if not self.network:
            argv.append("--unshare-net")
        for path in self.hidden_before:
            argv += _empty(path)
        argv += ["--bind", str(self.root), str(self.root)]
        for path in self.hidden_after:
            argv += _empty(path)
        return [*argv, "--chdir", str(cwd), "--", *program]


def _empty(path: Path) -> list[str]:
    """bwrap options that show ``path`` empty: an empty folder, or an empty file."""
    if path.is_dir():
        return ["--tmpfs", str(path)]
    return ["--ro-bind", "/dev/null", str(path)]
