"""The parent process of ``goagent-py serve --workers N``: it holds the listening socket, starts
N worker processes that serve it (each a new interpreter: ``python -m
goagent_py.serve._supervise``), starts another in place of one that dies after it served, and
stops them all on SIGINT or SIGTERM (docs/serve.md, "Several worker processes").

A worker that ends before it is ready (a bad option, no model) stops the server: every worker
would fail the same way. One that ends after it served is started again, at once the first
time and then after a wait that doubles with each worker that ended within ``_CRASH_WINDOW``
seconds (up to ``_BACKOFF_CAP``); ``_CRASH_LIMIT`` of them within that window stop the server
(exit 1): a worker that dies as soon as it serves would otherwise be started again and again,
burning the CPU and filling the log. Workers run in process groups of their own, so a Ctrl-C in the
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
import re
import secrets
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from goagent_py.errors import ConfigurationError

__all__ = ["WorkerContext", "leave", "ready", "supervise", "sweep", "worker_context"]

_log = logging.getLogger("goagent_py.serve")
_READY = b"r"
_PREFIX = "goagent-serve-"
_BACKOFF_FIRST = 0.5  # seconds before the second start of a worker in a crash window
_BACKOFF_CAP = 10.0
_CRASH_WINDOW = 60.0  # seconds: workers that ended this recently count as a crash loop
_CRASH_LIMIT = 5  # ... and this many of them stop the server


@dataclass(frozen=True, slots=True)
class WorkerContext:
    """What the parent tells one worker: its number, the listening socket's descriptor, the
    server's private folder and secret, its readiness pipe's write end."""

    index: int
    listen_fd: int
    run_dir: str
    secret: str
    ready_fd: int
    parent: int = 0  # the parent's pid: a worker that outlives it removes the folder


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
    when a worker failed to start or ``_CRASH_LIMIT`` workers ended within ``_CRASH_WINDOW``
    seconds (each start after the first in that window waits ``_BACKOFF_FIRST`` seconds,
    doubled each time, at most ``_BACKOFF_CAP``).

    The server's private folder (``<tmp>/goagent-serve-<pid>-<start time>-*``) is removed on
    every end this process sees; those of parents that died without removing theirs (SIGKILL)
    are removed by the next one (:func:`sweep`), or by their last worker.

    Raises:
        ConfigurationError: not on Linux (the thread leases name their holder with Linux's
            ``struct flock``; the parent-death signal is Linux's).
    """
    if not sys.platform.startswith("linux"):
        raise ConfigurationError(
            "--workers above 1 works on Linux only; run one process (--workers 1) here"
        )
    sweep()
    secret = secrets.token_hex(32)
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
            "context": WorkerContext(
                index, listening.fileno(), run_dir, secret, ready_w, parent=os.getpid()
            ),
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

    running: list[_Worker | None] = []
    # Made and removed in one try: no end of this function this process lives through leaves
    # it (a failed start, a signal handler refused outside the main thread, an error).
    run_dir = ""
    try:
        run_dir = tempfile.mkdtemp(prefix=_own_prefix())  # 0700: the workers' sockets
        wake_r, wake_w = os.pipe()
        try:
            os.set_blocking(wake_r, False)
            os.set_blocking(wake_w, False)
            with _handlers(on_stop, wake_w):
                try:
                    running = [start(i) for i in range(workers)]
                    return _Watch(running, start, wake_r, caught, announce, run_dir).run()
                finally:
                    _stop(running, caught[0] if caught else signal.SIGTERM)
        finally:
            os.close(wake_r)
            os.close(wake_w)
    finally:
        if run_dir:
            shutil.rmtree(run_dir, ignore_errors=True)


