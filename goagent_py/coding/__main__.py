"""``python -m goagent_py.coding``: see :mod:`goagent_py.coding.repl`."""

from __future__ import annotations

import sys

from goagent_py import _main_guard
from goagent_py.coding.repl import run_code

if __name__ == "__main__":
    _main_guard.release()
    sys.exit(run_code())
