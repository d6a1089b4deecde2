"""Several tabs on one thread in a real browser (serve14_tabs_follow, serve15_hidden_tabs): a
slow served model, a served app on it, and what a tab reads of the page."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from goagent_py import Agent
from goagent_py.provider import CompletionRequest, StreamDone, TextDelta
from goagent_py.testing import text_response

WAIT = 30  # seconds before a wait fails the test (never reached when things work)


class Slow:
    """Streams "Hel", then waits for ``go`` (set on the server's loop) before "lo!"."""

    def __init__(self) -> None:
        self.go: asyncio.Event | None = None
        self.waiting = 0

    async def complete(self, request: CompletionRequest) -> Any:
        raise AssertionError("the served run streams")

    async def stream(self, request: CompletionRequest) -> AsyncIterator[Any]:
        self.go = self.go or asyncio.Event()
        yield TextDelta("Hel")
        self.waiting += 1
        await asyncio.wait_for(self.go.wait(), 120)
        yield TextDelta("lo!")
        yield StreamDone(text_response("Hello!"))


def texts(driver: Any, selector: str) -> list[str]:
    texts: list[str] = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), e => e.textContent)",
        selector,
    )
    return texts


def signed_in(driver: Any) -> None:
    WebDriverWait(driver, WAIT).until(
        lambda d: d.find_element(By.ID, "whoami").text == "signed in as local"
    )


@contextlib.contextmanager
def slow_server(served_app: Callable[[], Any], tmp_path: Path) -> Iterator[tuple[Any, Slow]]:
    """A served app (no auth) whose model is a :class:`Slow`; its run let go and the server
    closed after."""
    from goagent_py.serve import create_app

    model = Slow()
    served = served_app()
    served.start(
        create_app(
            lambda ctx: Agent(
                provider=model, model="scripted", short_term_memory=ctx.short_term_memory
            ),
            storage_path=str(tmp_path / "serve.db"),
        )
    )
    try:
        yield served, model
    finally:
        if model.go is not None:
            served.call_soon(model.go.set)
        served.close()


def on_a_new_thread(driver: Any, base: str) -> None:
    """``driver`` on the page at ``base``, signed in, with one new thread open."""
    driver.get(base + "/")
    signed_in(driver)
    driver.find_element(By.ID, "new-thread").click()
    WebDriverWait(driver, WAIT).until(lambda d: len(texts(d, "#threads li")) == 1)
