"""Bounds and interrupts the completions llama-cpp-python makes for one chat call.

Private to :mod:`goagent_py.providers.llama_cpp` (see :class:`Guard`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["Guard"]

_MIN_BOUND = 32
"""The smallest bound given to a completion llama-cpp-python asks with no ``max_tokens``."""


class _Aborted(Exception):
    """Raised inside the worker thread once the caller has gone (``stop`` is set)."""


class Guard:
    """Bounds and interrupts every completion llama-cpp-python makes for one chat call.

    ``chatml_function_calling`` generates a tool choice and each tool call's arguments with
    ``max_tokens=None`` (until the context window is full: minutes on a CPU) and forwards no
    stopping criteria; its ``logits_processor`` runs inside a ctypes sampler callback, which
    prints and drops exceptions. But it calls ``llama.create_completion``, so, for the call
    only (under the call lock), the instance's ``create_completion`` is wrapped: an unbounded
    completion gets ``max_tokens`` and every completion a stopping criterion, checked in
    Python after each token, that raises :class:`_Aborted` once ``stop`` is set.

    Args:
        stop: set when the caller has gone (a stream closed, a task cancelled).
        max_tokens: the bound for each completion that asks for none (at least 32).
    """

    def __init__(self, stop: threading.Event, max_tokens: int) -> None:
        self.stop = stop
        self.max_tokens = max_tokens
        self.cut_off = False
        self.tokens = 0

    def criterion(self, input_ids: Any, logits: Any) -> bool:
        """The stopping criterion: never stops a completion, raises once aborted."""
        self.tokens += 1
        if self.stop.is_set():
            raise _Aborted
        return False

    def wrap(self, create_completion: Any) -> Any:
        """``create_completion`` bounded, interruptible, and watched for a cut-off."""

        def bounded(*args: Any, **kwargs: Any) -> Any:
            if self.stop.is_set():
                raise _Aborted
            limit = kwargs.get("max_tokens")
            if limit is None or limit <= 0:
                # At least enough for the tool-choice step's "functions.<name>:".
                kwargs["max_tokens"] = max(self.max_tokens, _MIN_BOUND)
            if self.cut_off:
                # The call is already cut off, so it will not run: end the handler's loop over
                # further calls (each would be as long) at once.
                kwargs["max_tokens"] = 1
            theirs = kwargs.get("stopping_criteria")

            def criteria(input_ids: Any, logits: Any) -> bool:
                return self.criterion(input_ids, logits) or bool(
                    theirs is not None and theirs(input_ids, logits)
                )

            kwargs["stopping_criteria"] = criteria
            result = create_completion(*args, **kwargs)
            if isinstance(result, dict) and _finish_of(result) == "length":
                self.cut_off = True
            return result

        return bounded

    @contextlib.contextmanager
    def installed(self, llama: Any) -> Iterator[None]:
        """Wrap ``llama.create_completion`` (an instance attribute) while the block runs."""
        original = getattr(llama, "create_completion", None)
        if original is None:  # not a llama_cpp.Llama (a test double)
            yield
            return
        had_own = "create_completion" in vars(llama)
        llama.create_completion = self.wrap(original)
        try:
            yield
        finally:
            if had_own:
                llama.create_completion = original
            else:
                del llama.create_completion

    def marked(self, result: dict[str, Any]) -> dict[str, Any]:
        """``result`` with ``finish_reason`` "length" if a completion of its tool calls was cut
        off (the chat handler says "tool_calls" whatever happened)."""
        if self.cut_off and _tool_calls_of(result):
            result["choices"][0]["finish_reason"] = "length"
        return result


def _finish_of(result: dict[str, Any]) -> str | None:
    choices = result.get("choices") or [{}]
    reason: str | None = choices[0].get("finish_reason")
    return reason


def _tool_calls_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    choices = result.get("choices") or [{}]
    calls: list[dict[str, Any]] = (choices[0].get("message") or {}).get("tool_calls") or []
    return calls
