"""``python -m goagent_py.mcp serve --provider ...``: serve an agent over MCP."""

import sys

from goagent_py.cli._mcp import main

if __name__ == "__main__":
    sys.exit(main())
