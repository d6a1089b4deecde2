"""Ctrl-C while a ``python -m goagent_py...`` command still imports: exit 130, no traceback.

``-m goagent_py.serve`` imports the package (``goagent_py/__init__``: the agent and its loop),
then the subpackage (``goagent_py.serve``), then runs the ``__main__`` module, whose own imports
load the command: seconds on a busy machine, all before any ``try``/``except
KeyboardInterrupt`` of the command can catch a Ctrl-C, and Python runs none of our code
earlier (the console script avoids it by living outside the package: ``goagent_py_launcher``).

So the package's ``__init__`` imports this module first, which calls :func:`guard`: only in a
process that ``-m`` is starting on one of our modules, SIGINT then ends the process with 130 (a
``SystemExit``, which Python reports without a traceback), as the console script does. The
guard lasts until the command starts: every module ``-m`` can run calls :func:`release` first
thing in its ``if __name__ == "__main__":`` block (tests/cli/test_proto11_entry.py checks that
each does), so from then on Ctrl-C is the command's own (``asyncio.run``'s handler, a REPL's
abort). Anywhere else (a program that imports goagent_py) the handler is left alone.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

__all__ = ["EXIT_INTERRUPTED", "guard", "release"]

EXIT_INTERRUPTED = 130  # as goagent_py.cli._common.EXIT_INTERRUPTED, the shell's 128 + SIGINT

_previous: list[Any] = []


def _started_by_m_on_us() -> bool:
    """Whether ``python -m goagent_py[.x]`` is importing the package right now."""
    if sys.argv[:1] != ["-m"]:  # what -m sets while it looks the module up; a path after
        return False
    frame = sys._getframe(1)
    while frame is not None:  # runpy's entry for -m, with the module asked for
        if frame.f_code.co_name == "_run_module_as_main":
            name = frame.f_locals.get("mod_name")
            return isinstance(name, str) and name.split(".")[0] == "goagent_py"
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _exit_interrupted(signum: int, frame: Any) -> None:
    sys.stderr.write("\n")
    raise SystemExit(EXIT_INTERRUPTED)


def guard() -> None:
    """While ``-m`` imports one of our commands, make SIGINT exit with 130."""
    if _started_by_m_on_us() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        _previous.append(signal.signal(signal.SIGINT, _exit_interrupted))


def release() -> None:
    """Put back the SIGINT handler :func:`guard` replaced: the command starts, Ctrl-C is its
    own again. Every ``if __name__ == "__main__":`` block of the package calls it first."""
    while _previous:
        signal.signal(signal.SIGINT, _previous.pop())


guard()  # on import: the package's __init__ imports this module before anything else
