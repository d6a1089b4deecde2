"""Several tabs on one thread (serve13): a turn sent in one tab shows in the others without a
reload, in the same browser (one tab holds the change stream, the others hear it through a
BroadcastChannel) and in another browser (a stream of its own) (docs/serve.md, "Several tabs").

Debian's headless chromium driven by selenium, against a real uvicorn server without auth.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from goagent_py import Agent
from goagent_py.provider import CompletionRequest, CompletionResponse, StreamDone, TextDelta
from goagent_py.testing import text_response

pytestmark = pytest.mark.slow

_WAIT = 30  # seconds before a wait fails the test (never reached when things work)


class _Echo:
    def _answer(self, request: CompletionRequest) -> CompletionResponse:
        return text_response(f"echo: {request.messages[-1].text}")

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        return self._answer(request)

    async def stream(self, request: CompletionRequest) -> Any:
        response = self._answer(request)
        yield TextDelta(response.message.text)
        yield StreamDone(response)


@pytest.fixture
def served(served_app: Callable[[], Any], tmp_path: Any) -> Iterator[Any]:
    from goagent_py.serve import create_app

    provider = _Echo()
    served = served_app()
    served.start(
        create_app(
            lambda ctx: Agent(
                provider=provider, model="scripted", short_term_memory=ctx.short_term_memory
            ),
            storage_path=str(tmp_path / "serve.db"),
        )
    )
    try:
        yield served
    finally:
        served.close()


def _texts(driver: Any, selector: str) -> list[str]:
    texts: list[str] = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), e => e.textContent)",
        selector,
    )
    return texts


def _signed_in(driver: Any) -> None:
    WebDriverWait(driver, _WAIT).until(
        lambda d: d.find_element(By.ID, "whoami").text == "signed in as local"
    )


def _send(driver: Any, text: str) -> None:
    wait = WebDriverWait(driver, _WAIT)
    wait.until(lambda d: d.find_element(By.ID, "send").text == "Send")
    driver.find_element(By.ID, "input").send_keys(text)
    driver.find_element(By.ID, "send").click()
    wait.until(lambda d: f"echo: {text}" in _texts(d, "#messages .msg.assistant"))
    wait.until(lambda d: d.find_element(By.ID, "send").text == "Send")


def _watchers(served: Any) -> int:
    async def count() -> int:
        return sum(len(q) for q in served.app.server.watchers.values())

    return served.call(count())


def test_a_turn_in_one_tab_shows_in_the_other_tabs_and_browsers(
    served: Any, launch_chromium: Callable[[], Any]
) -> None:
    first = launch_chromium()
    first.get(served.base + "/")
    _signed_in(first)
    first.find_element(By.ID, "new-thread").click()
    WebDriverWait(first, _WAIT).until(lambda d: len(_texts(d, "#threads li")) == 1)
    _send(first, "one")
    tab_a = first.current_window_handle

    first.switch_to.new_window("tab")  # the same browser: its profile, cookies, locks
    first.get(served.base + "/")
    _signed_in(first)
    tab_b = first.current_window_handle
    WebDriverWait(first, _WAIT).until(lambda d: _texts(d, "#messages .msg") == ["one", "echo: one"])
    other = launch_chromium()  # another browser
    other.get(served.base + "/")
    _signed_in(other)
    WebDriverWait(other, _WAIT).until(lambda d: _texts(d, "#messages .msg") == ["one", "echo: one"])

    first.switch_to.window(tab_a)
    _send(first, "two")
    expected = ["one", "echo: one", "two", "echo: two"]
    assert _texts(first, "#messages .msg") == expected
    # No reload anywhere: the other tab and the other browser show the new turn.
    WebDriverWait(other, _WAIT).until(lambda d: _texts(d, "#messages .msg") == expected)
    first.switch_to.window(tab_b)
    WebDriverWait(first, _WAIT).until(lambda d: _texts(d, "#messages .msg") == expected)

    # A new chat made in one browser is listed in the other at once.
    other.find_element(By.ID, "new-thread").click()
    WebDriverWait(first, _WAIT).until(lambda d: len(_texts(d, "#threads li")) == 2)
    # One stream per browser, not per tab: each takes one of a browser's six connections.
    assert _watchers(served) == 2
    other.quit()
    first.quit()
