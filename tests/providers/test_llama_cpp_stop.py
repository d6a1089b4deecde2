"""LlamaCppProvider: tool arguments are bounded, and an abort stops llama.cpp at its next token.

llama-cpp-python's ``chatml-function-calling`` handler generates tool arguments with
``max_tokens=None`` (until the context window is full) and forwards no stopping criteria; the
provider wraps ``create_completion`` for each call (``Guard``). The fast tests drive the guard
with a stand-in ``create_completion``; the ``slow`` ones run the real SmolLM2-135M-Instruct.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from goagent_py import Agent, tool
from goagent_py.messages import Role, StopReason, user_message
from goagent_py.provider import CompletionRequest, StreamDone
from goagent_py.providers._llama_guard import Guard, _Aborted
from goagent_py.providers.llama_cpp import LlamaCppProvider


@tool
def write_file(path: str, content: str) -> str:
    """Write text to a file.

    Args:
        path: the file to write.
        content: the full text of the file.
    """
    return "ok"


_LONG = "Write a 3000-word essay about the history of Rome and save it to rome.txt."


class _Completions:
    """A stand-in ``create_completion``: records its kwargs, runs the stopping criteria per
    token for ``tokens`` tokens, and reports ``finish``."""

    def __init__(self, tokens: int = 3, finish: str = "stop") -> None:
        self.tokens = tokens
        self.finish = finish
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        for _ in range(self.tokens):
            if kwargs["stopping_criteria"](None, None):
                break
        return {"choices": [{"text": "x", "finish_reason": self.finish}]}


def _call_result(finish: str) -> dict[str, Any]:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{"}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"choices": [{"message": message, "finish_reason": finish}]}


def test_an_unbounded_completion_gets_the_bound_and_a_given_one_keeps_its_own() -> None:
    inner = _Completions()
    bounded = Guard(threading.Event(), 100).wrap(inner)
    bounded(prompt="a", max_tokens=None)
    bounded(prompt="b", max_tokens=-1)
    bounded(prompt="c", max_tokens=7)
    assert [c["max_tokens"] for c in inner.calls] == [100, 100, 7]


def test_the_bound_leaves_room_for_the_tool_choice() -> None:
    inner = _Completions()
    Guard(threading.Event(), 4).wrap(inner)(prompt="a", max_tokens=None)
    assert inner.calls[0]["max_tokens"] == 32


def test_a_cut_off_ends_the_handlers_loop_and_marks_the_calls() -> None:
    inner = _Completions(finish="length")
    guard = Guard(threading.Event(), 100)
    bounded = guard.wrap(inner)
    bounded(prompt="arguments", max_tokens=None)
    bounded(prompt="next call?", max_tokens=None)
    assert [c["max_tokens"] for c in inner.calls] == [100, 1]
    assert guard.marked(_call_result("tool_calls"))["choices"][0]["finish_reason"] == "length"
    text = {"choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "x"}]}
    assert guard.marked(text)["choices"][0]["finish_reason"] == "x"  # only tool calls


def test_without_a_cut_off_the_calls_are_left_alone() -> None:
    guard = Guard(threading.Event(), 100)
    guard.wrap(_Completions())(prompt="a", max_tokens=None)
    assert guard.marked(_call_result("tool_calls"))["choices"][0]["finish_reason"] == "tool_calls"


def test_the_stopping_criterion_raises_at_the_first_token_after_the_abort() -> None:
    stop = threading.Event()
    guard = Guard(stop, 100)
    assert guard.criterion(None, None) is False
    stop.set()
    with pytest.raises(_Aborted):
        guard.criterion(None, None)
    assert guard.tokens == 2
    with pytest.raises(_Aborted):  # and no new completion starts
        guard.wrap(_Completions())(prompt="a")


def test_a_stopping_criterion_of_the_caller_still_counts() -> None:
    inner = _Completions(tokens=10)
    seen: list[int] = []

    def theirs(input_ids: Any, logits: Any) -> bool:
        seen.append(1)
        return len(seen) == 3

    Guard(threading.Event(), 100).wrap(inner)(prompt="a", stopping_criteria=theirs)
    assert len(seen) == 3


class _Llama:
    def create_completion(self, **kwargs: Any) -> str:
        return "class method"


def test_installed_wraps_for_the_call_only() -> None:
    llama = _Llama()
    guard = Guard(threading.Event(), 100)
    with guard.installed(llama):
        assert "create_completion" in vars(llama)
    assert "create_completion" not in vars(llama)
    own = _Completions()
    llama.create_completion = own  # type: ignore[method-assign]
    with guard.installed(llama):
        llama.create_completion(prompt="a")
    assert llama.create_completion is own
    assert own.calls[0]["max_tokens"] == 100


@pytest.mark.needs_extra("local")
def test_context_window_is_n_ctx() -> None:
    assert LlamaCppProvider(n_ctx=2048).context_window == 2048


# -- the real model ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local() -> Iterator[LlamaCppProvider]:
    pytest.importorskip("llama_cpp", reason='needs the "local" extra')
    provider = LlamaCppProvider(temperature=0.0, seed=0)
    asyncio.run(provider.load())
    yield provider
    provider.close()


class _Spy:
    """Sits under the guard as the model's ``create_completion``: records each completion's
    generated tokens, and can call ``on_token(n)`` per token of a tool's arguments."""

    def __init__(self, llama: Any) -> None:
        self.llama = llama
        self.original = llama.create_completion
        self.generated: list[int] = []
        self.argument_tokens = 0
        self.on_token: Any = None

    def __call__(self, **kwargs: Any) -> Any:
        theirs = kwargs["stopping_criteria"]
        arguments = kwargs["prompt"].endswith("functions.write_file:\n")

        def counting(input_ids: Any, logits: Any) -> bool:
            if arguments:
                self.argument_tokens += 1
                if self.on_token is not None:
                    self.on_token(self.argument_tokens)
            return bool(theirs(input_ids, logits))

        kwargs["stopping_criteria"] = counting
        result = self.original(**kwargs)
        if isinstance(result, dict):
            self.generated.append(int(result["usage"]["completion_tokens"]))
        return result

    def __enter__(self) -> _Spy:
        self.llama.create_completion = self
        return self

    def __exit__(self, *exc: object) -> None:
        del self.llama.create_completion


