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
from goagent_py.provider import CompletionRequest, CompletionResponse, StreamDone, TextDelta
from goagent_py.testing import text_response

pytestmark = pytest.mark.slow

_WAIT = 30  # seconds before a wait fails the test (never reached when things work)
# U+202E (right-to-left override) then U+202C (pop): "invoice_fdp.exe" would read
# "invoice_exe.pdf"; ESC starts a terminal sequence; U+0007 rings a bell; U+2067 isolates.
_SPOOFED = "invoice_\u202efdp.exe\u202c \x1b[31mred\x07 \u2067x\u2069"
_ESCAPED = "invoice_\\u202efdp.exe\\u202c \\e[31mred\\x07 \\u2067x\\u2069"
_HUGE = [f"w{i}" for i in range(20_000)]  # one delta each: ~130 KB of answer


class _Provider:
    """The answer depends on the last message; it streams word by word."""

    def _answer(self, request: CompletionRequest) -> CompletionResponse:
        text = request.messages[-1].text
        if text.startswith("spoof"):
            return text_response(f"Download {_SPOOFED}")
        if text == "huge":
            return text_response(" ".join(_HUGE))
        return text_response(f"echo: {text}")

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        return self._answer(request)

    async def stream(self, request: CompletionRequest) -> Any:
        response = self._answer(request)
        for i, word in enumerate(response.message.text.split(" ")):
            yield TextDelta(word if i == 0 else " " + word)
        yield StreamDone(response)


@pytest.fixture(scope="module")
def served(
    served_app: Callable[[], Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    from goagent_py.serve import create_app

    provider = _Provider()
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
        yield served
    finally:
        served.close()


@pytest.fixture(scope="module")
def page(served: Any, launch_chromium: Callable[[], Any]) -> Iterator[Any]:
    driver = launch_chromium()
    try:
        driver.get(served.base + "/")
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


def _chat(driver: Any, text: str, *, wait_for: float = _WAIT) -> None:
    """A new chat, one message, its answer."""
    wait = WebDriverWait(driver, wait_for)
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
    wait.until(lambda d: _texts(d, "#threads li.active") == ["the second chat"])
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


def test_a_long_streamed_answer_does_not_stall_the_page(page: Any) -> None:
    # 20,000 deltas: each one rewrote the whole answer and measured the page for the scroll,
    # so the page froze (over 120 s, chromedriver gave up; 2.3 s now, on a busy machine).
    # The bound only stops a hang.
    _chat(page, "huge", wait_for=120)
    (answer,) = _texts(page, "#messages .msg.assistant .text")
    assert answer == " ".join(_HUGE)
    assert page.find_element(By.ID, "status").text.startswith("done")
    # the chat is scrolled to the end of the answer
    assert page.execute_script(
        "const m = document.getElementById('messages');"
        "return m.scrollHeight - m.scrollTop - m.clientHeight < 2"
    )


def test_a_long_thread_opens(page: Any, served: Any) -> None:
    # 2,000 turns: the page scrolled (and so laid itself out) once per message it added, so
    # opening the thread froze it (over 120 s, chromedriver gave up; ~9 s now, page load
    # included). The bound only stops a hang.
    from goagent_py.messages import Message, Role, TextBlock

    turns = 2000

    async def fill() -> str:
        thread = await served.app.server.threads.create("local", "a long thread")
        live = await served.app.server.live_of("local", thread["id"])
        memory = live.session.agent.options.short_term_memory
        for i in range(turns):
            await memory.append(Message(Role.USER, [TextBlock(f"question {i} " + "ipsum " * 10)]))
            await memory.append(Message(Role.ASSISTANT, [TextBlock(f"answer {i} " + "sit " * 20)]))
        return str(thread["id"])

    thread = served.call(fill())
    page.execute_script("localStorage.setItem('goagent.thread', arguments[0])", thread)
    page.refresh()
    WebDriverWait(page, 120).until(
        lambda d: (
            d.execute_script("return document.querySelectorAll('#messages .msg').length")
            == 2 * turns
        )
    )
    assert _texts(page, "#messages .msg.user .text")[-1].startswith(f"question {turns - 1} ")
    WebDriverWait(page, _WAIT).until(
        lambda d: d.execute_script(
            "const m = document.getElementById('messages');"
            "return m.scrollHeight - m.scrollTop - m.clientHeight < 2"
        )
    )
