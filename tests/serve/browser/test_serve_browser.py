"""The built-in page in a real browser: Debian's headless chromium driven by selenium, against
a real uvicorn server with a deterministic provider (users-file auth, long-term memory; one
server without auth for what ``goagent-py serve`` shows by default).

One chromium serves most of the module (others only for the other user's test and the first
look at a page); the server runs in its own thread and event loop, so the tests can look at its
side (runs, transcripts, tools). What the user sees is checked as displayed and in the viewport,
not as present in the DOM (issue 37).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from goagent_py import Agent
from goagent_py.messages import Message, Role, StopReason, TextBlock
from goagent_py.provider import (
    CompletionRequest,
    CompletionResponse,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)
from goagent_py.testing import text_response, tool_call_response

pytestmark = pytest.mark.slow

T = TypeVar("T")
PASSWORDS = {"alice": "alice-secret-1", "bob": "bob-secret-22", "carol": "carol-secret-333"}
STREAMED = "The quick brown fox jumps over the lazy dog."
_WAIT = 30  # seconds before a wait fails the test (never reached when things work)


class _World:
    """The server side: the served app, the gates the tests open, what the tools saw."""

    def __init__(self, served: Any) -> None:
        self.served = served  # conftest.ServedApp
        self.mid_stream = asyncio.Event()  # the streaming answer waits here after two words
        self.tool_entered = threading.Event()
        self.tool_cancelled = threading.Event()
        self.tool_released = asyncio.Event()  # never set: only Stop ends wait_here

    @property
    def app(self) -> Any:
        return self.served.app

    @property
    def base(self) -> str:
        base: str = self.served.base
        return base

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the server's loop and return its result."""
        result: T = self.served.call(coro)
        return result

    def release_stream(self) -> None:
        self.served.call_soon(self.mid_stream.set)


class _Router:
    """A deterministic provider: the answer depends on the last message; text streams word by
    word, and "stream" answers pause mid-way until the test lets them go on."""

    def __init__(self, world: _World) -> None:
        self.world = world

    def _answer(self, request: CompletionRequest) -> CompletionResponse:
        last = request.messages[-1]
        if last.role is Role.TOOL:
            return text_response(f"Here is the forecast: {last.text}.")
        text = last.text
        if text.startswith("weather in "):
            return tool_call_response(("weather", {"city": text.removeprefix("weather in ")}))
        if text == "wait for me":
            return tool_call_response(("wait_here", {}))
        if text.startswith("stream"):
            return text_response(STREAMED)
        return text_response(f"echo: {text}")

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        return self._answer(request)

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        response = self._answer(request)
        words = response.message.text.split(" ") if response.message.text else []
        for i, word in enumerate(words):
            if i == 2 and response.message.text == STREAMED:
                await self.world.mid_stream.wait()
            yield TextDelta(word if i == 0 else " " + word)
        for i, call in enumerate(response.message.tool_calls):
            yield ToolCallStart(i, call.id, call.name)
            yield ToolCallDelta(i, json.dumps(call.arguments))
        yield StreamDone(response)


def _build_app(world: _World, tmp: Path, *, users: bool = True) -> Any:
    from goagent_py.memory.deciders import RuleDecider
    from goagent_py.memory.long_term import LongTermMemory
    from goagent_py.memory.vector.in_memory import InMemoryVectorStore
    from goagent_py.memory.write_policies import user_statements
    from goagent_py.serve import ThreadContext, UsersFileAuth, create_app, hash_password
    from goagent_py.testing import FakeEmbedder
    from goagent_py.tools import tool

    @tool
    def weather(city: str) -> str:
        """Today's weather in a city."""
        return f"sunny, 21 °C in {city}"

    @tool
    async def wait_here() -> str:
        """Wait until released."""
        world.tool_entered.set()
        try:
            await world.tool_released.wait()
        except asyncio.CancelledError:
            world.tool_cancelled.set()
            raise
        return "released"

    # As `goagent-py serve` sets it up: the rule decider, the user's own statements only.
    ltm = LongTermMemory(FakeEmbedder(), InMemoryVectorStore(), top_k=3, decider=RuleDecider())
    for text in ("my cat is called Miso", "I live in Paris and like the weather there"):
        world.call(ltm.store([Message(Role.USER, [TextBlock(text)])], session="user-alice"))
    users_file = tmp / "users.txt"
    users_file.write_text("".join(f"{u}:{hash_password(p)}\n" for u, p in PASSWORDS.items()))
    provider = _Router(world)

    def factory(ctx: ThreadContext) -> Agent:
        return Agent(
            provider=provider,
            model="scripted",
            name=ctx.memory_scope,
            tools=[weather, wait_here],
            short_term_memory=ctx.short_term_memory,
            long_term_memory=ltm,
            write_policy=user_statements(about_user=True),
        )

    return create_app(
        factory,
        storage_path=str(tmp / "serve.db"),
        auth=UsersFileAuth(str(users_file)) if users else None,
        long_term_memory=ltm,
    )


