"""Served approvals in a real browser (issue 35): the agent asks to run a mutating tool, the
server restarts between the question and the click, the page (reloaded) approves, and the run
goes on. Debian's headless chromium driven by selenium, against a real uvicorn server."""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from goagent_py import Agent, Role, ToolCall, tool, validate_transcript
from goagent_py.serve.run import event_loop_factory
from goagent_py.testing import FunctionProvider, text_response, tool_call_response

pytestmark = pytest.mark.slow

_CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_DRIVER = shutil.which("chromedriver")
if _CHROMIUM is None or _DRIVER is None:
    pytest.skip(
        "the browser tests need Debian's chromium and chromium-driver "
        "(apt-get install chromium chromium-driver; .ci/run installs them)",
        allow_module_level=True,
    )
pytest.importorskip("selenium", reason="the browser tests need selenium (the dev extra)")
pytest.importorskip("uvicorn", reason="the browser tests need the serve extra")

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

T = TypeVar("T")
_WAIT = 30  # seconds before a wait fails the test (never reached when things work)


class _Server:
    """A uvicorn server on a fixed port, in its own thread and loop; it can restart."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.ran: list[str] = []
        # The id the model gives every call (None: the scripted default); local models'
        # servers number calls per turn, so every turn's call can have the same id.
        self.call_id: str | None = None
        self.approval_timeout: float | None = None
        # the loop goagent-py serve runs on (uvloop when installed)
        self.loop = (event_loop_factory() or asyncio.new_event_loop)()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.base = f"http://127.0.0.1:{self.port}"
        self.app: Any = None
        self._uvicorn: Any = None
        self._serving: Any = None

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(_WAIT)

    def _factory(self) -> Any:
        ran = self.ran

        @tool(requires_approval=True)
        def wipe(target: str) -> str:
            """Wipe something.

            Args:
                target: what.
            """
            ran.append(target)
            return f"wiped {target}"

        def answer(request: Any) -> Any:
            last = request.messages[-1]
            if last.role is Role.TOOL:
                return text_response(f"after: {last.text}")
            target = {"target": last.text.removeprefix("wipe ")}
            if self.call_id is not None:
                return tool_call_response(ToolCall(self.call_id, "wipe", target))
            return tool_call_response(("wipe", target))

        provider = FunctionProvider(answer)

        def factory(ctx: Any) -> Agent:
            return Agent(
                provider=provider,
                model="scripted",
                tools=[wipe],
                short_term_memory=ctx.short_term_memory,
                approval_timeout=self.approval_timeout,
            )

        return factory

    def start(self) -> None:
        import uvicorn

        from goagent_py.serve import create_app

        self.app = create_app(self._factory(), storage_path=str(self.db))
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(128)
        self._uvicorn = uvicorn.Server(uvicorn.Config(self.app, log_level="warning"))
        self._serving = asyncio.run_coroutine_threadsafe(
            self._uvicorn.serve(sockets=[sock]), self.loop
        )
        self._sock = sock

    def stop(self) -> None:
        self._uvicorn.should_exit = True
        self._serving.result(_WAIT)
        self.call(self.app.aclose())
        self._sock.close()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(_WAIT)
        self.loop.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[_Server]:
    found = _Server(tmp_path / "serve.db")
    found.start()
    try:
        yield found
    finally:
        found.stop()
        found.close()


def _chromium(profile: Path) -> Any:
    options = webdriver.ChromeOptions()
    options.binary_location = _CHROMIUM or ""
    for flag in (
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
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(_DRIVER or ""))


def _texts(driver: Any, selector: str) -> list[str]:
    texts: list[str] = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), e => e.innerText.trim())",
        selector,
    )
    return texts


def _shown(driver: Any, selector: str) -> bool:
    found = driver.find_elements(By.CSS_SELECTOR, selector)
    return bool(found) and found[0].is_displayed()


def test_the_page_approves_a_call_across_a_server_restart(server: _Server, tmp_path: Path) -> None:
    driver = _chromium(tmp_path / "chromium")
    try:
        wait = WebDriverWait(driver, _WAIT)
        driver.get(server.base + "/")
        wait.until(lambda d: d.find_element(By.ID, "whoami").text == "signed in as local")
        driver.find_element(By.ID, "new-thread").click()
        wait.until(lambda d: _texts(d, "#threads li.active") == ["New chat"])
        driver.find_element(By.ID, "input").send_keys("wipe disk")
        driver.find_element(By.ID, "send").click()

        # The agent asks: a card with Approve / Deny, the run over (Send is back).
        wait.until(lambda d: _shown(d, "#messages details.tool .decision .approve"))
        wait.until(lambda d: d.find_element(By.ID, "send").text == "Send")
        assert driver.find_element(By.ID, "status").text == "waiting for your decision"
        assert server.ran == []

        server.stop()  # the server restarts between the question and the click
        server.start()
        driver.refresh()

        wait.until(lambda d: _shown(d, "#messages details.tool .decision .approve"))
        card = driver.find_element(By.CSS_SELECTOR, "#messages details.tool")
        assert '"target": "disk"' in card.find_element(By.CSS_SELECTOR, ".args").text
        card.find_element(By.CSS_SELECTOR, ".decision .approve").click()

        wait.until(lambda d: _texts(d, "#messages .msg.assistant .text") == ["after: wiped disk"])
        assert card.find_element(By.CSS_SELECTOR, ".result").text == "wiped disk"
        assert not driver.find_elements(By.CSS_SELECTOR, "#messages .decision")
        assert server.ran == ["disk"]
        severe = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert severe == []
    finally:
        driver.quit()
    (live,) = server.app.server.live.values()
    stored = server.call(live.session.agent.options.short_term_memory.transcript())
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert validate_transcript(stored, allow_pending=False) == []


def test_a_second_call_with_the_same_id_gets_its_own_card(server: _Server, tmp_path: Path) -> None:
    # durable11: the page put the decision box of a call on the first card with its id; with
    # ids numbered per turn that was the answered card of an earlier turn (its arguments
    # overwritten), while the new call's card showed no decision.
    server.call_id = "llama-tool-0"
    driver = _chromium(tmp_path / "chromium")
    try:
        wait = WebDriverWait(driver, _WAIT)
        driver.get(server.base + "/")
        wait.until(lambda d: d.find_element(By.ID, "whoami").text == "signed in as local")
        driver.find_element(By.ID, "new-thread").click()
        wait.until(lambda d: _texts(d, "#threads li.active") == ["New chat"])
        for target in ("disk", "backup"):
            driver.find_element(By.ID, "input").send_keys(f"wipe {target}")
            driver.find_element(By.ID, "send").click()
            wait.until(lambda d: _shown(d, "#messages details.tool .decision .approve"))
            wait.until(lambda d: d.find_element(By.ID, "send").text == "Send")
            cards = driver.find_elements(By.CSS_SELECTOR, "#messages details.tool")
            assert len(cards) == (1 if target == "disk" else 2)
            (box,) = driver.find_elements(By.CSS_SELECTOR, "#messages .decision")
            last = cards[-1]
            assert last.find_elements(By.CSS_SELECTOR, ".decision")  # on the newest card
            assert f'"target": "{target}"' in last.find_element(By.CSS_SELECTOR, ".args").text
            if target == "backup":
                first = cards[0]
                assert '"target": "disk"' in first.find_element(By.CSS_SELECTOR, ".args").text
                assert first.find_element(By.CSS_SELECTOR, ".result").text == "wiped disk"
            box.find_element(By.CSS_SELECTOR, ".approve").click()
            wait.until(
                lambda d, t=target: (
                    f"after: wiped {t}" in _texts(d, "#messages .msg.assistant .text")
                )
            )
        assert server.ran == ["disk", "backup"]
        severe = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert severe == []
    finally:
        driver.quit()


def test_after_the_deadline_the_card_offers_only_deny(server: _Server, tmp_path: Path) -> None:
    # durable11: past its deadline a call takes only a denial, yet the card still offered
    # Approve (and the server refused it, the card came back with Approve again).
    server.approval_timeout = 0
    driver = _chromium(tmp_path / "chromium")
    try:
        wait = WebDriverWait(driver, _WAIT)
        driver.get(server.base + "/")
        wait.until(lambda d: d.find_element(By.ID, "whoami").text == "signed in as local")
        driver.find_element(By.ID, "new-thread").click()
        wait.until(lambda d: _texts(d, "#threads li.active") == ["New chat"])
        driver.find_element(By.ID, "input").send_keys("wipe disk")
        driver.find_element(By.ID, "send").click()
        wait.until(lambda d: _shown(d, "#messages details.tool .decision .deny"))
        for _ in range(2):  # as the run left it, and read back after a reload
            box = driver.find_element(By.CSS_SELECTOR, "#messages .decision")
            assert not box.find_element(By.CSS_SELECTOR, ".approve").is_enabled()
            assert "only Deny is taken" in box.text
            driver.refresh()
            wait.until(lambda d: _shown(d, "#messages details.tool .decision .deny"))
        driver.find_element(By.CSS_SELECTOR, "#messages .decision .deny").click()
        wait.until(lambda d: any(t.startswith("after:") for t in _texts(d, ".msg.assistant .text")))
        assert server.ran == []
    finally:
        driver.quit()
