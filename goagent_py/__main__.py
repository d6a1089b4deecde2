"""``python -m goagent_py`` runs the ``goagent-py`` command."""

import sys

from goagent_py import _main_guard
from goagent_py.cli.main import main  # a Ctrl-C while this imports is 130 (see _main_guard)

if __name__ == "__main__":
    _main_guard.release()
    sys.exit(main())