@contextlib.contextmanager
def _handlers(on_stop: Callable[[int, Any], None], wake_w: int) -> Iterator[None]:
    """SIGINT and SIGTERM to ``on_stop``, and every signal (SIGCHLD too) wakes ``wake_w``."""
    previous: dict[int, Any] = {}
    old_wakeup: int | None = None
    try:
        for number, handler in (
            (signal.SIGINT, on_stop),
            (signal.SIGTERM, on_stop),
            (signal.SIGCHLD, lambda sig, frame: None),
        ):
            previous[number] = signal.signal(number, handler)
        old_wakeup = signal.set_wakeup_fd(wake_w)
        yield
    finally:
        if old_wakeup is not None:
            signal.set_wakeup_fd(old_wakeup)
        for saved, old in previous.items():
            signal.signal(saved, old)


class _Watch:
    """The parent's loop: readiness, ended workers (started again after a back-off), signals."""

    def __init__(
        self,
        running: list[_Worker | None],
        start: Callable[[int], _Worker],
        wake_r: int,
        caught: list[int],
        announce: Callable[[list[int]], None] | None,
        run_dir: str,
    ) -> None:
        self.running = running
        self.start = start
        self.wake_r = wake_r
        self.caught = caught
        self.announce = announce
        self.run_dir = run_dir
        self.crash_window = _CRASH_WINDOW
        self.crash_limit = _CRASH_LIMIT
        self.backoff = _BACKOFF_FIRST
        self.ended: list[float] = []  # when workers that had served ended (monotonic)
        self.due: dict[int, float] = {}  # slot -> when its next worker starts

    def run(self) -> int:
        announced = False
        while not self.caught:
            self._wait()
            if self.caught:
                break
            for n, w in enumerate(self.running):
                if w is None or w.process.poll() is None:
                    continue
                if not self._ended(n, w):
                    return 1
            now = time.monotonic()
            for n, when in list(self.due.items()):
                if when <= now:
                    del self.due[n]
                    self.running[n] = self.start(n)
            if not announced and all(w is not None and w.ready for w in self.running):
                announced = True
                if self.announce is not None:
                    self.announce([w.process.pid for w in self.running if w is not None])
        return 128 + self.caught[0]

    def _wait(self) -> None:
        """Until a signal, a readiness byte, or the next delayed start is due."""
        waiting = [w.ready_fd for w in self.running if w is not None and w.ready_fd >= 0]
        timeout = None
        if self.due:
            timeout = max(0.0, min(self.due.values()) - time.monotonic())
        readable, _, _ = select.select([self.wake_r, *waiting], [], [], timeout)
        with contextlib.suppress(BlockingIOError):
            while os.read(self.wake_r, 512):
                pass
        for w in self.running:
            if w is not None and w.ready_fd in readable:
                _read_ready(w)

    def _ended(self, n: int, w: _Worker) -> bool:
        """A worker ended: False when the server must stop (it never served, or too many
        ended within the crash window); else its slot's next start is scheduled."""
        code = w.process.returncode
        if w.ready_fd >= 0:
            # What it wrote before it ended (the byte may not have been read yet: its end and
            # its readiness can come in one wake-up); the write end is closed, no wait.
            _read_ready(w)
            if w.ready_fd >= 0:
                os.close(w.ready_fd)
                w.ready_fd = -1
        self.running[n] = None
        who = f"worker {w.index} (process {w.process.pid})"
        if not w.ready:
            _say(f"{who} ended while starting ({_describe(code)}); stopping the server")
            return False
        _forget(self.run_dir, w.process.pid)
        now = time.monotonic()
        self.ended = [t for t in self.ended if now - t < self.crash_window] + [now]
        recent = len(self.ended)
        if recent >= self.crash_limit:
            _say(
                f"{who} ended ({_describe(code)}); {recent} workers ended within "
                f"{self.crash_window:g} s, each soon after it started: stopping the server "
                "(see the workers' messages above for why they end)"
            )
            return False
        wait = 0.0 if recent == 1 else min(_BACKOFF_CAP, self.backoff * 2 ** (recent - 2))
        self.due[n] = now + wait
        when = "starting another" if not wait else f"starting another in {wait:g} s"
        _say(f"{who} ended ({_describe(code)}); its threads' runs are over; {when}")
        return True


