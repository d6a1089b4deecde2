"""The page when its connection to the server breaks (docs/serve.md, "A stream that breaks
off"): the person sees at once that it did, the page comes back by itself when the server does,
however long that takes, and no message the person wrote is lost on the way.

The server is a real ``goagent-py``-style process (uvicorn over a real SQLite file, a scripted
provider) that the tests kill with SIGKILL or stop, and start again on the same port.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

pytestmark = pytest.mark.slow

_WAIT = 30  # seconds before a wait fails the test (never reached when things work)
_SERVER = textwrap.dedent(
    '''
    import asyncio
    import socket
    import sys

    import uvicorn

    from goagent_py import Agent, Role, tool
    from goagent_py.serve import create_app
    from goagent_py.testing import FunctionProvider, text_response, tool_call_response


    @tool
    async def hold() -> str:
        """Wait until the server goes away."""
        await asyncio.Event().wait()
        return "never"


    def answer(request):
        last = request.messages[-1]
        if last.role is Role.TOOL:
            return text_response(f"after: {last.text}")
        if last.text == "hold":
            return tool_call_response(("hold", {}))
        return text_response(f"echo: {last.text}")


    provider = FunctionProvider(answer)
    app = create_app(
        lambda ctx: Agent(
            provider=provider,
            model="scripted",
            tools=[hold],
            short_term_memory=ctx.short_term_memory,
        ),
        storage_path=sys.argv[2],
    )
    app.server.sse_ping = float(sys.argv[3])  # seconds between keep-alive comments
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", int(sys.argv[1])))
    sock.listen(128)
    print("listening", flush=True)  # connections queue in the kernel from now on
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
    '''
)


class _Process:
    """The server in a process of its own, on one port and one SQLite file across restarts."""

    def __init__(self, tmp: Path, *, ping: float = 15.0) -> None:
        self.ping = ping
        self.script = tmp / "server.py"
        self.script.write_text(_SERVER)
        self.db = tmp / "serve.db"
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.base = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.process = subprocess.Popen(
            [sys.executable, str(self.script), str(self.port), str(self.db), str(self.ping)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        with self.process.stdout:
            assert self.process.stdout.readline() == "listening\n"

    def kill(self) -> None:
        """SIGKILL: no shutdown, no stored end of the run (a crash, an OOM kill)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(_WAIT)

    def terminate(self) -> None:
        """SIGTERM: a clean shutdown (open streams end, their runs are stored aborted)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(_WAIT)

    def freeze(self) -> None:
        """SIGSTOP: the server hangs; its connections stay open and say nothing."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.thaw()
            self.kill()


@pytest.fixture
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[_Process]:
    """The server; ``@pytest.mark.parametrize("server", [seconds], indirect=True)`` sets its
    keep-alive interval."""
    found = _Process(tmp_path, ping=getattr(request, "param", 15.0))
    found.start()
    try:
        yield found
    finally:
        found.close()


@pytest.fixture
def page(server: _Process, launch_chromium: Callable[[], Any]) -> Iterator[Any]:
    driver = launch_chromium()
    try:
        driver.get(server.base + "/")
        WebDriverWait(driver, _WAIT).until(
            lambda d: d.find_element(By.ID, "whoami").text == "signed in as local"
        )
        yield driver
    finally:
        driver.quit()


def _texts(driver: Any, selector: str) -> list[str]:
    texts: list[str] = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), e => e.textContent)",
        selector,
    )
    return texts


def _new_chat(driver: Any) -> None:
    wait = WebDriverWait(driver, _WAIT)
    driver.find_element(By.ID, "new-thread").click()
    wait.until(lambda d: _texts(d, "#threads li.active") == ["New chat"])


def _send(driver: Any, text: str) -> None:
    driver.find_element(By.ID, "input").send_keys(text)
    driver.find_element(By.ID, "send").click()


def _offline_notice(driver: Any) -> str:
    """The text of the notice that the connection is lost, when it is displayed ("" if not)."""
    found = driver.find_elements(By.CSS_SELECTOR, "[role=alert]")
    return " ".join(f.text for f in found if f.is_displayed())


