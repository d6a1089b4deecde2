"""What the browser tests share: Debian's headless chromium driven by selenium, and a real
uvicorn server in a thread and event loop of its own, so a test can look at the server's side
(its runs, transcripts, tools) while the page uses it.

Every test in this folder is skipped, naming what to install, when chromium, chromedriver,
selenium or the serve extra is missing (the core-only CI job has none of them). The tests are
marked slow in their own modules.
"""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import socket
import threading
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def _missing() -> str:
    """Why the browser tests cannot run here ("" when they can)."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        return (
            "the browser tests need Debian's chromium and chromium-driver "
            "(apt-get install chromium chromium-driver; .ci/run installs them)"
        )
    for module, what in (
        ("selenium", "selenium (the dev extra)"),
        ("uvicorn", "the serve extra"),
        ("ag_ui", "the serve extra"),
    ):
        if importlib.util.find_spec(module) is None:
            return f"the browser tests need {what}"
    return ""


MISSING = _missing()


class _CannotRun(pytest.Module):
    """A test module of this folder that is not imported (it imports selenium): skipped."""

    def collect(self) -> Any:
        pytest.skip(MISSING)


def pytest_pycollect_makemodule(module_path: Path, parent: Any) -> Any:
    # Skipped module by module rather than by a skip in this file: a skip raised while pytest
    # loads a conftest named on its command line stops pytest with a traceback.
    if MISSING:
        return _CannotRun.from_parent(parent, path=module_path)
    return None


T = TypeVar("T")
WAIT = 30  # seconds before a wait fails a test (never reached when things work)

# Without the background-networking flags chromium misbehaves on a closed network.
_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,800",
)


def _chromium(profile: Path) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM or ""
    for flag in (*_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    # The console's entries, for the tests that check the page logs no error.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER or ""))


@pytest.fixture(scope="session")
def launch_chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], Any]]:
    """``launch_chromium()`` starts a headless chromium (a selenium ``WebDriver``) with a fresh
    profile of its own: its own cookies and local storage, as another person's browser. A test
    may ``quit()`` it; any still open is quit at the end of the session."""
    started: list[Any] = []

    def launch() -> Any:
        driver = _chromium(tmp_path_factory.mktemp("chromium"))
        started.append(driver)
        return driver

    yield launch
    for driver in started:
        process = driver.service.process
        if process is not None and process.poll() is None:  # not quit by its test
            driver.quit()


class ServedApp:
    """A uvicorn server on 127.0.0.1 in a thread and event loop of its own (the loop
    ``goagent-py serve`` runs on: uvloop when installed). ``start(app)`` serves an app, on the
    same port again after ``stop()`` (a restart the page sees as the same server)."""

    def __init__(self) -> None:
        from goagent_py.serve.run import event_loop_factory

        self.loop = (event_loop_factory() or asyncio.new_event_loop)()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.port = 0  # the first start picks one
        self.base = ""
        self.app: Any = None
        self._uvicorn: Any = None
        self._serving: Any = None
        self._sock: socket.socket | None = None

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the server's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(WAIT)

    def call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        """Call ``fn(*args)`` on the server's loop (to set its events)."""
        self.loop.call_soon_threadsafe(fn, *args)

    def start(self, app: Any) -> None:
        """Serve ``app`` (built by the caller, possibly with :meth:`call`)."""
        import uvicorn

        self.app = app
        # Our own listening socket: connections queue in the kernel from now on.
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self._uvicorn = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self._serving = asyncio.run_coroutine_threadsafe(
            self._uvicorn.serve(sockets=[sock]), self.loop
        )
        self._sock = sock

    def drop_connections(self) -> None:
        """Reset every open connection (a network that fails under an open stream)."""

        def drop() -> None:
            for connection in list(self._uvicorn.server_state.connections):
                connection.transport.abort()

        self.loop.call_soon_threadsafe(drop)

    def stop(self) -> None:
        """Shut the server down as Ctrl-C does (open streams end, runs are aborted), then
        close the app."""
        if self._sock is None:
            return
        self._uvicorn.should_exit = True
        # What the server does on Ctrl-C in its own process (its streams see uvicorn's exit
        # flag through the signal handler, which a server in a thread has not): the app ends
        # its streams (runs, the pages' change streams), or uvicorn would wait for them.
        self.call(self.app.aclose())
        self._serving.result(WAIT)
        self._sock.close()
        self._sock = None

    def close(self) -> None:
        """Stop serving and end the loop and its thread (twice is harmless)."""
        if self.loop.is_closed():
            return
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(WAIT)
        self.loop.close()


@pytest.fixture(scope="session")
def served_app() -> Iterator[Callable[[], ServedApp]]:
    """``served_app()`` makes a :class:`ServedApp` (its loop running, nothing served yet); any
    not closed by the test that made it is closed at the end of the session."""
    made: list[ServedApp] = []

    def make() -> ServedApp:
        made.append(ServedApp())
        return made[-1]

    yield make
    for served in made:
        served.close()
