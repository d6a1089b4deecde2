"""A model load that ``wait_loaded`` tries again is a registered load like the first one.

docs/notes/ragcode14.md, "Found, not fixed": a failed background load was tried again in a
daemon worker that ``loading()`` did not know, so a Ctrl-C during that second try took the
normal exit, which finalises the interpreter while ONNX Runtime or torch is still running (the
abort ``exit_if_loading`` exists to avoid).
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from goagent_py.cli import _setup

GENEROUS = 60.0


class _FailsThenWaits:
    """A model whose first load fails and whose second waits until it is let go."""

    def __init__(self) -> None:
        self.calls = 0
        self.second_started = threading.Event()
        self.let_go = threading.Event()

    def _load(self) -> None:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("the first load failed")
        self.second_started.set()
        assert self.let_go.wait(GENEROUS)


class _AlwaysFails:
    def __init__(self) -> None:
        self.calls = 0

    def _load(self) -> None:
        self.calls += 1
        raise RuntimeError(f"load {self.calls} failed")


@pytest.fixture(autouse=True)
def _own_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_setup, "_LOADS", [])


def test_a_retried_load_counts_as_loading_while_it_runs() -> None:
    model = _FailsThenWaits()
    seen: list[bool] = []

    async def main() -> None:
        waiting = asyncio.ensure_future(_setup.wait_loaded(model))
        assert await asyncio.to_thread(model.second_started.wait, GENEROUS)
        seen.append(_setup.loading())  # was False: the retry ran in an unregistered worker
        model.let_go.set()
        await waiting

    asyncio.run(main())
    assert seen == [True]
    assert model.calls == 2
    assert not _setup.loading()


def test_a_load_that_fails_twice_raises_the_second_failure() -> None:
    model = _AlwaysFails()
    with pytest.raises(RuntimeError, match="load 2 failed"):
        asyncio.run(_setup.wait_loaded(model))
    assert not _setup.loading()


def test_a_load_that_succeeded_is_not_called_again() -> None:
    class Loaded:
        calls = 0

        def _load(self) -> None:
            type(self).calls += 1

    asyncio.run(_setup.wait_loaded(Loaded()))
    assert Loaded.calls == 1  # was 2: called again after it had loaded
    assert not _setup.loading()
