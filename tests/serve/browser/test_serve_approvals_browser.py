"""Served approvals in a real browser (issue 35): the agent asks to run a mutating tool, the
server restarts between the question and the click, the page (reloaded) approves, and the run
goes on. Debian's headless chromium driven by selenium, against a real uvicorn server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from goagent_py import Agent, Role, ToolCall, tool, validate_transcript
from goagent_py.testing import FunctionProvider, text_response, tool_call_response

pytestmark = pytest.mark.slow

_WAIT = 30  # seconds before a wait fails the test (never reached when things work)


class _Server:
    """The app served by a conftest ``ServedApp``, which can restart it on the same port."""

    def __init__(self, served: Any, db: Path) -> None:
        self.served = served
        self.db = db
        self.ran: list[str] = []
        # The id the model gives every call (None: the scripted default); local models'
        # servers number calls per turn, so every turn's call can have the same id.
        self.call_id: str | None = None
        self.approval_timeout: float | None = None

    @property
    def base(self) -> str:
        base: str = self.served.base
        return base

    @property
    def app(self) -> Any:
        return self.served.app

    def call(self, coro: Any) -> Any:
        return self.served.call(coro)

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
        from goagent_py.serve import create_app

        self.served.start(create_app(self._factory(), storage_path=str(self.db)))

    def stop(self) -> None:
        self.served.stop()


@pytest.fixture
def server(served_app: Callable[[], Any], tmp_path: Path) -> Iterator[_Server]:
    found = _Server(served_app(), tmp_path / "serve.db")
    try:
        found.start()
        yield found
    finally:
        found.served.close()


def _texts(driver: Any, selector: str) -> list[str]:
    texts: list[str] = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), e => e.innerText.trim())",
        selector,
    )
    return texts


def _shown(driver: Any, selector: str) -> bool:
    found = driver.find_elements(By.CSS_SELECTOR, selector)
    return bool(found) and found[0].is_displayed()


def test_the_page_approves_a_call_across_a_server_restart(
    server: _Server, launch_chromium: Callable[[], Any]
) -> None:
    driver = launch_chromium()
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


def test_a_second_call_with_the_same_id_gets_its_own_card(
    server: _Server, launch_chromium: Callable[[], Any]
) -> None:
    # durable11: the page put the decision box of a call on the first card with its id; with
    # ids numbered per turn that was the answered card of an earlier turn (its arguments
    # overwritten), while the new call's card showed no decision.
    server.call_id = "llama-tool-0"
    driver = launch_chromium()
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


def test_after_the_deadline_the_card_offers_only_deny(
    server: _Server, launch_chromium: Callable[[], Any]
) -> None:
    # durable11: past its deadline a call takes only a denial, yet the card still offered
    # Approve (and the server refused it, the card came back with Approve again).
    server.approval_timeout = 0
    driver = launch_chromium()
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
