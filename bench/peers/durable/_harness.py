"""The protocol of the durable peer benchmark (issue 36), stdlib only: one script per framework.

Each ``durable_<name>.py`` runs in its framework's own virtualenv, connects to the Temporal dev
server that ``durable.py`` started, runs ONE worker in its own process (its own task queue), and
serves the coordinator over stdin/stdout:

- it prints ``READY <json>`` (framework, versions, its task queue) once a plain and a durable run answered right;
- for each line ``<plain|durable> <steps> <n>`` it makes ``n`` runs one after another and prints
  one JSON list: each run's ``[wall seconds, CPU seconds]`` (``perf_counter`` and
  ``process_time`` around the run, start to result; the CPU is this process's, all its threads:
  the client, the worker and the Temporal SDK's core, which a loaded machine does not inflate);
- ``quit`` ends it.

A run is the same conversation everywhere, on each framework's own scripted model: the prompt
``steps <k>``; the model asks for ``add(a=i, b=1)`` while fewer than ``k`` tool results are in
its history (``i`` = how many there are), then answers with the last result's text, so a run is
``k + 1`` model calls and ``k`` tool calls (``2k + 1`` steps), and the answer is ``k``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")

RunFn = Callable[[int], Awaitable[str]]
# The task queue the script's worker serves (set by its setup; reported in READY, so the
# coordinator can tell the frameworks' workflows apart on the shared server).
TASK_QUEUE = ""


def start_options() -> dict[str, Any]:
    """Options for the script's workflow start: ``BENCH_EAGER_START=1``/``0`` asks every
    framework for Temporal's eager start (or not); unset, each keeps its own default."""
    flag = os.environ.get("BENCH_EAGER_START", "")
    return {"request_eager_start": flag == "1"} if flag in ("0", "1") else {}


def prompt(steps: int) -> str:
    return f"steps {steps}"


def steps_of(text: str) -> int:
    """The ``k`` of a prompt ``steps <k>``."""
    return int(text.split()[-1])


async def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


def _versions(dists: tuple[str, ...]) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for d in dists:
        try:
            out[d] = version(d)
        except PackageNotFoundError:
            out[d] = "-"
    return out


async def _serve(
    framework: str, dists: tuple[str, ...], setup: Callable[[str], Any], address: str
) -> None:
    plain, durable, close = await setup(address)
    try:
        for k in (1, 3):  # verify: the right answer, both ways
            for fn in (plain, durable):
                answer = (await fn(k)).strip()
                assert answer == str(k), (framework, k, answer)
        info = {
            "framework": framework,
            "versions": _versions(dists),
            "python": sys.version[:6],
            "task_queue": TASK_QUEUE,
        }
        print("READY", json.dumps(info), flush=True)
        loop = asyncio.get_running_loop()
        while True:
            line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
            if not line or line == "quit":
                return
            mode, steps, n = line.split()
            fn = plain if mode == "plain" else durable
            times = []
            for _ in range(int(n)):
                start, cpu = time.perf_counter(), time.process_time()
                answer = await fn(int(steps))
                times.append([time.perf_counter() - start, time.process_time() - cpu])
                assert answer.strip() == steps, (framework, mode, steps, answer)
            print(json.dumps(times), flush=True)
    finally:
        await close()


def main(framework: str, dists: tuple[str, ...], setup: Callable[[str], Any]) -> None:
    """Serve the coordinator: ``setup(address)`` returns ``(plain, durable, close)``, where
    ``plain(k)`` and ``durable(k)`` make one run of ``k`` tool steps and return its answer."""
    asyncio.run(_serve(framework, dists, setup, sys.argv[1]))
