"""Resident memory of ``goagent-py chat`` and ``goagent-py serve`` after the first answer.

Run: .venv/bin/python bench/rss.py [--target chat|serve|both] [--top 12]

Each target starts in a fresh GOAGENT_HOME with ``--provider local`` (the embedded llama.cpp
model and the local MiniLM embedder, which long-term memory and the small-model kit use):
``chat`` gets one question through a pipe, ``serve`` one ``/v1/chat/completions`` turn. Once
the answer is back the script reads the process's memory from /proc: VmRSS (resident),
VmHWM (the peak), Pss and USS (private pages) from ``smaps_rollup``, and the mappings that hold
the most resident memory, grouped by file (``[anon]`` is the heap: Python objects, weights
copied into memory). The embedder cache (``GOAGENT_EMBED_CACHE``) is kept as the environment
has it, so a run measures the steady state of a machine that exported once; pass
``--cold-cache`` for a first start (an empty cache folder: the export runs in that process).
Prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "What is the capital of France?"


def env(home: str, cache: str | None) -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), out.get("PYTHONPATH", "")]))
    out["GOAGENT_HOME"] = home
    if cache is not None:
        out["GOAGENT_EMBED_CACHE"] = cache
    return out


def memory(pid: int, top: int) -> dict[str, object]:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = {}
    for line in status.splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024
    rollup: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, _, value = line.partition(":")
        parts = value.split()
        if parts and parts[-1] == "kB":
            rollup[name] = int(parts[0]) / 1024
    by_file: dict[str, float] = collections.defaultdict(float)
    current = "[anon]"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
            current = head[5] if len(head) > 5 else "[anon]"
        elif line.startswith("Rss:"):
            by_file[Path(current).name if current.startswith("/") else current] += (
                int(head[1]) / 1024
            )
    biggest = sorted(by_file.items(), key=lambda kv: -kv[1])[:top]
    return {
        "rss_mb": fields.get("VmRSS"),
        "peak_mb": fields.get("VmHWM"),
        "pss_mb": rollup.get("Pss"),
        "uss_mb": rollup.get("Private_Clean", 0) + rollup.get("Private_Dirty", 0),
        "largest": [(name, round(mb, 1)) for name, mb in biggest],
        "torch_loaded": any(name.startswith("libtorch") for name in by_file),
        "onnxruntime_loaded": any("onnxruntime" in name for name in by_file),
    }


def chat(home: str, cache: str | None, top: int) -> dict[str, object]:
    cmd = [sys.executable, "-m", "goagent_py", "chat", "--provider", "local"]
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env(home, cache),
        cwd=home,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    start = time.perf_counter()
    proc.stdin.write(QUESTION + "\n")
    proc.stdin.flush()
    answer = ""
    for line in proc.stdout:  # two banner lines, then the answer
        if line.startswith(("goagent-py chat", "session ")) or not line.strip():
            continue
        answer = line.strip()
        break
    seconds = time.perf_counter() - start
    figures = memory(proc.pid, top)
    proc.stdin.close()
    proc.wait(timeout=120)
    return {"answer": answer, "seconds_to_answer": round(seconds, 1), **figures}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def serve(home: str, cache: str | None, top: int) -> dict[str, object]:
    port = free_port()
    cmd = [sys.executable, "-m", "goagent_py", "serve", "--provider", "local", "--port", str(port)]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env(home, cache),
        cwd=home,
    )
    base = f"http://127.0.0.1:{port}"
    start = time.perf_counter()
    try:
        while True:
            try:
                with urllib.request.urlopen(base + "/v1/models", timeout=5) as response:
                    model = json.load(response)["data"][0]["id"]
                break
            except OSError:
                if proc.poll() is not None:
                    raise SystemExit("serve exited before answering") from None
                time.sleep(0.2)  # polling a starting server; no figure depends on it
        body = json.dumps({"model": model, "messages": [{"role": "user", "content": QUESTION}]})
        request = urllib.request.Request(
            base + "/v1/chat/completions",
            data=body.encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=600) as response:
            answer = json.load(response)["choices"][0]["message"]["content"]
        seconds = time.perf_counter() - start
        figures = memory(proc.pid, top)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return {"answer": answer, "seconds_to_answer": round(seconds, 1), **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=["chat", "serve", "both"], default="both")
    parser.add_argument("--top", type=int, default=12, help="largest mappings to list")
    parser.add_argument(
        "--cold-cache", action="store_true", help="an empty embedder cache (the first start)"
    )
    args = parser.parse_args()
    targets = ["chat", "serve"] if args.target == "both" else [args.target]
    for target in targets:
        with tempfile.TemporaryDirectory() as home:
            cache = os.path.join(home, "embed-cache") if args.cold_cache else None
            record = (chat if target == "chat" else serve)(home, cache, args.top)
        print(json.dumps({"target": target, "load": os.getloadavg()[0], **record}, indent=1))


if __name__ == "__main__":
    main()
