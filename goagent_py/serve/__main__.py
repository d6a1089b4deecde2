"""``python -m goagent_py.serve``: the same as ``goagent-py serve``."""

from __future__ import annotations

import argparse
import asyncio

from goagent_py import _main_guard
from goagent_py.serve.run import add_serve_arguments, run_serve


def main(argv: list[str] | None = None) -> int:
    """Parse the serve options and serve until interrupted; the exit code."""
    parser = argparse.ArgumentParser(prog="goagent-py serve", description="serve a chat agent")
    add_serve_arguments(parser)
    try:
        return asyncio.run(run_serve(parser.parse_args(argv)))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    _main_guard.release()  # the command starts: Ctrl-C is asyncio.run's from here
    raise SystemExit(main())