def test_a_crashed_server_is_shown_at_once_and_the_page_comes_back_with_it(
    page: Any, server: _Process
) -> None:
    wait = WebDriverWait(page, _WAIT)
    _new_chat(page)
    _send(page, "first")
    wait.until(lambda d: _texts(d, "#messages .msg.assistant .text") == ["echo: first"])
    wait.until(lambda d: d.find_element(By.ID, "send").text == "Send")
    _send(page, "hold")
    wait.until(lambda d: _texts(d, "#messages details.tool summary") == ["tool hold …"])
    server.kill()
    # At once, while the server is still down: the person is told, in a notice of its own.
    wait.until(lambda d: "connection to the server was lost" in _offline_notice(d))
    assert page.find_element(By.ID, "send").text == "Send"  # the run is over for the page
    # A message written meanwhile is not sent into the void: it stays where it was typed.
    box = page.find_element(By.ID, "input")
    box.send_keys("written while it was down")
    box.send_keys(Keys.ENTER)
    wait.until(lambda d: "stays in the box" in d.find_element(By.ID, "status").text)
    assert box.get_attribute("value") == "written while it was down"
    assert _texts(page, "#messages .msg.user .text") == ["first", "hold"]

    server.start()
    # Back by itself: the notice goes, the thread is what the server kept (a SIGKILL mid-turn
    # keeps the person's message, not the model's call).
    wait.until(lambda d: _offline_notice(d) == "")
    wait.until(lambda d: d.find_element(By.ID, "status").text.startswith("reconnected"))
    assert _stored_users(page) == ["first", "hold"]
    assert _texts(page, "#messages .msg.user .text") == ["first", "hold"]
    assert _texts(page, "#messages details.tool") == []
    assert box.get_attribute("value") == "written while it was down"
    box.send_keys(Keys.ENTER)
    wait.until(
        lambda d: (
            _texts(d, "#messages .msg.assistant .text")[-1] == "echo: written while it was down"
        )
    )
    assert box.get_attribute("value") == ""


def _stored_users(driver: Any) -> list[str]:
    users: list[str] = driver.execute_async_script(
        "const done = arguments[0];"
        "fetch(`/api/threads/${localStorage.getItem('goagent.thread')}/messages`)"
        ".then(r => r.json())"
        ".then(d => done(d.messages.filter(m => m.role === 'user').map(m => m.text)))"
    )
    return users


def test_a_steer_the_server_did_not_keep_goes_back_into_the_box(
    page: Any, server: _Process
) -> None:
    # A steer waits in the run's queue for the tool to end: a crash loses it on the server.
    # The page showed it as sent; once the server is back it is in the box again.
    wait = WebDriverWait(page, _WAIT)
    _new_chat(page)
    _send(page, "hold")
    wait.until(lambda d: _texts(d, "#messages details.tool summary") == ["tool hold …"])
    _send(page, "and then stop")
    wait.until(lambda d: _texts(d, "#messages .msg.user .text") == ["hold", "and then stop"])
    wait.until(lambda d: d.find_element(By.ID, "input").get_attribute("value") == "")
    server.kill()
    wait.until(lambda d: "connection to the server was lost" in _offline_notice(d))
    server.start()
    wait.until(lambda d: "back in the box" in d.find_element(By.ID, "status").text)
    assert _offline_notice(page) == ""
    assert _stored_users(page) == ["hold"]
    assert _texts(page, "#messages .msg.user .text") == ["hold"]
    assert page.find_element(By.ID, "input").get_attribute("value") == "and then stop"


@pytest.mark.parametrize("server", [1.0], indirect=True)
def test_a_stream_that_goes_silent_is_a_lost_connection(page: Any, server: _Process) -> None:
    # A hung server (or a connection that broke without a reset) sends nothing, not even its
    # keep-alive comments: the page, which hears one every second here, says the connection
    # is lost instead of "working…" for ever, and comes back when the server does.
    wait = WebDriverWait(page, _WAIT)
    _new_chat(page)
    _send(page, "hold")
    wait.until(lambda d: _texts(d, "#messages details.tool summary") == ["tool hold …"])
    server.freeze()
    try:
        wait.until(lambda d: "connection to the server was lost" in _offline_notice(d))
        assert page.find_element(By.ID, "send").text == "Send"
    finally:
        server.thaw()
    wait.until(lambda d: _offline_notice(d) == "")
    # The server saw the stream closed and stopped the run: the call has its error result.
    wait.until(lambda d: _texts(d, "#messages details.tool.error summary") != [])
    assert _stored_users(page) == ["hold"]