def _write_request(max_tokens: int) -> CompletionRequest:
    return CompletionRequest(
        model="",
        messages=[user_message(_LONG)],
        tools=[write_file.definition],
        max_tokens=max_tokens,
    )


@pytest.mark.slow
async def test_long_tool_arguments_are_cut_off_at_the_bound(local: LlamaCppProvider) -> None:
    with _Spy(local._load()) as spy:
        response = await local.complete(_write_request(max_tokens=40))
    assert response.stop_reason == StopReason.MAX_TOKENS
    assert [c.name for c in response.message.tool_calls] == ["write_file"]
    assert max(spy.generated) == 40  # not the 4096-token window
    assert spy.argument_tokens == 40 + 1  # llama-cpp checks the criteria once more at the end


@pytest.mark.slow
async def test_a_cut_off_call_streamed_is_not_run_and_the_model_is_told(
    local: LlamaCppProvider,
) -> None:
    ran: list[str] = []

    @tool
    def write_file(path: str, content: str) -> str:  # the same tool, recording its runs
        """Write text to a file.

        Args:
            path: the file to write.
            content: the full text of the file.
        """
        ran.append(path)
        return "ok"

    events = [e async for e in local.stream(_write_request(max_tokens=40))]
    assert isinstance(events[-1], StreamDone)
    assert events[-1].response.stop_reason == StopReason.MAX_TOKENS
    provider = LlamaCppProvider(temperature=0.0, seed=0, max_tokens=40)
    provider._llama = local._llama  # share the loaded model (the module loads it once)
    provider._call_lock = local._call_lock
    agent = Agent(provider=provider, model="local", tools=[write_file], max_iterations=2)
    result = await agent.run(_LONG)
    assert ran == []
    results = [m for m in result.messages if m.role == Role.TOOL]
    assert results
    assert results[0].is_error
    assert "cut off" in results[0].text


@pytest.mark.slow
async def test_an_abort_during_tool_arguments_stops_within_a_token(
    local: LlamaCppProvider,
) -> None:
    loop = asyncio.get_running_loop()
    after_abort: list[int] = []
    asked = threading.Event()

    async def consume() -> None:
        async for _ in local.stream(_write_request(max_tokens=2000)):
            pass

    task = asyncio.create_task(consume())
    with _Spy(local._load()) as spy:

        def on_token(n: int) -> None:
            if asked.is_set():
                after_abort.append(n)
            elif n == 16:
                asked.set()
                loop.call_soon_threadsafe(task.cancel)

        spy.on_token = on_token
        with pytest.raises(asyncio.CancelledError):
            await task
    assert asked.is_set()
    # The loop takes the cancel and sets ``stop`` within a few tokens; llama.cpp then stops at
    # the next one (unbounded, the arguments run to the 2000-token bound).
    assert len(after_abort) < 16
    assert max(spy.generated, default=0) < 32  # no completion after the abort ran on
    request = CompletionRequest(model="", messages=[user_message("Hi")], max_tokens=4)
    assert (await local.complete(request)).stop_reason  # the model is free again
