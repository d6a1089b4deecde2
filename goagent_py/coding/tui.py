"""A full-screen UI for the coding agent (Textual): the same REPL in a window.

``python -m goagent_py.coding --root DIR`` opens it when Textual is installed (without
``--plain``). The conversation scrolls above, one input line below; the input answers the
approval questions too (``y``/``a``/``n``/``s``). Ctrl-C aborts the running turn
(``session.abort("now")``), Ctrl-Q quits. It drives :func:`~goagent_py.coding.repl.code_main`
with its own ``read_line`` and ``write``, so both front ends behave alike.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from goagent_py.errors import MissingExtraError
from goagent_py.session import Session

__all__ = ["make_app"]


def make_app(ns: argparse.Namespace, *, provider: Any = None) -> Any:
    """The Textual app for parsed arguments (``app.run()`` returns the exit status).

    Raises:
        MissingExtraError: Textual is not installed.
    """
    try:
        from textual.app import App, ComposeResult
        from textual.binding import Binding
        from textual.widgets import Input, RichLog
    except ImportError as exc:
        raise MissingExtraError("textual", "tui", feature="the full-screen coding UI") from exc

    from goagent_py.coding.repl import code_main

    class CodingApp(App[int]):
        """The window: a log and an input line."""

        BINDINGS = [  # noqa: RUF012 - Textual reads the class attribute
            Binding("ctrl+c", "abort", "abort the turn", priority=True),
            Binding("ctrl+q", "quit", "quit"),
        ]

        def __init__(self) -> None:
            super().__init__()
            self.lines: asyncio.Queue[str | None] = asyncio.Queue()
            self.prompts: asyncio.Queue[str] = asyncio.Queue()  # each question asked (for tests)
            self.session: Session | None = None
            self.output: list[str] = []

        def compose(self) -> ComposeResult:
            yield RichLog(id="log", wrap=True, markup=False)
            yield Input(placeholder="> ", id="prompt")

        def on_mount(self) -> None:
            self.query_one(Input).focus()
            self.run_worker(self._main(), exclusive=True)

        async def _main(self) -> None:
            def keep(session: Session) -> None:
                self.session = session

            code = await code_main(
                ns, provider=provider, read_line=self._read, write=self._write, on_session=keep
            )
            self.exit(code)

        async def _read(self, prompt: str) -> str | None:
            self.query_one(Input).placeholder = prompt
            self.prompts.put_nowait(prompt)
            return await self.lines.get()

        def _write(self, text: str) -> None:
            self.output.append(text)
            self.query_one(RichLog).write(text)

        def on_input_submitted(self, event: Input.Submitted) -> None:
            self._write(f"{event.input.placeholder}{event.value}")
            self.lines.put_nowait(event.value)
            event.input.value = ""

        def action_abort(self) -> None:
            if self.session is not None and self.session.state.running:
                self.session.abort("now", reason="Ctrl-C")

        async def action_quit(self) -> None:
            self.lines.put_nowait(None)

    return CodingApp()