@pytest.fixture(scope="module")
def world(
    served_app: Callable[[], Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[_World]:
    """The server with users-file auth."""
    yield from _running(served_app, tmp_path_factory, users=True)


@pytest.fixture(scope="module")
def local_world(
    served_app: Callable[[], Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[_World]:
    """The server without auth, as ``goagent-py serve`` starts by default."""
    yield from _running(served_app, tmp_path_factory, users=False)


def _running(
    served_app: Callable[[], Any], factory: pytest.TempPathFactory, *, users: bool
) -> Iterator[_World]:
    world = _World(served_app())
    try:
        world.served.start(_build_app(world, factory.mktemp("serve"), users=users))
        yield world
    finally:
        world.served.close()


def _login(driver: Any, world: _World, user: str) -> None:
    driver.get(world.base + "/")
    wait = WebDriverWait(driver, _WAIT)
    wait.until(lambda d: d.find_element(By.ID, "login").is_displayed())
    driver.find_element(By.ID, "login-user").send_keys(user)
    driver.find_element(By.ID, "login-secret").send_keys(PASSWORDS[user])
    driver.find_element(By.CSS_SELECTOR, "#login-form button").click()
    wait.until(lambda d: d.find_element(By.ID, "whoami").text == f"signed in as {user}")


@pytest.fixture(scope="module")
def alice(world: _World, launch_chromium: Callable[[], Any]) -> Iterator[Any]:
    driver = launch_chromium()
    try:
        _login(driver, world, "alice")
        yield driver
    finally:
        driver.quit()


def _severe(driver: Any) -> list[str]:
    """The browser console's SEVERE entries since the last call."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _visible_in_viewport(driver: Any, element_id: str) -> bool:
    """Whether the element is displayed and wholly inside the viewport, unscrolled."""
    element = driver.find_element(By.ID, element_id)
    inside: bool = driver.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return window.scrollY === 0 && r.width > 0 && r.height > 0 && r.top >= 0 &&"
        " r.left >= 0 && r.bottom <= window.innerHeight && r.right <= window.innerWidth;",
        element,
    )
    return bool(element.is_displayed() and inside)


def test_without_auth_the_page_opens_on_the_chat(
    local_world: _World, launch_chromium: Callable[[], Any]
) -> None:
    # Issue 37: what the user SEES at first paint, not what is in the DOM.
    driver = launch_chromium()
    try:
        driver.get(local_world.base + "/")
        WebDriverWait(driver, _WAIT).until(
            lambda d: d.find_element(By.ID, "whoami").text == "signed in as local"
        )
        assert not driver.find_element(By.ID, "login").is_displayed()
        assert not driver.find_element(By.ID, "login-secret").is_displayed()
        for element_id in ("input", "send", "new-thread"):
            assert _visible_in_viewport(driver, element_id), element_id
        assert _severe(driver) == []
    finally:
        driver.quit()


def test_with_auth_the_page_opens_on_the_login_form_alone(
    world: _World, launch_chromium: Callable[[], Any]
) -> None:
    driver = launch_chromium()
    try:
        driver.get(world.base + "/")
        WebDriverWait(driver, _WAIT).until(
            lambda d: d.execute_script("return !document.getElementById('login').hidden")
        )
        for element_id in ("login-user", "login-secret"):
            assert _visible_in_viewport(driver, element_id), element_id
        assert not driver.find_element(By.ID, "app").is_displayed()
        assert not driver.find_element(By.ID, "input").is_displayed()
        # Asking who is there before the login is no error (issue 29: a SEVERE entry for
        # the 401 of /api/me on every visit).
        assert _severe(driver) == []
    finally:
        driver.quit()


def _new_chat(driver: Any) -> None:
    before = driver.execute_script("return localStorage.getItem('goagent.thread')")
    driver.find_element(By.ID, "new-thread").click()
    # The page has opened the new thread once it is the active one in the list (the list is
    # loaded last): a message typed earlier could be wiped by the thread's (empty) history.
    WebDriverWait(driver, _WAIT).until(
        lambda d: (
            d.execute_script("return localStorage.getItem('goagent.thread')") != before
            and _texts(d, "#threads li.active") == ["New chat"]
        )
    )


def _api(driver: Any, path: str) -> tuple[int, Any]:
    """GET ``path`` from the page, with its cookie: (status, JSON body)."""
    status, body = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0]).then(r => r.text().then(t => done([r.status, t])));",
        path,
    )
    return int(status), json.loads(body)


def _send(driver: Any, text: str) -> None:
    box = driver.find_element(By.ID, "input")
    box.send_keys(text)
    driver.find_element(By.ID, "send").click()


def _idle(driver: Any) -> None:
    """Wait until the page's run is over (Send is back)."""
    WebDriverWait(driver, _WAIT).until(lambda d: d.find_element(By.ID, "send").text == "Send")


def _texts(driver: Any, selector: str) -> list[str]:
    # One script reads them all: the page may re-render the list between two WebDriver calls
    # (a stale element), and a list read half before and half after would be wrong anyway.
    texts: list[str] = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), e => e.innerText.trim())",
        selector,
    )
    return texts


def test_a_message_streams_into_the_page(world: _World, alice: Any) -> None:
    _new_chat(alice)
    _send(alice, "stream something")
    wait = WebDriverWait(alice, _WAIT)
    # The answer stops after two words on the server until the test lets it go on: the page
    # shows the partial text while the run is still going...
    wait.until(lambda d: _texts(d, "#messages .msg.assistant .text") == ["The quick"])
    assert alice.find_element(By.ID, "stop").is_enabled()
    ttft = alice.execute_script("return document.body.dataset.ttftMs")
    world.release_stream()
    # ...then the rest, delta by delta.
    wait.until(lambda d: _texts(d, "#messages .msg.assistant .text") == [STREAMED])
    _idle(alice)
    assert alice.find_element(By.ID, "status").text.startswith("done (first token")
    # No script error, no Content-Security-Policy violation, no missing file, no failed
    # request (the login page included: the fixture logged in on this page).
    assert _severe(alice) == []
    print(f"\ntime to first token, measured in the page: {float(ttft):.1f} ms")


def test_a_tool_card_shows_arguments_result_and_duration(world: _World, alice: Any) -> None:
    _new_chat(alice)
    _send(alice, "weather in Lyon")
    _idle(alice)
    card = alice.find_element(By.CSS_SELECTOR, "#messages details.tool")
    assert '"city": "Lyon"' in card.find_element(By.CSS_SELECTOR, ".args").text
    assert card.find_element(By.CSS_SELECTOR, ".result").text == "sunny, 21 °C in Lyon"
    assert re.fullmatch(r"tool weather — \d+ ms", card.find_element(By.TAG_NAME, "summary").text)
    assert _texts(alice, "#messages .msg.assistant .text") == [
        "Here is the forecast: sunny, 21 °C in Lyon."
    ]
    ttft = float(alice.execute_script("return document.body.dataset.ttftMs"))
    print(f"\ntime to first token after a tool call, measured in the page: {ttft:.1f} ms")


def test_a_reload_restores_the_thread_with_its_tool_card(world: _World, alice: Any) -> None:
    _new_chat(alice)
    _send(alice, "weather in Nice")
    _idle(alice)
    thread = alice.execute_script("return localStorage.getItem('goagent.thread')")
    alice.refresh()
    wait = WebDriverWait(alice, _WAIT)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#messages details.tool")) == 1)
    assert alice.execute_script("return localStorage.getItem('goagent.thread')") == thread
    assert _texts(alice, "#messages .msg.user .text") == ["weather in Nice"]
    assert _texts(alice, "#messages .msg.assistant .text") == [
        "Here is the forecast: sunny, 21 °C in Nice."
    ]
    card = alice.find_element(By.CSS_SELECTOR, "#messages details.tool")
    # The duration survives the reload (kept by the server beside the conversation).
    assert re.fullmatch(r"tool weather — \d+ ms", card.find_element(By.TAG_NAME, "summary").text)
    card.find_element(By.TAG_NAME, "summary").click()  # restored cards are folded
    assert card.find_element(By.CSS_SELECTOR, ".result").text == "sunny, 21 °C in Nice"
    assert '"city": "Nice"' in card.find_element(By.CSS_SELECTOR, ".args").text
    assert alice.find_element(By.ID, "thread-title").text == "weather in Nice"


def test_stop_cancels_the_run_on_the_server(world: _World, alice: Any) -> None:
    _new_chat(alice)
    thread = alice.execute_script("return localStorage.getItem('goagent.thread')")
    _send(alice, "wait for me")
    assert world.tool_entered.wait(_WAIT)
    WebDriverWait(alice, _WAIT).until(lambda d: d.find_element(By.ID, "stop").is_enabled())
    alice.find_element(By.ID, "stop").click()
    # The server side: the tool saw its cancellation, the run ended aborted.
    assert world.tool_cancelled.wait(_WAIT)
    _idle(alice)
    live = world.app.server.live[("alice", thread)]
    assert live.run is None
    assert live.session.state.last_result.stop_reason is StopReason.ABORTED
    assert not world.tool_released.is_set()
    transcript = world.call(live.session.agent.options.short_term_memory.transcript())
    assert [m.role for m in transcript] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert transcript[2].is_error
    assert transcript[2].tool_call_id == transcript[1].tool_calls[0].id
    assert alice.find_element(By.ID, "status").text.startswith("stopped")
    # The thread goes on.
    _send(alice, "still there?")
    _idle(alice)
    assert _texts(alice, "#messages .msg.assistant .text")[-1] == "echo: still there?"


def test_another_user_sees_neither_threads_nor_memories(
    world: _World, alice: Any, launch_chromium: Callable[[], Any]
) -> None:
    _new_chat(alice)
    _send(alice, "weather in Paris")
    _idle(alice)
    # The owner's panel: what long-term memory brought back, with scores.
    recalled = _texts(alice, "#memory-list li")
    assert any("I live in Paris" in r for r in recalled)
    # Scores are cosine similarities: without a threshold an unrelated memory can score < 0.
    assert all(re.match(r"-?\d\.\d{3} ", r) for r in recalled), recalled
    alice_thread = alice.execute_script("return localStorage.getItem('goagent.thread')")
    status, listed = _api(alice, "/api/threads")
    assert status == 200
    alice_threads = [t["title"] for t in listed["threads"]]
    assert "weather in Paris" in alice_threads

    bob = launch_chromium()
    try:
        _login(bob, world, "bob")  # his own cookie, in his own browser profile
        assert _api(bob, "/api/threads") == (200, {"threads": []})
        assert _api(bob, f"/api/threads/{alice_thread}/messages")[0] == 404
        assert _api(bob, f"/api/threads/{alice_thread}")[0] == 404
        status, found = _api(bob, "/api/memories?q=cat")
        assert status == 200
        assert not any("Miso" in m["text"] or "Paris" in m["text"] for m in found["memories"])
        _new_chat(bob)
        _send(bob, "what is my cat called")
        _idle(bob)
        assert not any("Miso" in r or "Paris" in r for r in _texts(bob, "#memory-list li"))
        WebDriverWait(bob, _WAIT).until(
            lambda d: _texts(d, "#threads li") == ["what is my cat called"]
        )
    finally:
        bob.quit()
    # Alice's session is untouched by Bob's login.
    alice.refresh()
    WebDriverWait(alice, _WAIT).until(lambda d: _texts(d, "#threads li") == alice_threads)


def test_the_memories_panel_shows_current_facts_and_their_history(
    world: _World, launch_chromium: Callable[[], Any]
) -> None:
    # Issue 31: a corrected fact replaces the old one in the panel, and its history (when,
    # which decider, what it was) is one click away.
    carol = launch_chromium()
    try:
        _login(carol, world, "carol")
        wait = WebDriverWait(carol, _WAIT)
        wait.until(lambda d: _texts(d, "#fact-list li") == ["nothing remembered yet"])
        _new_chat(carol)
        _send(carol, "I live in Lisbon.")
        _idle(carol)
        wait.until(lambda d: _texts(d, "#fact-list > li summary") == ["I live in Lisbon.1 change"])
        _send(carol, "I moved to Porto last month.")
        _idle(carol)
        wait.until(lambda d: _texts(d, "#fact-list > li summary") == ["I live in Porto.2 changes"])
        assert _visible_in_viewport(carol, "fact-list")
        history = carol.find_element(By.CSS_SELECTOR, "#fact-list .history")
        assert not history.is_displayed()  # folded until asked for
        carol.find_element(By.CSS_SELECTOR, "#fact-list > li summary").click()
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#fact-list .history").is_displayed())
        lines = _texts(carol, "#fact-list .history li")
        when = r"\d{4}-\d\d-\d\d \d\d:\d\d"
        assert re.fullmatch(when + r" added “I live in Lisbon\.” \(by rules\)", lines[0])
        assert re.fullmatch(
            when + r" updated: “I live in Lisbon\.” → “I live in Porto\.”"
            r" \(by rules\)",
            lines[1],
        ), lines
        assert len(lines) == 2
        # The route behind it: the current fact with its history; all=1 adds the replaced one.
        status, data = _api(carol, "/api/memories/history?all=1")
        assert status == 200
        states = {m["text"]: m["state"] for m in data["memories"]}
        assert states == {"I live in Lisbon.": "superseded", "I live in Porto.": "current"}
        # It survives a reload (the store is the record, not the page).
        carol.refresh()
        wait.until(lambda d: _texts(d, "#fact-list > li summary") == ["I live in Porto.2 changes"])
        assert _severe(carol) == []
    finally:
        carol.quit()
