"""An OS-level sandbox for the shell tool: bubblewrap (``bwrap``), where the machine has it.

What a sandboxed command gets (:meth:`Sandbox.wrap`):

- the whole file system read-only, the workspace root read-write;
- an empty, private ``/tmp``; the usual places of credentials in the home folder
  (:data:`SECRET_PLACES`: ``~/.ssh``, ``~/.aws``, ``~/.config``, ``~/.netrc``...) shown empty,
  and the paths given in ``hide`` (the session database's folder) too, looked up as each
  command starts (a folder made later, a link pointed elsewhere later, is hidden as it is
  then; the folders between the root and a hidden one inside it are mount points the command
  cannot rename); a root whose name leads to another folder than at start runs nothing;
  ``hide=[Path.home()]`` empties the whole home folder (safer, but a Python or toolchain
  installed there, e.g. with pyenv, is then gone too);
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

from goagent_py.coding._tool import WorkspaceRoot
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
        # The paths as given, made absolute now (a relative one means the folder it names at
        # start-up); what they lead to is looked up when each command starts (:meth:`_hidden`).
        self.hide = [Path(os.path.abspath(p)) for p in [*_secret_places(), *hide]]
        self._root = WorkspaceRoot(root)

    def _hidden(self) -> tuple[list[Path], list[Path]]:
        """The paths to show empty, resolved now: around the root (or beside it), and inside
        it. Resolved when each command starts, not once: a folder made since, a link pointed
        elsewhere since, is hidden as it is now."""
        hidden = [Path(os.path.realpath(p)) for p in self.hide]
        # Never "/" (a session database at /code.db would otherwise empty the whole system).
        hidden = [p for p in dict.fromkeys(hidden) if p not in (self.root, Path("/"))]
        hidden = [p for p in hidden if os.path.lexists(p)]
        before = [p for p in hidden if self.root not in p.parents]
        return before, [p for p in hidden if self.root in p.parents]

    def wrap(
        self, program: list[str], cwd: Path, *, folder: tuple[int, int] | None = None
    ) -> list[str]:
        """The command line that runs ``program`` in ``cwd`` inside the sandbox.

        ``folder``: the ``(st_dev, st_ino)`` of the folder the caller opened as ``cwd``.
        bubblewrap enters ``cwd`` by name, after the caller checked it: a command running
        beside this one could swap it for a link meanwhile. With ``folder``, the program starts
        only in that very folder (a shell compares the folder it is in, which no later swap
        changes, before it runs the program; else it exits 126 and runs nothing).

        Raises:
            CodingToolError: the root was moved or replaced since this sandbox was made.
        """
        # The root's name must still lead to the folder it named at start: the command would
        # be given another folder to write in.
        self._root.check()
        before, inside = self._hidden()
        argv = [self.bwrap, *_BASE]
        if not self.network:
            argv.append("--unshare-net")
        for path in before:
            argv += _empty(path)
        argv += ["--bind", str(self.root), str(self.root)]
        # Mounts stack in order: a folder around the root (or beside it) is hidden before the
        # root is bound back on top; one inside is hidden after. Inside, the root is writable:
        # each folder between it and a hidden one is made a mount point of its own first, which
        # the command cannot rename or remove (EBUSY), so it cannot move the hidden folder out
        # from under its mount (``mv a b`` with ``a/private`` hidden) for a later command.
        steps = {a for p in inside for a in p.parents if self.root in a.parents}
        for step in sorted(steps, key=lambda a: len(a.parts)):
            argv += ["--bind", str(step), str(step)]
        for path in sorted(inside, key=lambda a: len(a.parts)):
            argv += _empty(path)
        if folder is not None:
            program = ["/bin/sh", "-c", _IN_FOLDER, f"{folder[0]}:{folder[1]}", *program]
        return [*argv, "--chdir", str(cwd), "--", *program]


_IN_FOLDER = (
    'case "$(stat -c %d:%i . 2>/dev/null)" in "$0") exec "$@";; esac; '
    'echo "the working folder is not the folder the tool opened (it was swapped for another '
    'meanwhile); nothing was run: call again" >&2; exit 126'
)
"""Run ``"$@"`` only in the folder ``$0`` (``dev:inode``) names (see :meth:`Sandbox.wrap`)."""


def _secret_places() -> list[Path]:
    return [Path.home() / p for p in SECRET_PLACES]


def _empty(path: Path) -> list[str]:
    """bwrap options that show ``path`` empty: an empty folder, or an empty file."""
    if path.is_dir():
        return ["--tmpfs", str(path)]
    return ["--ro-bind", "/dev/null", str(path)]
