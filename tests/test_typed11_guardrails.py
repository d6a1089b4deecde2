"""Input guardrails see every user message that enters a run, not only its prompt: a steering
message and a follow-up reach the model too (docs/approvals.md, "Guardrails")."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from goagent_py import (
    Agent,
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
