"""Latency of ``goagent-py chat`` on the embedded model, through a pseudo-terminal.

Run it:

    python bench/cli_latency.py [turns]

Measures, in a fresh data folder: the time from starting the command to its first ``you>``
prompt, then for each turn the time from sending a line to the next prompt (long-term recall,
the model's answer, and persisting the turn). The first turn includes loading the embedder
if the background warm-up has not finished.
"""

from __future__ import annotations

import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time

PROMPT = b"you> "
LINES = [
    "My name is Ada and I live in Lisbon.",
    "What is 12 times 12?",
    "Where do I live?",
    "Thanks!",
]


def read_until(fd: int, marker: bytes, timeout: float = 180) -> bytes:
    buf = b""
    end = time.monotonic() + timeout
    while marker not in buf:
        left = end - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no {marker!r} after {timeout}s; got {buf[-200:]!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                raise EOFError(buf[-200:])
            buf += chunk
    return buf


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else len(LINES)
    home = tempfile.mkdtemp(prefix="goagent-bench-")
    env = {**os.environ, "GOAGENT_HOME": home}
    env.pop("ANTHROPIC_API_KEY", None)
    env.pop("OPENAI_API_KEY", None)
    leader, follower = pty.openpty()
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "goagent_py", "chat", "--provider", "local"],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        close_fds=True,
    )
    os.close(follower)
    try:
        read_until(leader, PROMPT)
        first_prompt = time.perf_counter() - start
        times = []
        for i in range(turns):
            line = LINES[i % len(LINES)]
            sent = time.perf_counter()
            os.write(leader, (line + "\n").encode())
            read_until(leader, PROMPT)
            times.append(time.perf_counter() - sent)
        os.write(leader, b"/exit\n")
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
    print("goagent-py chat on the embedded model (SmolLM2-135M, all-MiniLM-L6-v2):")
    print(f"  start to first prompt: {first_prompt:6.2f} s")
    print(f"  first turn:            {times[0]:6.2f} s")
    if len(times) > 1:
        print(
            f"  later turns (median):  {statistics.median(times[1:]):6.2f} s "
            f"(min {min(times[1:]):.2f}, max {max(times[1:]):.2f})"
        )


if __name__ == "__main__":
    main()
