"""Input and output guardrails (issue 35): trip and no-trip in plain, streamed and session runs,
the record they leave, and a model-based guardrail."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from goagent_py import (
    Agent,
    AgentEnd,
    GuardrailChecked,
    GuardrailContext,
    GuardrailResult,
    GuardrailTripped,
    Message,
    ModelGuardrail,
    Role,
    Session,
    tool,
    validate_transcript,
)
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.testing import ScriptedProvider, tool_call_response


def no_secrets(prompt: list[Message], ctx: GuardrailContext) -> str | None:
    return "the prompt holds an API key" if "sk-" in prompt[-1].text else None


async def polite(output: Any, ctx: GuardrailContext) -> GuardrailResult:
    await asyncio.sleep(0)
    rude = "stupid" in ctx.text
    return GuardrailResult(rude, "the answer is rude" if rude else "", info={"checked": True})


def memory_at(path: Path) -> ShortTermMemory:
    return ShortTermMemory(storage=SQLiteStorage(path, session_id="g"))


async def test_an_input_guardrail_that_passes_lets_the_run_go_on() -> None:
    provider = ScriptedProvider("Hello.")
    agent = Agent(provider=provider, input_guardrails=[no_secrets])
    events = [e async for e in agent.stream("hi")]
    checked = [e for e in events if isinstance(e, GuardrailChecked)]
    assert [(c.kind, c.name, c.tripped) for c in checked] == [("input", "no_secrets", False)]
    assert isinstance(events[-1], AgentEnd)
    assert events[-1].result.text == "Hello."


async def test_an_input_guardrail_that_trips_ends_the_run_before_any_model_call(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider("never")
    memory = memory_at(tmp_path / "g.db")
    agent = Agent(provider=provider, input_guardrails=[no_secrets], short_term_memory=memory)

    with pytest.raises(GuardrailTripped, match="API key") as caught:
        await agent.run("my key is sk-123")

    assert provider.requests == []
    assert caught.value.kind == "input"
    assert caught.value.guardrail == "no_secrets"
    assert caught.value.run_result is not None
    stored = await memory.transcript()
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT]
    assert stored[1].metadata["goagent.synthetic"] == "guardrail"
    assert validate_transcript(stored, allow_pending=False) == []


async def test_an_input_guardrail_trips_in_a_streamed_run_after_its_event() -> None:
    agent = Agent(provider=ScriptedProvider(), input_guardrails=[no_secrets])
    seen: list[Any] = []

    async def read() -> None:
        async for event in agent.stream("sk-1"):
            seen.append(event)

    with pytest.raises(GuardrailTripped):
        await read()
    checked = [e for e in seen if isinstance(e, GuardrailChecked)]
    assert [(c.tripped, c.reason) for c in checked] == [(True, "the prompt holds an API key")]
    assert isinstance(seen[-1], AgentEnd)
    assert isinstance(seen[-1].result.error, GuardrailTripped)


async def test_an_output_guardrail_withholds_the_answer_and_keeps_a_valid_record(
    tmp_path: Path,
) -> None:
    memory = memory_at(tmp_path / "g.db")
    agent = Agent(
        provider=ScriptedProvider("What a stupid question."),
        output_guardrails=[polite],
        short_term_memory=memory,
    )
    with pytest.raises(GuardrailTripped, match="rude") as caught:
        await agent.run("why?")
    assert caught.value.kind == "output"
    assert caught.value.run_result is not None
    assert caught.value.run_result.text == ""
    stored = await memory.transcript()
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT]
    assert validate_transcript(stored) == []


async def test_an_output_guardrail_that_passes_sees_the_text_and_the_info_is_reported() -> None:
    agent = Agent(provider=ScriptedProvider("Gladly."), output_guardrails=[polite])
    events = [e async for e in agent.stream("help?")]
    (checked,) = [e for e in events if isinstance(e, GuardrailChecked)]
    assert (checked.kind, checked.tripped, checked.info) == ("output", False, {"checked": True})
    assert isinstance(events[-1], AgentEnd)
    assert events[-1].result.text == "Gladly."


class Answer(BaseModel):
    value: int


async def test_an_output_guardrail_sees_typed_output() -> None:
    seen: list[Any] = []

    def small(output: Any, ctx: GuardrailContext) -> str | None:
        seen.append(output)
        return "too big" if output.value > 10 else None

    agent = Agent(
        provider=ScriptedProvider(tool_call_response(("final_result", {"value": 42}))),
        output_type=Answer,
        output_guardrails=[small],
    )
    with pytest.raises(GuardrailTripped, match="too big"):
        await agent.run("a number")
    assert seen == [Answer(value=42)]


async def test_a_guardrail_that_raises_trips() -> None:
    def broken(prompt: list[Message], ctx: GuardrailContext) -> None:
        raise RuntimeError("classifier down")

    agent = Agent(provider=ScriptedProvider("x"), input_guardrails=[broken])
    with pytest.raises(GuardrailTripped, match="classifier down"):
        await agent.run("hi")


async def test_guardrails_in_a_session_trip_and_the_session_goes_on(tmp_path: Path) -> None:
    provider = ScriptedProvider("Fine.")
    memory = memory_at(tmp_path / "g.db")
    session = Session(
        Agent(provider=provider, input_guardrails=[no_secrets], short_term_memory=memory)
    )
    with pytest.raises(GuardrailTripped):
        await session.prompt("sk-999")
    assert not session.state.running
    result = await session.prompt("hello")
    assert result.text == "Fine."
    assert [m.role for m in session.transcript] == [
        Role.USER,
        Role.ASSISTANT,
        Role.USER,
        Role.ASSISTANT,
    ]
    assert validate_transcript(session.transcript, allow_pending=False) == []
    # The refused prompt is in the record, answered by the note; the model saw both.
    assert [m.role for m in provider.requests[0].messages] == [Role.USER, Role.ASSISTANT, Role.USER]


async def test_a_model_guardrail_asks_a_model_and_trips_on_block() -> None:
    judge = ScriptedProvider("BLOCK: off topic", "ALLOW")
    guard = ModelGuardrail(judge, model="small", policy="Only questions about cooking.")
    agent = Agent(provider=ScriptedProvider("Boil it."), input_guardrails=[guard])

    with pytest.raises(GuardrailTripped, match="off topic"):
        await agent.run("Who won the match?")
    result = await agent.run("How long do I boil an egg?")

    assert result.text == "Boil it."
    asked = judge.requests[0]
    assert "Only questions about cooking." in asked.system_prompt
    assert asked.messages[-1].text == "<text>\nWho won the match?\n</text>"  # data, enclosed
    assert asked.tools == []


async def test_the_on_guardrail_hook_sees_every_decision_of_a_plain_run() -> None:
    from goagent_py import Hooks

    seen: list[GuardrailChecked] = []
    agent = Agent(
        provider=ScriptedProvider("Gladly."),
        input_guardrails=[no_secrets],
        output_guardrails=[polite],
        hooks=Hooks(on_guardrail=seen.append),
    )
    await agent.run("hi")
    assert [(e.kind, e.name, e.tripped) for e in seen] == [
        ("input", "no_secrets", False),
        ("output", "polite", False),
    ]


# -- an abort while a guardrail decides (review6a) ------------------------------------------------


def _hanging_guardrail(started: asyncio.Event) -> Any:
    async def hangs(value: Any, ctx: GuardrailContext) -> None:
        started.set()
        await asyncio.Event().wait()  # a model guardrail whose provider never answers

    return hangs


async def test_abort_now_while_an_input_guardrail_decides_ends_the_run_at_once(
    tmp_path: Path,
) -> None:
    # As with a summariser (issue 28): a guardrail that hangs held an abort for good.
    started = asyncio.Event()
    provider = ScriptedProvider("never sent")
    memory = ShortTermMemory(storage=SQLiteStorage(tmp_path / "chat.db", session_id="s"))
    session = Session(
        Agent(
            provider=provider,
            short_term_memory=memory,
            input_guardrails=[_hanging_guardrail(started)],
        )
    )
    task = asyncio.create_task(session.prompt("hello"))
    await started.wait()
    session.abort("now")
    result = await asyncio.wait_for(task, 60)  # a hang guard, not a timing

    assert result.stop_reason == "aborted"
    assert provider.requests == []
    stored = await memory.transcript()
    assert validate_transcript(stored) == []
    assert session.transcript == stored


async def test_abort_now_while_an_output_guardrail_decides_withholds_the_unchecked_answer(
    tmp_path: Path,
) -> None:
    started = asyncio.Event()
    memory = ShortTermMemory(storage=SQLiteStorage(tmp_path / "chat.db", session_id="s"))
    session = Session(
        Agent(
            provider=ScriptedProvider("the secret is 42"),
            short_term_memory=memory,
            output_guardrails=[_hanging_guardrail(started)],
        )
    )
    task = asyncio.create_task(session.prompt("hello"))
    await started.wait()
    session.abort("now")
    result = await asyncio.wait_for(task, 60)  # a hang guard, not a timing

    assert result.stop_reason == "aborted"
    assert result.text == ""  # never checked: withheld, as a trip withholds it
    assert result.output in ("", None)
    stored = await memory.transcript()
    assert validate_transcript(stored) == []
    assert session.transcript == stored
    # Nor kept in the record for the next request or a page to show (review7a).
    assert "secret" not in " ".join(m.text for m in stored)
    assert result.messages == stored


@pytest.mark.parametrize("where", ["instructions", "prepare_turn"])
async def test_abort_now_while_a_request_is_prepared_ends_the_run_at_once(
    tmp_path: Path, where: str
) -> None:
    # The same for the other user code a request is built with: a dynamic system prompt that
    # reads a database, a prepare_turn hook; each held abort("now") while it hung.
    started = asyncio.Event()

    async def hangs(value: Any) -> Any:
        started.set()
        await asyncio.Event().wait()

    provider = ScriptedProvider("never sent")
    memory = ShortTermMemory(storage=SQLiteStorage(tmp_path / "chat.db", session_id="s"))
    session = Session(Agent(provider=provider, short_term_memory=memory, **{where: hangs}))
    task = asyncio.create_task(session.prompt("hello"))
    await started.wait()
    session.abort("now")
    result = await asyncio.wait_for(task, 60)  # a hang guard, not a timing

    assert result.stop_reason == "aborted"
    assert provider.requests == []
    stored = await memory.transcript()
    assert validate_transcript(stored) == []
    assert session.transcript == stored


# -- what the record holds after an output trip (review7a) ----------------------------------------


def _said(messages: list[Message]) -> str:
    """Every text and every call's arguments in ``messages``: what a model or a page reads."""
    return " ".join(m.text + " ".join(str(c.arguments) for c in m.tool_calls) for m in messages)


