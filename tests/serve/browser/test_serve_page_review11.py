"""The page reviewed as a user and as an attacker (page11): keyboard alone, and what a model
writes into an answer or a title that would reorder or hide what the person reads.

Debian's headless chromium driven by selenium, against a real uvicorn server without auth and a
scripted provider whose answer depends on the last message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from goagent_py import Agent
from goagent_py.testing import FunctionProvider, text_response

pytestmark = pytest.mark.slow

_WAIT = 30  # seconds before a wait fails the test (never reached when things work)
# U+202E (right-to-left override) then U+202C (pop): "invoice_fdp.exe" would read
# "invoice_exe.pdf"; ESC starts a terminal sequence; U+0007 rings a bell; U+2067 isolates.
_SPOOFED = "invoice_\u202efdp.exe\u202c \x1b[31mred\x07 \u2067x\u2069"
_ESCAPED = "invoice_\\u202efdp.exe\\u202c \\e[31mred\\x07 \\u2067x\\u2069"


@pytest.fixture(scope="module")
def base(served_app: Callable[[], Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from goagent_py.serve import create_app

    def answer(request: Any) -> Any:
        text = request.messages[-1].text
        if text.startswith("spoof"):
            return text_response(f"Download {_SPOOFED}")
        return text_response(f"echo: {text}")

    provider = FunctionProvider(answer)
    served = served_app()
    served.start(
        create_app(
            lambda ctx: Agent(
                provider=provider, model="scripted", short_term_memory=ctx.short_term_memory
            ),
            storage_path=str(tmp_path_factory.mktemp("serve") / "serve.db"),
        )
    )
    try:
        yield served.base
    finally:
        served.close()


@pytest.fixture(scope="module")
def page(base: str, launch_chromium: Callable[[], Any]) -> Iterator[Any]:
    driver = launch_chromium()
    try:
        driver.get(base + "/")
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


def _chat(driver: Any, text: str) -> None:
    """A new chat, one message, its answer."""
    wait = WebDriverWait(driver, _WAIT)
    wait.until(lambda d: d.find_element(By.ID, "send").text == "Send")
    before = len(_texts(driver, "#threads li"))
    driver.find_element(By.ID, "new-thread").click()
    wait.until(lambda d: len(_texts(d, "#threads li")) == before + 1)
    wait.until(lambda d: _texts(d, "#messages > *") == [])
    # set, not typed: the keys of ESC and the bell would be pressed rather than written
    driver.execute_script("document.getElementById('input').value = arguments[0]", text)
    driver.find_element(By.ID, "send").click()
    wait.until(lambda d: len(_texts(d, "#messages .msg.assistant")) == 1)
    wait.until(lambda d: d.find_element(By.ID, "send").text == "Send")


def _focused_text(driver: Any) -> str:
    text: str = driver.execute_script("return document.activeElement.textContent")
    return text


def test_the_keyboard_alone_opens_another_thread(page: Any) -> None:
    # Tab to a thread in the list and press Enter: a person without a mouse can go back to an
    # earlier chat (the list's items took clicks only).
    wait = WebDriverWait(page, _WAIT)
    _chat(page, "the first chat")
    _chat(page, "the second chat")
    assert _texts(page, "#threads li.active") == ["the second chat"]
    page.find_element(By.ID, "input").click()
    keys = ActionChains(page)
    for _ in range(40):  # every control of the page, forwards and round again
        if _focused_text(page) == "the first chat":
            break
        keys.send_keys(Keys.TAB).perform()
    assert _focused_text(page) == "the first chat"
    keys.send_keys(Keys.ENTER).perform()
    wait.until(lambda d: _texts(d, "#threads li.active") == ["the first chat"])
    wait.until(lambda d: _texts(d, "#messages .msg.user .text") == ["the first chat"])
    # and the active one says so to a screen reader
    current = page.find_elements(By.CSS_SELECTOR, "#threads [aria-current=true]")
    assert [c.text for c in current] == ["the first chat"]


def test_overrides_and_control_characters_in_answers_and_titles_show_as_escapes(
    page: Any,
) -> None:
    # What a tool card already did (docs/serve.md): an override in an answer or a title would
    # make "invoice_\u202efdp.exe" read "invoice_exe.pdf"; a control character would be hidden.
    wait = WebDriverWait(page, _WAIT)
    _chat(page, "spoof " + _SPOOFED)
    assert _texts(page, "#messages .msg.assistant .text") == [f"Download {_ESCAPED}"]
    assert _texts(page, "#messages .msg.user .text") == ["spoof " + _ESCAPED]
    wait.until(lambda d: _texts(d, "#threads li.active") == ["spoof " + _ESCAPED])
    assert page.find_element(By.ID, "thread-title").get_attribute("textContent") == (
        "spoof " + _ESCAPED
    )
    # the stored record is the text as written; a reload shows it the same way
    stored = page.execute_async_script(
        "const done = arguments[0];"
        "fetch(`/api/threads/${localStorage.getItem('goagent.thread')}/messages`)"
        ".then(r => r.json()).then(d => done(d.messages.map(m => m.text)))"
    )
    assert stored == ["spoof " + _SPOOFED, f"Download {_SPOOFED}"]
    page.refresh()
    wait.until(lambda d: _texts(d, "#messages .msg.assistant .text") == [f"Download {_ESCAPED}"])
    wait.until(lambda d: _texts(d, "#threads li.active") == ["spoof " + _ESCAPED])
    # newlines and tabs stay what they are
    _chat(page, "lines\tone\ntwo")
    assert _texts(page, "#messages .msg.assistant .text") == ["echo: lines\tone\ntwo"]
