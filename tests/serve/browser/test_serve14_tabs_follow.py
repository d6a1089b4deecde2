"""Several tabs on one thread, reviewed in a real browser (serve14): a run started in another
tab or browser streams live in every tab open on its thread, opened before or during it; and
a reload of the thread caused by another tab's change keeps the approval decisions this tab
had begun (docs/serve.md, "Several tabs").

Debian's headless chromium driven by selenium, against a real uvicorn server without auth.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from goagent_py import Agent, Role, tool
from goagent_py.testing import FunctionProvider, text_response, tool_call_response
from tests.serve.browser.tabs import (
    WAIT,
    Slow,
    on_a_new_thread,
    signed_in,
    slow_server,
    texts,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def slow(served_app: Callable[[], Any], tmp_path: Path) -> Iterator[tuple[Any, Slow]]:
    with slow_server(served_app, tmp_path) as both:
        yield both


def test_a_run_started_elsewhere_streams_live_in_every_tab_on_its_thread(
    slow: tuple[Any, Slow], launch_chromium: Callable[[], Any]
) -> None:
    served, model = slow
    first = launch_chromium()
    on_a_new_thread(first, served.base)
    other = launch_chromium()  # another browser, open on the thread before the run
    other.get(served.base + "/")
    signed_in(other)
    WebDriverWait(other, WAIT).until(lambda d: len(texts(d, "#threads li")) == 1)

    first.find_element(By.ID, "input").send_keys("hello")
    first.find_element(By.ID, "send").click()
    WebDriverWait(first, WAIT).until(lambda d: "Hel" in texts(d, "#messages .msg.assistant"))
    assert model.waiting == 1  # the model holds the rest back
    # The other browser shows the run as it streams: the message and the answer so far.
    WebDriverWait(other, WAIT).until(lambda d: texts(d, "#messages .msg") == ["hello", "Hel"])
    # A tab opened during the run (the first browser's second tab) follows it too.
    first.switch_to.new_window("tab")
    first.get(served.base + "/")
    signed_in(first)
    WebDriverWait(first, WAIT).until(lambda d: texts(d, "#messages .msg") == ["hello", "Hel"])
    assert model.waiting == 1
    # It can stop or steer the run it follows.
    assert first.find_element(By.ID, "send").text == "Steer"
    assert first.find_element(By.ID, "stop").is_enabled()

    assert model.go is not None
    served.call_soon(model.go.set)
    done = ["hello", "Hello!"]
    WebDriverWait(other, WAIT).until(lambda d: texts(d, "#messages .msg") == done)
    WebDriverWait(first, WAIT).until(lambda d: texts(d, "#messages .msg") == done)
    WebDriverWait(first, WAIT).until(lambda d: d.find_element(By.ID, "send").text == "Send")
    assert not first.find_element(By.ID, "stop").is_enabled()
    for driver in (first, other):
        logs = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert logs == []
    other.quit()
    first.quit()


class _Approvals:
    """Each message asks for two calls of a tool that waits for approval."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def factory(self) -> Any:
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
                results = [m.text for m in request.messages if m.role is Role.TOOL]
                return text_response("after: " + " | ".join(results))
            return tool_call_response(("wipe", {"target": "a"}), ("wipe", {"target": "b"}))

        provider = FunctionProvider(answer)
        return lambda ctx: Agent(
            provider=provider,
            model="scripted",
            tools=[wipe],
            short_term_memory=ctx.short_term_memory,
        )


def test_a_reload_for_another_tabs_change_keeps_the_decisions_begun(
    served_app: Callable[[], Any], tmp_path: Path, launch_chromium: Callable[[], Any]
) -> None:
    from goagent_py.serve import create_app

    approvals = _Approvals()
    served = served_app()
    served.start(create_app(approvals.factory(), storage_path=str(tmp_path / "serve.db")))
    try:
        driver = launch_chromium()
        wait = WebDriverWait(driver, WAIT)
        driver.get(served.base + "/")
        signed_in(driver)
        driver.find_element(By.ID, "new-thread").click()
        wait.until(lambda d: len(texts(d, "#threads li")) == 1)
        driver.find_element(By.ID, "input").send_keys("wipe both")
        driver.find_element(By.ID, "send").click()
        cards = "#messages details.tool.pending"
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, cards)) == 2)
        wait.until(lambda d: d.find_element(By.ID, "send").text == "Send")
        first, second = driver.find_elements(By.CSS_SELECTOR, "#messages details.tool")
        first.find_element(By.CSS_SELECTOR, ".approve").click()  # decided, not sent yet
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, cards)) == 1)
        second.find_element(By.CSS_SELECTOR, ".reason").send_keys("not b")
        driver.execute_script("document.querySelector('#messages').firstChild.dataset.old = 1")

        # Another tab (here a plain client) renames the thread: this tab reloads it.
        tid = driver.execute_script("return localStorage.getItem('goagent.thread')")
        r = httpx.patch(f"{served.base}/api/threads/{tid}", json={"title": "renamed"})
        assert r.status_code == 200, r.text
        wait.until(
            lambda d: (
                not d.execute_script(
                    "return document.querySelector('#messages [data-old]') !== null"
                )
            )
        )
        assert driver.find_element(By.ID, "thread-title").text == "renamed"
        first, second = driver.find_elements(By.CSS_SELECTOR, "#messages details.tool")
        # The decision made and the reason typed are still there.
        assert "pending" not in first.get_attribute("class")
        assert not first.find_element(By.CSS_SELECTOR, ".approve").is_enabled()
        assert "pending" in second.get_attribute("class")
        assert second.find_element(By.CSS_SELECTOR, ".reason").get_attribute("value") == "not b"

        second.find_element(By.CSS_SELECTOR, ".deny").click()  # the last: both are sent
        wait.until(
            lambda d: any(t.startswith("after:") for t in texts(d, "#messages .msg.assistant"))
        )
        answer = [t for t in texts(driver, "#messages .msg.assistant") if t.startswith("after")]
        assert approvals.ran == ["a"]
        assert "wiped a" in answer[0]
        assert "not b" in answer[0]  # the reason typed before the reload reached the model
        logs = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert logs == []
        driver.quit()
    finally:
        served.close()