async def _blocked_run(how: str, agent: Agent) -> Any:
    if how == "run":
        with pytest.raises(GuardrailTripped) as caught:
            await agent.run("why?")
        return caught.value.run_result
    if how == "stream":
        ends: list[AgentEnd] = []

        async def read() -> None:
            async for event in agent.stream("why?"):
                if isinstance(event, AgentEnd) and not event.path:
                    ends.append(event)

        with pytest.raises(GuardrailTripped):
            await read()
        return ends[-1].result
    session = Session(agent)
    with pytest.raises(GuardrailTripped) as caught:
        await session.prompt("why?")
    assert session.transcript == await agent.options.short_term_memory.transcript()  # type: ignore[union-attr]
    return caught.value.run_result


@pytest.mark.parametrize("how", ["run", "stream", "session"])
async def test_an_answer_an_output_guardrail_blocked_is_neither_stored_nor_sent_again(
    tmp_path: Path, how: str
) -> None:
    # The blocked answer was stored as said: the next request carried it to the model (which
    # then builds on it) and a served page showed it after a reload.
    provider = ScriptedProvider("What a stupid question.", "Sorry about that.")
    memory = memory_at(tmp_path / "g.db")
    agent = Agent(provider=provider, output_guardrails=[polite], short_term_memory=memory)

    result = await _blocked_run(how, agent)

    stored = await memory.transcript()
    assert "stupid" not in _said(stored)
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT]
    assert stored[1].metadata["goagent.synthetic"] == "guardrail"
    assert "the answer is rude" in stored[1].text
    assert result.messages == stored  # the result's record is the stored one
    assert result.text == ""
    assert validate_transcript(stored, allow_pending=False) == []
    await agent.run("and now?")
    assert "stupid" not in _said(provider.requests[1].messages)


