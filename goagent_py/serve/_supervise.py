"""The parent process of ``goagent-py serve --workers N``: it holds the listening socket, starts
N worker processes that serve it (each a new interpreter: ``python -m
goagent_py.serve._supervise``), starts another in place of one that dies after it served, and
stops them all on SIGINT or SIGTERM (docs/serve.md, "Several worker processes").

A worker that ends before it is ready (a bad option, no model) stops the server: every worker
would fail the same way. Workers run in process groups of their own, so a Ctrl-C in the
terminal reaches the parent alone, which sends it on to each worker once (a second signal
makes uvicorn drop its open streams without their goodbyes); a worker whose parent dies
(even by SIGKILL) gets SIGTERM from the kernel (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import pickle
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from goagent_py.errors import ConfigurationError

__all__ = ["WorkerContext", "ready", "supervise", "worker_context"]

_log = logging.getLogger("goagent_py.serve")
_READY = b"r"


@dataclass(frozen=True, slots=True)
class WorkerContext:
    """What the parent tells one worker: its number, the listening socket's descriptor, the
    server's private folder and secret, its readiness pipe's write end."""

    index: int
    listen_fd: int
    run_dir: str
    secret: str
    ready_fd: int


_context: list[WorkerContext] = []


def worker_context() -> WorkerContext | None:
    """This process's worker context, None outside ``serve --workers N``'s workers."""
    return _context[0] if _context else None


@dataclass
class _Worker:
    index: int
    process: subprocess.Popen[bytes]
    ready_fd: int  # the read end of its readiness pipe (-1 once at its end)
    ready: bool = False


def supervise(
    target: str,
    payload: Any,
    *,
    listening: socket.socket,
    workers: int,
    announce: Callable[[list[int]], None] | None = None,
) -> int:
    """Serve ``listening`` with ``workers`` processes, each calling ``target``
    (``"module:function"``) with ``payload`` once it knows it is a worker
    (:func:`goagent_py.serve._cluster.worker_context`); ``announce`` gets the workers' pids
    once all are ready. Returns the exit code: 128 + the signal that stopped the server, 1
    when a worker failed to start.

    Raises:
        ConfigurationError: not on Linux (the thread leases name their holder with Linux's
            ``struct flock``; the parent-death signal is Linux's).
    """
    if not sys.platform.startswith("linux"):
        raise ConfigurationError(
            "--workers above 1 works on Linux only; run one process (--workers 1) here"
        )
    run_dir = tempfile.mkdtemp(prefix="goagent-serve-")  # 0700: the workers' sockets
    secret = secrets.token_hex(32)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    caught: list[int] = []

    def on_stop(sig: int, frame: Any) -> None:
        caught.append(sig)

    def start(index: int) -> _Worker:
        ready_r, ready_w = os.pipe()
        spec = {
            "target": target,
            "payload": payload,
            "sys_path": list(sys.path),
            "parent": os.getpid(),
            "context": WorkerContext(index, listening.fileno(), run_dir, secret, ready_w),
        }
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "goagent_py.serve._supervise"],
                stdin=subprocess.PIPE,
                pass_fds=(listening.fileno(), ready_w),
                process_group=0,
            )
        finally:
            os.close(ready_w)
        assert process.stdin is not None
        with process.stdin:
            process.stdin.write(pickle.dumps(spec))
        return _Worker(index, process, ready_r)

    previous = {
        sig: signal.signal(sig, handler)
        for sig, handler in (
            (signal.SIGINT, on_stop),
            (signal.SIGTERM, on_stop),
            (signal.SIGCHLD, lambda sig, frame: None),
        )
    }
    old_wakeup = signal.set_wakeup_fd(wake_w)
    running: list[_Worker] = []
    code = 1
    try:
        running = [start(i) for i in range(workers)]
        code = _watch(running, start, wake_r, caught, announce, run_dir)
    finally:
        _stop(running, caught[0] if caught else signal.SIGTERM)
        signal.set_wakeup_fd(old_wakeup)
        for sig, old in previous.items():
            signal.signal(sig, old)
        os.close(wake_r)
        os.close(wake_w)
        shutil.rmtree(run_dir, ignore_errors=True)
    return code


def _watch(
    running: list[_Worker],
    start: Callable[[int], _Worker],
    wake_r: int,
    caught: list[int],
    announce: Callable[[list[int]], None] | None,
    run_dir: str,
) -> int:
    announced = False
    while not caught:
        waiting = [w.ready_fd for w in running if w.ready_fd >= 0]
        readable, _, _ = select.select([wake_r, *waiting], [], [])
        with contextlib.suppress(BlockingIOError):
            while os.read(wake_r, 512):
                pass
        for w in running:
            if w.ready_fd in readable:
                got = os.read(w.ready_fd, 1)
                w.ready = w.ready or got == _READY
                if got != _READY:  # its end of the pipe closed
                    os.close(w.ready_fd)
                    w.ready_fd = -1
        if caught:
            break
        for n, w in enumerate(running):
            ended = w.process.poll()
            if ended is None:
                continue
            if w.ready_fd >= 0:
                os.close(w.ready_fd)
            if not w.ready:
                print(
                    f"goagent-py serve: worker {w.index} (process {w.process.pid}) ended while "
                    f"starting ({_describe(ended)}); stopping the server",
                    file=sys.stderr,
                )
                return 1
            _forget(run_dir, w.process.pid)
            print(
                f"goagent-py serve: worker {w.index} (process {w.process.pid}) ended "
                f"({_describe(ended)}); its threads' runs are over; starting another",
                file=sys.stderr,
            )
            running[n] = start(w.index)
        if not announced and all(w.ready for w in running):
            announced = True
            if announce is not None:
                announce([w.process.pid for w in running])
    return 128 + caught[0]


def _stop(running: list[_Worker], sig: int) -> None:
    for w in running:
        if w.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                w.process.send_signal(sig)
    for w in running:
        try:
            w.process.wait(timeout=60)
        except subprocess.TimeoutExpired:  # a worker that does not stop: no orphans left
            w.process.kill()
            w.process.wait()
        if w.ready_fd >= 0:
            os.close(w.ready_fd)
            w.ready_fd = -1


def _forget(run_dir: str, pid: int) -> None:
    """Remove a dead worker's sockets (nobody forwards to it or relays to it then)."""
    for ext in ("sock", "ev"):
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(run_dir, f"{pid}.{ext}"))


def _describe(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


def ready(ctx: WorkerContext) -> None:
    """Tell the parent this worker serves."""
    with contextlib.suppress(OSError):
        os.write(ctx.ready_fd, _READY)
        os.close(ctx.ready_fd)


def _die_with_parent(parent: int) -> None:
    """SIGTERM to this process when its parent dies (Linux), so none is left behind."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it died before the call
        os.kill(os.getpid(), signal.SIGTERM)


def _worker_main() -> int:
    spec = pickle.loads(sys.stdin.buffer.read())  # from the parent, over its own pipe
    _die_with_parent(spec["parent"])
    for entry in reversed(spec["sys_path"]):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    _context[:] = [spec["context"]]
    module, _, name = str(spec["target"]).partition(":")
    fn = getattr(importlib.import_module(module), name)
    return int(fn(spec["payload"]) or 0)


if __name__ == "__main__":
    from goagent_py import _main_guard

    _main_guard.release()  # the worker's command starts: Ctrl-C is the command's from here
    # Through the module's own name: run as __main__, this file is a second module whose
    # worker context the rest of the package would not see.
    from goagent_py.serve._supervise import _worker_main as main

    sys.exit(main())
