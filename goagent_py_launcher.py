"""The ``goagent-py`` command's entry point, outside the ``goagent_py`` package on purpose.

A console script imports its function's module before it calls anything, and importing any
module of ``goagent_py`` runs the package's ``__init__`` first (the agent and its loop: a
quarter of a second on an idle machine, seconds on a busy one). A Ctrl-C in that time printed a
Python traceback and the process died by the signal. This module imports nothing until
:func:`main` runs, and then imports the command inside a handler.
"""

from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130  # as goagent_py.cli._common.EXIT_INTERRUPTED, the shell's 128 + SIGINT


def main() -> int:
    """Import and run ``goagent-py``; 130 when interrupted while it imports."""
    try:
        from goagent_py.cli.main import main as command
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        return EXIT_INTERRUPTED
    return command()