@pytest.mark.parametrize("kind", ["input", "output"])
async def test_a_key_a_guardrails_reason_quotes_is_not_stored_in_its_note(
    tmp_path: Path, kind: str
) -> None:
    # The note standing for a refused prompt or a withheld answer is in the record the model
    # reads next and a page shows: the reason it carries is redacted, as in spans and logs.
    key = "sk-ant-api03-" + "Q" * 40

    def quoting(value: Any, ctx: Any) -> str:
        return f"it holds the key {key}"

    memory = memory_at(tmp_path / "g.db")
    guards: dict[str, Any] = {f"{kind}_guardrails": [quoting]}
    agent = Agent(provider=ScriptedProvider("Fine."), short_term_memory=memory, **guards)
    with pytest.raises(GuardrailTripped):
        await agent.run("hello")
    stored = await memory.transcript()
    note = stored[-1]
    assert note.metadata["goagent.synthetic"] == "guardrail"
    assert "it holds the key [REDACTED]" in note.text
    assert key not in _said(stored)


async def test_a_typed_answer_an_output_guardrail_blocked_leaves_no_final_result_call(
    tmp_path: Path,
) -> None:
    memory = memory_at(tmp_path / "g.db")
    agent = Agent(
        provider=ScriptedProvider(tool_call_response(("final_result", {"value": 4242}))),
        output_type=Answer,
        output_guardrails=[lambda out, ctx: "too big" if out.value > 10 else None],
        short_term_memory=memory,
    )
    with pytest.raises(GuardrailTripped) as caught:
        await agent.run("a number")
    stored = await memory.transcript()
    assert "4242" not in _said(stored)
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT]
    assert validate_transcript(stored, allow_pending=False) == []
    assert caught.value.run_result is not None
    assert caught.value.run_result.messages == stored
    assert caught.value.run_result.output is None


async def test_an_answer_blocked_after_a_tool_batch_keeps_the_calls_that_ran(
    tmp_path: Path,
) -> None:
    # The run stops after the batch (should_stop): its calls ran, so they stay answered in the
    # record; only the text beside them, the answer the guardrail judged, goes.
    ran: list[str] = []

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        ran.append(q)
        return "found"

    memory = memory_at(tmp_path / "g.db")
    agent = Agent(
        provider=ScriptedProvider(
            tool_call_response(("lookup", {"q": "x"}), text="You stupid user, wait.")
        ),
        tools=[lookup],
        should_stop=lambda state: True,
        output_guardrails=[polite],
        short_term_memory=memory,
    )
    with pytest.raises(GuardrailTripped):
        await agent.run("find x")
    stored = await memory.transcript()
    assert ran == ["x"]
    assert "stupid" not in _said(stored)
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert [c.name for c in stored[1].tool_calls] == ["lookup"]
    assert stored[2].text == "found"
    assert validate_transcript(stored, allow_pending=False) == []
