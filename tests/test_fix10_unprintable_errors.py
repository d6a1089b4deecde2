"""Errors from code we do not own whose ``__str__`` raises: described, never replaced (fix10).

A provider, a memory store, a guardrail, an approval check or an argument repair may raise an
exception that cannot be written out. The run must report that exception (its type, as the
cause), not the second error its ``__str__`` raised while the message was built.
"""

from __future__ import annotations

from typing import Any

import pytest

from goagent_py import Agent, Hooks
from goagent_py.errors import GuardrailTripped, MemoryStoreError, ProviderError
from goagent_py.memory import ShortTermMemory
from goagent_py.messages import Message, user_message
from goagent_py.testing import FunctionProvider, ScriptedProvider, text_response, tool_call_response
from goagent_py.tools import tool


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str() of this error raises")


def _failing_provider() -> FunctionProvider:
    def fn(request: Any) -> Any:
        raise UnprintableError()

    return FunctionProvider(fn)


def _assert_provider_error(error: BaseException) -> None:
    assert isinstance(error, ProviderError)
    assert isinstance(error.__cause__, UnprintableError)
    assert "UnprintableError" in str(error)
    assert "str() of this error raises" not in str(error)


async def test_a_provider_error_whose_str_raises_is_the_cause_of_a_quiet_runs_error() -> None:
    agent = Agent(provider=_failing_provider())
    with pytest.raises(ProviderError) as caught:
        await agent.run("hi")
    _assert_provider_error(caught.value)


async def test_a_provider_error_whose_str_raises_is_the_cause_when_hooks_listen() -> None:
    seen: list[Any] = []
    agent = Agent(
        provider=_failing_provider(), hooks=Hooks(on_provider_response=lambda i, r: seen.append(r))
    )
    with pytest.raises(ProviderError) as caught:
        await agent.run("hi")
    _assert_provider_error(caught.value)
    assert isinstance(seen[0].error, UnprintableError)


async def test_a_provider_error_whose_str_raises_is_the_cause_of_a_streamed_runs_error() -> None:
    agent = Agent(provider=_failing_provider())
    with pytest.raises(ProviderError) as caught:
        async for _ in agent.stream("hi"):
            pass
    _assert_provider_error(caught.value)


class _UnreadableMemory:
    async def messages(self) -> list[Message]:
        raise UnprintableError()

    async def append(self, *messages: Message) -> None:
        return None


async def test_a_memory_store_error_whose_str_raises_is_the_cause_of_the_runs_error() -> None:
    agent = Agent(
        provider=ScriptedProvider(text_response("ok")), short_term_memory=_UnreadableMemory()
    )
    with pytest.raises(MemoryStoreError) as caught:
        await agent.run("hi")
    assert isinstance(caught.value.__cause__, UnprintableError)
    assert "str() of this error raises" not in str(caught.value)


async def test_a_guardrail_whose_error_cannot_be_written_trips_naming_its_error() -> None:
    def guard(value: Any, ctx: Any) -> None:
        raise UnprintableError()

    agent = Agent(provider=ScriptedProvider(text_response("ok")), input_guardrails=[guard])
    with pytest.raises(GuardrailTripped) as caught:
        await agent.run("hi")
    assert "UnprintableError" in str(caught.value)
    assert "str() of this error raises" not in str(caught.value)


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def _tool_then_answer() -> ScriptedProvider:
    return ScriptedProvider(tool_call_response(("echo", {"text": "x"})), text_response("done"))


def _result_text(provider: ScriptedProvider) -> str:
    tool_message = provider.requests[1].messages[-1]
    return tool_message.text


async def test_an_approval_check_whose_error_cannot_be_written_blocks_the_call() -> None:
    def gate(call: Any) -> None:
        raise UnprintableError()

    provider = _tool_then_answer()
    await Agent(provider=provider, tools=[echo], before_tool_call=gate).run("go")
    text = _result_text(provider)
    assert "the approval check failed (UnprintableError" in text
    assert "str() of this error raises" not in text


async def test_an_argument_repair_whose_error_cannot_be_written_is_an_error_result() -> None:
    def prepare(call: Any) -> None:
        raise UnprintableError()

    provider = _tool_then_answer()
    await Agent(provider=provider, tools=[echo], prepare_arguments=prepare).run("go")
    text = _result_text(provider)
    assert "preparing the arguments failed: <str() failed: RuntimeError>" in text
    assert "str() of this error raises" not in text


class _UnreadableStorage:
    """A user's own :class:`Storage` whose errors cannot be written out."""

    async def load(self) -> list[Message]:
        raise UnprintableError()

    async def append(self, *messages: Message) -> None:
        raise UnprintableError()


async def test_short_term_memory_over_a_storage_whose_error_cannot_be_written_says_so() -> None:
    memory = ShortTermMemory(storage=_UnreadableStorage())  # type: ignore[arg-type]
    with pytest.raises(MemoryStoreError) as loading:
        await memory.messages()
    assert isinstance(loading.value.__cause__, UnprintableError)
    assert "<str() failed: RuntimeError>" in str(loading.value)
    with pytest.raises(MemoryStoreError) as appending:
        await memory.append(user_message("hi"))
    assert isinstance(appending.value.__cause__, UnprintableError)
    assert "<str() failed: RuntimeError>" in str(appending.value)
