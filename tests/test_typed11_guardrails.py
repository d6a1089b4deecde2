"""Input guardrails see every user message that enters a run, not only its prompt: a steering
message and a follow-up reach the model too (docs/approvals.md, "Guardrails")."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from goagent_py import (
    Agent,
    ConfigurationError,
    GuardrailChecked,
    GuardrailContext,
    GuardrailTripped,
    Message,
    Role,
    Session,
    tool,
    validate_transcript,
)
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.output import FINAL_RESULT_TOOL
from goagent_py.testing import ScriptedProvider, tool_call_response


def no_secrets(prompt: list[Message], ctx: GuardrailContext) -> str | None:
    return "the message holds an API key" if any("sk-" in m.text for m in prompt) else None


def _session(provider: ScriptedProvider, path: Path, *tools: object) -> Session:
    memory = ShortTermMemory(storage=SQLiteStorage(path, session_id="s"))
    agent = Agent(
        provider=provider,
        tools=list(tools),
        input_guardrails=[no_secrets],
        short_term_memory=memory,
    )
    return Session(agent)


def _sent(provider: ScriptedProvider) -> list[str]:
    return [m.text for r in provider.requests for m in r.messages]


async def test_a_steering_message_is_checked_before_the_model_reads_it(tmp_path: Path) -> None:
    """A steered message went to the model unchecked: a served chat's ``/steer`` (or the
    coding TUI's) took text past every input guardrail while a tool ran."""
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        """A slow lookup."""
        started.set()
        await release.wait()
        return "looked up"

    provider = ScriptedProvider(tool_call_response(("slow", {})), "unused", "Fine.")
    session = _session(provider, tmp_path / "s.db", slow)

    async def steer() -> None:
        await started.wait()
        session.steer("and here is my key: sk-123")
        release.set()

    steering = asyncio.create_task(steer())
    events: list[object] = []

    async def collect() -> None:
        async for event in session.stream("look it up"):
            events.append(event)

    with pytest.raises(GuardrailTripped) as info:
        await collect()
    await steering
    assert info.value.reason == "the message holds an API key"
    assert len(provider.requests) == 1  # no request after the steer
    assert not any("sk-123" in text for text in _sent(provider))
    checks = [e for e in events if isinstance(e, GuardrailChecked)]
    assert [(c.kind, c.tripped) for c in checks] == [("input", False), ("input", True)]
    # The record is valid and stored: the steered message answered by the refusal note.
    assert validate_transcript(session.transcript, allow_pending=False) == []
    assert [m.role for m in session.transcript][-2:] == [Role.USER, Role.ASSISTANT]
    assert session.transcript[-1].metadata["goagent.synthetic"] == "guardrail"
    # The session goes on (and the model sees the note, never the key's message text).
    assert (await session.prompt("hello")).text == "unused"
    assert not session.state.running


async def test_a_follow_up_is_checked_before_the_model_reads_it(tmp_path: Path) -> None:
    provider = ScriptedProvider("First answer.", "never")
    session = _session(provider, tmp_path / "f.db")
    session.follow_up("sk-456 is my key")  # queued before the run: taken when it would stop
    with pytest.raises(GuardrailTripped):
        await session.prompt("hi")
    assert len(provider.requests) == 1
    assert not any("sk-456" in text for text in _sent(provider))
    assert validate_transcript(session.transcript, allow_pending=False) == []


async def test_a_clean_steering_message_is_checked_and_reaches_the_model(tmp_path: Path) -> None:
    provider = ScriptedProvider("one", "two")
    session = _session(provider, tmp_path / "c.db")
    session.follow_up("and one more thing")
    events = [e async for e in session.stream("hi")]
    checks = [e for e in events if isinstance(e, GuardrailChecked)]
    assert [(c.kind, c.tripped) for c in checks] == [("input", False), ("input", False)]
    assert provider.requests[1].messages[-1].text == "and one more thing"


class Contact(BaseModel):
    name: str
    phone: str


async def test_an_output_guardrail_reads_a_typed_answer_given_beside_text() -> None:
    """A typed answer's text is its JSON; when the model also wrote a sentence beside the
    ``final_result`` call, the text was that sentence alone, so a guardrail judging the text
    (a ModelGuardrail reads ``ctx.text``) never saw the answer it let through."""
    seen: list[str] = []

    def no_phone_numbers(output: object, ctx: GuardrailContext) -> str | None:
        seen.append(ctx.text)
        return "the answer holds a phone number" if "555-" in ctx.text else None

    answer = tool_call_response(
        (FINAL_RESULT_TOOL, {"name": "Ana", "phone": "555-0100"}), text="Here is the contact."
    )
    agent = Agent(
        provider=ScriptedProvider(answer), output_type=Contact, output_guardrails=[no_phone_numbers]
    )
    with pytest.raises(GuardrailTripped, match="phone number"):
        await agent.run("Ana's number?")
    assert "Here is the contact." in seen[0]


async def test_a_typed_answers_text_is_its_json_after_what_the_model_wrote_beside_it() -> None:
    answer = tool_call_response(
        (FINAL_RESULT_TOOL, {"name": "Ana", "phone": "+1"}), text="Here is the contact."
    )
    result = await Agent(provider=ScriptedProvider(answer), output_type=Contact).run("?")
    assert result.output == Contact(name="Ana", phone="+1")
    prose, data = result.text.split("\n\n")
    assert prose == "Here is the contact."
    assert json.loads(data) == {"name": "Ana", "phone": "+1"}


async def test_a_prompt_whose_check_an_abort_cut_short_never_reaches_the_model(
    tmp_path: Path,
) -> None:
    """An abort while the input guardrails decided left the prompt unchecked at the end of
    the record, and ``continue_()`` sent it to the model with no check at all (a continued run
    has no prompt to check). It is answered by a note, as an unchecked answer is withheld."""
    started = asyncio.Event()

    async def slow_check(prompt: list[Message], ctx: GuardrailContext) -> None:
        started.set()
        await asyncio.Event().wait()  # a model guardrail whose provider is slow

    provider = ScriptedProvider("never sent")
    memory = ShortTermMemory(storage=SQLiteStorage(tmp_path / "a.db", session_id="a"))
    agent = Agent(provider=provider, short_term_memory=memory, input_guardrails=[slow_check])
    session = Session(agent)
    task = asyncio.create_task(session.prompt("my key is sk-1"))
    await started.wait()
    session.abort("now")
    result = await asyncio.wait_for(task, 60)  # a hang guard, not a timing
    assert result.stop_reason == "aborted"
    last = session.transcript[-1]
    assert last.role is Role.ASSISTANT
    assert last.metadata["goagent.synthetic"] == "guardrail"
    assert "not checked" in last.text
    assert session.transcript == await memory.transcript()
    assert validate_transcript(session.transcript, allow_pending=False) == []
    with pytest.raises(ConfigurationError):
        await session.continue_()  # nothing to go on with: the prompt was never answered
    assert provider.requests == []
