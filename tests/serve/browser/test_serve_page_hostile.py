"""The built-in page against hostile content and odd sequences, in a real browser (review9d):
what a model, a tool or a title writes stays text and is shown as written; every call that waits
is decided in one request; a session that ends sends the page back to its login form.

Debian's headless chromium driven by selenium, against a real uvicorn server with a scripted
provider whose answer depends on the last message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from goagent_py import Agent, Role, tool
from goagent_py.testing import FunctionProvider, text_response, tool_call_response

pytestmark = pytest.mark.slow

_WAIT = 30  # seconds before a wait fails the test (never reached when things work)
_PASSWORD = "alice-secret-1"
# "wipe" then U+202E (right-to-left override): shown as written, the target reads "exe.txt".
_SPOOF = "notes\u202etxt.exe"
_LONG = "x" * 3000
_HOSTILE = (
    '<img src=x onerror="window.pwned=1"> [click](javascript:window.pwned=2) '
    '<svg onload="window.pwned=3"></svg><style>#app{display:none}</style>'
    "<script>window.pwned=4</script> **bold** &lt;b&gt;"
)


class _Server:
    """The app served by a conftest ``ServedApp`` (users-file auth when ``users``)."""

    def __init__(self, served: Any, tmp: Path, *, users: bool) -> None:
        self.served = served
        self.tmp = tmp
        self.users = users
        self.ran: list[str] = []
        self.held = asyncio.Event()  # "hold" waits here until the test lets it go

    @property
    def base(self) -> str:
        base: str = self.served.base
        return base

    def release(self) -> None:
        self.served.call_soon(self.held.set)

    def drop_connections(self) -> None:
        self.served.drop_connections()

    def _factory(self) -> Any:
        ran, held = self.ran, self.held

        @tool(requires_approval=True)
        def wipe(target: str) -> str:
            """Wipe something.

            Args:
                target: what.
            """
            ran.append(target)
            return f"wiped {target}"

        @tool
        def echo(text: str) -> str:
            """Echo.

            Args:
                text: what.
            """
            return text

        @tool
        async def hold() -> str:
            """Wait until released."""
            await held.wait()
            return "released"

        def answer(request: Any) -> Any:
            last = request.messages[-1]
            if last.role is Role.TOOL:
                return text_response(f"after: {last.text}")
            text = last.text
            if text == "two":
                return tool_call_response(("wipe", {"target": "a"}), ("wipe", {"target": "b"}))
            if text == "spoof":
                return tool_call_response(("wipe", {"target": _SPOOF}))
            if text.startswith("<img"):
                return tool_call_response(("echo", {"text": _HOSTILE}), text=_HOSTILE)
            if text == "hold":
                return tool_call_response(("hold", {}))
            if text.startswith("long"):
                return text_response(_LONG)
            return text_response(f"echo: {text}")

        provider = FunctionProvider(answer)

        def factory(ctx: Any) -> Agent:
            return Agent(
                provider=provider,
                model="scripted",
                tools=[wipe, hold, echo],
                short_term_memory=ctx.short_term_memory,
            )

        return factory

    def start(self) -> None:
        from goagent_py.serve import UsersFileAuth, create_app, hash_password

        auth = None
        if self.users:
            users_file = self.tmp / "users.txt"
            users_file.write_text(f"alice:{hash_password(_PASSWORD)}\n")
            auth = UsersFileAuth(str(users_file))
        app = create_app(self._factory(), storage_path=str(self.tmp / "serve.db"), auth=auth)
        self.served.start(app)


def _serving(served_app: Callable[[], Any], tmp: Path, *, users: bool) -> Iterator[_Server]:
    found = _Server(served_app(), tmp, users=users)
    try:
        found.start()
        yield found
    finally:
        found.served.close()


@pytest.fixture(scope="module")
def server(
    served_app: Callable[[], Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[_Server]:
    """Without auth, as ``goagent-py serve`` starts by default."""
    yield from _serving(served_app, tmp_path_factory.mktemp("serve"), users=False)


@pytest.fixture(scope="module")
def users_server(
    served_app: Callable[[], Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[_Server]:
    yield from _serving(served_app, tmp_path_factory.mktemp("serve-users"), users=True)


@pytest.fixture(scope="module")
def page(server: _Server, launch_chromium: Callable[[], Any]) -> Iterator[Any]:
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


def _shown(driver: Any, selector: str) -> bool:
    found = driver.find_elements(By.CSS_SELECTOR, selector)
    return bool(found) and all(f.is_displayed() for f in found)


def _new_chat_and_send(driver: Any, text: str) -> None:
    wait = WebDriverWait(driver, _WAIT)
    wait.until(lambda d: d.find_element(By.ID, "send").text == "Send")
    before = len(_texts(driver, "#threads li"))
    driver.find_element(By.ID, "new-thread").click()
    wait.until(lambda d: len(_texts(d, "#threads li")) == before + 1)
    wait.until(lambda d: _texts(d, "#messages > *") == [])
    driver.find_element(By.ID, "input").send_keys(text)
    driver.find_element(By.ID, "send").click()


def _in_viewport(driver: Any, element: Any) -> bool:
    inside: bool = driver.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= window.innerWidth;",
        element,
    )
    return bool(element.is_displayed() and inside)


def test_an_approval_card_shows_bidi_overrides_as_escapes(page: Any, server: _Server) -> None:
    # What the person approves is what runs: an override in the arguments would show the
    # target "notes\u202etxt.exe" as "notesexe.txt" (the terminal shows it as an escape).
    _new_chat_and_send(page, "spoof")
    wait = WebDriverWait(page, _WAIT)
    wait.until(lambda d: _shown(d, "#messages details.tool .decision .approve"))
    (args,) = _texts(page, "#messages details.tool .args")
    assert "\u202e" not in args
    assert '"target": "notes\\u202etxt.exe"' in args
    # a reload shows the card from the stored record the same way
    page.refresh()
    wait.until(lambda d: _shown(d, "#messages details.tool .decision .approve"))
    (args,) = _texts(page, "#messages details.tool .args")
    assert '"target": "notes\\u202etxt.exe"' in args
    page.find_element(By.CSS_SELECTOR, "#messages .decision .deny").click()
    wait.until(lambda d: d.find_element(By.ID, "send").text == "Send")
    assert server.ran == []


def test_two_waiting_calls_are_decided_in_one_request(page: Any, server: _Server) -> None:
    # The server takes the decisions of a turn all at once: deciding the first card alone
    # was a 400 ("decide every waiting call") and left that card without buttons.
    server.ran.clear()
    _new_chat_and_send(page, "two")
    wait = WebDriverWait(page, _WAIT)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#messages .decision .approve")) == 2)
    wait.until(lambda d: d.find_element(By.ID, "send").text == "Send")
    first, second = page.find_elements(By.CSS_SELECTOR, "#messages details.tool")
    first.find_element(By.CSS_SELECTOR, ".decision .approve").click()
    wait.until(lambda d: "1 more" in d.find_element(By.ID, "status").text)
    assert "error" not in page.find_element(By.ID, "status").get_attribute("class")
    assert server.ran == []
    second.find_element(By.CSS_SELECTOR, ".decision .deny").click()
    wait.until(lambda d: len(_texts(d, "#messages .msg.assistant .text")) == 1)
    wait.until(lambda d: d.find_element(By.ID, "status").text.startswith("done"))
    assert server.ran == ["a"]
    assert first.find_element(By.CSS_SELECTOR, ".result").text == "wiped a"
    assert "error" in second.get_attribute("class")  # the denied call's card
    assert not page.find_elements(By.CSS_SELECTOR, "#messages .decision")


def test_a_long_unbroken_answer_and_title_stay_inside_the_page(page: Any) -> None:
    _new_chat_and_send(page, "long" + "y" * 80)
    wait = WebDriverWait(page, _WAIT)
    wait.until(lambda d: _texts(d, "#messages .msg.assistant .text") == [_LONG])
    wait.until(lambda d: d.find_element(By.ID, "send").text == "Send")
    bubble = page.find_element(By.CSS_SELECTOR, "#messages .msg.assistant")
    wide: bool = page.execute_script(
        "return arguments[0].scrollWidth > arguments[0].clientWidth", bubble
    )
    assert not wide
    messages = page.find_element(By.ID, "messages")
    assert not page.execute_script(
        "return arguments[0].scrollWidth > arguments[0].clientWidth", messages
    )
    # the thread is named after the message: Rename and Delete stay on screen
    wait.until(lambda d: d.find_element(By.ID, "thread-title").text.startswith("longyyy"))
    for button in ("rename", "delete", "stop"):
        assert _in_viewport(page, page.find_element(By.ID, button)), button


def test_a_session_that_ends_brings_back_the_login_form(
    users_server: _Server, launch_chromium: Callable[[], Any]
) -> None:
    driver = launch_chromium()
    try:
        wait = WebDriverWait(driver, _WAIT)
        driver.get(users_server.base + "/")
        wait.until(lambda d: d.find_element(By.ID, "login").is_displayed())
        driver.find_element(By.ID, "login-user").send_keys("alice")
        driver.find_element(By.ID, "login-secret").send_keys(_PASSWORD)
        driver.find_element(By.CSS_SELECTOR, "#login-form button").click()
        wait.until(lambda d: d.find_element(By.ID, "whoami").text == "signed in as alice")
        _new_chat_and_send(driver, "hello")
        wait.until(lambda d: _texts(d, "#messages .msg.assistant .text") == ["echo: hello"])
        wait.until(lambda d: d.find_element(By.ID, "send").text == "Send")
        # another tab logs out: the session ends on the server
        driver.execute_async_script(
            "const done = arguments[0];"
            "fetch('/api/logout', {method: 'POST', headers: {'content-type': 'application/json'},"
            " body: '{}'}).then(() => done())"
        )
        driver.find_element(By.ID, "input").send_keys("still there?")
        driver.find_element(By.ID, "send").click()
        wait.until(lambda d: d.find_element(By.ID, "login").is_displayed())
        assert not driver.find_element(By.ID, "app").is_displayed()
        assert driver.find_element(By.ID, "login-error").text  # what the server said
    finally:
        driver.quit()


def test_the_page_logs_out(users_server: _Server, launch_chromium: Callable[[], Any]) -> None:
    driver = launch_chromium()
    try:
        wait = WebDriverWait(driver, _WAIT)
        driver.get(users_server.base + "/")
        wait.until(lambda d: d.find_element(By.ID, "login").is_displayed())
        driver.find_element(By.ID, "login-user").send_keys("alice")
        driver.find_element(By.ID, "login-secret").send_keys(_PASSWORD)
        driver.find_element(By.CSS_SELECTOR, "#login-form button").click()
        wait.until(lambda d: d.find_element(By.ID, "whoami").text == "signed in as alice")
        driver.find_element(By.ID, "logout").click()
        wait.until(lambda d: d.find_element(By.ID, "login").is_displayed())
        me = driver.execute_async_script(
            "const done = arguments[0]; fetch('/api/me').then(r => r.json()).then(done)"
        )
        assert me["authenticated"] is False
        assert driver.find_element(By.ID, "login-secret").get_attribute("value") == ""
    finally:
        driver.quit()


def test_a_message_from_a_second_tab_steers_the_run_it_follows(page: Any, server: _Server) -> None:
    # Two tabs on one thread: the second one follows the first one's run (serve14), so its
    # message steers that run (it was refused with a 409 and given back); both tabs show it
    # where the run took it, and the answer to it.
    wait = WebDriverWait(page, _WAIT)
    _new_chat_and_send(page, "hold")
    wait.until(lambda d: d.find_element(By.ID, "send").text == "Steer")
    first = page.current_window_handle
    page.switch_to.new_window("tab")
    done = ["hold", "me too", "echo: me too"]
    try:
        page.get(server.base + "/")  # opens the thread the first tab opened last
        wait.until(lambda d: _texts(d, "#messages .msg.user .text") == ["hold"])
        wait.until(lambda d: d.find_element(By.ID, "send").text == "Steer")
        page.find_element(By.ID, "input").send_keys("me too")
        page.find_element(By.ID, "send").click()
        wait.until(lambda d: _texts(d, "#messages .msg.user .text") == ["hold", "me too"])
        assert page.find_element(By.ID, "input").get_attribute("value") == ""
        server.release()
        wait.until(lambda d: _texts(d, "#messages .msg .text") == done)
    finally:
        page.close()
        page.switch_to.window(first)
        server.release()
    wait.until(lambda d: _texts(d, "#messages .msg .text") == done)


def test_html_and_markdown_from_the_model_and_tools_stay_text(page: Any) -> None:
    # The message (which becomes the title), the answer, a tool's arguments and its result all
    # carry HTML, SVG, CSS and a javascript: link: each is shown as those characters.
    wait = WebDriverWait(page, _WAIT)
    _new_chat_and_send(page, _HOSTILE)
    wait.until(lambda d: len(_texts(d, "#messages .msg.assistant .text")) == 2)
    wait.until(lambda d: d.find_element(By.ID, "send").text == "Send")
    for selector in ("#messages .msg.user .text", "#messages .msg.assistant .text"):
        assert _HOSTILE in _texts(page, selector), selector
    assert _texts(page, "#messages details.tool .result")[0] == _HOSTILE
    # the thread list is reloaded when the run is over: the title is the message, as text
    wait.until(lambda d: _HOSTILE[:60] in "".join(_texts(d, "#threads li.active")))
    made = page.execute_script(
        "return document.querySelectorAll('#app img, #app svg, #app style, #app script,"
        " #app a, #app b, #app strong').length"
    )
    assert made == 0
    assert page.execute_script("return window.pwned === undefined")
    assert page.find_element(By.ID, "app").is_displayed()
    page.refresh()  # rebuilt from the stored record: the same
    wait.until(lambda d: len(_texts(d, "#messages .msg.assistant .text")) == 2)
    assert _texts(page, "#messages details.tool .result")[0] == _HOSTILE
    assert page.execute_script("return document.querySelectorAll('#app img, #app svg').length") == 0
    assert page.execute_script("return window.pwned === undefined")


def test_after_a_dropped_stream_the_page_shows_what_the_server_kept(
    page: Any, server: _Server
) -> None:
    # The connection breaks mid-run: the server stops the run and stores it closed (the call
    # that did not finish gets an error result). The page, which painted a card still waiting
    # for its result, shows the thread as the server holds it once it can reach it again.
    wait = WebDriverWait(page, _WAIT)
    server.held.clear()
    _new_chat_and_send(page, "hold")
    wait.until(lambda d: d.find_element(By.ID, "send").text == "Steer")
    wait.until(lambda d: _texts(d, "#messages details.tool summary") == ["tool hold …"])
    server.drop_connections()
    wait.until(lambda d: _shown(d, "#messages details.tool.error"))
    wait.until(lambda d: "connection was lost" in d.find_element(By.ID, "status").text)
    stored = page.execute_async_script(
        "const done = arguments[0];"
        "fetch(`/api/threads/${localStorage.getItem('goagent.thread')}/messages`)"
        ".then(r => r.json()).then(d => done(d.messages.map(m => m.role)))"
    )
    assert stored == ["user", "assistant", "tool"]
    assert _texts(page, "#messages .msg.user .text") == ["hold"]
    card = page.find_element(By.CSS_SELECTOR, "#messages details.tool")
    assert "error" in card.get_attribute("class")
    assert card.find_element(By.CSS_SELECTOR, ".result").get_attribute("textContent")


def test_another_chat_does_not_open_while_a_run_streams(page: Any, server: _Server) -> None:
    # The run's events paint the chat on screen: opening another one mid-run would paint them
    # into it. The page says why instead, and New chat makes no empty thread meanwhile.
    wait = WebDriverWait(page, _WAIT)
    server.held.clear()
    _new_chat_and_send(page, "another one")
    wait.until(lambda d: _texts(d, "#messages .msg.assistant .text") == ["echo: another one"])
    _new_chat_and_send(page, "hold")
    wait.until(lambda d: d.find_element(By.ID, "send").text == "Steer")
    before = _texts(page, "#threads li")
    try:
        page.find_element(By.ID, "new-thread").click()
        wait.until(lambda d: "wait for it" in d.find_element(By.ID, "status").text)
        page.find_elements(By.CSS_SELECTOR, "#threads li:not(.active)")[0].click()
        assert _texts(page, "#messages .msg.user .text") == ["hold"]
    finally:
        server.release()
    wait.until(lambda d: _texts(d, "#messages .msg.assistant .text") == ["after: released"])
    assert len(_texts(page, "#threads li")) == len(before)  # no empty thread made


def test_back_after_a_logout_elsewhere_shows_the_login_form(
    users_server: _Server, launch_chromium: Callable[[], Any]
) -> None:
    # The person leaves the chat, logs out elsewhere (another tab), comes back with the back
    # button: the browser may restore the page as it was, conversation included, without
    # asking the server anything.
    driver = launch_chromium()
    try:
        wait = WebDriverWait(driver, _WAIT)
        driver.get(users_server.base + "/")
        wait.until(lambda d: d.find_element(By.ID, "login").is_displayed())
        driver.find_element(By.ID, "login-user").send_keys("alice")
        driver.find_element(By.ID, "login-secret").send_keys(_PASSWORD)
        driver.find_element(By.CSS_SELECTOR, "#login-form button").click()
        wait.until(lambda d: d.find_element(By.ID, "whoami").text == "signed in as alice")
        _new_chat_and_send(driver, "secret plans")
        wait.until(lambda d: _texts(d, "#messages .msg.assistant .text") == ["echo: secret plans"])
        wait.until(lambda d: d.find_element(By.ID, "send").text == "Send")
        driver.get(users_server.base + "/api/me")
        driver.execute_async_script(
            "const done = arguments[0];"
            "fetch('/api/logout', {method: 'POST', headers: {'content-type': 'application/json'},"
            " body: '{}'}).then(() => done())"
        )
        driver.back()
        wait.until(lambda d: d.find_element(By.ID, "login").is_displayed())
        assert not driver.find_element(By.ID, "app").is_displayed()
        assert _texts(driver, "#messages .msg") == []
    finally:
        driver.quit()


def test_a_logout_in_one_tab_closes_the_chat_in_the_others(
    users_server: _Server, launch_chromium: Callable[[], Any]
) -> None:
    # One browser, two tabs on the chat; Log out in one: the other stops showing the
    # conversation at once, not at its next request (a shared computer).
    driver = launch_chromium()
    try:
        wait = WebDriverWait(driver, _WAIT)
        driver.get(users_server.base + "/")
        wait.until(lambda d: d.find_element(By.ID, "login").is_displayed())
        driver.find_element(By.ID, "login-user").send_keys("alice")
        driver.find_element(By.ID, "login-secret").send_keys(_PASSWORD)
        driver.find_element(By.CSS_SELECTOR, "#login-form button").click()
        wait.until(lambda d: d.find_element(By.ID, "whoami").text == "signed in as alice")
        _new_chat_and_send(driver, "secret plans")
        wait.until(lambda d: _texts(d, "#messages .msg.assistant .text") == ["echo: secret plans"])
        first = driver.current_window_handle
        driver.switch_to.new_window("tab")
        driver.get(users_server.base + "/")
        wait.until(lambda d: _texts(d, "#messages .msg.user .text") == ["secret plans"])
        driver.find_element(By.ID, "logout").click()
        wait.until(lambda d: d.find_element(By.ID, "login").is_displayed())
        driver.switch_to.window(first)
        wait.until(lambda d: d.find_element(By.ID, "login").is_displayed())
        assert not driver.find_element(By.ID, "app").is_displayed()
        assert _texts(driver, "#messages .msg") == []
    finally:
        driver.quit()
