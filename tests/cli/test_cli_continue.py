"""The chat's ``/continue`` goes through ``Session.continue_`` (docs/chat.md, "Ctrl-C and
/continue"): what the model receives after an answer cut off or the iteration budget, and what
the user reads when there is nothing the chat can go on with."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from goagent_py import Agent, tool
from goagent_py.cli import main as cli
from goagent_py.errors import ProviderError
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.messages import Role
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response


async def _lines(*lines: str) -> AsyncIterator[str]:
    for line in lines:
        yield line


async def _chat(agent: Agent, *lines: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    console = cli.Console(out, err, interactive=False)
    code = await cli.chat_loop(agent, _lines(*lines), console, cli.ChatState(), None)
    return code, out.getvalue(), err.getvalue()


def _memory(tmp_path: Path) -> ShortTermMemory:
    return ShortTermMemory(storage=SQLiteStorage(tmp_path / "chat.db", session_id="t"))


class BrokenStreamProvider:
    """Streams half an answer, then the connection fails; the next request gets the rest."""

    def __init__(self) -> None:
        self.requests: list[CompletionRequest] = []

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        raise AssertionError("the chat streams")

    async def stream(self, request: CompletionRequest) -> Any:
        from goagent_py.provider import StreamDone, TextDelta

        self.requests.append(request)
        if len(self.requests) == 1:
            yield TextDelta("Once upon a time, a fox")
            raise ProviderError("connection reset mid-stream")
        yield TextDelta(" found a golden key.")
        yield StreamDone(text_response(" found a golden key."))


async def test_continue_after_a_failed_stream_asks_the_model_to_go_on_from_the_cut(
    tmp_path: Path,
) -> None:
    """The chat's own continuation handled only Ctrl-C's cut ("aborted"): after a stream that
    failed mid-answer it said the answer was complete."""
    provider = BrokenStreamProvider()
    agent = Agent(provider=provider, short_term_memory=_memory(tmp_path))

    code, out, err = await _chat(agent, "tell me a story", "/continue", "/continue")

    assert "connection reset mid-stream" in err  # the failed turn, shown as an error
    assert code == cli.EXIT_TURN_FAILED
    assert "Once upon a time, a fox" in out
    assert "found a golden key." in out
    assert len(provider.requests) == 2
    resumed = provider.requests[1].messages
    assert [m.role for m in resumed] == [Role.USER, Role.ASSISTANT, Role.USER]
    assert resumed[1].text == "Once upon a time, a fox"
    assert "Once upon a time, a fox" in resumed[2].text  # asked to go on from the cut
    assert "without repeating" in resumed[2].text
    assert err.count("(nothing to continue: the last answer is complete)") == 1  # the 2nd


async def test_continue_after_the_iteration_budget_asks_the_model_to_go_on(
    tmp_path: Path,
) -> None:
    @tool
    def look(q: str) -> str:
        """Look."""
        return "seen"

    provider = ScriptedProvider(tool_call_response(("look", {"q": "a"})), "found it")
    agent = Agent(
        provider=provider, tools=[look], max_iterations=1, short_term_memory=_memory(tmp_path)
    )

    code, out, err = await _chat(agent, "find it", "/continue")

    assert "found it" in out
    assert "nothing to continue" not in err
    asked = provider.requests[-1].messages[-1]
    assert asked.role is Role.USER
    assert "iteration limit" in asked.text
    assert code == cli.EXIT_TURN_FAILED  # the first turn hit the budget


async def test_continue_while_a_call_waits_for_approval_says_so_and_calls_no_model(
    tmp_path: Path,
) -> None:
    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay."""
        return "paid"

    provider = ScriptedProvider(tool_call_response(("pay", {"amount": 3})), "done")
    agent = Agent(provider=provider, tools=[pay], short_term_memory=_memory(tmp_path))

    code, out, err = await _chat(agent, "pay 3", "/continue")

    assert len(provider.requests) == 1  # /continue sent nothing to the model
    assert "wait for an approval the chat cannot give" in err
    assert "complete" not in err  # not the old "(nothing to continue: ... complete)"
    assert "error:" not in err
    assert code == cli.EXIT_OK
    assert "done" not in out


async def test_continue_before_any_turn_says_there_is_nothing_yet(tmp_path: Path) -> None:
    provider = ScriptedProvider()
    agent = Agent(provider=provider, short_term_memory=_memory(tmp_path))

    code, out, err = await _chat(agent, "/continue")

    assert err.strip() == "(nothing to continue yet)"
    assert (code, out, provider.requests) == (cli.EXIT_OK, "", [])
