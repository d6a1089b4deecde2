"""``python -m goagent_py.mcp serve --provider ...``: serve an agent over MCP."""

import sys

from goagent_py import _main_guard
from goagent_py.cli._mcp import main  # a Ctrl-C while this imports is 130 (see _main_guard)

if __name__ == "__main__":
    _main_guard.release()
    sys.exit(main())
