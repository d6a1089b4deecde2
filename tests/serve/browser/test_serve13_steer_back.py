"""A steer the run never takes goes back to the person (serve13): Stop a slow answer after
steering it, and the steering message leaves the chat and is back in the box, where the page
showed it as sent and the server had dropped it (docs/serve.md, "Steering").

Debian's headless chromium driven by selenium, against a real uvicorn server without auth.
"""

from __future__ import annotations

import asyncio
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


class _Slow:
    """Streams "thinking…", then waits for ever (until the run is stopped)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        return text_response("unused")

    async def stream(self, request: CompletionRequest) -> Any:
        self.asked.append(request.messages[-1].text)
        yield TextDelta("thinking…")
        await asyncio.Event().wait()
        yield StreamDone(text_response("never"))


@pytest.fixture
def served(served_app: Callable[[], Any], tmp_path: Any) -> Iterator[Any]:
    from goagent_py.serve import create_app

    provider = _Slow()
    served = served_app()
    served.start(
        create_app(
            lambda ctx: Agent(
                provider=provider, model="scripted", short_term_memory=ctx.short_term_memory
            ),
            storage_path=str(tmp_path / "serve.db"),
        )
    )
    served.provider = provider
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


def test_a_steer_a_stopped_run_never_took_goes_back_into_the_box(
    served: Any, launch_chromium: Callable[[], Any]
) -> None:
    driver = launch_chromium()
    wait = WebDriverWait(driver, _WAIT)
    driver.get(served.base + "/")
    wait.until(lambda d: d.find_element(By.ID, "whoami").text == "signed in as local")
    driver.find_element(By.ID, "new-thread").click()
    wait.until(lambda d: len(_texts(d, "#threads li")) == 1)
    driver.find_element(By.ID, "input").send_keys("go")
    driver.find_element(By.ID, "send").click()
    wait.until(lambda d: _texts(d, "#messages .msg.assistant") == ["thinking…"])
    driver.find_element(By.ID, "input").send_keys("and also this")
    driver.find_element(By.ID, "send").click()  # "Steer" while the run goes on
    wait.until(lambda d: "and also this" in _texts(d, "#messages .msg.user"))
    wait.until(lambda d: d.find_element(By.ID, "input").get_attribute("value") == "")
    driver.find_element(By.ID, "stop").click()
    wait.until(lambda d: d.find_element(By.ID, "send").text == "Send")
    wait.until(lambda d: d.find_element(By.ID, "input").get_attribute("value") == "and also this")
    assert _texts(driver, "#messages .msg.user") == ["go"]  # the steer was never taken
    assert "did not take your last message" in driver.find_element(By.ID, "status").text
    assert served.provider.asked == ["go"]
    driver.quit()


class _Gated:
    """Streams "thinking…" for "go" and waits for the test; answers anything else at once."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.asked: list[str] = []

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        return text_response("unused")

    async def stream(self, request: CompletionRequest) -> Any:
        last = request.messages[-1].text
        self.asked.append(last)
        if last == "go":
            yield TextDelta("thinking…")
            await self.gate.wait()
            yield StreamDone(text_response("thinking…"))
            return
        yield TextDelta(f"answer to {last}")
        yield StreamDone(text_response(f"answer to {last}"))


# The page's fetch of /steer reaches the server, then fails as a connection reset after the
# request would: the person cannot know whether the server kept the message.
_LOSE_STEER_ANSWERS = """
const real = window.fetch;
window.fetch = async (path, init) => {
  const response = await real(path, init);
  if (String(path).endsWith("/steer")) throw new TypeError("Failed to fetch");
  return response;
};
"""


def test_a_steer_whose_answer_was_lost_is_shown_once_as_the_server_kept_it(
    served_app: Callable[[], Any], tmp_path: Any, launch_chromium: Callable[[], Any]
) -> None:
    from goagent_py.serve import create_app

    provider = _Gated()
    served = served_app()
    served.start(
        create_app(
            lambda ctx: Agent(
                provider=provider, model="scripted", short_term_memory=ctx.short_term_memory
            ),
            storage_path=str(tmp_path / "serve.db"),
        )
    )
    driver = launch_chromium()
    try:
        wait = WebDriverWait(driver, _WAIT)
        driver.get(served.base + "/")
        wait.until(lambda d: d.find_element(By.ID, "whoami").text == "signed in as local")
        driver.find_element(By.ID, "new-thread").click()
        wait.until(lambda d: len(_texts(d, "#threads li")) == 1)
        driver.find_element(By.ID, "input").send_keys("go")
        driver.find_element(By.ID, "send").click()
        wait.until(lambda d: _texts(d, "#messages .msg.assistant") == ["thinking…"])
        driver.execute_script(_LOSE_STEER_ANSWERS)
        driver.find_element(By.ID, "input").send_keys("and this")
        driver.find_element(By.ID, "send").click()  # the server takes it; the page hears nothing
        wait.until(lambda d: "and this" not in d.find_element(By.ID, "status").text)
        served.call_soon(provider.gate.set)
        wait.until(lambda d: "answer to and this" in _texts(d, "#messages .msg.assistant"))
        wait.until(lambda d: d.find_element(By.ID, "send").text == "Send")
        wait.until(lambda d: d.find_element(By.ID, "offline").get_attribute("hidden"))
        # Shown once, as the server kept it, and not back in the box as if it was lost.
        wait.until(lambda d: _texts(d, "#messages .msg.user") == ["go", "and this"])
        assert driver.find_element(By.ID, "input").get_attribute("value") == ""
        assert provider.asked == ["go", "and this"]
    finally:
        driver.quit()
        served.close()
