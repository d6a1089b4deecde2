"""The package's one way to send blocking work to a thread (fix10)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from goagent_py._workers import to_thread


def exhausted() -> int:
    return next(iter([]))


async def test_a_function_raising_stop_iteration_in_a_thread_raises_runtime_error() -> None:
    # The guard only keeps a regression from hanging the suite; the call fails at once.
    with pytest.raises(RuntimeError, match="exhausted raised StopIteration") as caught:
        await asyncio.wait_for(to_thread(exhausted), timeout=120)
    assert isinstance(caught.value.__cause__, StopIteration)


async def test_a_function_raising_stop_iteration_in_a_given_executor_raises_runtime_error() -> None:
    with ThreadPoolExecutor(1) as pool, pytest.raises(RuntimeError, match="StopIteration"):
        await asyncio.wait_for(to_thread(exhausted, executor=pool), timeout=120)


async def test_to_thread_passes_arguments_and_returns_the_result() -> None:
    assert await to_thread(divmod, 7, 2) == (3, 1)