def _read_ready(w: _Worker) -> None:
    got = os.read(w.ready_fd, 1)
    w.ready = w.ready or got == _READY
    if got != _READY:  # its end of the pipe closed
        os.close(w.ready_fd)
        w.ready_fd = -1


def _say(text: str) -> None:
    print(f"goagent-py serve: {text}", file=sys.stderr, flush=True)


def _stop(running: list[_Worker | None], sig: int) -> None:
    for w in running:
        if w is not None and w.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                w.process.send_signal(sig)
    for w in running:
        if w is None:
            continue
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


def _start_time(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, Linux's /proc), None when there
    is no such process: a pid alone could be another process's by now."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # Field 22; the name (field 2) is in parentheses and may hold spaces and parentheses.
    fields = stat[stat.rindex(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else None


def _own_prefix() -> str:
    return f"{_PREFIX}{os.getpid()}-{_start_time(os.getpid()) or 0}-"


_OURS = re.compile(re.escape(_PREFIX) + r"(\d+)-(\d+)-[A-Za-z0-9_]+")


def sweep(where: str | None = None) -> list[str]:
    """Remove the private folders left in ``where`` (the temporary folder) by servers whose
    parent process is gone (SIGKILL leaves its folder: nothing of it runs to remove it); the
    folders removed. Only this user's folders with this module's name, and only when the
    process named in the name is gone or is another process (its start time differs)."""
    where = where or tempfile.gettempdir()
    removed: list[str] = []
    try:
        names = os.listdir(where)
    except OSError:
        return removed
    uid = os.getuid()
    for name in names:
        found = _OURS.fullmatch(name)
        old = found is None and _OLD.fullmatch(name) is not None
        if found is None and not old:
            continue
        path = os.path.join(where, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
            continue  # a link, a file, someone else's: not ours to remove
        if found is not None and _start_time(int(found[1])) == found[2]:
            continue  # its parent serves
        if old and not _old_and_stale(path, info):
            continue
        if _answers(path):
            continue  # a worker serves there (a parent this process cannot see: a container)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _answers(path: str) -> bool:
    """Whether a worker's private socket in the folder ``path`` takes a connection."""
    try:
        names = [n for n in os.listdir(path) if n.endswith(".sock")]
    except OSError:
        return False
    for name in names:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.setblocking(False)
            try:
                probe.connect(os.path.join(path, name))
            except (BlockingIOError, InterruptedError):
                return True  # its backlog is full: it is there
            except OSError:
                continue  # refused: nobody listens on it
            return True
    return False


_OLD = re.compile(re.escape(_PREFIX) + r"[A-Za-z0-9_]{8}")


def _old_and_stale(path: str, info: os.stat_result) -> bool:
    """A folder named as before the parent's pid was in the name: stale when no worker of it
    lives (its sockets name their pids) and nothing changed in it for an hour (a parent that
    has not started its workers yet has an empty folder for a moment)."""
    if time.time() - info.st_mtime < 3600:
        return False
    try:
        names = os.listdir(path)
    except OSError:
        return False
    for name in names:
        stem, _, ext = name.partition(".")
        if ext in ("sock", "ev") and stem.isdigit() and _start_time(int(stem)) is not None:
            return False
    return True


def leave(ctx: WorkerContext) -> None:
    """A worker's end: when the parent is gone (killed), the server's folder goes with its last
    worker (each removes its own sockets first; the last one finds the folder empty)."""
    if not ctx.parent or os.getppid() == ctx.parent:
        return  # the parent serves on, or removes the folder itself
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(ctx.run_dir, "threads.lock"))
    with contextlib.suppress(OSError):
        os.rmdir(ctx.run_dir)


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
