"""Regenerate docs/images/serve-chat.png: the built-in chat page mid-conversation, with a tool
card and the recalled-memories panel.

Runs ``goagent_py.serve.create_app`` on a free localhost port with a deterministic provider
(no model, no network), drives Debian's headless chromium with selenium (``apt-get install
chromium chromium-driver``; selenium is in the ``dev`` extra) and saves a screenshot::

    python scripts/serve_screenshot.py [--out docs/images/serve-chat.png]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import socket
import tempfile
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from goagent_py import Agent
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.messages import Message, Role, TextBlock
from goagent_py.provider import (
    CompletionRequest,
    CompletionResponse,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)
from goagent_py.serve import ThreadContext, create_app
from goagent_py.testing import FakeEmbedder, text_response, tool_call_response
from goagent_py.tools import tool

QUESTION = "Will I need my rain jacket for the ride home tonight?"
ANSWER = (
    "Yes, take it. Paris has light rain this evening (14 °C) with a mild 12 km/h wind, "
    "so the ride home will be wet but not cold. Miso will want a towel-dried cuddle."
)
FACTS = (
    "I live in Paris and cycle home from work",
    "my cat is called Miso",
    "I prefer temperatures in Celsius",
)
OTHER_THREADS = ("Miso's vet appointment", "Weekend in Lyon", "Birthday gift ideas")


class _Demo:
    """Answers the question with a weather tool call, then with the forecast."""

    def _answer(self, request: CompletionRequest) -> CompletionResponse:
        last = request.messages[-1]
        if last.role is Role.TOOL:
            return text_response(ANSWER)
        if "rain" in last.text:
            return tool_call_response(("weather", {"city": "Paris", "when": "this evening"}))
        return text_response(f"echo: {last.text}")

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        return self._answer(request)

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        response = self._answer(request)
        for i, word in enumerate(response.message.text.split(" ") if response.message.text else []):
            yield TextDelta(word if i == 0 else " " + word)
        for i, call in enumerate(response.message.tool_calls):
            yield ToolCallStart(i, call.id, call.name)
            yield ToolCallDelta(i, json.dumps(call.arguments))
        yield StreamDone(response)


@tool
async def weather(city: str, when: str = "now") -> str:
    """The weather forecast for a city."""
    await asyncio.sleep(0.18)  # a plausible duration on the card
    return json.dumps(
        {"city": city, "when": when, "sky": "light rain", "temp_c": 14, "wind_kmh": 12}
    )


def _app(folder: Path, loop: asyncio.AbstractEventLoop) -> Any:
    ltm = LongTermMemory(FakeEmbedder(), InMemoryVectorStore(), top_k=3, score_threshold=-1.0)
    for fact in FACTS:
        message = Message(Role.USER, [TextBlock(fact)])
        asyncio.run_coroutine_threadsafe(ltm.store([message], session="user-local"), loop).result()
    provider = _Demo()

    def factory(ctx: ThreadContext) -> Agent:
        return Agent(
            provider=provider,
            model="demo",
            name=ctx.memory_scope,
            tools=[weather],
            short_term_memory=ctx.short_term_memory,
            long_term_memory=ltm,
        )

    return create_app(factory, storage_path=str(folder / "serve.db"), long_term_memory=ltm)


def _chromium(profile: str, width: int, height: int) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--window-size={width},{height}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    return webdriver.Chrome(options=options, service=Service(driver))


def main() -> None:
    """Serve the demo, chat once in chromium, save the screenshot."""
    import httpx
    import uvicorn
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs/images/serve-chat.png")
    parser.add_argument("--width", type=int, default=1200)
    parser.add_argument("--height", type=int, default=760)
    args = parser.parse_args()

    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    with tempfile.TemporaryDirectory() as folder:
        app = _app(Path(folder), loop)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        serving = asyncio.run_coroutine_threadsafe(server.serve(sockets=[sock]), loop)
        for title in OTHER_THREADS:
            httpx.post(base + "/api/threads", json={"title": title}).raise_for_status()
        driver = _chromium(str(Path(folder) / "profile"), args.width, args.height)
        try:
            wait = WebDriverWait(driver, 30)
            driver.get(base + "/")
            wait.until(lambda d: d.find_element(By.ID, "whoami").text.startswith("signed in"))
            driver.find_element(By.ID, "new-thread").click()
            wait.until(lambda d: d.find_element(By.ID, "thread-title").text == "New chat")
            driver.find_element(By.ID, "input").send_keys(QUESTION)
            driver.find_element(By.ID, "send").click()
            wait.until(lambda d: d.find_element(By.ID, "send").text == "Send")
            wait.until(lambda d: d.find_element(By.ID, "status").text.startswith("done"))
            ttft = driver.execute_script("return document.body.dataset.ttftMs")
            # Selenium scrolls what it clicks into view, which once hid a login form stacked
            # above the chat (issue 37): refuse to save a picture of a scrolled page.
            if driver.find_element(By.ID, "login").is_displayed():
                raise SystemExit("the login form is visible without auth")
            if driver.execute_script("return window.scrollY") != 0:
                raise SystemExit("the page is scrolled: the chat is not in view at first paint")
            out = Path(args.out)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(driver.get_screenshot_as_png())
            print(f"{out}: {out.stat().st_size // 1024} KiB; time to first token {ttft} ms")
        finally:
            driver.quit()
            server.should_exit = True
            serving.result(30)
            asyncio.run_coroutine_threadsafe(app.aclose(), loop).result(30)
            loop.call_soon_threadsafe(loop.stop)
            runner.join(30)
            # The streams' shutdown watcher (serve/_sse.py) may still be on the loop: end it.
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()
            sock.close()


if __name__ == "__main__":
    main()
